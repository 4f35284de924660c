/**
 * Retries through the real runtime and store: the marker rule end to end, and decision D4 (a plan is checked
 * against the journal when it is used, so two hosts holding plans from one history cannot both retry).
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { inspectToolRecovery, prepareToolRetry } from '../../src/tool/recovery.js';
import type { ToolApprover } from '../../src/tool/types.js';
import { untilBodyEnded } from '../support/body-ended.js';
import { never, rig, tool } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';
const review = { actor: 'ops@example.com', evidence: 'ledger query #42: no row', outcome: 'not_executed' as const };

forEachStore('retries through the runtime', (target) => {
  it('the marker rule: died waiting for approval → not_executed, retried without review, approval asked again', async () => {
    const waiting: ToolApprover = async () => never();
    let bodies = 0;
    const charge = tool('charge_card', async () => { bodies += 1; return 'charged'; },
      new ToolMetadata('charges a card', { type: 'object' }).withEffect('non_idempotent', 'cards-v1').withApproval('human'));
    const r = await rig(target, { tools: [charge], approvers: { human: waiting } });
    const dying = new AbortController();
    const abandoned = r.gateway.callWithOptions('charge_card', { cents: 500 }, { signal: dying.signal }).catch((e: unknown) => e);
    // seq 0 is the task's start (docs/design.md#the-task-ledger-in-the-chain): wait for the call after it.
    while ((await r.store.loadHistory(r.sessionId)).length < 2) await new Promise((res) => setTimeout(res, 5));
    // The host dies while the approver has not answered; a new host takes over.
    const store = await r.reopen();
    const owner = await store.acquire(r.sessionId, { owner: 'recovering-host', takeover: true });
    dying.abort();
    assert.equal(((await abandoned) as { code: string }).code, 'recording_failed', 'the fenced host cannot record anything');
    const history = await store.loadHistory(r.sessionId);
    assert.deepEqual(history.map((e) => e.kind.type), ['task_ledger', 'tool_call']);
    const callId = (history[1]!.kind as { call: { id: string } }).call.id;
    assert.equal(inspectToolRecovery(history, callId).status, 'not_executed');
    const plan = prepareToolRetry(history, callId, null);
    let approved = 0;
    const runtime = createToolRuntime({
      tools: [charge],
      grants: { agent: '*' },
      approvers: { human: async () => { approved += 1; return { decision: 'approved' }; } },
    });
    const retry = await runtime.bind({ owner, taskId: r.taskId, caller: 'agent' }).callWithOptions('charge_card', { cents: 500 }, { retry: plan });
    assert.equal(retry.result.outcome.status, 'succeeded');
    assert.equal(approved, 1, 'approval is asked again on the retry');
    assert.equal(bodies, 1);
    await store.close();
    await r.store.close();
  });

  it('the marker rule: the same call after its tool_started marker needs review until a not_executed review', async () => {
    let release!: () => void;
    const gate = new Promise<void>((res) => { release = res; });
    const charge = tool('charge_card', async () => { await gate; return 'charged'; },
      new ToolMetadata('charges a card', { type: 'object' }).withEffect('non_idempotent', 'cards-v1'));
    const r = await rig(target, { tools: [charge] });
    const pending = r.gateway.call('charge_card', { cents: 500 }).catch((e: unknown) => e);
    // seq 0 is the task's start: wait for the call and its marker after it.
    while ((await r.store.loadHistory(r.sessionId)).length < 3) await new Promise((res) => setTimeout(res, 5));
    const store = await r.reopen();
    const owner = await store.acquire(r.sessionId, { owner: 'recovering-host', takeover: true });
    release();
    assert.equal(((await pending) as { code: string }).code, 'recording_failed', 'the fenced host cannot record its result');
    const callId = ((await store.loadHistory(r.sessionId))[1]!.kind as { call: { id: string } }).call.id;
    // The new owner (another handle on the same database, in this process) journals how the fenced body ended; a
    // review is decided on a history that shows it.
    const end = await untilBodyEnded(store, r.sessionId, callId);
    assert.deepEqual(end.kind.type === 'custom' && end.kind.payload, { callId, ended: 'returned' });
    const history = await store.loadHistory(r.sessionId);
    assert.deepEqual(history.map((e) => e.kind.type), ['task_ledger', 'tool_call', 'tool_started', 'custom']);
    assert.equal(inspectToolRecovery(history, callId).status, 'outcome_unknown');
    // Without a review passed: where an operator's answer from the CLI must go first (r105 F3).
    assert.throws(() => prepareToolRetry(history, callId, null), { code: 'needs_review', message: /review recorded in the decision inbox .* counts once the host journals it \(journalInboxReviews\)$/ });
    assert.throws(() => prepareToolRetry(history, callId, { ...review, outcome: 'uncertain' }), (error: unknown) => (error as { code?: string }).code === 'needs_review' && !String(error).includes('journalInboxReviews'));
    // The fenced body returned: a not_executed review says the person checked all the same.
    assert.throws(() => prepareToolRetry(history, callId, review), { code: 'needs_review' });
    const plan = prepareToolRetry(history, callId, { ...review, despiteLateReturn: true });
    const runtime = createToolRuntime({ tools: [tool('charge_card', async () => 'charged', charge.metadata)], grants: { agent: '*' } });
    const retry = await runtime.bind({ owner, taskId: r.taskId, caller: 'agent' }).callWithOptions('charge_card', { cents: 500 }, { retry: plan });
    assert.equal(retry.result.outcome.status, 'succeeded');
    assert.deepEqual(retry.call.operation!.retry, { callId, eventId: history[1]!.eventId, review });
    await store.close();
    await r.store.close();
  });

  it('D4: two hosts with plans from the same history: one retry recorded, the other not_latest_attempt, nothing written or charged', async () => {
    let fail = true;
    const lookup = tool('lookup', async () => { if (fail) throw new TypeError('flaky'); return 'found'; },
      new ToolMetadata('reads', { type: 'object' }).withEffect('read_only', 'v1'));
    const r = await rig(target, { tools: [lookup] });
    const first = await r.gateway.call('lookup', { q: 'x' });
    const history = await r.store.loadHistory(r.sessionId);
    const planA = prepareToolRetry(history, first.call.id, null);
    const planB = prepareToolRetry(history, first.call.id, null);
    fail = false;
    const a = await r.gateway.callWithOptions('lookup', { q: 'x' }, { retry: planA });
    assert.equal(a.result.outcome.status, 'succeeded');
    const before = { events: (await r.store.loadHistory(r.sessionId)).length, charged: (await r.owner.task(r.taskId)).charged };
    await assert.rejects(r.gateway.callWithOptions('lookup', { q: 'x' }, { retry: planB }), { code: 'not_latest_attempt' });
    // A second host that took over, holding the same stale plan's twin, is refused the same way.
    const store = await r.reopen();
    const owner = await store.acquire(r.sessionId, { owner: 'host-b', takeover: true });
    const planC = prepareToolRetry(history, first.call.id, null);
    const runtime = createToolRuntime({ tools: [lookup], grants: { agent: '*' } });
    await assert.rejects(runtime.bind({ owner, taskId: r.taskId, caller: 'agent' }).callWithOptions('lookup', { q: 'x' }, { retry: planC }), { code: 'not_latest_attempt' });
    assert.equal((await store.loadHistory(r.sessionId)).length, before.events, 'nothing written');
    assert.deepEqual((await owner.task(r.taskId)).charged, before.charged, 'nothing charged');
    assert.equal(planB.consumed, true, 'a plan is spent once taken, even when admission then fails');
    await assert.rejects(r.gateway.callWithOptions('lookup', { q: 'x' }, { retry: planB }), { code: 'consumed' });
    await store.close();
    await r.store.close();
  });
});

forEachStore('an interrupt before the call is written', (target) => {
  it('is recorded without a start marker, so recovery proves the body never ran', async () => {
    let bodies = 0;
    const send = tool('send_email', async () => { bodies += 1; return 'sent'; },
      new ToolMetadata('sends', { type: 'object' }).withEffect('non_idempotent', 'v1'));
    const r = await rig(target, { tools: [send] });
    const execution = await r.gateway.callWithOptions('send_email', {}, { signal: AbortSignal.abort() });
    assert.equal((execution.result.outcome as { category: string }).category, 'cancelled');
    assert.equal(execution.startedEvent, null);
    assert.equal(bodies, 0);
    const history = await r.store.loadHistory(r.sessionId);
    assert.deepEqual(history.map((e) => e.kind.type), ['task_ledger', 'tool_call', 'tool_result']);
    assert.equal(inspectToolRecovery(history, execution.call.id).status, 'not_executed');
    assert.equal((await r.owner.task(r.taskId)).charged.toolCalls, 1, 'the attempt is charged, its output refunded');
    assert.equal((await r.owner.task(r.taskId)).charged.toolOutputBytes, 0);
    await r.store.close();
  });
});

forEachStore('a stale attempt cannot start', (target) => {
  it('an owner retries a call still waiting for approval: the late approval never runs the first body', async () => {
    let approveFirst!: () => void;
    const firstApproval = new Promise<void>((res) => { approveFirst = res; });
    let asked = 0;
    const approver: ToolApprover = async () => {
      asked += 1;
      if (asked === 1) await firstApproval;
      return { decision: 'approved' };
    };
    const bodies: number[] = [];
    const charge = tool('charge_card', async (request) => { bodies.push(asked); return `charged ${request.callId}`; },
      new ToolMetadata('charges a card', { type: 'object' }).withEffect('non_idempotent', 'cards-v1').withApproval('human'));
    const r = await rig(target, { tools: [charge], approvers: { human: approver } });
    const first = r.gateway.call('charge_card', { cents: 500 });
    // seq 0 is the task's start (docs/design.md#the-task-ledger-in-the-chain): wait for the call after it.
    while ((await r.store.loadHistory(r.sessionId)).length < 2) await new Promise((res) => setTimeout(res, 5));
    const history = await r.store.loadHistory(r.sessionId);
    const firstId = (history[1]!.kind as { call: { id: string } }).call.id;
    // Same owner, no takeover: the waiting call has no marker, so a retry is allowed, and it runs.
    const plan = prepareToolRetry(history, firstId, null);
    const retry = await r.gateway.callWithOptions('charge_card', { cents: 500 }, { retry: plan });
    assert.equal(retry.result.outcome.status, 'succeeded');
    assert.equal(bodies.length, 1);
    approveFirst();
    const late = await first;
    assert.equal(bodies.length, 1, 'the superseded attempt never ran its body');
    assert.equal(late.startedEvent, null);
    assert.ok(late.result.outcome.status === 'failed' && late.result.outcome.code === 'tool_superseded', JSON.stringify(late.result.outcome));
    const types = (await r.store.loadHistory(r.sessionId)).map((e) => e.kind.type);
    assert.equal(types.filter((t) => t === 'tool_started').length, 1, 'only the latest attempt has a start marker');
    await r.store.close();
  });
});
