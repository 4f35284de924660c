/**
 * Durable approvals and the decision inbox, in one process with two store handles (the host's and the operator's),
 * on SQLite and PostgreSQL: a pending answer leaves a bound request in the result's transaction; an operator's
 * decision answers once for the next attempt of that operation; stale, unknown and differently bound decisions are
 * refused with nothing written; waiting ends on a decision, a deadline or a signal.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolBodyError } from '../../src/errors.js';
import type { ToolApprovalRecord } from '../../src/event/types.js';
import { jsonDigest } from '../../src/json/canonical.js';
import { modelFacingOutcome } from '../../src/bridges/outcome.js';
import { awaitDecision, decisionInbox } from '../../src/store/inbox.js';
import { exportRustJournal } from '../../src/store/rust-format.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { inspectToolRecovery, prepareToolRetry } from '../../src/tool/recovery.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { ToolApproval, ToolExecution } from '../../src/tool/types.js';
import { rig, tool, type Rig } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';
import { commitAs } from '../../src/store/owner-commit.js';

const mailSchema = { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] };

/** A non-idempotent mail tool that needs approval, whose approver answers from a queue (pending when empty). */
/** `hangUp`: the provider hangs up after taking each mail, so every call's outcome is unknown (a call to review). */
function mailRig(answers: Array<ToolApproval | (() => Promise<ToolApproval>)>, options: { hangUp?: boolean } = {}) {
  const sent: string[] = [];
  const mail = tool('send_mail', async (req) => {
    sent.push((req.arguments as { to: string }).to);
    if (options.hangUp) throw new ToolBodyError('connection_reset', 'the provider hung up');
    return 'sent';
  }, new ToolMetadata('send mail', mailSchema).withEffect('non_idempotent', 'mail-v1').withApproval('ops'));
  const asked: number[] = [];
  const approver = async (): Promise<ToolApproval> => {
    asked.push(1);
    const next = answers.shift();
    if (typeof next === 'function') return next();
    return next ?? { decision: 'pending', note: 'a person must look at this' };
  };
  return { sent, asked, answers, config: { tools: [mail], approvers: { ops: approver } } };
}

function failedCategory(execution: ToolExecution): string {
  const o = execution.result.outcome;
  return o.status === 'failed' ? `${o.category}/${o.code}` : 'succeeded';
}

async function pendingCall(r: Rig): Promise<{ execution: ToolExecution; requestId: string }> {
  const execution = await r.gateway.call('send_mail', { to: 'ann@example.com' });
  assert.equal(failedCategory(execution), 'approval_pending/tool_approval_pending');
  const requestId = execution.result.approval?.requestId ?? '';
  assert.ok(requestId.startsWith('approval_'));
  return { execution, requestId };
}

async function retry(r: Rig, callId: string): Promise<ToolExecution> {
  const plan = prepareToolRetry(await r.store.loadHistory(r.sessionId), callId);
  return r.gateway.callWithOptions('send_mail', { to: 'ann@example.com' }, { retry: plan });
}

forEachStore('durable approvals', (target) => {
  it('a pending answer records approval_pending (not executed) and leaves an open request bound to the call', async () => {
    const m = mailRig([]);
    const r = await rig(target, m.config);
    const { execution, requestId } = await pendingCall(r);
    const history = await r.store.loadHistory(r.sessionId);
    // After the task's start (docs/design.md#the-task-ledger-in-the-chain): the call and its pending result.
    assert.deepEqual(history.map((e) => e.kind.type), ['task_ledger', 'tool_call', 'tool_result']);
    assert.equal(inspectToolRecovery(history, execution.call.id).status, 'not_executed');
    assert.deepEqual(execution.result.approval, { requestId, decision: 'pending', reason: 'a person must look at this' });
    const row = await decisionInbox(r.store).get(requestId);
    assert.equal(row?.state, 'open');
    assert.equal(row?.callId, execution.call.id);
    assert.deepEqual(row?.binding, {
      taskId: r.taskId, key: execution.call.operation!.key, tool: 'send_mail', revision: 'mail-v1',
      argumentsDigest: jsonDigest({ to: 'ann@example.com' }), approver: 'ops',
    });
    assert.deepEqual(m.sent, []);
    // The original's form reads it as an approval that could not be given, without the inbox's record.
    const rust = exportRustJournal(history);
    assert.match(rust, /"category":"approval_unavailable"/);
    assert.doesNotMatch(rust, /"category":"approval_pending"|request_id|"approval":/);
    await r.store.close();
  });

  it('an approval from another handle runs the next attempt once, with the actor journaled; it is never used twice', async () => {
    const m = mailRig([]);
    const r = await rig(target, m.config);
    const { execution, requestId } = await pendingCall(r);
    const operator = await r.reopen();
    const decided = await decisionInbox(operator).approve(requestId, { actor: 'alice', reason: 'checked the recipient' });
    assert.equal(decided.state, 'decided');
    await assert.rejects(decisionInbox(operator).deny(requestId, { actor: 'bob' }), { code: 'decision_stale' });
    const asked = m.asked.length;
    const second = await retry(r, execution.call.id);
    assert.equal(second.result.outcome.status, 'succeeded');
    assert.equal(m.asked.length, asked, 'the operator answered in place of the approver');
    assert.deepEqual(m.sent, ['ann@example.com']);
    const approval: ToolApprovalRecord = { requestId, decision: 'approved', actor: 'alice', reason: 'checked the recipient' };
    assert.deepEqual(second.startedEvent?.kind, { type: 'tool_started', callId: second.call.id, approval });
    const used = await decisionInbox(operator).get(requestId);
    assert.equal(used?.state, 'consumed');
    assert.equal(used?.consumedBy, second.call.id);
    // The journal survives a reload with the actor in it.
    const reloaded = (await operator.loadHistory(r.sessionId)).find((e) => e.kind.type === 'tool_started');
    assert.deepEqual(reloaded?.kind, second.startedEvent?.kind);
    await assert.rejects(decisionInbox(operator).approve(requestId, { actor: 'alice' }), { code: 'decision_stale' });
    await operator.close();
    await r.store.close();
  });

  it('a denial from the inbox is recorded as approval_denied with the operator as actor, and the body never runs', async () => {
    const m = mailRig([]);
    const r = await rig(target, m.config);
    const { execution, requestId } = await pendingCall(r);
    await decisionInbox(r.store).deny(requestId, { actor: 'bob', reason: 'wrong recipient' });
    const second = await retry(r, execution.call.id);
    assert.equal(failedCategory(second), 'approval_denied/tool_approval_denied_by_operator');
    assert.deepEqual(second.result.approval, { requestId, decision: 'denied', actor: 'bob', reason: 'wrong recipient' });
    assert.match((second.result.outcome as { message: string }).message, /denied by bob/);
    assert.deepEqual(m.sent, []);
    assert.equal((await decisionInbox(r.store).get(requestId))?.state, 'consumed');
    // The model reads that a person denied it and why: not who, not the request id, and not that the attempt
    // before (which waited for this decision, its body never started) may have taken effect.
    const told = modelFacingOutcome(second);
    assert.ok(!told.ok);
    assert.equal(told.text, 'Tool "send_mail" failed: approval_denied (tool_approval_denied_by_operator): an operator denied it: wrong recipient. The tool did not run.');
    const waiting = modelFacingOutcome(execution);
    assert.ok(!waiting.ok);
    assert.doesNotMatch(waiting.text, /approval_[0-9a-f]/);
    assert.match(waiting.text, /it waits for an operator's decision: a person must look at this\. The tool did not run\.$/);
    await r.store.close();
  });

  it('a redeploy that dropped the approval still takes the decision: a denial stands, an approval is used', async () => {
    for (const decision of ['deny', 'approve'] as const) {
      const m = mailRig([]);
      const r = await rig(target, m.config);
      const { execution, requestId } = await pendingCall(r);
      const inbox = decisionInbox(r.store);
      await (decision === 'deny' ? inbox.deny(requestId, { actor: 'bob', reason: 'wrong recipient' }) : inbox.approve(requestId, { actor: 'alice' }));
      // The next deploy keeps the tool, its revision and the arguments, but asks for no approval any more.
      const sent: string[] = [];
      const unguarded = createToolRuntime({
        tools: [tool('send_mail', async (req) => {
          sent.push((req.arguments as { to: string }).to);
          return 'sent';
        }, new ToolMetadata('send mail', mailSchema).withEffect('non_idempotent', 'mail-v1'))],
        grants: { agent: '*' },
      }).bind({ owner: r.owner, taskId: r.taskId, caller: 'agent' });
      const plan = prepareToolRetry(await r.store.loadHistory(r.sessionId), execution.call.id);
      const second = await unguarded.callWithOptions('send_mail', { to: 'ann@example.com' }, { retry: plan });
      if (decision === 'deny') {
        assert.equal(failedCategory(second), 'approval_denied/tool_approval_denied_by_operator', 'the operator said no to this very action');
        assert.deepEqual(sent, []);
      } else {
        assert.equal(failedCategory(second), 'succeeded');
        assert.equal(second.startedEvent?.kind.type === 'tool_started' && second.startedEvent.kind.approval?.actor, 'alice', 'the approval is journaled with the marker');
        assert.deepEqual(sent, ['ann@example.com']);
      }
      assert.equal((await inbox.get(requestId))?.state, 'consumed', 'nothing left waiting in the queue');
      await r.store.close();
    }
  });

  it('a decision is refused for another binding, and nothing is written', async () => {
    const m = mailRig([]);
    const r = await rig(target, m.config);
    const { execution, requestId } = await pendingCall(r);
    await decisionInbox(r.store).approve(requestId, { actor: 'alice' });
    const op = execution.call.operation!;
    const before = await r.store.loadHistory(r.sessionId);
    const other = { taskId: r.taskId, key: op.key, tool: 'send_mail', revision: 'mail-v1', argumentsDigest: jsonDigest({ to: 'eve@example.com' }) };
    await assert.rejects(commitAs(r.owner, {
      events: [{ turnId: 'turn-x', kind: { type: 'user_message', text: 'x' } }],
      approval: { use: { id: requestId, callId: 'toolcall_other', binding: other, at: new Date().toISOString() } },
    }), { code: 'decision_binding_changed' });
    assert.equal((await r.store.loadHistory(r.sessionId)).length, before.length);
    assert.equal((await decisionInbox(r.store).get(requestId))?.state, 'decided');
    // The same arguments as a new operation are not that operation: the approver is asked again.
    const fresh = await r.gateway.call('send_mail', { to: 'eve@example.com' });
    assert.equal(failedCategory(fresh), 'approval_pending/tool_approval_pending');
    assert.deepEqual(m.sent, []);
    assert.equal((await decisionInbox(r.store).get(requestId))?.state, 'decided');
    await r.store.close();
  });

  it('a newer pending attempt supersedes the older request: deciding the old one is refused', async () => {
    const m = mailRig([]);
    const r = await rig(target, m.config);
    const first = await pendingCall(r);
    const second = await retry(r, first.execution.call.id);
    const newer = second.result.approval!.requestId;
    assert.notEqual(newer, first.requestId);
    await assert.rejects(decisionInbox(r.store).approve(first.requestId, { actor: 'alice' }), { code: 'decision_stale' });
    await assert.rejects(decisionInbox(r.store).approve('approval_unknown', { actor: 'alice' }), { code: 'decision_not_found' });
    await assert.rejects(decisionInbox(r.store).approve(newer, { actor: ' ' }), { code: 'invalid_input' });
    const page = await decisionInbox(r.store).list({ sessionId: r.sessionId });
    assert.deepEqual(page.items.map((d) => d.id), [newer]);
    await r.store.close();
  });

  for (const end of ['stopped', 'completed'] as const) {
    it(`a task ${end} supersedes the requests it leaves open or decided: none waits for an operator or a host who can do nothing with it`, async () => {
      const m = mailRig([]);
      const r = await rig(target, m.config);
      const open = await pendingCall(r);
      const decidedCall = await r.gateway.call('send_mail', { to: 'bob@example.com' });
      const decided = decidedCall.result.approval!.requestId;
      const inbox = decisionInbox(r.store);
      await inbox.approve(decided, { actor: 'alice' });
      if (end === 'stopped') await r.owner.stopTask(r.taskId, 'the customer cancelled');
      else await r.owner.completeTask(r.taskId);
      for (const id of [open.requestId, decided]) {
        const row = await inbox.get(id);
        assert.equal(row?.state, 'superseded');
        assert.match(row?.note ?? '', end === 'stopped' ? /its task was stopped \(the customer cancelled\)/ : /its task was completed/);
      }
      assert.deepEqual((await inbox.list({ sessionId: r.sessionId, kind: 'approval', states: ['open', 'decided'] })).items, []);
      await assert.rejects(inbox.approve(open.requestId, { actor: 'alice' }), { code: 'decision_stale' });
      assert.deepEqual(m.sent, []);
      await r.store.close();
    });
  }

  it('a newer attempt its approver denied supersedes the older request: approving the old one cannot let a later retry skip the approver', async () => {
    const m = mailRig([]);
    const r = await rig(target, m.config);
    const first = await pendingCall(r);
    m.answers.push({ decision: 'denied', code: 'over_limit', message: 'never send this mail' });
    const second = await retry(r, first.execution.call.id);
    assert.equal(failedCategory(second), 'approval_denied/over_limit');
    assert.equal(second.result.approval, undefined, 'the approver\'s denial is not an operator\'s decision');
    const waiting = await decisionInbox(r.store).list({ sessionId: r.sessionId });
    assert.deepEqual(waiting.items, [], 'nothing is left in the queue for a person to approve');
    await assert.rejects(decisionInbox(r.store).approve(first.requestId, { actor: 'alice' }), { code: 'decision_stale' });
    assert.deepEqual(m.sent, []);
    await r.store.close();
  });

  it('an operator decision made while the retry asks its approver is that attempt\'s answer: a denial stands, an approval is used', async () => {
    for (const [operator, approverSays] of [['deny', 'approved'], ['approve', 'pending']] as const) {
      const m = mailRig([]);
      const r = await rig(target, m.config);
      const first = await pendingCall(r);
      // The operator answers the earlier request at the moment the host's approver is being asked.
      m.answers.push(async () => {
        const inbox = decisionInbox(r.store);
        if (operator === 'deny') await inbox.deny(first.requestId, { actor: 'maria', reason: 'wrong recipient' });
        else await inbox.approve(first.requestId, { actor: 'maria' });
        return approverSays === 'approved' ? { decision: 'approved' } : { decision: 'pending', note: 'a person must look' };
      });
      const second = await retry(r, first.execution.call.id);
      const row = await decisionInbox(r.store).get(first.requestId);
      assert.equal(row?.state, 'consumed', `${operator}: the operator's decision was used, not superseded`);
      assert.equal(row?.consumedBy, second.call.id);
      if (operator === 'deny') {
        assert.equal(failedCategory(second), 'approval_denied/tool_approval_denied_by_operator');
        assert.deepEqual(m.sent, [], 'the denial stands: the mail is not sent');
      } else {
        assert.equal(failedCategory(second), 'succeeded');
        assert.equal(second.startedEvent?.kind.type === 'tool_started' && second.startedEvent.kind.approval?.actor, 'maria');
        assert.deepEqual(m.sent, ['ann@example.com']);
        assert.deepEqual((await decisionInbox(r.store).list({ sessionId: r.sessionId })).items.filter((d) => d.state === 'open'), [],
          'no new request waits for a person');
      }
      await r.store.close();
    }
  });

  it('awaitDecision ends at its timeout though the wall clock steps back an hour while it waits', async () => {
    const m = mailRig([]);
    const r = await rig(target, m.config);
    const { requestId } = await pendingCall(r);
    const realNow = Date.now;
    const waiting = awaitDecision(r.store, requestId, { timeoutMs: 300, pollMs: 20 });
    Date.now = () => realNow() - 3_600_000;
    try {
      const ended = await Promise.race([
        waiting.then(() => 'decided', (error: { code?: string }) => error.code ?? 'error'),
        new Promise((resolve) => setTimeout(resolve, 5_000, 'still waiting')),
      ]);
      assert.equal(ended, 'decision_wait_timeout', 'a wait of 300 ms is measured on a clock that does not step');
    } finally {
      Date.now = realNow;
    }
    await r.store.close();
  });

  it('awaitDecision returns once an operator decides, and stops at a deadline or a signal', async () => {
    const m = mailRig([]);
    const r = await rig(target, m.config);
    const { requestId } = await pendingCall(r);
    await assert.rejects(awaitDecision(r.store, requestId, { timeoutMs: 0 }), { code: 'decision_wait_timeout' });
    const controller = new AbortController();
    controller.abort(new Error('host shutting down'));
    await assert.rejects(awaitDecision(r.store, requestId, { signal: controller.signal }), { code: 'decision_wait_aborted' });
    await assert.rejects(awaitDecision(r.store, 'approval_missing'), { code: 'decision_not_found' });
    // A deadline that is no time (a config value gone missing) would wait forever: refused, as a signal that is none.
    // (The aborted signal ends the wait that the invalid deadline would otherwise make endless, should it be taken.)
    await assert.rejects(awaitDecision(r.store, requestId, { deadline: new Date(Number.NaN), signal: controller.signal }), { code: 'invalid_input', field: 'deadline' });
    await assert.rejects(awaitDecision(r.store, requestId, { deadline: '2026-12-03' as never }), { code: 'invalid_input', field: 'deadline' });
    await assert.rejects(awaitDecision(r.store, requestId, { signal: { aborted: false } as never }), { code: 'invalid_input', field: 'signal' });
    const operator = await r.reopen();
    const waiting = awaitDecision(r.store, requestId, { pollMs: 20 });
    await decisionInbox(operator).approve(requestId, { actor: 'alice' });
    const row = await waiting;
    assert.equal(row.decision, 'approved');
    assert.equal(row.actor, 'alice');
    await operator.close();
    await r.store.close();
  });

  it('a wait ends with store_closed when its store closes, not at its next re-read', { skip: target.name !== 'postgres' && 'only PostgreSQL pushes decisions' }, async () => {
    const m = mailRig([]);
    const r = await rig(target, m.config);
    const { requestId } = await pendingCall(r);
    // With push, a wait re-reads at most every max(pollMs, 5 s) as a safety net: here once a minute.
    const waiting = awaitDecision(r.store, requestId, { pollMs: 60_000 }).then(() => null, (e: unknown) => e);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await r.store.close();
    const ended = await Promise.race([waiting, new Promise((resolve) => setTimeout(() => resolve('still waiting'), 30_000))]);
    assert.equal((ended as { code?: string }).code, 'store_closed');
  });

  it('review decisions wait in the inbox, filtered by session and paged, until marked journaled', async () => {
    const m = mailRig([{ decision: 'approved' }, { decision: 'approved' }, { decision: 'approved' }], { hangUp: true });
    const r = await rig(target, m.config);
    const calls = [];
    for (let i = 0; i < 3; i++) calls.push(await r.gateway.call('send_mail', { to: `p${i}@example.com` }));
    const inbox = decisionInbox(r.store);
    for (const c of calls) {
      await inbox.recordReview({ sessionId: r.sessionId, callId: c.call.id, outcome: 'completed', evidence: 'in the outbox', actor: 'alice' });
    }
    await assert.rejects(inbox.recordReview({ sessionId: r.sessionId, callId: 'toolcall_nope', outcome: 'completed', evidence: 'x', actor: 'a' }),
      { code: 'decision_not_found' });
    const first = await inbox.list({ sessionId: r.sessionId, kind: 'review', limit: 2 });
    assert.equal(first.items.length, 2);
    assert.ok(first.next);
    const second = await inbox.list({ sessionId: r.sessionId, kind: 'review', limit: 2, after: first.next! });
    assert.equal(second.items.length, 1);
    assert.equal(second.next, null);
    assert.deepEqual([...first.items, ...second.items].map((d) => d.callId), calls.map((c) => c.call.id));
    assert.equal((await inbox.list({ sessionId: 'another-session' })).items.length, 0);
    const journaled = await inbox.markReviewJournaled(first.items[0]!.id, 'evt_1');
    assert.equal(journaled.state, 'consumed');
    await assert.rejects(inbox.markReviewJournaled(first.items[0]!.id, 'evt_2'), { code: 'decision_stale' });
    assert.equal((await inbox.list({ sessionId: r.sessionId, kind: 'review' })).items.length, 2);
    await r.store.close();
  });

  it('listings of many shapes, each asked twice, answer as the first time (a store may keep a statement per shape)', async () => {
    const m = mailRig([{ decision: 'approved' }, { decision: 'approved' }], { hangUp: true });
    const r = await rig(target, m.config);
    const calls = [await r.gateway.call('send_mail', { to: 'a@example.com' }), await r.gateway.call('send_mail', { to: 'b@example.com' })];
    const inbox = decisionInbox(r.store);
    for (const c of calls) await inbox.recordReview({ sessionId: r.sessionId, callId: c.call.id, outcome: 'completed', evidence: 'sent', actor: 'alice' });
    const expected = calls.map((c) => c.call.id);
    // 1 to 80 copies of one state: 80 shapes of the listing's statement, more than any store keeps. The reviews
    // are decided, not open, so the answer alternates with the shape.
    for (const round of [1, 2]) {
      for (let copies = 1; copies <= 80; copies++) {
        const states = Array.from({ length: copies }, () => (copies % 2 ? 'decided' : 'open') as 'open' | 'decided');
        const page = await inbox.list({ sessionId: r.sessionId, kind: 'review', states });
        assert.deepEqual(page.items.map((d) => d.callId), copies % 2 ? expected : [], `round ${round}, ${copies} states`);
      }
      assert.deepEqual((await inbox.list({ sessionId: 'another-session', kind: 'review' })).items, []);
    }
    await r.store.close();
  });

  it('an approval unavailable once: the agent asks again and the mail is sent once', async () => {
    const m = mailRig([{ decision: 'unavailable', message: 'approval service down' }, { decision: 'approved' }]);
    const r = await rig(target, m.config);
    const first = await r.gateway.call('send_mail', { to: 'ann@example.com' });
    assert.equal(failedCategory(first), 'approval_unavailable/tool_approval_unavailable');
    const second = await r.gateway.call('send_mail', { to: 'ann@example.com' });
    assert.equal(second.result.outcome.status, 'succeeded');
    assert.deepEqual(m.sent, ['ann@example.com']);
    const history = await r.store.loadHistory(r.sessionId);
    assert.equal(inspectToolRecovery(history, first.call.id).status, 'not_executed');
    await r.store.close();
  });

  it('a retry of a call that waited for approval, its tool redeployed since, is recorded not run and supersedes the request; so is a retry of that refused retry', async () => {
    const m = mailRig([]);
    const r = await rig(target, m.config);
    const { execution, requestId } = await pendingCall(r);
    await decisionInbox(r.store).approve(requestId, { actor: 'ops@example.com' });
    const v2 = tool('send_mail', async () => 'sent', new ToolMetadata('send mail', mailSchema).withEffect('non_idempotent', 'mail-v2').withApproval('ops'));
    const redeployed = createToolRuntime({ tools: [v2], approvers: m.config.approvers, grants: { agent: '*' } }).bind({ owner: r.owner, taskId: r.taskId, caller: 'agent' });
    const plan = prepareToolRetry(await r.store.loadHistory(r.sessionId), execution.call.id);
    const refused = await redeployed.callWithOptions('send_mail', { to: 'ann@example.com' }, { retry: plan });
    assert.equal(failedCategory(refused), 'unavailable/tool_contract_changed');
    assert.deepEqual(refused.call.operation?.contract, { effect: 'non_idempotent', revision: 'mail-v1' }, 'recorded under the operation\'s contract');
    assert.equal(refused.call.operation?.retry?.callId, execution.call.id);
    assert.equal(refused.startedEvent, null);
    assert.equal(modelFacingOutcome(refused).ok, false);
    assert.match(JSON.stringify(modelFacingOutcome(refused)), /mail-v1.*mail-v2.*The tool did not run/);
    assert.equal((await decisionInbox(r.store).get(requestId))?.state, 'superseded');
    const history = await r.store.loadHistory(r.sessionId);
    assert.equal(inspectToolRecovery(history, refused.call.id).status, 'not_executed');
    assert.deepEqual(m.sent, []);
    // Its own retry stopped before its body: under the new contract it is recorded as not run again, and says so.
    const again = await redeployed.callWithOptions('send_mail', { to: 'ann@example.com' }, { retry: prepareToolRetry(history, refused.call.id) });
    assert.equal(failedCategory(again), 'unavailable/tool_contract_changed');
    assert.match(JSON.stringify(again.result.outcome), /stopped before its body when it ran as non_idempotent revision mail-v1/);
    assert.deepEqual(m.sent, []);
    await r.store.close();
  });

  it('an operator denying the request while such a retry is recorded: the denial is recorded and used, not superseded', async () => {
    const m = mailRig([]);
    const r = await rig(target, m.config);
    const { execution, requestId } = await pendingCall(r);
    const v2 = tool('send_mail', async () => 'sent', new ToolMetadata('send mail', mailSchema).withEffect('non_idempotent', 'mail-v2').withApproval('ops'));
    const redeployed = createToolRuntime({ tools: [v2], approvers: m.config.approvers, grants: { agent: '*' } }).bind({ owner: r.owner, taskId: r.taskId, caller: 'agent' });
    // The operator's denial lands after the runtime read the inbox (nothing decided) and before its commit.
    const read = r.owner.decidedApproval!.bind(r.owner);
    let denied = false;
    r.owner.decidedApproval = async (taskId, key) => {
      const row = await read(taskId, key);
      if (!denied) {
        denied = true;
        await decisionInbox(r.store).deny(requestId, { actor: 'ops@example.com', reason: 'wrong customer' });
      }
      return row;
    };
    const plan = prepareToolRetry(await r.store.loadHistory(r.sessionId), execution.call.id);
    const retried = await redeployed.callWithOptions('send_mail', { to: 'ann@example.com' }, { retry: plan });
    assert.equal(failedCategory(retried), 'approval_denied/tool_approval_denied_by_operator');
    assert.equal(retried.result.approval?.actor, 'ops@example.com');
    assert.equal((await decisionInbox(r.store).get(requestId))?.state, 'consumed');
    assert.deepEqual(m.sent, []);
    await r.store.close();
  });
});

it('the memory store has an inbox too; pending needs one', async () => {
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'h' });
  await owner.startTask('t');
  const m = mailRig([]);
  const gateway = createToolRuntime({ ...m.config, grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  const execution = await gateway.call('send_mail', { to: 'a@example.com' });
  const requestId = execution.result.approval!.requestId;
  assert.equal((await decisionInbox(store).list()).items[0]?.id, requestId);
  await assert.rejects(async () => decisionInbox({ ...store, kind: 'fake' } as typeof store), { code: 'inbox_unsupported' });
  // A store not awaited yet (openPostgresStore resolves to one) is named as such, not as "the undefined store".
  assert.throws(() => decisionInbox(Promise.resolve(store) as unknown as typeof store), { name: 'InvalidInputError', field: 'store', message: /is a Promise: await the store/ });
  assert.throws(() => decisionInbox(undefined as unknown as typeof store), { name: 'InvalidInputError', field: 'store' });
});
