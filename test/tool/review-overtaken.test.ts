/**
 * A review of a call still running in this process is refused, whether it has no result yet or its body outlived
 * its result: by recordToolReview, and reconcileUncertainCalls does not ask. A journaled not_executed review that
 * the call's own start marker, result or late body's end came after is not used by prepareToolRetry: it was made
 * without that evidence (the decision inbox marks such reviews stale the same way).
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { SessionEvent } from '../../src/event/types.js';
import type { SessionStore } from '../../src/store/types.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { JournalStore } from '../../src/store/journal-store.js';
import type { JournalBackend, TxReads, TxState, TxWrites } from '../../src/store/rows.js';
import type { SessionId } from '../../src/ids.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { reconcileUncertainCalls } from '../../src/tool/reconcile.js';
import { recordToolReview } from '../../src/tool/review.js';
import { keepUnjournaledCompleted } from '../../src/tool/attempt-rules.js';
import { journalInboxReviews } from '../../src/tool/inbox-review.js';
import { decisionInbox } from '../../src/store/inbox.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool } from '../../src/tool/types.js';
import { sleep } from '../support/runtime.js';

/** `history` with the event at `from` moved to `to`, seqs renumbered: the same events, another physical order. */
function moved(history: readonly SessionEvent[], from: number, to: number): SessionEvent[] {
  const events = [...history];
  const [event] = events.splice(from, 1);
  events.splice(to, 0, event!);
  return events.map((e, seq) => ({ ...e, seq }));
}

const types = (history: readonly SessionEvent[]) => history.map((e) => (e.kind.type === 'custom' ? e.kind.kind : e.kind.type));

/** A memory store whose session `s` an owner `host` holds, with task `t` started. */
async function session(options: { leaseMs?: number; heartbeat?: boolean } = {}, store: SessionStore = createMemoryStore()) {
  const owner = await store.acquire('s', { owner: 'host', ...options });
  await owner.startTask('t');
  return { store, owner };
}

/** The session's journal once `shows` holds of it; fails after 5 s instead of waiting for ever. */
async function journalShowing(store: SessionStore, shows: (history: SessionEvent[]) => boolean, what: string): Promise<SessionEvent[]> {
  for (let waited = 0; waited < 5000; waited += 5) {
    const history = await store.loadHistory('s');
    if (shows(history)) return history;
    await sleep(5);
  }
  throw new Error(`the journal never showed ${what}`);
}

/** A non-idempotent transfer whose body ignores its 100 ms deadline and ends (returning) when `late.finish()` is called. */
function lateTransfer() {
  const late = { bodies: 0, finish: () => {} };
  const tool: Tool = {
    name: 'transfer',
    metadata: new ToolMetadata('transfer', { type: 'object' }).withEffect('non_idempotent', 'v1').withTimeoutCeiling(100),
    execute: () => new Promise<string>((resolve) => {
      late.bodies += 1;
      late.finish = () => resolve('sent late');
    }),
  };
  return { tool, late };
}

it('a call still in flight here (no result yet) cannot be reviewed, and no reconciler is asked about it', async () => {
  const { store, owner } = await session();
  let release: () => void = () => {};
  let asked = 0;
  const transfer: Tool = {
    name: 'transfer',
    metadata: new ToolMetadata('transfer', { type: 'object' }).withEffect('non_idempotent', 'v1'),
    execute: () => new Promise<string>((resolve) => { release = () => resolve('sent'); }),
    reconcile: async () => { asked += 1; return { outcome: 'not_executed', evidence: 'nothing at the bank yet' }; },
  };
  const gateway = createToolRuntime({ tools: [transfer], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  const running = gateway.call('transfer', { to: 'acme' });
  const history = await journalShowing(store, (h) => types(h).includes('tool_started'), 'tool_started');
  const callId = history.flatMap((e) => (e.kind.type === 'tool_started' ? [e.kind.callId] : []))[0]!;
  await assert.rejects(recordToolReview(owner, history, callId, { actor: 'ops', evidence: 'nothing seen', outcome: 'not_executed' }), {
    name: 'DecisionError', code: 'call_in_flight', message: /still running in this process: no result is recorded yet/,
  });
  const reconciled = await reconcileUncertainCalls(owner, [transfer], history);
  assert.deepEqual(reconciled.calls.map((c) => c.action), ['body_running']);
  assert.equal(asked, 0);
  release();
  assert.equal((await running).result.outcome.status, 'succeeded');
  await store.close();
});

it('a journaled not_executed review that the call\'s result or its late body\'s end came after is not used', async () => {
  const { store, owner } = await session();
  const { tool: transfer, late } = lateTransfer();
  const gateway = createToolRuntime({ tools: [transfer], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  const first = await gateway.call('transfer', { to: 'acme' });
  late.finish();
  const history = await journalShowing(store, (h) => types(h).includes('body_ended'), 'body_ended');
  await recordToolReview(owner, history, first.call.id, { actor: 'ops', evidence: 'the bank shows nothing', outcome: 'not_executed', despiteLateReturn: true });
  const informed = await store.loadHistory('s');
  assert.deepEqual(types(informed), ['task_ledger', 'tool_call', 'tool_started', 'tool_result', 'body_ended', 'tool_review']);
  assert.equal(prepareToolRetry(informed, first.call.id).review?.outcome, 'not_executed', 'made with every piece of evidence: used');

  const beforeEnd = moved(informed, 5, 4);
  assert.deepEqual(types(beforeEnd), ['task_ledger', 'tool_call', 'tool_started', 'tool_result', 'tool_review', 'body_ended']);
  assert.throws(() => prepareToolRetry(beforeEnd, first.call.id), { name: 'ToolRetryError', code: 'needs_review' });
  const beforeResult = moved(informed, 5, 3);
  assert.throws(() => prepareToolRetry(beforeResult, first.call.id), { name: 'ToolRetryError', code: 'needs_review' });
  // Before the marker the call was not in doubt: such a journal is refused as evidence no runtime writes.
  assert.throws(() => prepareToolRetry(moved(informed, 5, 2), first.call.id), { name: 'ToolRetryError', code: 'invalid_evidence' });
  // A review the host passes is its own, current decision: it is used, once it says the person checked although the
  // body returned.
  const passed = { actor: 'ops', evidence: 'checked again: nothing', outcome: 'not_executed' } as const;
  assert.throws(() => prepareToolRetry(beforeEnd, first.call.id, passed), { name: 'ToolRetryError', code: 'needs_review', message: /went on after its result and returned .*despiteLateReturn/ });
  const plan = prepareToolRetry(beforeEnd, first.call.id, { ...passed, despiteLateReturn: true });
  assert.deepEqual(plan.review, passed, 'the audit keeps the review, not the flag');
  await store.close();
});

it('a session taken over in this process still knows a call of its earlier owner runs', async () => {
  const { store, owner: first } = await session();
  const { tool: transfer, late } = lateTransfer();
  const runtime = createToolRuntime({ tools: [transfer], grants: { agent: '*' } });
  const ran = await runtime.bind({ owner: first, taskId: 't', caller: 'agent' }).call('transfer', { to: 'acme' });
  assert.equal(ran.result.outcome.status === 'failed' && ran.result.outcome.code, 'tool_timeout');
  // Its release would wait for the body (docs/design.md#letting-a-session-go-stops-its-calls): a takeover here fences
  // the first owner while the body runs.
  const second = await store.acquire('s', { owner: 'host', takeover: true });
  const history = await store.loadHistory('s');
  await assert.rejects(recordToolReview(second, history, ran.call.id, { actor: 'ops', evidence: 'nothing seen', outcome: 'not_executed' }), { code: 'call_in_flight' });
  const plan = prepareToolRetry(history, ran.call.id, { actor: 'ops', evidence: 'nothing seen', outcome: 'not_executed' });
  await assert.rejects(runtime.bind({ owner: second, taskId: 't', caller: 'agent' }).callWithOptions('transfer', { to: 'acme' }, { retry: plan }), { code: 'body_running' });
  late.finish();
  await sleep(20);
  assert.equal(late.bodies, 1, 'no second transfer');
  await store.close();
});

it('the end of a late body is journaled through the owner that holds the session by then, and only the runtime writes it', async () => {
  const { store, owner: first } = await session();
  const { tool: transfer, late } = lateTransfer();
  const ran = await createToolRuntime({ tools: [transfer], grants: { agent: '*' } }).bind({ owner: first, taskId: 't', caller: 'agent' }).call('transfer', {});
  const second = await store.acquire('s', { owner: 'host', takeover: true });
  await assert.rejects(second.append([{ turnId: ran.callEvent.turnId, kind: { type: 'custom', plugin: 'jingwei.runtime', kind: 'body_ended', payload: { callId: ran.call.id, ended: 'not_called' } } }]), {
    name: 'InvalidInputError', message: /jingwei\.runtime events are written only by the tool runtime/,
  });
  late.finish();
  const ended = (await journalShowing(store, (h) => types(h).includes('body_ended'), 'body_ended')).find((e) => e.kind.type === 'custom' && e.kind.kind === 'body_ended')!;
  assert.deepEqual(ended.kind.type === 'custom' && ended.kind.payload, { callId: ran.call.id, ended: 'returned' });
  await store.close();
});

it('a session of the same id in another store of this process is another session: its running bodies refuse nothing here', async () => {
  const stores = [createMemoryStore(), createMemoryStore()] as const;
  let finish: () => void = () => {};
  let bodies = 0;
  const transfer: Tool = {
    name: 'transfer',
    metadata: new ToolMetadata('transfer', { type: 'object' }).withEffect('idempotent', 'v1').withTimeoutCeiling(100),
    execute: () => new Promise<string>((resolve) => {
      bodies += 1;
      if (bodies === 1) finish = () => resolve('late');
      else if (bodies === 2) throw new Error('refused by the bank');
      else resolve('done');
    }),
  };
  const runtime = createToolRuntime({ tools: [transfer], grants: { agent: '*' } });
  const gateways = [];
  for (const store of stores) {
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('t');
    gateways.push(runtime.bind({ owner, taskId: 't', caller: 'agent' }));
  }
  const x = await gateways[0]!.callWithOptions('transfer', {}, { operationKey: 'k1' });
  assert.equal(x.result.outcome.status === 'failed' && x.result.outcome.code, 'tool_timeout', 'store X: its body runs on');
  const y = await gateways[1]!.callWithOptions('transfer', {}, { operationKey: 'k1' });
  assert.equal(y.result.outcome.status === 'failed' && y.result.outcome.category, 'body_panic', 'store Y ran its own call');
  const plan = prepareToolRetry(await stores[1].loadHistory('s'), y.call.id);
  const retried = await gateways[1]!.callWithOptions('transfer', {}, { retry: plan });
  assert.equal(retried.result.outcome.status, 'succeeded', 'not refused for store X\'s running body');
  finish();
  for (const store of stores) await store.close();
});

it('a decision about a call still running here waits in the inbox: journalInboxReviews neither journals nor fails on it', async () => {
  const { store, owner } = await session({ leaseMs: 100, heartbeat: false });
  let release: () => void = () => {};
  const transfer: Tool = {
    name: 'transfer',
    metadata: new ToolMetadata('transfer', { type: 'object' }).withEffect('non_idempotent', 'v1'),
    execute: () => new Promise<string>((resolve) => { release = () => resolve('sent'); }),
  };
  const running = createToolRuntime({ tools: [transfer], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' }).call('transfer', {});
  const history = await journalShowing(store, (h) => types(h).includes('tool_started'), 'tool_started');
  const callId = history.flatMap((e) => (e.kind.type === 'tool_started' ? [e.kind.callId] : []))[0]!;
  await sleep(150);
  const inbox = decisionInbox(store);
  const decided = await inbox.recordReview({ sessionId: 's', callId, outcome: 'uncertain', evidence: 'cannot tell yet', actor: 'ops' });
  const report = await journalInboxReviews(owner, store, history);
  assert.deepEqual([report.journaled, report.stale], [[], []]);
  assert.equal((await inbox.get(decided.id))?.state, 'decided', 'left for a pass after the call has a result');
  release();
  assert.equal((await running).result.outcome.status, 'succeeded');
  await store.close();
});

it('append checks and writes one plain copy of each draft: a getter cannot show the check one kind and the journal another', async () => {
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'host' });
  let reads = 0;
  const shifty = { type: 'custom', kind: 'body_ended', payload: { callId: 'toolcall_x', ended: 'not_called' }, get plugin() { reads += 1; return reads === 1 ? 'host.plugin' : 'jingwei.runtime'; } };
  const [written] = await owner.append([{ turnId: 'turn_1' as never, kind: shifty as never }]);
  assert.equal(reads, 1, 'read once');
  assert.equal(written!.kind.type === 'custom' && written!.kind.plugin, 'host.plugin');
  assert.deepEqual((await store.loadHistory('s')).map((e) => (e.kind.type === 'custom' ? e.kind.plugin : e.kind.type)), ['host.plugin']);
  const proxied = new Proxy({ type: 'user_message', text: 'hi' }, {});
  await assert.rejects(owner.append([{ turnId: 'turn_1' as never, kind: proxied as never }]), { name: 'InvalidInputError', message: /events\[0\]: must be plain data/ });
  await store.close();
});

it('a body whose result cannot be written (its owner taken over here meanwhile) has its end journaled through the new owner', async () => {
  const { store, owner: first } = await session();
  let finish: () => void = () => {};
  let started = false;
  const transfer: Tool = {
    name: 'transfer',
    metadata: new ToolMetadata('transfer', { type: 'object' }).withEffect('non_idempotent', 'v1'),
    execute: () => new Promise<string>((resolve) => { started = true; finish = () => resolve('sent'); }),
  };
  const running = createToolRuntime({ tools: [transfer], grants: { agent: '*' } }).bind({ owner: first, taskId: 't', caller: 'agent' }).call('transfer', {});
  for (let waited = 0; !started && waited < 5000; waited += 2) await sleep(2);
  const second = await store.acquire('s', { owner: 'host-2', takeover: true });
  finish();
  await assert.rejects(running, { name: 'ToolRecordingError' });
  const history = await journalShowing(store, (h) => types(h).includes('body_ended'), 'body_ended');
  assert.deepEqual(types(history), ['task_ledger', 'tool_call', 'tool_started', 'body_ended']);
  const ended = history[3]!;
  assert.equal(ended.kind.type === 'custom' && (ended.kind.payload as { ended?: string }).ended, 'returned', 'the journal shows the body returned: a review is not made blind to it');
  await second.release();
  await store.close();
});

it('two handles on one SQLite file in one process see the same running bodies, as one store would', async () => {
  const path = tempDbPath(tempDir(), 'journal');
  const a = openSqliteStore(path);
  const b = openSqliteStore(path);
  const first = await a.acquire('s', { owner: 'host' });
  await first.startTask('t');
  const { tool: transfer, late } = lateTransfer();
  const runtime = createToolRuntime({ tools: [transfer], grants: { agent: '*' } });
  const ran = await runtime.bind({ owner: first, taskId: 't', caller: 'agent' }).call('transfer', {});
  assert.equal(ran.result.outcome.status === 'failed' && ran.result.outcome.code, 'tool_timeout');
  // Taken over through the other handle while the body runs (a release would wait for it).
  const second = await b.acquire('s', { owner: 'host', takeover: true });
  const history = await b.loadHistory('s');
  await assert.rejects(recordToolReview(second, history, ran.call.id, { actor: 'ops', evidence: 'nothing seen', outcome: 'not_executed' }), { code: 'call_in_flight' });
  const plan = prepareToolRetry(history, ran.call.id, { actor: 'ops', evidence: 'nothing seen', outcome: 'not_executed' });
  await assert.rejects(runtime.bind({ owner: second, taskId: 't', caller: 'agent' }).callWithOptions('transfer', {}, { retry: plan }), { code: 'body_running' });
  late.finish();
  const ended = await journalShowing(b, (h) => types(h).includes('body_ended'), 'body_ended');
  assert.equal(types(ended).at(-1), 'body_ended', 'journaled through the other handle\'s owner');
  assert.equal(late.bodies, 1);
  await second.release();
  await a.close();
  await b.close();
});

it("an operator's not_executed decision made before the reconciler journaled that it could not say is stale: only one made after it is the operator's decision over the reconciler", async () => {
  const { store, owner } = await session();
  let answer: 'unknown' | 'throw' = 'unknown';
  const wire: Tool = {
    name: 'wire',
    metadata: new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1'),
    execute: async () => { throw new Error('lost after the write'); },
    reconcile: () => {
      if (answer === 'throw') throw new Error('the bank is down');
      return { outcome: 'unknown', evidence: 'the bank view lags' };
    },
  };
  const gateway = createToolRuntime({ tools: [wire], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  const callId = (await gateway.call('wire', {})).call.id;
  const inbox = decisionInbox(store);
  const early = await inbox.recordReview({ sessionId: 's', callId, outcome: 'not_executed', evidence: 'not in the bank view', actor: 'ops' });
  const asked = await reconcileUncertainCalls(owner, [wire], await store.loadHistory('s'));
  assert.equal(asked.calls[0]?.review?.outcome, 'uncertain', 'the reconciler could not say');
  const first = await journalInboxReviews(owner, store, await store.loadHistory('s'));
  assert.deepEqual(first.journaled, []);
  assert.match(first.stale[0]?.reason ?? '', /the reconciler's uncertain review \(seq \d+\) of call .* since this not_executed review was recorded/);
  assert.equal((await inbox.get(early.id))?.state, 'stale');
  await inbox.recordReview({ sessionId: 's', callId, outcome: 'not_executed', evidence: 'called the bank: nothing under this reference', actor: 'ops' });
  const second = await journalInboxReviews(owner, store, await store.loadHistory('s'));
  assert.equal(second.journaled.length, 1);
  answer = 'throw';
  const failed = await reconcileUncertainCalls(owner, [wire], second.history);
  assert.deepEqual([failed.calls[0]?.action, failed.calls[0]?.review], ['failed', null], 'the decision stands');
  assert.equal(prepareToolRetry(failed.history, callId).review?.actor, 'ops');
  await store.close();
});

it('journalInboxReviews judges and writes a decision again on a journal another writer of the owner moved since it was read', async () => {
  const { store, owner, callId } = await wireInDoubt();
  await decisionInbox(store).recordReview({ sessionId: 's', callId, outcome: 'not_executed', evidence: 'called the bank', actor: 'ops' });
  const read = await store.loadHistory('s');
  await owner.append([{ turnId: 'another-run', kind: { type: 'user_message', text: 'meanwhile' } }]);
  const report = await journalInboxReviews(owner, store, read);
  assert.equal(report.journaled.length, 1);
  assert.equal(report.history.at(-1)?.kind.type, 'tool_review');
  assert.equal(report.history.length, read.length + 2, 'on the journal read again');
  await store.close();
});

it('two passes judging one inbox decision at once: the second finds it marked and goes on; a decision recorded on a journal newer than the one read is judged on that one', async () => {
  const { store, owner, callId, inbox } = await reviewedInDoubt();
  // The same review again: both passes mark it stale as a repeat, and the second finds it marked.
  const repeat = await inbox.recordReview({ sessionId: 's', callId, outcome: 'not_executed', evidence: 'not in the bank view', actor: 'ops' });
  const read = await store.loadHistory('s');
  const [a, b] = await Promise.all([journalInboxReviews(owner, store, read), journalInboxReviews(owner, store, read)]);
  assert.equal(a.stale.length + b.stale.length, 1);
  assert.equal((await inbox.get(repeat.id))?.state, 'stale');
  // The reconciler could not say, then the operator decided again, both after the journal a pass had read.
  const older = await store.loadHistory('s');
  await recordToolReview(owner, older, callId, { actor: 'reconciler:wire@v1', outcome: 'uncertain', evidence: 'the bank view lags', source: 'reconciler' });
  await inbox.recordReview({ sessionId: 's', callId, outcome: 'not_executed', evidence: 'called the bank: nothing sent', actor: 'ops' });
  const report = await journalInboxReviews(owner, store, older);
  assert.deepEqual([report.journaled.length, report.stale], [1, []], 'not taken for a repeat of the review before the reconciler\'s');
  await store.close();
});

it('a decision is refused as a repeat only on a journal read again: another writer may have journaled a review since the pass read it; one another pass refused meanwhile but this one journaled is marked journaled', async () => {
  const { store, owner, callId, inbox } = await reviewedInDoubt();
  const read = await store.loadHistory('s');
  const decision = await inbox.recordReview({ sessionId: 's', callId, outcome: 'not_executed', evidence: 'called the bank: nothing sent', actor: 'ops' });
  // Another pass journals a colleague's review after this pass read the journal.
  await recordToolReview(owner, await store.loadHistory('s'), callId, { actor: 'ops-2', outcome: 'uncertain', evidence: 'the bank cannot say' });
  const report = await journalInboxReviews(owner, store, read);
  assert.deepEqual([report.journaled.map((j) => j.decisionId), report.stale], [[decision.id], []], 'not a repeat of the latest review');
  // A row refused meanwhile (on an older read) whose review this pass journaled says what the journal holds.
  const again = await inbox.recordReview({ sessionId: 's', callId, outcome: 'uncertain', evidence: 'asking the bank again', actor: 'ops-3' });
  await inbox.markReviewStale(again.id, 'refused on an older read');
  const marked = await inbox.markReviewJournaled(again.id, 'event_x');
  assert.deepEqual([marked.state, marked.consumedBy, marked.note], ['consumed', 'event_x', null]);
  await store.close();
});

it("a decision refused as a repeat on a read another writer of the owner overtook before the refusal was marked says so, truly, and is not journaled after it", async () => {
  const { store, owner, callId, inbox } = await reviewedInDoubt();
  const decision = await inbox.recordReview({ sessionId: 's', callId, outcome: 'not_executed', evidence: 'called the bank: nothing sent', actor: 'ops' });
  const read = await store.loadHistory('s');
  // The pass's own fresh read returns a journal another run of the session writes past before the pass marks the row.
  const load = store.loadHistory.bind(store);
  let reads = 0;
  store.loadHistory = async (sessionId) => {
    const history = await load(sessionId);
    reads += 1;
    if (reads === 1) await recordToolReview(owner, history, callId, { actor: 'ops-2', outcome: 'uncertain', evidence: 'the bank cannot say' });
    return history;
  };
  const report = await journalInboxReviews(owner, store, read);
  assert.deepEqual(report.journaled, []);
  // Not "it repeats": the journal's latest review of the call is ops-2's now, and the reason says so.
  const reason = /has since recorded the uncertain review by ops-2 \(seq \d+\): it was not journaled; record it again/;
  assert.match(report.stale[0]?.reason ?? '', reason);
  const row = await inbox.get(decision.id);
  assert.equal(row?.state, 'stale');
  assert.match(row?.note ?? '', reason);
  const reviews = reviewLines(await load('s'));
  assert.deepEqual(reviews, ['ops not_executed', 'ops-2 uncertain'], 'the call is in doubt again, for the operator to decide on what came between');
  await store.close();
});

it("a decision refused as a repeat is never journaled after an operator's newer decision for the call, whatever the clocks of the processes that recorded them", async () => {
  const { store, owner, callId, inbox } = await reviewedInDoubt();
  const repeat = await inbox.recordReview({ sessionId: 's', callId, outcome: 'not_executed', evidence: 'still not in the bank view', actor: 'ops' });
  const read = await store.loadHistory('s');
  const load = store.loadHistory.bind(store);
  let newer: { id: string } | undefined;
  store.loadHistory = async (sessionId) => {
    // Once the repeat is refused (stale, so no longer waiting), the operator changes their mind and another pass
    // journals it, before this pass reads the journal again.
    if (newer === undefined && (await inbox.get(repeat.id))?.state === 'stale') {
      newer = await inbox.recordReview({ sessionId: 's', callId, outcome: 'uncertain', evidence: 'a pending item showed up', actor: 'ops' });
      await journalInboxReviews(owner, store, await load(sessionId));
    }
    return load(sessionId);
  };
  const report = await journalInboxReviews(owner, store, read);
  assert.deepEqual(report.journaled, []);
  assert.match(report.stale[0]?.reason ?? '', /has since recorded the uncertain review by ops/);
  assert.equal((await inbox.get(repeat.id))?.state, 'stale');
  const reviews = reviewLines(await load('s'));
  assert.deepEqual(reviews, ['ops not_executed', 'ops uncertain'], "the operator's newer review stays the latest");
  await store.close();
});

it("a retry is refused while an operator's review decision of its source waits in the inbox, and a completed decision that comes after a retry says the write may have been made twice", async () => {
  const { store, owner, callId, gateway, bodies } = await wireInDoubt();
  await recordToolReview(owner, await store.loadHistory('s'), callId, { actor: 'ops', outcome: 'not_executed', evidence: 'nothing in the bank view' });
  const plan = prepareToolRetry(await store.loadHistory('s'), callId);
  // A colleague, looking at the ledger, records that the transfer was made; the host's plan is older.
  const inbox = decisionInbox(store);
  const completed = await inbox.recordReview({ sessionId: 's', callId, outcome: 'completed', evidence: 'the ledger shows the transfer', actor: 'ops-2' });
  const before = (await store.loadHistory('s')).length;
  await assert.rejects(gateway.callWithOptions('wire', {}, { retry: plan }), { name: 'ToolRetryError', code: 'needs_review', message: new RegExp(`${completed.id}.*waits in the decision inbox`) });
  assert.equal(bodies(), 1, 'not run again');
  assert.equal((await store.loadHistory('s')).length, before, 'nothing written');
  const report = await journalInboxReviews(owner, store, await store.loadHistory('s'));
  assert.deepEqual(report.journaled.map((j) => j.decisionId), [completed.id]);
  assert.throws(() => prepareToolRetry(report.history, callId), { name: 'ToolRetryError', code: 'completed' });

  // A decision recorded just after the retry's looks at the inbox (stood in for here): the store finds it when the
  // retry's call is committed, so nothing is written, and the decision, journaled on the source, settles the operation.
  const second = await wireInDoubt();
  await recordToolReview(second.owner, await second.store.loadHistory('s'), second.callId, { actor: 'ops', outcome: 'not_executed', evidence: 'nothing in the bank view' });
  const racing = prepareToolRetry(await second.store.loadHistory('s'), second.callId);
  await decisionInbox(second.store).recordReview({ sessionId: 's', callId: second.callId, outcome: 'completed', evidence: 'the ledger shows the transfer', actor: 'ops-2' });
  Object.assign(second.owner, { waitingReview: async () => undefined });
  await assert.rejects(second.gateway.callWithOptions('wire', {}, { retry: racing }), { name: 'ToolRetryError', code: 'needs_review' });
  assert.equal(second.bodies(), 1, 'not run again');
  const settled = await journalInboxReviews(second.owner, second.store, await second.store.loadHistory('s'));
  assert.deepEqual(settled.journaled.map((j) => [j.callId, j.outcome]), [[second.callId, 'completed']]);

  // A backend that does not read the inbox in that transaction (written before TxReads.reviews): the retry goes ahead,
  // and the decision, which can no longer be journaled, says the write may have been made twice, not "never retry it".
  const inner = createMemoryStore() as JournalStore;
  const backend: JournalBackend = Object.assign(Object.create(inner.backend) as JournalBackend, {
    transact: (sessionId: SessionId, { reviews: _, ...reads }: TxReads, decide: (state: TxState) => TxWrites<unknown>) => inner.backend.transact(sessionId, reads, decide),
  });
  const third = await wireInDoubt(new JournalStore(backend));
  await recordToolReview(third.owner, await third.store.loadHistory('s'), third.callId, { actor: 'ops', outcome: 'not_executed', evidence: 'nothing in the bank view' });
  const unchecked = prepareToolRetry(await third.store.loadHistory('s'), third.callId);
  await decisionInbox(third.store).recordReview({ sessionId: 's', callId: third.callId, outcome: 'completed', evidence: 'the ledger shows the transfer', actor: 'ops-2' });
  Object.assign(third.owner, { waitingReview: async () => undefined });
  await third.gateway.callWithOptions('wire', {}, { retry: unchecked });
  const late = await journalInboxReviews(third.owner, third.store, await third.store.loadHistory('s'));
  assert.equal(late.stale.length, 1);
  assert.match(late.stale[0]!.reason, /ops-2 says call .* completed, but attempt 2 of its operation .* may have been made twice/);
  await store.close();
  await second.store.close();
  await third.store.close();
});

it("a retry is refused while a review decision waits for any attempt of its operation, also one recorded while the retry's guards ran", async () => {
  const guarded = await guardedInDoubt();
  const { store, owner, gateway, first } = guarded;
  // While the retry's guard runs (after its first look at the inbox), a colleague records that the transfer was made.
  const inbox = decisionInbox(store);
  let decision: { id: string } | undefined;
  guarded.duringGuard = async () => { decision = await inbox.recordReview({ sessionId: 's', callId: first, outcome: 'completed', evidence: 'the ledger shows the transfer', actor: 'ops-2' }); };
  await assert.rejects(gateway.callWithOptions('wire', {}, { retry: prepareToolRetry(await store.loadHistory('s'), first) }), { name: 'ToolRetryError', code: 'needs_review' });
  assert.equal(guarded.bodies, 1, 'not run: the decision was seen once the guard had answered');
  await inbox.markReviewStale(decision!.id, 'set aside for the next part of this test');

  // A retry the guard refuses is not recorded while a decision about the first attempt, recorded meanwhile, waits:
  // the decision stays on the attempt it names (an uncertain one was marked stale once a refused retry existed).
  guarded.refuse = true;
  guarded.duringGuard = async () => { decision = await inbox.recordReview({ sessionId: 's', callId: first, outcome: 'uncertain', evidence: 'the bank may have sent it', actor: 'ops-2' }); };
  const before = (await store.loadHistory('s')).length;
  await assert.rejects(gateway.callWithOptions('wire', {}, { retry: prepareToolRetry(await store.loadHistory('s'), first) }), { name: 'ToolRetryError', code: 'needs_review' });
  assert.equal((await store.loadHistory('s')).length, before, 'the refused retry was not recorded');
  const doubt = await journalInboxReviews(owner, store, await store.loadHistory('s'));
  assert.deepEqual(doubt.journaled.map((j) => [j.decisionId, j.callId, j.outcome]), [[decision!.id, first, 'uncertain']]);
  assert.throws(() => prepareToolRetry(doubt.history, first), { name: 'ToolRetryError', code: 'needs_review' });
  await recordToolReview(owner, doubt.history, first, { actor: 'ops', outcome: 'not_executed', evidence: 'the bank confirms nothing was sent' });

  // A retry the guard refuses never runs; a decision about the first attempt, recorded after it, holds back the next.
  guarded.refuse = true;
  const second = (await gateway.callWithOptions('wire', {}, { retry: prepareToolRetry(await store.loadHistory('s'), first) })).call.id;
  guarded.refuse = false;
  decision = await inbox.recordReview({ sessionId: 's', callId: second, outcome: 'completed', evidence: 'the ledger shows the transfer', actor: 'ops-2' });
  const plan = prepareToolRetry(await store.loadHistory('s'), second);
  await assert.rejects(gateway.callWithOptions('wire', {}, { retry: plan }), { name: 'ToolRetryError', code: 'needs_review', message: new RegExp(`${decision!.id} of call ${second}`) });
  assert.equal(guarded.bodies, 1, 'written once');
  // Journaled on the operation's latest attempt, which never ran: no retry is planned after it.
  const report = await journalInboxReviews(owner, store, await store.loadHistory('s'));
  assert.deepEqual(report.journaled.map((j) => [j.decisionId, j.callId, j.outcome]), [[decision!.id, second, 'completed']]);
  assert.throws(() => prepareToolRetry(report.history, second), { name: 'ToolRetryError', code: 'completed' });
  // Resolved for good: another decision about it is refused.
  await assert.rejects(decisionInbox(store).recordReview({ sessionId: 's', callId: second, outcome: 'completed', evidence: 'again', actor: 'ops-3' }), { code: 'decision_stale' });
  assert.equal(guarded.bodies, 1);
  await store.close();
});

it("after a retry that never ran, its attempt takes only a completed review, and a completed answer kept here about the earlier attempt refuses a retry planned from the later one", async () => {
  const guarded = await guardedInDoubt();
  const { store, owner, gateway, first } = guarded;
  guarded.refuse = true;
  const second = (await gateway.callWithOptions('wire', {}, { retry: prepareToolRetry(await store.loadHistory('s'), first) })).call.id;
  guarded.refuse = false;
  // An uncertain review of the attempt that never ran would be read as about that attempt, and change nothing: refused.
  await assert.rejects(recordToolReview(owner, await store.loadHistory('s'), second, { actor: 'ops-2', outcome: 'uncertain', evidence: 'not sure' }), { name: 'ToolRetryError', code: 'not_in_doubt' });
  // A reconciler's completed answer about the first attempt that this process could not journal (its owner fenced).
  keepUnjournaledCompleted(owner, first, 'reconciler:wire@v1', 'the ledger shows it');
  await assert.rejects(gateway.callWithOptions('wire', {}, { retry: prepareToolRetry(await store.loadHistory('s'), second) }), { name: 'ToolRetryError', code: 'completed', message: new RegExp(`call ${first}`) });
  assert.equal(guarded.bodies, 1, 'written once');
  // A completed review is taken there, and settles the operation.
  await recordToolReview(owner, await store.loadHistory('s'), second, { actor: 'ops-2', outcome: 'completed', evidence: 'the ledger shows it' });
  const settled = await store.loadHistory('s');
  assert.throws(() => prepareToolRetry(settled, second), { name: 'ToolRetryError', code: 'completed' });
  await store.close();
});

/**
 * A session `s` whose non-idempotent transfer failed after its write, reviewed `not_executed` by ops, behind a guard
 * that runs `duringGuard` once when set and refuses while `refuse` is true; `bodies` counts the transfer's runs.
 */
it("a completed review the owner's own inbox pass journals while the retry's guard runs refuses the retry before its call is committed", async () => {
  const guarded = await guardedInDoubt();
  const { store, owner, gateway, first } = guarded;
  const plan = prepareToolRetry(await store.loadHistory('s'), first);
  // While the guard runs, a colleague records that the transfer was made, and the host's own routine journals it: the
  // source's row says settled before and after, and nothing waits in the inbox any more.
  guarded.duringGuard = async () => {
    await decisionInbox(store).recordReview({ sessionId: 's', callId: first, outcome: 'completed', evidence: 'the ledger shows the transfer', actor: 'ops-2' });
    assert.equal((await journalInboxReviews(owner, store, await store.loadHistory('s'))).journaled.length, 1);
  };
  const before = (await store.loadHistory('s')).length;
  await assert.rejects(gateway.callWithOptions('wire', {}, { retry: plan }), { name: 'StoreConflictError', code: 'history_changed', message: /the plan is spent/ });
  assert.equal(guarded.bodies, 1, 'written once');
  const after = await store.loadHistory('s');
  assert.deepEqual(after.slice(before).map((e) => e.kind.type), ['tool_review'], 'nothing written but the review');
  await store.close();
});

async function guardedInDoubt() {
  const { store, owner } = await session();
  const state = { bodies: 0, refuse: false, duringGuard: null as (() => Promise<unknown>) | null };
  const wire: Tool = {
    name: 'wire',
    metadata: new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1'),
    execute: async () => {
      state.bodies += 1;
      throw new Error('lost after the write');
    },
  };
  const guard = async () => {
    const record = state.duringGuard;
    state.duringGuard = null;
    if (record !== null) await record();
    return state.refuse ? { code: 'rate_limited', message: 'too many transfers this minute', retryable: true } : null;
  };
  const gateway = createToolRuntime({ tools: [wire], grants: { agent: '*' }, guards: [guard] }).bind({ owner, taskId: 't', caller: 'agent' });
  const first = (await gateway.call('wire', {})).call.id;
  await recordToolReview(owner, await store.loadHistory('s'), first, { actor: 'ops', outcome: 'not_executed', evidence: 'nothing in the bank view' });
  return Object.assign(state, { store, owner, gateway, first });
}

/** The journal's reviews as "actor outcome" lines, in order. */
function reviewLines(history: readonly SessionEvent[]): string[] {
  return history.flatMap((e) => (e.kind.type === 'tool_review' ? [`${e.kind.review.actor} ${e.kind.review.outcome}`] : []));
}

/** wireInDoubt, with ops's not_executed review of the call journaled, and the store's decision inbox. */
async function reviewedInDoubt() {
  const wired = await wireInDoubt();
  await recordToolReview(wired.owner, await wired.store.loadHistory('s'), wired.callId, { actor: 'ops', outcome: 'not_executed', evidence: 'not in the bank view' });
  return { ...wired, inbox: decisionInbox(wired.store) };
}

/** A session `s` whose non-idempotent transfer failed after its write: its call in doubt. */
async function wireInDoubt(store?: SessionStore) {
  const { store: opened, owner } = await session({}, store);
  store = opened;
  let bodies = 0;
  const wire: Tool = {
    name: 'wire',
    metadata: new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1'),
    execute: async () => {
      bodies += 1;
      throw new Error('lost after the write');
    },
  };
  const gateway = createToolRuntime({ tools: [wire], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  const callId = (await gateway.call('wire', {})).call.id;
  return { store, owner, callId, gateway, bodies: () => bodies };
}
