/**
 * How often a run reads the whole journal (docs/design.md#a-resume-reads-the-journal-once), counted in backend
 * snapshots, never timed: a run's new calls are decided from the store's operation rows (no snapshot per call), a
 * resume replaying N completed calls reads the journal a constant number of times, and a history another owner
 * wrote since it was read is read again rather than trusted.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resumeAgent, runAgent, scriptedModel, type ChatResponse } from '../../src/agent.js';
import { ToolBodyError } from '../../src/errors.js';
import { createMemoryStore } from '../../src/store/memory.js';
import type { JournalStore } from '../../src/store/journal-store.js';
import { openSqliteStore } from '../../src/sqlite.js';
import type { SessionStore } from '../../src/store/types.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

/** Counts the whole-journal reads (snapshots, whole or handed over row by row) the store's backend serves. */
function countSnapshots(store: SessionStore): { readonly count: number } {
  const backend = (store as JournalStore).backend;
  const snapshot = backend.snapshot.bind(backend);
  const counter = { count: 0 };
  backend.snapshot = (sessionId) => {
    counter.count += 1;
    return snapshot(sessionId);
  };
  const scan = backend.scanSnapshot?.bind(backend);
  if (scan) {
    backend.scanSnapshot = (sessionId, read) => {
      counter.count += 1;
      return scan(sessionId, read);
    };
  }
  return counter;
}

const STOP = 'stopped before the last answer';

/**
 * A run of `steps` steps of `perStep` no-op calls that stops where the model would answer; then resumed once. With
 * `failing`, every other call fails (the tool's own error), so the resume reads back recorded failures too.
 */
async function runAndResume(open: () => SessionStore, steps: number, perStep: number, failing = false) {
  const store = open();
  const reads = countSnapshots(store);
  let executed = 0;
  const metadata = new ToolMetadata('does nothing', { type: 'object' }).withEffect('read_only', 'r1');
  const execute = async (request: { readonly arguments: unknown }) => {
    executed++;
    if ((request.arguments as { fail?: boolean }).fail === true) throw new ToolBodyError('declined', 'the upstream declined');
    return 'ok';
  };
  const runtime = createToolRuntime({ tools: [{ name: 'noop', metadata, execute }], grants: { agent: '*' } });
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t', { limits: { toolCalls: 10_000 } });
  const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent' });
  const turns: ChatResponse[] = Array.from({ length: steps }, (_, s) => ({
    text: null,
    toolCalls: Array.from({ length: perStep }, (_, c) => ({ id: `m-${s}-${c}`, name: 'noop', arguments: failing && c % 2 === 0 ? '{"fail":true}' : '{}' })),
  }));
  const stop = () => { throw new Error(STOP); };
  const options = { owner, gateway, store, maxSteps: steps + 1 };
  await assert.rejects(runAgent({ ...options, input: 'go', model: scriptedModel([...turns, stop]) }), { message: STOP });
  assert.equal(executed, steps * perStep);
  const runReads = reads.count;
  const runId = ((await store.loadHistory('s')).find((e) => e.kind.type === 'custom')!.kind as unknown as { payload: { runId: string } }).payload.runId;
  const before = reads.count;
  await assert.rejects(resumeAgent({ ...options, runId, model: scriptedModel([stop]) }), { message: STOP });
  assert.equal(executed, steps * perStep, 'a replayed call ran again');
  const resumeReads = reads.count - before;
  await store.close();
  return { runReads, resumeReads };
}

const dir = tempDir();
const stores: Array<[string, () => SessionStore]> = [
  ['memory', () => createMemoryStore()],
  ['sqlite', () => openSqliteStore(tempDbPath(dir))],
];

describe('whole-journal reads per call', () => {
  for (const [name, open] of stores) {
    it(`${name}: a run reads no journal for its new calls, and a resume reads it a constant number of times`, async () => {
      const small = await runAndResume(open, 2, 2);
      const large = await runAndResume(open, 10, 5);
      // New operation keys are decided from the operation rows: no snapshot at all, whatever the number of calls.
      assert.equal(small.runReads, 0);
      assert.equal(large.runReads, 0);
      // The run is read back once, and its replayed calls are checked against that one verified read.
      assert.equal(small.resumeReads, 1, `4 replayed calls read the journal ${small.resumeReads} times`);
      assert.equal(large.resumeReads, 1, `50 replayed calls read the journal ${large.resumeReads} times`);
      // Recorded failures are read back from that one read too (a `completed` review of one is looked up in it).
      const failing = await runAndResume(open, 10, 5, true);
      assert.equal(failing.resumeReads, 1, `50 replayed calls, 25 of them failed, read the journal ${failing.resumeReads} times`);
    });
  }

  it('a caller key replayed many times reads the journal once; an own write (a retry) is read again and replays', async () => {
    const store = createMemoryStore();
    const reads = countSnapshots(store);
    let runs = 0;
    const metadata = new ToolMetadata('flaky', { type: 'object' }).withEffect('idempotent', 'v1');
    const flaky = { name: 'flaky', metadata, execute: async () => { runs++; if (runs === 1) throw new ToolBodyError('upstream_503', 'later', { retryable: true }); return 'done'; } };
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('t', { limits: { toolCalls: 100 } });
    const gateway = createToolRuntime({ tools: [flaky], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
    const first = await gateway.callWithOptions('flaky', {}, { operationKey: 'k' });
    assert.equal(first.result.outcome.status, 'failed');
    await assert.rejects(gateway.callWithOptions('flaky', {}, { operationKey: 'k' }), { code: 'operation_in_doubt' });
    await assert.rejects(gateway.callWithOptions('flaky', {}, { operationKey: 'k' }), { code: 'operation_in_doubt' });
    const plan = prepareToolRetry(await store.loadHistory('s'), first.call.id);
    const retried = await gateway.callWithOptions('flaky', {}, { retry: plan });
    assert.equal(retried.result.outcome.status, 'succeeded');
    const before = reads.count;
    for (let i = 0; i < 20; i++) {
      const again = await gateway.callWithOptions('flaky', {}, { operationKey: 'k' });
      assert.equal(again.replayed, true);
      assert.equal(again.call.id, retried.call.id);
    }
    assert.equal(reads.count - before, 1);
    await assert.rejects(gateway.callWithOptions('flaky', { other: true }, { operationKey: 'k' }), { code: 'binding_changed' });
    assert.equal(runs, 2);
    await store.close();
  });

  it('an owner does not trust a journal it read once another owner wrote a newer attempt of the key', async () => {
    const path = tempDbPath(tempDir());
    const a = openSqliteStore(path);
    const b = openSqliteStore(path);
    let runs = 0;
    const metadata = new ToolMetadata('flaky', { type: 'object' }).withEffect('idempotent', 'v1');
    const flaky = { name: 'flaky', metadata, execute: async () => { runs++; if (runs === 1) throw new ToolBodyError('upstream_503', 'later', { retryable: true }); return 'done'; } };
    const runtime = createToolRuntime({ tools: [flaky], grants: { agent: '*' } });
    const ownerA = await a.acquire('s', { owner: 'a' });
    await ownerA.startTask('t', { limits: { toolCalls: 100 } });
    const first = await runtime.bind({ owner: ownerA, taskId: 't', caller: 'agent' }).callWithOptions('flaky', {}, { operationKey: 'k' });
    const seen = await ownerA.readOperation('t', 'k');
    assert.equal(seen?.callId, first.call.id);
    // Another host takes the session over and completes the operation with a retry.
    const ownerB = await b.acquire('s', { owner: 'b', takeover: true });
    const retried = await runtime.bind({ owner: ownerB, taskId: 't', caller: 'agent' })
      .callWithOptions('flaky', {}, { retry: prepareToolRetry(await b.loadHistory('s'), first.call.id) });
    assert.equal(retried.result.outcome.status, 'succeeded');
    const now = await ownerA.readOperation('t', 'k');
    assert.equal(now?.callId, retried.call.id);
    assert.equal(now?.resultEvent?.kind.type, 'tool_result');
    await a.close();
    await b.close();
  });
});
