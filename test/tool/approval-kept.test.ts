/**
 * An operator's decision is not lost to an attempt that never ran its body (r65 #3, #4). Before:
 * - an approval given while the next attempt asked its approver was superseded when that attempt was interrupted (a
 *   release, a close, its deadline, the caller's cancellation), and the attempt after it asked for approval again;
 * - an approval the start marker spent, whose body was then never called (the session let go or lost right after the
 *   marker), was consumed all the same, and the operation's next attempt asked for approval again.
 * An interrupt now leaves the operation's requests as they were, and the result that says the body was never called
 * puts the spent approval back in the same commit. Either way the next attempt runs on the operator's decision, once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFaultHook } from '../../src/fault.js';
import { decisionInbox } from '../../src/store/inbox.js';
import { createMemoryStore } from '../../src/store/memory.js';
import type { SessionStore } from '../../src/store/types.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/recovery.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { ToolApprover } from '../../src/tool/types.js';
import { tool } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';

const metadata = new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('boss');

/** A session with one `wire` operation whose first attempt left a request; the approver answers as `ask` says. */
async function waitingRequest(store: SessionStore, ask: (n: number) => ReturnType<ToolApprover>) {
  let ran = 0;
  let asked = 0;
  const wire = tool('wire', async () => { ran += 1; return 'wired'; }, metadata);
  const runtime = createToolRuntime({ tools: [wire], grants: { agent: '*' }, approvers: { boss: async () => ask(++asked) } });
  const owner = await store.acquire('s', { owner: 'host-1' });
  await owner.startTask('t');
  const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent' });
  const first = await gateway.call('wire', { to: 'acct-1' });
  const requestId = first.result.approval?.requestId ?? '';
  assert.equal(first.result.outcome.status === 'failed' && first.result.outcome.category, 'approval_pending');
  return { runtime, owner, gateway, first, requestId, ran: () => ran, asked: () => asked };
}

const pending = { decision: 'pending', note: 'a person must look' } as const;

function scenario(open: () => Promise<SessionStore>): void {
  for (const how of ['release', 'deadline', 'cancel'] as const) {
    it(`an approval given while the next attempt asks its approver outlives that attempt's interruption (${how}), and the attempt after it runs on it`, async () => {
      const store = await open();
      const controller = new AbortController();
      let interrupt: () => Promise<void> = async () => {};
      let interrupted: Promise<void> = Promise.resolve();
      const w = await waitingRequest(store, async (n) => {
        if (n === 1) return pending;
        if (n === 2) {
          await decisionInbox(store).approve(w.requestId, { actor: 'alice', reason: 'checked' });
          interrupted = interrupt();
          return new Promise<never>(() => {});
        }
        throw new Error('the approver is not asked a third time: the operator answered');
      });
      interrupt = how === 'release' ? () => w.owner.release() : how === 'cancel' ? async () => controller.abort() : async () => {};
      const second = await w.gateway.callWithOptions('wire', { to: 'acct-1' }, {
        retry: prepareToolRetry(await store.loadHistory('s'), w.first.call.id),
        ...(how === 'deadline' ? { timeoutMs: 300 } : { signal: controller.signal }),
      });
      const expected = how === 'deadline' ? 'timeout' : 'cancelled';
      assert.equal(second.result.outcome.status === 'failed' && second.result.outcome.category, expected);
      assert.equal(second.startedEvent, null);
      const row = await decisionInbox(store).get(w.requestId);
      assert.deepEqual([row?.state, row?.decision, row?.actor], ['decided', 'approved', 'alice'], "alice's approval still waits for the host");

      await interrupted;
      const owner = how === 'release' ? await store.acquire('s', { owner: 'host-2' }) : w.owner;
      const gateway = w.runtime.bind({ owner, taskId: 't', caller: 'agent' });
      const third = await gateway.callWithOptions('wire', { to: 'acct-1' }, { retry: prepareToolRetry(await store.loadHistory('s'), second.call.id) });
      assert.equal(third.result.outcome.status, 'succeeded');
      assert.deepEqual(third.startedEvent?.kind.type === 'tool_started' && third.startedEvent.kind.approval,
        { requestId: w.requestId, decision: 'approved', actor: 'alice', reason: 'checked' });
      assert.equal((await decisionInbox(store).get(w.requestId))?.consumedBy, third.call.id);
      assert.deepEqual([w.ran(), w.asked()], [1, 2], 'the body ran once, and the approver was not asked again');
      await store.close();
    });
  }

  it('an attempt cancelled before it is written leaves an approval decided earlier for the next one', async () => {
    const store = await open();
    const w = await waitingRequest(store, async () => pending);
    await decisionInbox(store).approve(w.requestId, { actor: 'alice' });
    const controller = new AbortController();
    controller.abort();
    const second = await w.gateway.callWithOptions('wire', { to: 'acct-1' }, { signal: controller.signal, retry: prepareToolRetry(await store.loadHistory('s'), w.first.call.id) });
    assert.equal(second.result.outcome.status === 'failed' && second.result.outcome.category, 'cancelled');
    assert.equal((await decisionInbox(store).get(w.requestId))?.state, 'decided');
    const third = await w.gateway.callWithOptions('wire', { to: 'acct-1' }, { retry: prepareToolRetry(await store.loadHistory('s'), second.call.id) });
    assert.equal(third.result.outcome.status, 'succeeded');
    assert.deepEqual([w.ran(), w.asked()], [1, 1]);
    await store.close();
  });

  it('a denial given while an interrupted attempt asks its approver stays, and answers the next attempt', async () => {
    const store = await open();
    const controller = new AbortController();
    const w = await waitingRequest(store, async (n) => {
      if (n === 1) return pending;
      await decisionInbox(store).deny(w.requestId, { actor: 'alice', reason: 'wrong account' });
      controller.abort();
      return new Promise<never>(() => {});
    });
    const second = await w.gateway.callWithOptions('wire', { to: 'acct-1' }, { signal: controller.signal, retry: prepareToolRetry(await store.loadHistory('s'), w.first.call.id) });
    assert.equal(second.result.outcome.status === 'failed' && second.result.outcome.category, 'cancelled');
    const third = await w.gateway.callWithOptions('wire', { to: 'acct-1' }, { retry: prepareToolRetry(await store.loadHistory('s'), second.call.id) });
    assert.equal(third.result.outcome.status === 'failed' && third.result.outcome.category, 'approval_denied');
    assert.equal((await decisionInbox(store).get(w.requestId))?.consumedBy, third.call.id);
    assert.deepEqual([w.ran(), w.asked()], [0, 2]);
    await store.close();
  });

  it('an approval the start marker spent goes back when the body is never called, and the next attempt runs on it', async () => {
    const store = await open();
    const w = await waitingRequest(store, async () => pending);
    await decisionInbox(store).approve(w.requestId, { actor: 'alice' });
    const controller = new AbortController();
    // The caller cancels as the marker is journaled: the body is never called.
    setFaultHook((point) => { if (point === 'started:after') controller.abort(); });
    let second;
    try {
      second = await w.gateway.callWithOptions('wire', { to: 'acct-1' }, { signal: controller.signal, retry: prepareToolRetry(await store.loadHistory('s'), w.first.call.id) });
    } finally {
      setFaultHook(null);
    }
    assert.ok(second.startedEvent, 'the marker was journaled, spending the approval');
    assert.equal(second.result.outcome.status === 'failed' && second.result.outcome.code, 'tool_stopped_before_body');
    const row = await decisionInbox(store).get(w.requestId);
    assert.deepEqual([row?.state, row?.consumedBy], ['decided', null], 'the approval is unspent again');
    const third = await w.gateway.callWithOptions('wire', { to: 'acct-1' }, { retry: prepareToolRetry(await store.loadHistory('s'), second.call.id) });
    assert.equal(third.result.outcome.status, 'succeeded');
    assert.equal((await decisionInbox(store).get(w.requestId))?.consumedBy, third.call.id);
    assert.deepEqual([w.ran(), w.asked()], [1, 1], 'the body ran once, and the approver was asked only by the first attempt');
    await store.close();
  });
}

describe('operator decisions kept past attempts that never ran, on memory', () => scenario(async () => createMemoryStore()));
forEachStore('operator decisions kept past attempts that never ran', (target) => {
  scenario(() => target.fresh().open());

  it('an approval spent by a marker whose body was never called goes back with the body\'s end when its result could not be written (r70 F1)', async () => {
    const store = await target.fresh().open();
    const idempotent = new ToolMetadata('wires money', { type: 'object' }).withEffect('idempotent', 'v1').withApproval('boss');
    let ran = 0;
    let asked = 0;
    const owner = await store.acquire('s', { owner: 'host-1' });
    await owner.startTask('t');
    const gateway = createToolRuntime({
      tools: [tool('wire', async () => { ran += 1; return 'wired'; }, idempotent)], grants: { agent: '*' },
      approvers: { boss: async () => { asked += 1; return pending; } },
    }).bind({ owner, taskId: 't', caller: 'agent' });
    const first = await gateway.call('wire', { to: 'acct-1' });
    const requestId = first.result.approval?.requestId ?? '';
    await decisionInbox(store).approve(requestId, { actor: 'alice' });
    const controller = new AbortController();
    let armed = false;
    let failed = false;
    // The caller cancels as the marker is journaled, and the commit of the result that says so fails once.
    setFaultHook((point) => {
      if (point === 'started:after') { controller.abort(); armed = true; }
      else if (point === 'commit:before' && armed && !failed) { failed = true; throw new Error('the disk went away'); }
    });
    try {
      await assert.rejects(gateway.callWithOptions('wire', { to: 'acct-1' }, { signal: controller.signal, retry: prepareToolRetry(await store.loadHistory('s'), first.call.id) }),
        { code: 'recording_failed' });
    } finally {
      setFaultHook(null);
    }
    assert.equal((await decisionInbox(store).get(requestId))?.state, 'consumed', 'spent by the marker, its result unwritten');
    const history = await store.loadHistory('s');
    const second = history.flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call.id] : [])).at(-1)!;
    // The next write journals the body's end (never called) and puts the approval back; the retry runs on it.
    const third = await gateway.callWithOptions('wire', { to: 'acct-1' }, { retry: prepareToolRetry(history, second) });
    assert.equal(third.result.outcome.status, 'succeeded');
    assert.deepEqual(third.startedEvent?.kind.type === 'tool_started' && third.startedEvent.kind.approval, { requestId, decision: 'approved', actor: 'alice' });
    assert.deepEqual([ran, asked], [1, 1], 'one body, and the approver asked only by the first attempt');
    await store.close();
  });
});
