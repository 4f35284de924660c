/**
 * Two approval requests for one write (r106 #3): a model told that its call waits for a person asks for the same call
 * again, under another operation, and leaves a second request. Once an operator approved one of them, approving the
 * other is refused (`decision_identical`, nothing written) unless a second identical write is meant
 * (`allowIdentical`); denying it is always taken. On every store, with the operator on another handle.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { DecisionError } from '../../src/errors.js';
import { decisionInbox } from '../../src/store/inbox.js';
import type { InboxBackend } from '../../src/store/inbox-rows.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/recovery.js';
import type { ToolExecution } from '../../src/tool/types.js';
import { rig, tool, type Rig } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';

const paySchema = { type: 'object', properties: { to: { type: 'string' }, cents: { type: 'integer' } }, required: ['to', 'cents'] };

/** A non-idempotent `pay` whose approver always answers pending: every decision is an operator's. */
async function payRig(target: Parameters<typeof rig>[0]) {
  const paid: unknown[] = [];
  const pay = tool('pay', async (req) => {
    paid.push(req.arguments);
    return 'paid';
  }, new ToolMetadata('pays', paySchema).withEffect('non_idempotent', 'pay-v1').withApproval('desk'));
  const r = await rig(target, { tools: [pay], approvers: { desk: async () => ({ decision: 'pending', note: 'a person decides' }) } });
  return { r, paid };
}

async function pending(r: Rig, args: { to: string; cents: number }): Promise<{ execution: ToolExecution; requestId: string }> {
  const execution = await r.gateway.call('pay', args);
  const requestId = execution.result.approval?.requestId;
  assert.ok(requestId !== undefined && execution.result.outcome.status === 'failed' && execution.result.outcome.category === 'approval_pending');
  return { execution, requestId };
}

async function retry(r: Rig, execution: ToolExecution): Promise<ToolExecution> {
  const plan = prepareToolRetry(await r.store.loadHistory(r.sessionId), execution.call.id);
  return r.gateway.callWithOptions('pay', execution.call.arguments, { retry: plan });
}

const ANN = { to: 'ann', cents: 500 };

forEachStore('identical approval requests', (target) => {
  it('a request identical to one approved (waiting, or used) is refused approval, nothing written; denying it is taken; one payment (r106 #3)', async () => {
    const { r, paid } = await payRig(target);
    const operator = await r.reopen();
    try {
      const inbox = decisionInbox(operator);
      const first = await pending(r, ANN);
      const repeat = await pending(r, ANN);
      const other = await pending(r, { to: 'bob', cents: 500 });
      // Neither approved yet: the first approval is taken.
      await inbox.approve(first.requestId, { actor: 'alice' });
      const refusal = (error: unknown, state: string) => {
        assert.ok(error instanceof DecisionError && error.code === 'decision_identical', String(error));
        assert.equal(error.decisionId, repeat.requestId);
        assert.ok(error.message.includes(`${first.requestId} (call ${first.execution.call.id}, approved by alice, ${state})`), error.message);
        return true;
      };
      await assert.rejects(inbox.approve(repeat.requestId, { actor: 'bob' }), (e: unknown) => refusal(e, 'not used yet'));
      assert.equal((await inbox.get(repeat.requestId))?.state, 'open', 'nothing was written');
      // Other arguments are another write.
      assert.equal((await inbox.approve(other.requestId, { actor: 'bob' })).state, 'decided');
      assert.equal((await retry(r, first.execution)).result.outcome.status, 'succeeded');
      assert.equal((await inbox.get(first.requestId))?.state, 'consumed');
      await assert.rejects(inbox.approve(repeat.requestId, { actor: 'bob' }), (e: unknown) => refusal(e, 'used'));
      assert.equal((await inbox.deny(repeat.requestId, { actor: 'bob', reason: 'a repeat' })).decision, 'denied');
      const denied = await retry(r, repeat.execution);
      assert.equal(denied.result.outcome.status === 'failed' && denied.result.outcome.category, 'approval_denied');
      assert.equal((await retry(r, other.execution)).result.outcome.status, 'succeeded');
      assert.deepEqual(paid, [ANN, { to: 'bob', cents: 500 }], 'one payment to ann');
      await assert.rejects(inbox.approve(repeat.requestId, { actor: 'bob', allowIdentical: 'yes' as unknown as boolean }), { code: 'invalid_input' });
    } finally {
      await operator.close();
      await r.store.close();
    }
  });

  it('an identical request approved between an approval\'s first read and its transaction is seen in the transaction: refused, one payment (r109 #2)', async () => {
    const { r, paid } = await payRig(target);
    const [alice, bob] = [await r.reopen(), await r.reopen()];
    try {
      const first = await pending(r, ANN);
      const repeat = await pending(r, ANN);
      // Bob's approval reads the session's requests (none approved), then Alice approves the identical one, then
      // Bob's transaction runs: two operators at the same moment, in this order on purpose.
      const inbox = (bob as unknown as { backend: { inbox: InboxBackend } }).backend.inbox;
      const transact = inbox.transactDecision.bind(inbox);
      let raced = false;
      inbox.transactDecision = async (id, decide, options) => {
        // The decision's own transaction (the first reads pass no options): Alice's approval lands just before it.
        if (!raced && options?.taskApprovals === true) {
          raced = true;
          await decisionInbox(alice).approve(first.requestId, { actor: 'alice' });
        }
        return transact(id, decide, options);
      };
      await assert.rejects(decisionInbox(bob).approve(repeat.requestId, { actor: 'bob' }), (error: unknown) =>
        error instanceof DecisionError && error.code === 'decision_identical' && error.message.includes(`${first.requestId} (call ${first.execution.call.id}, approved by alice, not used yet)`));
      assert.equal(raced, true);
      assert.equal((await decisionInbox(alice).get(repeat.requestId))?.state, 'open', 'nothing was written');
      for (const call of [first, repeat]) await retry(r, call.execution);
      assert.deepEqual(paid, [ANN], 'one payment');
    } finally {
      await alice.close();
      await bob.close();
      await r.store.close();
    }
  });

  it('allowIdentical approves a second identical write that is meant; each retry pays once', async () => {
    const { r, paid } = await payRig(target);
    const operator = await r.reopen();
    try {
      const inbox = decisionInbox(operator);
      const first = await pending(r, ANN);
      const second = await pending(r, ANN);
      await inbox.approve(second.requestId, { actor: 'alice' });
      await assert.rejects(inbox.approve(first.requestId, { actor: 'alice' }), { code: 'decision_identical' });
      assert.equal((await inbox.approve(first.requestId, { actor: 'alice', allowIdentical: true })).state, 'decided');
      assert.equal((await retry(r, first.execution)).result.outcome.status, 'succeeded');
      assert.equal((await retry(r, second.execution)).result.outcome.status, 'succeeded');
      assert.deepEqual(paid, [ANN, ANN]);
    } finally {
      await operator.close();
      await r.store.close();
    }
  });

  it("a newer request of the same operation is not an identical one: the operation's own retry asks again and is approved", async () => {
    const { r, paid } = await payRig(target);
    const operator = await r.reopen();
    try {
      const inbox = decisionInbox(operator);
      const first = await pending(r, ANN);
      await inbox.deny(first.requestId, { actor: 'alice', reason: 'not yet' });
      const again = await retry(r, first.execution);
      assert.equal(again.result.outcome.status === 'failed' && again.result.outcome.category, 'approval_denied');
      // The host retries the denied call: the approver answers pending, a new request of the same operation.
      const third = await retry(r, again);
      const requestId = third.result.approval?.requestId;
      assert.ok(requestId !== undefined && requestId !== first.requestId);
      assert.equal((await inbox.approve(requestId, { actor: 'alice' })).state, 'decided');
      assert.equal((await retry(r, third)).result.outcome.status, 'succeeded');
      assert.deepEqual(paid, [ANN]);
    } finally {
      await operator.close();
      await r.store.close();
    }
  });
});
