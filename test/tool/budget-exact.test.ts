/**
 * Finding 6: budgets are exact. Output beyond what is left of the budget is refused as `output_limit` and never
 * charged past the limit.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool } from '../../src/tool/types.js';
import { createJournalStore } from '../../src/backend.js';
import { RUNTIME_DEFAULTS } from '../../src/limits.js';
import { StoreBusyError } from '../../src/errors.js';
import type { SessionId } from '../../src/ids.js';
import type { JournalStore } from '../../src/store/journal-store.js';
import type { JournalBackend } from '../../src/store/rows.js';
import type { SessionStore } from '../../src/store/types.js';

const big: Tool = { name: 'big', metadata: new ToolMetadata('big', { type: 'object' }), execute: async () => 'x'.repeat(5000) };

describe('budgets are exact', () => {
  it('5,000 bytes of output against a 1,000-byte task limit: output_limit, charged at most 1,000', async () => {
    const store = createMemoryStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('task', { limits: { toolOutputBytes: 1000 } });
    const gateway = createToolRuntime({ tools: [big], grants: { agent: '*' } }).bind({ owner, taskId: 'task', caller: 'agent', turnId: 'turn-1' });
    const execution = await gateway.call('big', {});
    const outcome = execution.result.outcome;
    assert.ok(outcome.status === 'failed' && outcome.category === 'output_limit', JSON.stringify(outcome));
    const task = await owner.task('task');
    assert.equal(task.charged.toolOutputBytes, 1000);
    assert.equal(task.reservedOutputBytes, 0);
    assert.ok(task.charged.toolOutputBytes <= task.limits.toolOutputBytes);
  });
});

/**
 * A memory store that, while busy, fails as a busy store would (writing nothing) every write of a tool result and
 * every release of a reservation (a task write without events): the runtime's attempts at the result all fail, and
 * so do the releases its store runs before each, so the reservation is still held when the call gives up.
 * `failNextResult` makes it busy until that call has given up; a busy count below the runtime's attempts lets a
 * later attempt through.
 */
function flakyResultStore(): { store: SessionStore; backend: JournalBackend; failNextResult: (resultFailures?: number) => void } {
  const inner = (createMemoryStore() as JournalStore).backend;
  let resultFailures = 0;
  const backend: JournalBackend = {
    kind: inner.kind,
    transact: (sessionId, reads, decide) => inner.transact(sessionId, reads, (state) => {
      const writes = decide(state);
      const result = writes.events?.some((e) => e.body.includes('"type":"tool_result"')) === true;
      const release = writes.task !== undefined && (writes.events?.length ?? 0) === 0;
      if (resultFailures > 0 && (result || release)) {
        if (result) resultFailures -= 1;
        throw new StoreBusyError('the store stayed busy');
      }
      return writes;
    }),
    snapshot: (sessionId) => inner.snapshot(sessionId),
    readTask: (sessionId, taskId) => inner.readTask(sessionId, taskId),
    listSessions: () => inner.listSessions(),
    close: () => inner.close(),
  };
  return { store: createJournalStore(backend), backend, failNextResult: (times = RUNTIME_DEFAULTS.resultWriteAttempts) => { resultFailures = times; } };
}

describe('a result write that fails transiently releases its reservation', () => {
  const small: Tool = { name: 'small', metadata: new ToolMetadata('small', { type: 'object' }), execute: async () => 'x'.repeat(10) };

  it('at the owner\'s next write: charged what the result would have been, the rest of the reservation returned', async () => {
    const { store, failNextResult } = flakyResultStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('task', { limits: { toolOutputBytes: 1000 } });
    const gateway = createToolRuntime({ tools: [small], grants: { agent: '*' } }).bind({ owner, taskId: 'task', caller: 'agent', turnId: 'turn-1' });
    failNextResult();
    await assert.rejects(gateway.call('small', {}), { code: 'recording_failed' });
    assert.equal((await owner.task('task')).reservedOutputBytes, 1000, 'held until the owner writes again');
    await owner.append([{ turnId: 'turn-1', kind: { type: 'user_message', text: 'next' } }]);
    const task = await owner.task('task');
    assert.deepEqual([task.reservedOutputBytes, task.charged.toolOutputBytes], [0, 10]);
    // The budget is usable again: the next call gets the whole remainder.
    const next = await gateway.call('small', {});
    assert.equal(next.result.outcome.status, 'succeeded');
    assert.equal((await owner.task('task')).charged.toolOutputBytes, 20);
  });

  it('busy fewer times than the runtime tries: the result is written, charged exactly, nothing held', async () => {
    const { store, failNextResult } = flakyResultStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('task', { limits: { toolOutputBytes: 1000 } });
    const gateway = createToolRuntime({ tools: [small], grants: { agent: '*' } }).bind({ owner, taskId: 'task', caller: 'agent', turnId: 'turn-1' });
    failNextResult(RUNTIME_DEFAULTS.resultWriteAttempts - 1);
    assert.equal((await gateway.call('small', {})).result.outcome.status, 'succeeded');
    const task = await owner.task('task');
    assert.deepEqual([task.reservedOutputBytes, task.charged.toolOutputBytes], [0, 10]);
  });

  it('at release, before the owner gives the session up', async () => {
    const { store, backend, failNextResult } = flakyResultStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('task', { limits: { toolOutputBytes: 1000 } });
    const gateway = createToolRuntime({ tools: [small], grants: { agent: '*' } }).bind({ owner, taskId: 'task', caller: 'agent', turnId: 'turn-1' });
    failNextResult();
    await assert.rejects(gateway.call('small', {}), { code: 'recording_failed' });
    await owner.release();
    const row = await backend.readTask('s' as SessionId, 'task');
    assert.deepEqual([row?.reservations, row?.chargedOutputBytes], [[], 10], 'not charged the whole 1,000-byte reservation');
  });
});
