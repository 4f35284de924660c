/**
 * A run's call waiting for a person while its tool is redeployed under a new contract
 * (docs/design.md#a-redeploy-while-a-call-waits): an approval request is bound to the contract the operator was
 * shown, and a retry runs only under the contract its call recorded. A call that waited for approval is recorded as
 * not run (a retry refused before its body, the old request superseded); a call in doubt stops the run for a review,
 * and once a person says it did not run, it is recorded as not run too; a completed call is read back as it ran. The
 * model reads that and may ask again under the new contract, and the run goes on: it is never stuck waiting for a
 * decision no host can use.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resumeAgent, runAgent, scriptedModel, type ScriptedModel } from '../../src/agent.js';
import { decisionInbox } from '../../src/decisions.js';
import type { ToolApprover } from '../../src/tool/types.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { recordToolReview } from '../../src/tool/review.js';
import { setFaultHook } from '../../src/fault.js';
import { assessSession } from '../../src/tool/assess.js';
import { journalInboxReviews } from '../../src/tool/inbox-review.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { calls, Crash, crashedInsideEmail, doneStep, emailStep, host, orderStep, outside, reply } from './fixtures/shop-run.js';

const pending: ToolApprover = async () => ({ decision: 'pending', note: 'check the address' });
const emailAgain = reply(null, calls(['c3', 'send_email', '{"item":"tea"}']));

/** The same outside system, its e-mail tool redeployed as `revision` (still asking an operator). */
function redeployed(world: ReturnType<typeof outside>, revision: string) {
  const next = outside({ emailApprover: true, emailRevision: revision });
  return world.tools.map((t) => (t.name === 'send_email' ? { ...t, metadata: next.tools[1]!.metadata } : t));
}

/** What the model read for each tool call of its first request in this invocation. */
const toolMessages = (model: ScriptedModel) => model.requests[0]!.messages.filter((m) => m.role === 'tool').map((m) => m.content);

describe('a run whose tools are redeployed while it waits for a person', () => {
  const dir = tempDir();

  async function waitingRun(runId: string) {
    const path = tempDbPath(dir);
    const world = outside({ emailApprover: true });
    const first = await host(path, world.tools, pending);
    const stopped = await runAgent({ ...first, model: scriptedModel([orderStep, emailStep]), input: 'Buy tea.', maxSteps: 6, runId, store: first.store });
    assert.equal(stopped.stopReason, 'awaiting_approval');
    const inbox = decisionInbox(first.store);
    const [request] = (await inbox.list({ sessionId: 'shop', kind: 'approval' })).items;
    assert.equal(request?.binding?.revision, 'email-v1');
    return { path, world, first, inbox, request: request! };
  }

  for (const decided of ['undecided', 'approved'] as const) {
    it(`${decided} under the old contract: the model reads that it did not run, the old request leaves the queue, and the call asked again runs once, on its own approval`, async () => {
      const { path, world, first, inbox, request } = await waitingRun(`redeploy-${decided}`);
      if (decided === 'approved') await inbox.approve(request.id, { actor: 'ops@example.com' });
      await first.store.close();

      const second = await host(path, redeployed(world, 'email-v2'), pending);
      const model = scriptedModel([emailAgain, doneStep]);
      const resumed = await resumeAgent({ ...second, model, runId: `redeploy-${decided}`, store: second.store, maxSteps: 6 });
      assert.equal(resumed.stopReason, 'awaiting_approval', 'the call asked again waits for its own approval');
      assert.match(toolMessages(model)[1]!, /tool_contract_changed/);
      assert.match(toolMessages(model)[1]!, /email-v1.*email-v2/);
      assert.deepEqual(world.bodies, ['place_order'], 'nothing was sent on the old approval');
      const now = decisionInbox(second.store);
      const old = (await now.get(request.id))!;
      assert.equal(old.state, 'superseded', 'the old request no longer waits for an operator');
      assert.match(old.note ?? '', /redeployed under another contract, or removed \(tool_contract_changed\)/, 'and says why, not that an approver answered');
      await assert.rejects(now.approve(request.id, { actor: 'late@example.com' }), (error: unknown) =>
        (error as { code?: string }).code === 'decision_stale' && /tool_contract_changed/.test((error as Error).message));
      const open = (await now.list({ sessionId: 'shop', kind: 'approval' })).items;
      assert.deepEqual(open.map((r) => r.binding?.revision), ['email-v2']);
      await now.approve(open[0]!.id, { actor: 'ops@example.com' });
      const done = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: `redeploy-${decided}`, store: second.store, maxSteps: 6 });
      assert.equal(done.stopReason, 'completed');
      assert.deepEqual(world.bodies, ['place_order', 'send_email']);
      assert.equal(world.emails.size, 1);

      // Read back by another host: the journal answers, the same refusal, nothing runs.
      const third = await host(path, redeployed(world, 'email-v2'), pending);
      const again = await runAgent({ ...third, model: scriptedModel([]), input: 'Buy tea.', maxSteps: 6, runId: `redeploy-${decided}`, store: third.store });
      assert.equal(again.stopReason, 'completed');
      assert.deepEqual(again.messages, done.messages);
      assert.deepEqual(world.bodies, ['place_order', 'send_email']);
      await second.store.close();
      await third.store.close();
    });
  }

  it('denied under the old contract: the denial is what the model reads, not a request to ask again', async () => {
    const { path, world, first, inbox, request } = await waitingRun('redeploy-denied');
    await inbox.deny(request.id, { actor: 'ops@example.com', reason: 'wrong customer' });
    await first.store.close();
    const second = await host(path, redeployed(world, 'email-v2'), pending);
    const model = scriptedModel([doneStep]);
    const resumed = await resumeAgent({ ...second, model, runId: 'redeploy-denied', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.match(toolMessages(model)[1]!, /approval_denied \(tool_approval_denied_by_operator\).*wrong customer/);
    assert.equal((await decisionInbox(second.store).get(request.id))!.state, 'consumed');
    assert.deepEqual(world.bodies, ['place_order']);
    const again = await runAgent({ ...second, model: scriptedModel([]), input: 'Buy tea.', maxSteps: 6, runId: 'redeploy-denied', store: second.store });
    assert.deepEqual(again.messages, resumed.messages, 'read back, the model reads the same denial');
    await second.store.close();
  });

  it('the tool removed while the call waited: the model reads that it did not run', async () => {
    const { path, world, first } = await waitingRun('redeploy-removed');
    await first.store.close();
    const second = await host(path, world.tools.filter((t) => t.name !== 'send_email'), pending);
    const model = scriptedModel([doneStep]);
    const resumed = await resumeAgent({ ...second, model, runId: 'redeploy-removed', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.match(toolMessages(model)[1]!, /tool_contract_changed/);
    assert.match(toolMessages(model)[1]!, /no longer registered/);
    assert.doesNotMatch(toolMessages(model)[1]!, /call it again/, 'a tool that is gone is not offered to be called again');
    assert.deepEqual(world.bodies, ['place_order']);
    // The tool deployed again as it was: the journal says the call did not run, and that stays what the model read.
    const third = await host(path, world.tools, pending);
    const again = await runAgent({ ...third, model: scriptedModel([]), input: 'Buy tea.', maxSteps: 6, runId: 'redeploy-removed', store: third.store });
    assert.equal(again.stopReason, 'completed');
    assert.deepEqual(again.messages, resumed.messages);
    assert.deepEqual(world.bodies, ['place_order']);
    await second.store.close();
    await third.store.close();
  });

  /**
   * The idempotent e-mail killed in its body (it may have been sent), retried by retry_safe and left waiting for
   * approval, then its tool redeployed: the resume records the retry as not run (attempt 3), and the run completes.
   */
  async function doubtThenRedeploy(runId: string) {
    const path = tempDbPath(dir);
    const world = outside({ emailApprover: true });
    const first = await host(path, world.tools, async () => ({ decision: 'approved' }));
    setFaultHook((point) => { if (point === 'started:after' && world.bodies.length === 1) throw new Crash('killed after the e-mail started'); });
    await assert.rejects(runAgent({ ...first, model: scriptedModel([orderStep, emailStep]), input: 'Buy tea.', maxSteps: 6, runId, store: first.store }), Crash);
    setFaultHook(null);
    await first.store.close();
    const second = await host(path, world.tools, pending);
    const waiting = await resumeAgent({ ...second, model: scriptedModel([]), runId, store: second.store, maxSteps: 6, recovery: 'retry_safe' });
    assert.equal(waiting.stopReason, 'awaiting_approval');
    await second.store.close();

    const third = await host(path, redeployed(world, 'email-v2'), pending);
    const model = scriptedModel([doneStep]);
    const result = await resumeAgent({ ...third, model, runId, store: third.store, maxSteps: 6 });
    assert.equal(result.stopReason, 'completed');
    return { world, third, model };
  }

  it('an idempotent call that may have run, retried and left waiting for approval, its tool redeployed: the model reads that the retry did not run and to check first, and is not invited to call again', async () => {
    const { world, third, model } = await doubtThenRedeploy('doubt-wait');
    const text = toolMessages(model)[1]!;
    assert.match(text, /tool_contract_changed.*It did not run\. This attempt did not run, but it retried an earlier attempt of the same call that may have taken effect; check before doing it again\.$/);
    assert.doesNotMatch(text, /call it again/);
    assert.deepEqual(world.bodies, ['place_order']);
    await third.store.close();
  });

  it('that operation stays in doubt until an operator reviews its latest attempt, which settles it; the attempt that may have run is not the one to review', async () => {
    const { third } = await doubtThenRedeploy('doubt-settle');
    const inbox = decisionInbox(third.store);
    const history = await third.store.loadHistory('shop');
    const attempts = history.flatMap((e) => (e.kind.type === 'tool_call' && e.kind.call.name === 'send_email' ? [e.kind.call.id] : []));
    assert.equal(attempts.length, 3);
    const queued = (await third.store.attention({ sessionId: 'shop' })).items;
    assert.deepEqual(queued.map((i) => [i.callId, i.status, i.inDoubt]), [[attempts[2], 'outcome_unknown', false]], 'idempotent: listed, not in doubt for a person');
    assert.equal(assessSession(history).calls.find((c) => c.callId === attempts[2])?.attention, 'in_doubt');
    const review = (callId: string) => inbox.recordReview({ sessionId: 'shop', callId, outcome: 'completed', evidence: 'the mail server sent it', actor: 'ops' });
    await assert.rejects(review(attempts[0]!), { code: 'decision_stale', message: new RegExp(`attempt 3 \\(${attempts[2]}\\) is newer: decide on that attempt instead`) });
    assert.equal((await review(attempts[2]!)).state, 'decided', 'the latest attempt never ran, but its review settles the operation');
    const journaled = await journalInboxReviews(third.owner, third.store, await third.store.loadHistory('shop'));
    assert.deepEqual(journaled.journaled.map((j) => [j.callId, j.outcome]), [[attempts[2], 'completed']]);
    assert.deepEqual((await third.store.attention({ sessionId: 'shop' })).items, [], 'the queue is empty');
    const after = assessSession(journaled.history).calls.find((c) => c.callId === attempts[2])!;
    assert.deepEqual([after.attention, after.nextStep], ['none', 'completed']);
    assert.throws(() => prepareToolRetry(journaled.history, attempts[2]!), { code: 'completed' }, 'resolved for good');
    assert.equal((await third.store.checkLookupRows!('shop')).checked, true, 'the index agrees with the chain');
    await third.store.close();
  });

  for (const effect of ['non_idempotent', 'idempotent'] as const) {
    it(`a ${effect} call in doubt, its tool redeployed: the run stops for a review, not with an error; reviewed not executed, the model reads that it did not run`, async () => {
      const path = tempDbPath(dir);
      const world = outside({ emailEffect: effect });
      const crashed = await crashedInsideEmail(path, world, `doubt-${effect}`);
      await crashed.store.close();
      const tools = world.tools.map((t) => (t.name === 'send_email' ? { ...t, metadata: outside({ emailEffect: effect, emailRevision: 'email-v2' }).tools[1]!.metadata } : t));
      const second = await host(path, tools);
      for (const recovery of ['suspend', 'retry_safe'] as const) {
        const stopped = await resumeAgent({ ...second, model: scriptedModel([]), runId: `doubt-${effect}`, store: second.store, maxSteps: 6, recovery });
        assert.equal(stopped.stopReason, 'needs_review', `${recovery}: a call that may have run is not retried under another contract`);
      }
      assert.deepEqual(world.bodies, ['place_order']);
      const callId = (await resumeAgent({ ...second, model: scriptedModel([]), runId: `doubt-${effect}`, store: second.store, maxSteps: 6 })).pendingCallIds[0]!;
      await recordToolReview(second.owner, await second.store.loadHistory('shop'), callId, { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'the mail server has no such message' });
      const model = scriptedModel([doneStep]);
      const result = await resumeAgent({ ...second, model, runId: `doubt-${effect}`, store: second.store, maxSteps: 6 });
      assert.equal(result.stopReason, 'completed');
      assert.match(toolMessages(model)[1]!, /tool_contract_changed.*reviewed as not executed.*email-v1.*email-v2.*The tool did not run\./);
      assert.deepEqual(world.bodies, ['place_order'], 'nothing ran under the new contract on the old review');
      await second.store.close();
    });
  }

  it('a completed call of the run, its tool redeployed since: the resume replays its recorded result and goes on', async () => {
    const { path, world, first, inbox, request } = await waitingRun('redeploy-completed');
    await inbox.approve(request.id, { actor: 'ops@example.com' });
    await first.store.close();
    // The order tool is redeployed while the e-mail waited; the e-mail, approved, is unchanged.
    const order = outside({ orderRevision: 'order-v2' }).tools[0]!;
    const second = await host(path, world.tools.map((t) => (t.name === 'place_order' ? { ...t, metadata: order.metadata } : t)), pending);
    const model = scriptedModel([doneStep]);
    const resumed = await resumeAgent({ ...second, model, runId: 'redeploy-completed', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email'], 'the order is not placed again; the approved e-mail is sent');
    assert.equal(toolMessages(model)[0], '{"orderId":1}', 'the model reads the order as it was recorded');
    assert.equal(resumed.toolCalls[0]!.execution!.replayed, true);
    // Read back later, by a host with the order tool as it is now: the same conversation, nothing runs.
    const again = await runAgent({ ...second, model: scriptedModel([]), input: 'Buy tea.', maxSteps: 6, runId: 'redeploy-completed', store: second.store });
    assert.deepEqual(again.messages, resumed.messages);
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    await second.store.close();
  });

  it('a completed call of the run, its tool renamed since: the resume reads its recorded result back and goes on', async () => {
    const { path, world, first, inbox, request } = await waitingRun('renamed-completed');
    await inbox.approve(request.id, { actor: 'ops@example.com' });
    await first.store.close();
    // Before, every resume of the run threw binding_changed ("not registered"), with no way on short of registering
    // the old name again.
    const second = await host(path, world.tools.map((t) => (t.name === 'place_order' ? { ...t, name: 'order_item' } : t)), pending);
    const model = scriptedModel([doneStep]);
    const resumed = await resumeAgent({ ...second, model, runId: 'renamed-completed', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email'], 'the order is not placed again; the approved e-mail is sent');
    assert.equal(toolMessages(model)[0], '{"orderId":1}', 'the model reads the order as it was recorded');
    assert.equal(resumed.toolCalls[0]!.execution!.replayed, true);
    await second.store.close();
  });

  it('moved to another store with export and import while it waits: the resume asks the approver again there, and the call runs once on that approval', async () => {
    const { path, world, first, request } = await waitingRun('moved-1');
    const jsonl = await first.store.exportJsonl('shop');
    await first.store.close();
    const moved = tempDbPath(dir);
    const target = openSqliteStore(moved);
    await target.importJsonl(jsonl, { owner: 'importer' });
    assert.equal(await decisionInbox(target).get(request.id), undefined, 'the inbox did not move with the journal');
    await target.close();

    const second = await host(moved, world.tools, pending);
    const resumed = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'moved-1', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'awaiting_approval');
    const inbox = decisionInbox(second.store);
    const open = (await inbox.list({ sessionId: 'shop', kind: 'approval' })).items;
    assert.equal(open.length, 1, 'a request an operator can decide, in the store the run lives in now');
    assert.notEqual(open[0]!.id, request.id);
    await inbox.approve(open[0]!.id, { actor: 'ops@example.com' });
    const done = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'moved-1', store: second.store, maxSteps: 6 });
    assert.equal(done.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    await second.store.close();
    assert.ok(path !== moved);
  });

  it('its task stopped while it waits: the request leaves the queue, and a resume says the task is not running instead of waiting for ever', async () => {
    const { world, first, inbox, request } = await waitingRun('stopped-1');
    await first.owner.stopTask('task', 'the customer cancelled');
    assert.equal((await inbox.get(request.id))?.state, 'superseded');
    await assert.rejects(resumeAgent({ ...first, model: scriptedModel([]), runId: 'stopped-1', store: first.store, maxSteps: 6 }), { code: 'task_not_running' });
    assert.deepEqual(world.bodies, ['place_order']);
    await first.store.close();
  });
});
