/**
 * A journaled review, or a reconciler's answer, settles its call everywhere an operator or the runtime looks, on
 * every store: after `completed`, assessSession needs no attention for it, the queue (the attention index) no longer
 * lists it, and the in-doubt guard no longer refuses an identical operation; after `not_executed` the queue lists it
 * as a write still due, the guard refuses an identical new operation, and the retry plan runs it once.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolBodyError } from '../../src/errors.js';
import { assessSession, prepareToolRetry } from '../../src/index.js';
import { reconcileUncertainCalls, recordToolReview } from '../../src/review.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool, ToolApprover } from '../../src/tool/types.js';
import { rig, tool, type Rig } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';

const ARGS = { to: 'a@example.com', subject: 'Your order' };

/** A non-idempotent mailer whose first body fails after it may have sent: that call is in doubt. */
function mailer(sent: { count: number }, reconcile?: Tool['reconcile']): Tool {
  let calls = 0;
  const t = tool('send_mail', async () => {
    calls += 1;
    if (calls === 1) throw new ToolBodyError('connection_reset', 'the provider hung up');
    sent.count += 1;
    return 'sent';
  }, new ToolMetadata('sends a mail', { type: 'object' }).withEffect('non_idempotent', 'mail-v1'));
  return reconcile ? { ...t, reconcile } : t;
}

async function inDoubt(r: Rig): Promise<string> {
  const first = await r.gateway.call('send_mail', ARGS);
  assert.equal(first.result.outcome.status, 'failed');
  const queue = await r.store.attention({ sessionId: r.sessionId });
  assert.deepEqual(queue.items.map((i) => [i.callId, i.inDoubt]), [[first.call.id, true]]);
  const repeat = await r.gateway.call('send_mail', ARGS);
  assert.equal(repeat.result.outcome.status === 'failed' && repeat.result.outcome.category, 'in_doubt', 'the guard refuses the repeat before any review');
  return first.call.id;
}

async function settled(r: Rig, callId: string): Promise<void> {
  const history = await r.store.loadHistory(r.sessionId);
  const assessed = assessSession(history).calls.find((c) => c.callId === callId);
  assert.equal(assessed?.attention, 'none');
  assert.equal(assessSession(history).totals.byAttention.in_doubt, 0);
  assert.deepEqual((await r.store.attention({ sessionId: r.sessionId })).items, [], 'the queue lists nothing of this session');
  const resolved = await r.store.attention({ sessionId: r.sessionId, status: 'resolved' });
  assert.deepEqual(resolved.items.map((i) => [i.callId, i.inDoubt]), [[callId, false]]);
}

forEachStore('a review settles its call for the queue, the guard and assessSession', (target) => {
  it('completed (journaled by a person): no attention, not queued, an identical new operation runs', async () => {
    const sent = { count: 0 };
    const r = await rig(target, { tools: [mailer(sent)] });
    const callId = await inDoubt(r);
    await recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), callId, { actor: 'ops:maria', evidence: 'the provider shows it sent', outcome: 'completed' });
    await settled(r, callId);
    const reviewed = await r.store.loadHistory(r.sessionId);
    assert.throws(() => prepareToolRetry(reviewed, callId), { code: 'completed' });
    const again = await r.gateway.call('send_mail', ARGS);
    assert.equal(again.result.outcome.status, 'succeeded', 'a deliberate new mail is not refused as in doubt');
    assert.equal(sent.count, 1);
    await r.store.close();
  });

  it('not_executed: queued as a write still due, not in doubt, until the retry plan built from the journaled review runs it once', async () => {
    const sent = { count: 0 };
    const r = await rig(target, { tools: [mailer(sent)] });
    const callId = await inDoubt(r);
    await recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), callId, { actor: 'ops:maria', evidence: 'nothing in the outbox', outcome: 'not_executed' });
    const history = await r.store.loadHistory(r.sessionId);
    const listed = (await r.store.attention({ sessionId: r.sessionId })).items;
    assert.deepEqual(listed.map((i) => [i.callId, i.status, i.inDoubt]), [[callId, 'reviewed_not_executed', false]]);
    const assessed = assessSession(history).calls.find((c) => c.callId === callId);
    assert.deepEqual([assessed?.nextStep, assessed?.attention], ['retry_allowed', 'interrupted'],
      'settled as not made: a host must retry it, and it is no longer in doubt, as the queue says (pass r73 #6)');
    // The user asks again (a new run of the task, a new operation) while the reviewed mail's retry is due: made
    // beside that retry, it would send the mail twice (pass r72 #1). The guard refuses it before its body.
    const repeat = await r.gateway.call('send_mail', ARGS);
    const refused = repeat.result.outcome;
    assert.equal(refused.status === 'failed' && refused.code, 'tool_in_doubt');
    assert.match(refused.status === 'failed' ? refused.message : '', new RegExp(`identical send_mail call \\(${callId}\\) was reviewed as not made, and its retry is still due`));
    assert.equal(sent.count, 0);
    const plan = prepareToolRetry(await r.store.loadHistory(r.sessionId), callId);
    const retry = await r.gateway.callWithOptions('send_mail', ARGS, { retry: plan });
    assert.equal(retry.result.outcome.status, 'succeeded');
    assert.equal(sent.count, 1, 'sent exactly once');
    assert.deepEqual((await r.store.attention({ sessionId: r.sessionId })).items, []);
    assert.equal(assessSession(await r.store.loadHistory(r.sessionId)).totals.byAttention.in_doubt, 0);
    await r.store.close();
  });

  it('not_executed: an identical new operation is refused while the reviewed retry waits for its approver (pass r73 #1)', async () => {
    const sent = { count: 0 };
    let hold: Promise<void> | null = null;
    let release!: () => void;
    const approver: ToolApprover = async () => {
      if (hold !== null) await hold;
      return { decision: 'approved' };
    };
    const base = mailer(sent);
    const gated = { ...base, metadata: base.metadata.withApproval('ops') };
    const r = await rig(target, { tools: [gated], approvers: { ops: approver } });
    const callId = await inDoubt(r);
    await recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), callId, { actor: 'ops:maria', evidence: 'nothing in the outbox', outcome: 'not_executed' });
    const plan = prepareToolRetry(await r.store.loadHistory(r.sessionId), callId);
    hold = new Promise<void>((resolve) => { release = resolve; });
    const retry = r.gateway.callWithOptions('send_mail', ARGS, { retry: plan });
    while ((await r.store.loadHistory(r.sessionId)).filter((e) => e.kind.type === 'tool_call').length < 3) await new Promise((resolve) => setTimeout(resolve, 5));
    // The retry is recorded and asks its approver, running in this process: the user's identical new call beside it
    // would send the mail a second time.
    hold = null;
    const repeat = await r.gateway.call('send_mail', { subject: ARGS.subject, to: ARGS.to });
    const refused = repeat.result.outcome;
    assert.equal(refused.status === 'failed' && refused.code, 'tool_in_doubt', 'refused while the reviewed retry runs');
    release();
    assert.equal((await retry).result.outcome.status, 'succeeded');
    assert.equal(sent.count, 1, 'sent exactly once');
    await r.store.close();
  });

  it('a completed review after the reviewed write\'s retry was denied resolves it in the index as in the journal', async () => {
    const sent = { count: 0 };
    const base = mailer(sent);
    // The approver lets the first attempt through, and denies the retry.
    let asked = 0;
    const approver: ToolApprover = async () => (asked++ === 0 ? { decision: 'approved' } : { decision: 'denied', code: 'not_now', message: 'not now' });
    const r = await rig(target, { tools: [{ ...base, metadata: base.metadata.withApproval('ops') }], approvers: { ops: approver } });
    const callId = await inDoubt(r);
    await recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), callId, { actor: 'ops:maria', evidence: 'nothing in the outbox', outcome: 'not_executed' });
    const denied = await r.gateway.callWithOptions('send_mail', ARGS, { retry: prepareToolRetry(await r.store.loadHistory(r.sessionId), callId) });
    assert.equal(denied.result.outcome.status === 'failed' && denied.result.outcome.category, 'approval_denied');
    // A colleague then finds the mail in the provider's log after all: it was made.
    await recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), denied.call.id, { actor: 'ops:lee', evidence: 'the provider logged it', outcome: 'completed' });
    const assessed = assessSession(await r.store.loadHistory(r.sessionId)).calls.find((c) => c.callId === denied.call.id);
    assert.equal(assessed?.nextStep, 'completed');
    const rows = (await r.store.attention({ sessionId: r.sessionId, status: ['resolved', 'not_executed'] })).items;
    assert.deepEqual(rows.filter((i) => i.callId === denied.call.id).map((i) => i.status), ['resolved'],
      'the index must say what the journal says: a completed review resolves the operation, also over a denied retry');
    await r.store.close();
  });

  it('not_executed of an idempotent write\'s latest attempt, a free retry refused before its body: due in the journal\'s view as in the queue (r77 #1)', async () => {
    const sent = { count: 0 };
    const base = mailer(sent);
    const idempotent = { ...base, metadata: new ToolMetadata('sends a mail', { type: 'object' }).withEffect('idempotent', 'mail-v1') };
    const r = await rig(target, { tools: [idempotent] });
    const first = await r.gateway.call('send_mail', ARGS);
    assert.equal(first.result.outcome.status, 'failed', 'its body failed after it may have sent: its outcome is open');
    // The free retry is refused before its body: the caller's grant was withdrawn.
    const refused = await createToolRuntime({ tools: [idempotent], grants: { other: '*' } }).bind({ owner: r.owner, taskId: r.taskId, caller: 'agent' })
      .callWithOptions('send_mail', ARGS, { retry: prepareToolRetry(await r.store.loadHistory(r.sessionId), first.call.id) });
    assert.equal(refused.result.outcome.status === 'failed' && refused.result.outcome.category, 'unavailable');
    // A person decides the operation's doubt on its latest attempt, as inspect shows it: not made.
    await recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), refused.call.id, { actor: 'ops:maria', evidence: 'nothing in the outbox', outcome: 'not_executed' });
    const listed = (await r.store.attention({ sessionId: r.sessionId })).items;
    assert.deepEqual(listed.map((i) => [i.callId, i.status]), [[refused.call.id, 'reviewed_not_executed']]);
    const assessed = assessSession(await r.store.loadHistory(r.sessionId)).calls.find((c) => c.callId === refused.call.id);
    assert.deepEqual([assessed?.attention, assessed?.nextStep], ['interrupted', 'retry_allowed'],
      'the write is due: assessSession (inspect, sessions, the startup routine) must count it as the queue does');
    const made = await r.gateway.callWithOptions('send_mail', ARGS, { retry: prepareToolRetry(await r.store.loadHistory(r.sessionId), refused.call.id) });
    assert.equal(made.result.outcome.status, 'succeeded');
    assert.equal(sent.count, 1, 'sent exactly once');
    assert.deepEqual((await r.store.attention({ sessionId: r.sessionId })).items, []);
    await r.store.close();
  });

  it('not_executed passed to prepareToolRetry, the retry denied: settled as a journaled review settles it, in the queue, assessSession and the guard (r109 #3)', async () => {
    const sent = { count: 0 };
    const base = mailer(sent);
    // The approver lets the first attempt through, denies the retry, and lets anything after it through.
    let asked = 0;
    const approver: ToolApprover = async () => (++asked === 2 ? { decision: 'denied', code: 'not_now', message: 'not now' } : { decision: 'approved' });
    const r = await rig(target, { tools: [{ ...base, metadata: base.metadata.withApproval('ops') }], approvers: { ops: approver } });
    const callId = await inDoubt(r);
    const review = { actor: 'ops:maria', evidence: 'nothing in the outbox', outcome: 'not_executed' } as const;
    const denied = await r.gateway.callWithOptions('send_mail', ARGS, { retry: prepareToolRetry(await r.store.loadHistory(r.sessionId), callId, review) });
    assert.equal(denied.result.outcome.status === 'failed' && denied.result.outcome.category, 'approval_denied');
    const history = await r.store.loadHistory(r.sessionId);
    const assessed = assessSession(history);
    assert.equal(assessed.totals.byAttention.in_doubt, 0, 'a person said it was not made, and the retry was decided against: nothing is in doubt');
    assert.deepEqual(assessed.calls.find((c) => c.callId === denied.call.id)?.attention, 'none');
    assert.deepEqual(assessed.calls.find((c) => c.callId === callId)?.review, { callId, source: 'human', ...review },
      'the earlier attempt shows the review its retry carried');
    assert.deepEqual((await r.store.attention({ sessionId: r.sessionId })).items, [], 'the queue lists nothing, as assessSession');
    const rows = (await r.store.attention({ sessionId: r.sessionId, status: 'not_executed' })).items;
    assert.deepEqual(rows.filter((i) => i.callId === denied.call.id).map((i) => i.inDoubt), [false], 'decided against');
    // The user asks for the mail anew: nobody made it, so the guard does not refuse it.
    const again = await r.gateway.call('send_mail', ARGS);
    assert.equal(again.result.outcome.status, 'succeeded');
    assert.equal(sent.count, 1, 'sent exactly once');
    await r.store.close();
  });

  it('not_executed passed to prepareToolRetry, the retry refused before its body: its write still due in the queue as in assessSession, made once by the next retry', async () => {
    const sent = { count: 0 };
    const r = await rig(target, { tools: [mailer(sent)] });
    const callId = await inDoubt(r);
    const review = { actor: 'ops:maria', evidence: 'nothing in the outbox', outcome: 'not_executed' } as const;
    // The retry is refused before its body: the caller's grant was withdrawn.
    const refused = await createToolRuntime({ tools: [mailer(sent)], grants: { other: '*' } }).bind({ owner: r.owner, taskId: r.taskId, caller: 'agent' })
      .callWithOptions('send_mail', ARGS, { retry: prepareToolRetry(await r.store.loadHistory(r.sessionId), callId, review) });
    assert.equal(refused.result.outcome.status === 'failed' && refused.result.outcome.category, 'unavailable');
    const listed = (await r.store.attention({ sessionId: r.sessionId })).items;
    assert.deepEqual(listed.map((i) => [i.callId, i.status, i.inDoubt]), [[refused.call.id, 'reviewed_not_executed', false]]);
    const assessed = assessSession(await r.store.loadHistory(r.sessionId)).calls.find((c) => c.callId === refused.call.id);
    assert.deepEqual([assessed?.attention, assessed?.nextStep], ['interrupted', 'retry_allowed']);
    assert.match(assessed?.reason ?? '', new RegExp(`a review said attempt 1 \\(${callId}\\) before it was not made, and its write is still due`));
    const repeat = await r.gateway.call('send_mail', ARGS);
    assert.equal(repeat.result.outcome.status === 'failed' && repeat.result.outcome.code, 'tool_in_doubt', 'an identical new mail beside the due one is refused');
    const made = await r.gateway.callWithOptions('send_mail', ARGS, { retry: prepareToolRetry(await r.store.loadHistory(r.sessionId), refused.call.id) });
    assert.equal(made.result.outcome.status, 'succeeded');
    assert.equal(sent.count, 1, 'sent exactly once');
    assert.deepEqual((await r.store.attention({ sessionId: r.sessionId })).items, []);
    await r.store.close();
  });

  it('a reconciler\'s completed answer settles it the same way, without a person', async () => {
    const sent = { count: 0 };
    const reconcile: Tool['reconcile'] = async () => ({ outcome: 'completed', evidence: 'the provider has a message for this key' });
    const r = await rig(target, { tools: [mailer(sent, reconcile)] });
    const callId = await inDoubt(r);
    const report = await reconcileUncertainCalls(r.owner, [mailer(sent, reconcile)], await r.store.loadHistory(r.sessionId));
    assert.deepEqual(report.needsReview, []);
    assert.equal(report.calls.find((c) => c.callId === callId)?.action, 'recorded');
    await settled(r, callId);
    await r.store.close();
  });
});
