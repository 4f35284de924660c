/**
 * A graceful shutdown (the store closed while a call of the run waits on its approver) and the resume after it
 * (docs/design.md#resumable-runs): the call stopped before its body is made again, once, as a crash at the same moment
 * would have had it made; the shutdown never loses the action. A call whose cancellation the model already read (the
 * run went on to a later step) is read back as it was.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resumeAgent, runAgent, scriptedModel } from '../../src/agent.js';
import { decisionInbox } from '../../src/decisions.js';
import { modelResponseEvent } from '../../src/agent/run-journal.js';
import type { ToolApprover } from '../../src/tool/types.js';
import { setFaultHook } from '../../src/fault.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { crashedInsideEmail, doneStep, emailStep, host, orderStep, outside, reply } from './fixtures/shop-run.js';

/** An approver still deciding when the store closes: it answers only once told to. */
function slowApprover() {
  let asked: () => void = () => {};
  const beingAsked = new Promise<void>((resolve) => { asked = resolve; });
  const approver: ToolApprover = async () => {
    asked();
    await new Promise<void>(() => {});
    return { decision: 'approved' };
  };
  return { approver, beingAsked };
}

const approves: ToolApprover = async () => ({ decision: 'approved' });

describe('a run whose host shuts down gracefully while a call waits on its approver', () => {
  const dir = tempDir();

  async function shutDownWhileAsked(runId: string) {
    const path = tempDbPath(dir);
    const world = outside({ emailApprover: true });
    const { approver, beingAsked } = slowApprover();
    const first = await host(path, world.tools, approver);
    const model = scriptedModel([orderStep, emailStep, doneStep]);
    const running = runAgent({ ...first, model, input: 'Buy tea.', maxSteps: 6, runId, store: first.store });
    await beingAsked;
    await first.store.close();
    await assert.rejects(running, { code: 'store_closed' }, 'the run stops with the store');
    assert.equal(model.requests.length, 2, 'the model is not asked again after the shutdown (pass r53 #7)');
    return { path, world };
  }

  it('the resume makes the e-mail once, on a fresh approval, and the model reads it was sent (pass r41 #10)', async () => {
    const { path, world } = await shutDownWhileAsked('shutdown-1');
    assert.deepEqual(world.bodies, ['place_order'], 'the e-mail was not sent before the shutdown');
    const second = await host(path, world.tools, approves);
    const model = scriptedModel([doneStep]);
    const resumed = await resumeAgent({ ...second, model, runId: 'shutdown-1', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email'], 'the action the shutdown interrupted is made, once');
    const read = model.requests[0]!.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    assert.equal(read[1], 'sent');
    const again = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'shutdown-1', store: second.store, maxSteps: 6 });
    assert.equal(again.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email'], 'read back, nothing runs again');
    await second.store.close();
  });

  it('a cancellation the model already read (a later step of the run is journaled) is read back, not made again', async () => {
    const { path, world } = await shutDownWhileAsked('shutdown-read');
    // The model read the cancelled e-mail and answered in a step the journal holds (as a run whose store stayed open
    // after a caller's cancel of the one call would have): that answer was the run's decision about it.
    const second = await host(path, world.tools, approves);
    const turnId = (await second.store.loadHistory('shop')).at(-1)!.turnId;
    await second.owner.append([modelResponseEvent(turnId, 'shutdown-read', 3, reply('I will not send the e-mail.'), new Set(['place_order', 'send_email']))]);
    const model = scriptedModel([]);
    const resumed = await resumeAgent({ ...second, model, runId: 'shutdown-read', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order'], 'not made again');
    assert.match(resumed.toolCalls[1]!.outcome.ok ? '' : resumed.toolCalls[1]!.outcome.text, /tool_cancelled/);
    await second.store.close();
  });

  it('cancelled by its caller inside the approval, the resumed run makes the call the cancel stopped, once', async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailApprover: true });
    const controller = new AbortController();
    const cancelling: ToolApprover = async () => {
      controller.abort();
      await new Promise<void>((resolve) => setTimeout(resolve, 5));
      return { decision: 'approved' };
    };
    const first = await host(path, world.tools, cancelling);
    await assert.rejects(runAgent({ ...first, model: scriptedModel([orderStep, emailStep]), input: 'Buy tea.', maxSteps: 6, runId: 'cancel-1', store: first.store, signal: controller.signal }));
    assert.deepEqual(world.bodies, ['place_order']);
    await first.store.close();
    const second = await host(path, world.tools, approves);
    const resumed = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'cancel-1', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    await second.store.close();
  });
});

describe('a retry of a call in doubt, stopped before its body by a shutdown', () => {
  const dir = tempDir();

  /**
   * The e-mail killed after its start marker (in doubt), then a resume under retry_safe whose retry is stopped while
   * its approver is asked, by a shutdown: a fourth "process" opens the journal.
   */
  async function retryShutDown(runId: string) {
    const path = tempDbPath(dir);
    const world = outside({ emailApprover: true });
    const second = await crashedInsideEmail(path, world, runId, { approver: approves });
    await second.store.close();
    const { approver, beingAsked } = slowApprover();
    const third = await host(path, world.tools, approver);
    const running = resumeAgent({ ...third, model: scriptedModel([doneStep]), runId, store: third.store, maxSteps: 6, recovery: 'retry_safe' });
    await beingAsked;
    await third.store.close();
    await assert.rejects(running, { code: 'store_closed' });
    assert.deepEqual(world.bodies, ['place_order'], 'the e-mail body never ran: its first attempt was killed after its marker, its retry stopped while asked');
    return { world, fourth: await host(path, world.tools, approves) };
  }

  it('is decided on resume as after a crash: under suspend the run stops for a review, nothing made again (pass r53 #2)', async () => {
    const { world, fourth } = await retryShutDown('doubt-shutdown');
    const suspended = await resumeAgent({ ...fourth, model: scriptedModel([doneStep]), runId: 'doubt-shutdown', store: fourth.store, maxSteps: 6, recovery: 'suspend' });
    assert.equal(suspended.stopReason, 'needs_review', 'the first attempt may have sent it: a person decides');
    assert.deepEqual(world.bodies, ['place_order']);
    await fourth.store.close();
  });

  it('an operator\'s completed review of the interrupted retry settles it: the resume reads it done, makes nothing and does not fail (pass r53 #1)', async () => {
    const { world, fourth } = await retryShutDown('doubt-reviewed');
    const history = await fourth.store.loadHistory('shop');
    const retry = history.flatMap((e) => (e.kind.type === 'tool_call' && e.kind.call.name === 'send_email' ? [e.kind.call.id] : [])).at(-1)!;
    await decisionInbox(fourth.store).recordReview({ sessionId: 'shop', callId: retry, outcome: 'completed', evidence: 'the first attempt sent it: in the outbox', actor: 'ana' });
    const model = scriptedModel([doneStep]);
    const resumed = await resumeAgent({ ...fourth, model, runId: 'doubt-reviewed', store: fourth.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order'], 'not sent again: a person said it was');
    assert.match(model.requests[0]!.messages.filter((m) => m.role === 'tool')[1]!.content, /confirmed outside/);
    await fourth.store.close();
  });
});

describe('a live run whose host stalls longer than its lease just before a body', () => {
  const dir = tempDir();

  /**
   * A host on a 100 ms lease without a heartbeat, whose event loop is held 250 ms once, between the first start
   * marker's commit and its body, as a loaded machine holds it.
   */
  async function stallingHost(limits?: { toolCalls: number }) {
    const world = outside();
    const store = openSqliteStore(tempDbPath(dir));
    const owner = await store.acquire('shop', { owner: 'stalling-host', leaseMs: 100, heartbeat: false });
    await owner.startTask('task', limits === undefined ? undefined : { limits });
    const gateway = createToolRuntime({ tools: world.tools, grants: { agent: '*' } }).bind({ owner, taskId: 'task', caller: 'agent' });
    const stalled = { count: 0 };
    setFaultHook((point) => {
      if (point !== 'started:after' || stalled.count > 0) return;
      stalled.count += 1;
      const until = Date.now() + 250;
      while (Date.now() < until) { /* held past the lease */ }
    });
    return { world, store, owner, gateway, stalled };
  }

  it('with the task\'s last tool call spent by the stopped attempt, the model reads the stop and the run goes on, not stranded (pass r54 #2)', async () => {
    const { world, store, owner, gateway } = await stallingHost({ toolCalls: 1 });
    try {
      const model = scriptedModel([orderStep, doneStep]);
      const result = await runAgent({ model, owner, gateway, input: 'Buy tea.', maxSteps: 4, runId: 'stall-budget', store });
      assert.equal(result.stopReason, 'completed');
      assert.deepEqual(world.bodies, []);
      assert.match(model.requests[1]!.messages.filter((m) => m.role === 'tool')[0]!.content, /before the body was called/);
      assert.doesNotMatch(model.requests[1]!.messages.filter((m) => m.role === 'tool')[0]!.content, /may have taken effect/);
    } finally {
      setFaultHook(null);
      await store.close();
    }
  });

  it('the call stopped before its body is made again at once, while the host still holds the session, and the model reads it ran (CI run matrix, a loaded machine)', async () => {
    const { world, store, owner, gateway, stalled } = await stallingHost();
    try {
      const model = scriptedModel([orderStep, doneStep]);
      const result = await runAgent({ model, owner, gateway, input: 'Buy tea.', maxSteps: 4, runId: 'stall-1', store });
      assert.equal(result.stopReason, 'completed');
      assert.equal(stalled.count, 1);
      assert.deepEqual(world.bodies, ['place_order'], 'made once: the first attempt never called the body');
      const read = model.requests[1]!.messages.filter((m) => m.role === 'tool').map((m) => m.content);
      assert.doesNotMatch(read[0]!, /stopped|cancelled/, 'the model reads the order placed, not the stop');
      const attempts = (await store.loadHistory('shop')).filter((e) => e.kind.type === 'tool_result').map((e) => (e.kind.type === 'tool_result' && e.kind.result.outcome.status === 'failed' ? e.kind.result.outcome.code : 'succeeded'));
      assert.deepEqual(attempts, ['tool_stopped_before_body', 'succeeded']);
    } finally {
      setFaultHook(null);
      await store.close();
    }
  });
});

describe('an operator\'s approval spent by an attempt then stopped before its body (r65 #4)', () => {
  const dir = tempDir();

  /** An approver that leaves every request to a person, counting how often it is asked. */
  function personDecides() {
    const asked = { count: 0 };
    const approver: ToolApprover = async () => { asked.count += 1; return { decision: 'pending', note: 'a person decides' }; };
    return { approver, asked };
  }

  /** Runs the order and the e-mail until the e-mail waits for a person, then approves its request as `alice`. */
  async function approvedWhileWaiting(first: Awaited<ReturnType<typeof host>>, runId: string) {
    const waiting = await runAgent({ ...first, model: scriptedModel([orderStep, emailStep]), input: 'Buy tea.', maxSteps: 6, runId, store: first.store });
    assert.equal(waiting.stopReason, 'awaiting_approval');
    const [request] = (await decisionInbox(first.store).list({ kind: 'approval' })).items;
    await decisionInbox(first.store).approve(request!.id, { actor: 'alice' });
    return request!.id;
  }

  const emailResults = async (store: Awaited<ReturnType<typeof host>>['store']) => (await store.loadHistory('shop')).flatMap((e) =>
    e.kind.type === 'tool_result' && e.kind.result.outcome.status === 'failed' ? [e.kind.result.outcome.code] : e.kind.type === 'tool_result' ? ['succeeded'] : []);

  it('a stall past the lease right after the marker: the run\'s next attempt runs on the same approval, once, without asking again', async () => {
    const world = outside({ emailApprover: true });
    const { approver, asked } = personDecides();
    const store = openSqliteStore(tempDbPath(dir));
    const owner = await store.acquire('shop', { owner: 'stalling-host', leaseMs: 100, heartbeat: false });
    await owner.startTask('task');
    const gateway = createToolRuntime({ tools: world.tools, grants: { agent: '*' }, approvers: { operator: approver } }).bind({ owner, taskId: 'task', caller: 'agent' });
    try {
      const requestId = await approvedWhileWaiting({ store, owner, gateway }, 'spent-stall');
      let stalls = 0;
      setFaultHook((point) => {
        if (point !== 'started:after' || stalls > 0) return;
        stalls += 1;
        const until = Date.now() + 250;
        while (Date.now() < until) { /* held past the lease */ }
      });
      const resumed = await resumeAgent({ model: scriptedModel([doneStep]), owner, gateway, runId: 'spent-stall', store, maxSteps: 6 });
      assert.equal(resumed.stopReason, 'completed');
      assert.equal(stalls, 1);
      assert.deepEqual(world.bodies, ['place_order', 'send_email']);
      assert.deepEqual(await emailResults(store), ['succeeded', 'tool_approval_pending', 'tool_stopped_before_body', 'succeeded']);
      assert.equal(asked.count, 1, 'the approver was asked once, by the first attempt: the operator\'s approval answered the rest');
      const row = await decisionInbox(store).get(requestId);
      const lastCall = (await store.loadHistory('shop')).flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call.id] : [])).at(-1);
      assert.deepEqual([row?.state, row?.consumedBy], ['consumed', lastCall]);
    } finally {
      setFaultHook(null);
      await store.close();
    }
  });

  it('a close right after the marker: after the restart the run sends the e-mail on the same approval, once', async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailApprover: true });
    const { approver, asked } = personDecides();
    const first = await host(path, world.tools, approver);
    const requestId = await approvedWhileWaiting(first, 'spent-close');
    setFaultHook((point) => { if (point === 'started:after') void first.store.close(); });
    try {
      await assert.rejects(resumeAgent({ ...first, model: scriptedModel([doneStep]), runId: 'spent-close', store: first.store, maxSteps: 6 }), { code: 'store_closed' });
    } finally {
      setFaultHook(null);
    }
    assert.deepEqual(world.bodies, ['place_order']);
    const second = await host(path, world.tools, approver);
    assert.deepEqual([(await decisionInbox(second.store).get(requestId))?.state], ['decided'], 'the approval waits for the host again');
    const resumed = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'spent-close', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    assert.equal(asked.count, 1);
    assert.deepEqual((await decisionInbox(second.store).list({ kind: 'approval' })).items, [], 'nothing waits for a person');
    await second.store.close();
  });
});
