/**
 * Resumable runs on SQLite, in process: a run placing an order and then sending its confirmation is stopped after
 * the order (at the model step between the calls, or inside the e-mail's body), and a fresh store handle, owner and
 * runtime resume it: exactly one order and one e-mail in the outside system, and nothing completed runs again.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { resumeAgent, runAgent, scriptedModel } from '../../src/agent.js';
import { setFaultHook } from '../../src/fault.js';
import { recordToolReview } from '../../src/tool/review.js';
import { journalInboxReviews, reconcileUncertainCalls } from '../../src/review.js';
import { prepareToolRetry } from '../../src/index.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool } from '../../src/tool/types.js';
import { exportRustJournal } from '../../src/store/rust-format.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { cli } from '../cli/helpers.js';
import { decisionInbox } from '../../src/store/inbox.js';
import { calls, Crash, crashedInsideEmail, doneStep, emailStep, failing, host, orderStep, outside, reply } from './fixtures/shop-run.js';

describe('resumable agent runs (SQLite)', () => {
  afterEach(() => setFaultHook(null));
  const dir = tempDir();

  it('stopped at the model step between the order and the e-mail: the resume sends exactly one e-mail and places exactly one order', async () => {
    const path = tempDbPath(dir);
    const world = outside();
    const first = await host(path, world.tools);
    await assert.rejects(runAgent({ ...first, model: scriptedModel([orderStep, failing()]), input: 'Buy tea.', maxSteps: 4, runId: 'order-1', store: first.store }), Crash);
    await first.store.close();

    const second = await host(path, world.tools);
    const model = scriptedModel([emailStep, doneStep]);
    const result = await resumeAgent({ ...second, model, runId: 'order-1', store: second.store, maxSteps: 4 });
    assert.equal(result.stopReason, 'completed');
    assert.equal(result.steps, 3);
    assert.equal(model.requests.length, 2, 'the journaled order step was not asked again');
    assert.deepEqual(model.requests[0]!.messages.map((m) => m.role), ['user', 'assistant', 'tool']);
    assert.equal(world.orders.size, 1);
    assert.equal(world.emails.size, 1);
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    assert.equal(result.toolCalls[0]!.execution!.replayed, true, 'the order is replayed from the journal');
    assert.deepEqual([...world.orders.keys()], ['order-1/1/0']);
    assert.deepEqual([...world.emails.keys()], ['order-1/2/0']);

    // Running it again after it finished: nothing runs, the model is not asked, the finished result comes back.
    const again = await runAgent({ ...second, model: scriptedModel([]), input: 'Buy tea.', maxSteps: 4, runId: 'order-1', store: second.store });
    assert.equal(again.stopReason, 'completed');
    assert.equal(again.text, 'Ordered and confirmed.');
    assert.equal(again.steps, 3);
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    assert.ok(again.toolCalls.every((c) => c.execution?.replayed === true));
    assert.deepEqual(again.messages, result.messages);

    // The run's journal events are custom events: the Rust-format export keeps them readable.
    const history = await second.store.loadHistory('shop');
    const runEvents = history.flatMap((e) => (e.kind.type === 'custom' && e.kind.plugin === 'jingwei.run' ? [e.kind.kind] : []));
    assert.deepEqual(runEvents, ['run_started', 'model_response', 'model_response', 'model_response', 'run_finished']);
    const exported = exportRustJournal(history);
    assert.match(exported, /"plugin":"jingwei\.run"/);
    await second.store.close();
  });

  it('killed inside the e-mail body (start marker durable, no result): retry_safe retries the idempotent e-mail once, with the policy as its review actor', async () => {
    const path = tempDbPath(dir);
    const world = outside();
    const second = await crashedInsideEmail(path, world, 'order-2');
    // The default policy suspends the open call, even though the e-mail is idempotent.
    const suspended = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'order-2', store: second.store, maxSteps: 4 });
    assert.equal(suspended.stopReason, 'needs_review');
    assert.equal(suspended.pendingCallIds.length, 1);
    assert.deepEqual(world.bodies, ['place_order']);

    const model = scriptedModel([doneStep]);
    const result = await resumeAgent({ ...second, model, runId: 'order-2', store: second.store, maxSteps: 4, recovery: 'retry_safe' });
    assert.equal(result.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    assert.equal(world.orders.size, 1);
    assert.equal(world.emails.size, 1);
    const retry = result.toolCalls[1]!.execution!.call.operation!.retry!;
    assert.equal(retry.callId, suspended.pendingCallIds[0]);
    assert.equal(retry.review!.actor, 'policy:retry_safe');
    await second.store.close();
  });

  it('retry_safe: the open call\'s retry refused because a redeploy moved the grant to a renamed tool stops the run needs_review before the model is asked again', async () => {
    const path = tempDbPath(dir);
    const world = outside();
    await (await crashedInsideEmail(path, world, 'order-renamed')).store.close();
    // The redeploy: the agent now sends e-mails through email_customer; send_email stays registered, not granted to it.
    const renamed: Tool = { ...world.tools[1]!, name: 'email_customer' };
    const second = await host(path, [...world.tools, renamed], undefined, ['place_order', 'email_customer']);
    const model = scriptedModel([reply(null, calls(['c3', 'email_customer', '{"item":"tea"}'])), doneStep]);
    const result = await resumeAgent({ ...second, model, runId: 'order-renamed', store: second.store, maxSteps: 4, recovery: 'retry_safe' });
    assert.equal(result.stopReason, 'needs_review');
    assert.equal(result.pendingCallIds.length, 1);
    assert.equal(world.emails.size, 0, 'no e-mail under the new name while the one that may have been sent is in doubt');
    await second.store.close();
  });

  it('suspend: an open non-idempotent call stops the run as needs_review; after a person reviews it, the run continues', async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailEffect: 'non_idempotent' });
    const second = await crashedInsideEmail(path, world, 'order-3');
    for (const recovery of ['suspend', 'retry_safe'] as const) {
      const stopped = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'order-3', store: second.store, maxSteps: 4, recovery });
      assert.equal(stopped.stopReason, 'needs_review', `${recovery} never retries an uncertain non-idempotent call`);
      assert.equal(stopped.pendingCallIds.length, 1);
    }
    assert.deepEqual(world.bodies, ['place_order']);

    const callId = (await resumeAgent({ ...second, model: scriptedModel([]), runId: 'order-3', store: second.store, maxSteps: 4 })).pendingCallIds[0]!;
    await recordToolReview(second.owner, await second.store.loadHistory('shop'), callId, { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'the mail server has no such message' });
    const result = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'order-3', store: second.store, maxSteps: 4 });
    assert.equal(result.stopReason, 'completed');
    assert.equal(world.emails.size, 1);
    assert.equal(world.orders.size, 1);
    assert.equal(result.toolCalls[1]!.execution!.call.operation!.retry!.review!.actor, 'ops@example.com');
    await second.store.close();
  });

  it('suspend: a call killed while its approver was asked never started, so the resume asks again and runs it once; no review is needed, none is taken', async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailEffect: 'non_idempotent', emailApprover: true });
    const approve = async () => ({ decision: 'approved' as const });
    const first = await host(path, world.tools, approve);
    // The call is journaled (no start marker yet), then the process dies while its approver is asked.
    setFaultHook((point) => { if (point === 'call:after' && world.bodies.length === 1) throw new Crash('killed while the approver was asked'); });
    await assert.rejects(runAgent({ ...first, model: scriptedModel([orderStep, emailStep]), input: 'Buy tea.', maxSteps: 4, runId: 'order-7', store: first.store }), Crash);
    setFaultHook(null);
    await first.store.close();

    const second = await host(path, world.tools, approve);
    const history = await second.store.loadHistory('shop');
    const open = history.flatMap((e) => (e.kind.type === 'tool_call' && e.kind.call.name === 'send_email' ? [e.kind.call.id] : []));
    assert.equal(open.length, 1);
    assert.equal(history.some((e) => e.kind.type === 'tool_started' && e.kind.callId === open[0]), false, 'no start marker');
    await assert.rejects(
      decisionInbox(second.store).recordReview({ sessionId: 'shop', callId: open[0]!, outcome: 'not_executed', evidence: 'no mail', actor: 'ops' }),
      { code: 'decision_stale', message: /not in doubt/ },
      'a person cannot review a call that provably never started, so the run must not wait for one',
    );
    const result = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'order-7', store: second.store, maxSteps: 4 });
    assert.equal(result.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    assert.equal(world.emails.size, 1);
    const retry = result.toolCalls[1]!.execution!.call.operation!.retry!;
    assert.equal(retry.callId, open[0]);
    assert.equal(retry.review, null, 'nobody decided anything: the journal shows the call never ran');
    await second.store.close();
  });

  it('suspend: an operation whose earlier attempt may have run still waits for a review when its latest attempt never started', async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailApprover: true });
    const approve = async () => ({ decision: 'approved' as const });
    const first = await host(path, world.tools, approve);
    setFaultHook((point) => { if (point === 'started:after' && world.bodies.length === 1) throw new Crash('killed after the e-mail started'); });
    await assert.rejects(runAgent({ ...first, model: scriptedModel([orderStep, emailStep]), input: 'Buy tea.', maxSteps: 4, runId: 'order-8', store: first.store }), Crash);
    await first.store.close();
    // The idempotent e-mail is retried under retry_safe, and that process dies while the approver is asked.
    const second = await host(path, world.tools, approve);
    setFaultHook((point) => { if (point === 'call:after') throw new Crash('killed while the approver was asked'); });
    await assert.rejects(resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'order-8', store: second.store, maxSteps: 4, recovery: 'retry_safe' }), Crash);
    setFaultHook(null);
    await second.store.close();

    const third = await host(path, world.tools, approve);
    const stopped = await resumeAgent({ ...third, model: scriptedModel([doneStep]), runId: 'order-8', store: third.store, maxSteps: 4 });
    assert.equal(stopped.stopReason, 'needs_review', 'the first attempt may have sent the e-mail');
    assert.deepEqual(world.bodies, ['place_order']);
    await third.store.close();
  });

  for (const outcome of ['not_executed', 'completed'] as const) {
    it(`an operator's ${outcome} review from another process (jingwei review) reaches the run: running it again journals the review and continues`, async () => {
      const path = tempDbPath(dir);
      const world = outside({ emailEffect: 'non_idempotent' });
      const second = await crashedInsideEmail(path, world, 'order-inbox');
      const stopped = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'order-inbox', store: second.store, maxSteps: 4 });
      assert.equal(stopped.stopReason, 'needs_review');
      const callId = stopped.pendingCallIds[0]!;
      // The operator answers from another process while this host keeps the session: nothing is taken over.
      const review = cli(['review', path, callId, '--session', 'shop', '--outcome', outcome, '--evidence', 'looked it up on the mail server', '--actor', 'ops@example.com']);
      assert.equal(review.code, 0, review.stderr);

      const result = await runAgent({ ...second, model: scriptedModel([doneStep]), input: 'Buy tea.', runId: 'order-inbox', store: second.store, maxSteps: 4 });
      assert.equal(result.stopReason, 'completed');
      assert.equal(world.orders.size, 1);
      assert.deepEqual(world.bodies, outcome === 'not_executed' ? ['place_order', 'send_email'] : ['place_order']);
      assert.equal(world.emails.size, outcome === 'not_executed' ? 1 : 0, 'a completed review never sends the e-mail again');
      if (outcome === 'not_executed') assert.equal(result.toolCalls[1]!.execution!.call.operation!.retry!.review!.actor, 'ops@example.com');
      else assert.equal(result.toolCalls[1]!.execution, null);

      const history = await second.store.loadHistory('shop');
      const reviews = history.flatMap((e) => (e.kind.type === 'tool_review' ? [e.kind.review] : []));
      assert.equal(reviews.length, 1, 'the decision is journaled once');
      assert.deepEqual([reviews[0]!.callId, reviews[0]!.actor, reviews[0]!.outcome, reviews[0]!.source], [callId, 'ops@example.com', outcome, 'human']);
      const decisions = await decisionInbox(second.store).list({ sessionId: 'shop', kind: 'review', states: ['consumed'] });
      assert.equal(decisions.items.length, 1, 'the inbox decision is marked used by its event');
      assert.equal(decisions.items[0]!.id, reviews[0]!.decisionId);
      await second.store.close();
    });
  }

  it('a reconciler answers first: completed means nothing runs again and the run finishes', async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailEffect: 'non_idempotent' });
    const first = await host(path, world.tools);
    setFaultHook((point) => { if (point === 'body:after' && world.bodies.length === 2) throw new Crash('killed after the e-mail went out'); });
    await assert.rejects(runAgent({ ...first, model: scriptedModel([orderStep, emailStep]), input: 'Buy tea.', maxSteps: 4, runId: 'order-4', store: first.store }), Crash);
    setFaultHook(null);
    await first.store.close();

    const email = world.tools[1]!;
    const reconciling: Tool = {
      ...email,
      name: email.name,
      metadata: email.metadata,
      execute: email.execute,
      reconcile: (request) => (world.emails.has(request.operation.key) ? { outcome: 'completed', evidence: 'in the sent folder', output: 'sent' } : { outcome: 'unknown', evidence: 'not found' }),
    };
    const tools = [world.tools[0]!, reconciling];
    const second = await host(path, tools);
    const model = scriptedModel([doneStep]);
    const result = await resumeAgent({ ...second, model, runId: 'order-4', store: second.store, maxSteps: 4, reconcilers: tools });
    assert.equal(result.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    assert.deepEqual(model.requests[0]!.messages.at(-1), { role: 'tool', toolCallId: 'c2', content: 'sent' });

    // Read back after it finished: the call a review settled is in the conversation (its output was never
    // journaled, so the model-facing text says so), and the rest of the run follows it; nothing runs.
    const again = await runAgent({ ...second, model: scriptedModel([]), input: 'Buy tea.', maxSteps: 4, runId: 'order-4', store: second.store, reconcilers: tools });
    assert.equal(again.stopReason, 'completed');
    assert.equal(again.text, 'Ordered and confirmed.');
    assert.deepEqual(again.messages.map((m) => m.role), result.messages.map((m) => m.role));
    assert.deepEqual(again.toolCalls.map((c) => c.name), ['place_order', 'send_email']);
    assert.equal(again.toolCalls[1]!.execution, null);
    assert.match(again.toolCalls[1]!.outcome.ok ? again.toolCalls[1]!.outcome.output : '', /confirmed outside the journal/);
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    await second.store.close();
  });

  it('cancelled while its reconciler is asked: the resume stops with the cancellation and records no retry; the next one retries once', async () => {
    const path = tempDbPath(dir);
    const world = outside();
    const second = await crashedInsideEmail(path, world, 'order-cancel');
    const email = world.tools[1]!;
    const stop = new AbortController();
    const waiting: Tool = {
      ...email,
      reconcile: (_request, signal) => new Promise((_resolve, reject) => {
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
        stop.abort(new Error('the operator stopped the run'));
      }),
    };
    const tools = [world.tools[0]!, waiting];
    await assert.rejects(
      resumeAgent({ ...second, model: scriptedModel([]), runId: 'order-cancel', store: second.store, maxSteps: 4, reconcilers: tools, recovery: 'retry_safe', signal: stop.signal }),
      /the operator stopped the run/,
    );
    const attempts = (await second.store.loadHistory('shop')).filter((e) => e.kind.type === 'tool_call');
    assert.equal(attempts.length, 2, 'the order and the e-mail: no retry was recorded');
    const result = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'order-cancel', store: second.store, maxSteps: 4, recovery: 'retry_safe' });
    assert.equal(result.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    await second.store.close();
  });

  it('cancelled while the journal is read for an open call: the resume stops with the cancellation and records no retry', async () => {
    const path = tempDbPath(dir);
    const world = outside();
    const second = await crashedInsideEmail(path, world, 'order-cancel-read');
    const stop = new AbortController();
    const store = {
      loadHistory: async (id: string) => {
        const history = await second.store.loadHistory(id);
        stop.abort(new Error('the operator stopped the run'));
        return history;
      },
    };
    await assert.rejects(
      resumeAgent({ ...second, store, model: scriptedModel([]), runId: 'order-cancel-read', maxSteps: 4, recovery: 'retry_safe', signal: stop.signal }),
      /the operator stopped the run/,
    );
    const attempts = (await second.store.loadHistory('shop')).filter((e) => e.kind.type === 'tool_call');
    assert.equal(attempts.length, 2, 'the order and the e-mail: no retry was recorded');
    assert.deepEqual(world.bodies, ['place_order']);
    await second.store.close();
  });

  it("a person's not_executed review that the tool's reconciler cannot check (it throws): the run stops for a review, and retries nothing until it answers", async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailEffect: 'non_idempotent' });
    const second = await crashedInsideEmail(path, world, 'order-unchecked');
    const history = await second.store.loadHistory('shop');
    const emailCall = history.filter((e) => e.kind.type === 'tool_call').at(-1)!;
    assert.ok(emailCall.kind.type === 'tool_call');
    await recordToolReview(second.owner, history, emailCall.kind.call.id, { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'not in the outbox view yet' });
    let answer: 'throw' | 'completed' = 'throw';
    const email = world.tools[1]!;
    const checking: Tool = {
      ...email,
      reconcile: () => {
        if (answer === 'throw') throw new Error('the mail provider is down');
        return { outcome: 'completed', evidence: 'in the sent folder', output: 'sent' };
      },
    };
    const tools = [world.tools[0]!, checking];
    const stopped = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'order-unchecked', store: second.store, maxSteps: 4, reconcilers: tools });
    assert.equal(stopped.stopReason, 'needs_review');
    assert.deepEqual(world.bodies, ['place_order'], 'nothing retried on the unchecked review');
    answer = 'completed';
    const done = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'order-unchecked', store: second.store, maxSteps: 4, reconcilers: tools });
    assert.equal(done.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order'], 'the reconciler found it sent: not sent again');
    await second.store.close();
  });

  it("a person's new not_executed review after the reconciler could not check the first one is their decision: the run retries on it while the reconciler still fails", async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailEffect: 'non_idempotent' });
    const second = await crashedInsideEmail(path, world, 'order-decided');
    const emailCall = (await second.store.loadHistory('shop')).filter((e) => e.kind.type === 'tool_call').at(-1)!;
    assert.ok(emailCall.kind.type === 'tool_call');
    const callId = emailCall.kind.call.id;
    await recordToolReview(second.owner, await second.store.loadHistory('shop'), callId, { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'not in the outbox view yet' });
    const checking: Tool = { ...world.tools[1]!, reconcile: () => { throw new Error('the mail provider is down'); } };
    const tools = [world.tools[0]!, checking];
    const stopped = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'order-decided', store: second.store, maxSteps: 4, reconcilers: tools });
    assert.equal(stopped.stopReason, 'needs_review');
    await recordToolReview(second.owner, await second.store.loadHistory('shop'), callId, { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'the provider confirms nothing was sent' });
    const done = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'order-decided', store: second.store, maxSteps: 4, reconcilers: tools });
    assert.equal(done.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email'], 'sent once, on the person\'s decision');
    await second.store.close();
  });

  it("a person's wrong not_executed review: the reconciler of the tool registered in the gateway's runtime is asked, with no reconcilers given or a copy without one", async () => {
    for (const given of ['none', 'copy'] as const) {
      const path = tempDbPath(dir);
      const world = outside({ emailEffect: 'non_idempotent' });
      const crashed = await crashedInsideEmail(path, world, `order-own-${given}`);
      const history = await crashed.store.loadHistory('shop');
      const emailCall = history.filter((e) => e.kind.type === 'tool_call').at(-1)!;
      assert.ok(emailCall.kind.type === 'tool_call');
      await recordToolReview(crashed.owner, history, emailCall.kind.call.id, { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'not in the outbox view yet' });
      await crashed.store.close();
      const checking: Tool = { ...world.tools[1]!, reconcile: () => ({ outcome: 'completed', evidence: 'in the sent folder', output: 'sent' }) };
      const { reconcile: _dropped, ...copy } = checking;
      const h = await host(path, [world.tools[0]!, checking]);
      const done = await resumeAgent({ ...h, model: scriptedModel([doneStep]), runId: `order-own-${given}`, store: h.store, maxSteps: 4, ...(given === 'copy' ? { reconcilers: [copy as Tool] } : {}) });
      assert.equal(done.stopReason, 'completed');
      assert.deepEqual(world.bodies, ['place_order'], `${given}: the reconciler found it sent: not sent again`);
      await h.store.close();
    }
  });

  it("a run asks the reconcilers about its own calls in doubt and about any call whose person's not_executed review it journals, not about every call of the session", async () => {
    const path = tempDbPath(dir);
    const other = outside({ emailEffect: 'non_idempotent' });
    await (await crashedInsideEmail(path, other, 'order-other')).store.close();
    const world = outside({ emailEffect: 'non_idempotent' });
    // Another e-mail: the same one, still in doubt, would be refused before it ran.
    await (await crashedInsideEmail(path, world, 'order-mine', { step: reply(null, calls(['c2', 'send_email', '{"item":"coffee"}'])) })).store.close();
    const asked: string[] = [];
    const checking: Tool = {
      ...world.tools[1]!,
      reconcile: (request) => {
        asked.push(request.operation.key);
        return { outcome: 'completed', evidence: 'in the sent folder', output: 'sent' };
      },
    };
    const h = await host(path, [world.tools[0]!, checking]);
    const done = await resumeAgent({ ...h, model: scriptedModel([doneStep]), runId: 'order-mine', store: h.store, maxSteps: 4 });
    assert.equal(done.stopReason, 'completed');
    assert.deepEqual(asked, ['order-mine/2/0'], 'the other run\'s e-mail is not its business');
    // Until a person's not_executed review of it waits in the inbox: any run that journals that review asks the
    // reconciler about the call at once, even a new run with no call of its own in doubt, so the review is never left
    // usable in the journal unchecked.
    const history = await h.store.loadHistory('shop');
    const otherEmail = history.flatMap((e) => (e.kind.type === 'tool_call' && e.kind.call.operation?.key === 'order-other/2/0' ? [e.kind.call.id] : []))[0]!;
    const review = cli(['review', path, otherEmail, '--session', 'shop', '--outcome', 'not_executed', '--evidence', 'not in the outbox view yet', '--actor', 'ops@example.com']);
    assert.equal(review.code, 0, review.stderr);
    const fresh = await runAgent({ ...h, model: scriptedModel([doneStep]), input: 'Hello.', runId: 'order-new', store: h.store, maxSteps: 4 });
    assert.equal(fresh.stopReason, 'completed');
    assert.deepEqual(asked, ['order-mine/2/0', 'order-other/2/0']);
    const reviews = (await h.store.loadHistory('shop')).flatMap((e) => (e.kind.type === 'tool_review' && e.kind.review.callId === otherEmail ? [[e.kind.review.source, e.kind.review.outcome]] : []));
    assert.deepEqual(reviews, [['human', 'not_executed'], ['reconciler', 'completed']], 'the reconciler\'s answer settles it over the person\'s review');
    await assert.rejects(async () => prepareToolRetry(await h.store.loadHistory('shop'), otherEmail), { name: 'ToolRetryError', code: 'completed' });
    const resumed = await resumeAgent({ ...h, model: scriptedModel([doneStep]), runId: 'order-other', store: h.store, maxSteps: 4 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual([...world.bodies, ...other.bodies], ['place_order', 'place_order'], 'neither e-mail sent again');
    await h.store.close();
  });

  it('three runs of one session resumed at once through one owner, operators\' reviews waiting in the inbox: each journals them in turn, none fails on the journal the others moved', async () => {
    const path = tempDbPath(dir);
    const worlds = ['tea', 'coffee', 'cocoa'].map(() => outside({ emailEffect: 'non_idempotent' }));
    const runs = ['tea', 'coffee', 'cocoa'];
    for (const [i, item] of runs.entries()) {
      await (await crashedInsideEmail(path, worlds[i]!, `order-${item}`, { step: reply(null, calls(['c2', 'send_email', JSON.stringify({ item })])) })).store.close();
    }
    const history = await (async () => {
      const h = await host(path, worlds[0]!.tools);
      const events = await h.store.loadHistory('shop');
      await h.store.close();
      return events;
    })();
    for (const item of runs) {
      const email = history.flatMap((e) => (e.kind.type === 'tool_call' && e.kind.call.operation?.key === `order-${item}/2/0` ? [e.kind.call.id] : []))[0]!;
      const review = cli(['review', path, email, '--session', 'shop', '--outcome', 'not_executed', '--evidence', 'not sent: the provider has no message', '--actor', 'ops@example.com']);
      assert.equal(review.code, 0, review.stderr);
    }
    const h = await host(path, worlds[0]!.tools);
    const results = await Promise.all(runs.map((item) => resumeAgent({ ...h, model: scriptedModel([doneStep]), runId: `order-${item}`, store: h.store, maxSteps: 4 })));
    assert.deepEqual(results.map((r) => r.stopReason), ['completed', 'completed', 'completed']);
    assert.deepEqual(worlds[0]!.bodies.filter((b) => b === 'send_email').length, 3, 'each e-mail sent once, on its review');
    await h.store.close();
  });

  it("a run's reconciler answer written while another run of the session writes is written on the journal read again, not lost, and the person's review is not left unchecked", async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailEffect: 'non_idempotent' });
    await (await crashedInsideEmail(path, world, 'order-busy')).store.close();
    const first = await host(path, world.tools);
    const history = await first.store.loadHistory('shop');
    await first.store.close();
    const email = history.flatMap((e) => (e.kind.type === 'tool_call' && e.kind.call.operation?.key === 'order-busy/2/0' ? [e.kind.call.id] : []))[0]!;
    const review = cli(['review', path, email, '--session', 'shop', '--outcome', 'not_executed', '--evidence', 'not in the outbox view yet', '--actor', 'ops@example.com']);
    assert.equal(review.code, 0, review.stderr);
    const holder: { owner?: Awaited<ReturnType<typeof host>>['owner'] } = {};
    const checking: Tool = {
      ...world.tools[1]!,
      // Another run of the session journals a step while the reconciler is asked.
      reconcile: async () => {
        await holder.owner!.append([{ turnId: 'other-run', kind: { type: 'user_message', text: 'meanwhile' } }]);
        return { outcome: 'completed', evidence: 'in the sent folder', output: 'sent' };
      },
    };
    const h = await host(path, [world.tools[0]!, checking]);
    holder.owner = h.owner;
    const fresh = await runAgent({ ...h, model: scriptedModel([doneStep]), input: 'Hello.', runId: 'order-next', store: h.store, maxSteps: 4 });
    assert.equal(fresh.stopReason, 'completed');
    const reviews = (await h.store.loadHistory('shop')).flatMap((e) => (e.kind.type === 'tool_review' && e.kind.review.callId === email ? [[e.kind.review.source, e.kind.review.outcome]] : []));
    assert.deepEqual(reviews, [['human', 'not_executed'], ['reconciler', 'completed']]);
    await h.store.close();
  });

  it("a person's not_executed review journaled by another run while this run's pass asked the reconcilers is not used: the run stops for a review, nothing is retried", async () => {
    const path = tempDbPath(dir);
    const other = outside({ emailEffect: 'non_idempotent' });
    await (await crashedInsideEmail(path, other, 'order-other')).store.close();
    const world = outside({ emailEffect: 'non_idempotent' });
    await (await crashedInsideEmail(path, world, 'order-x', { step: reply(null, calls(['c2', 'send_email', '{"item":"coffee"}'])) })).store.close();
    const first = await host(path, world.tools);
    const history = await first.store.loadHistory('shop');
    await first.store.close();
    const emailOf = (run: string) => history.flatMap((e) => (e.kind.type === 'tool_call' && e.kind.call.operation?.key === `${run}/2/0` ? [e.kind.call.id] : []))[0]!;
    // A review of the other run's e-mail waits in the inbox, so this run's start pass asks the reconcilers.
    const waiting = cli(['review', path, emailOf('order-other'), '--session', 'shop', '--outcome', 'uncertain', '--evidence', 'cannot tell', '--actor', 'ops@example.com']);
    assert.equal(waiting.code, 0, waiting.stderr);
    const holder: { h?: Awaited<ReturnType<typeof host>> } = {};
    const checking: Tool = {
      ...world.tools[1]!,
      // While it is asked, another run journals an operator's not_executed review of this run's e-mail.
      reconcile: async (request) => {
        if (request.operation.key === 'order-x/2/0') {
          const h = holder.h!;
          await recordToolReview(h.owner, await h.store.loadHistory('shop'), emailOf('order-x'), { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'not in the outbox view yet' });
        }
        throw new Error('the mail provider is down');
      },
    };
    const h = await host(path, [world.tools[0]!, checking]);
    holder.h = h;
    const result = await resumeAgent({ ...h, model: scriptedModel([doneStep]), runId: 'order-x', store: h.store, maxSteps: 4 });
    assert.equal(result.stopReason, 'needs_review');
    assert.deepEqual(world.bodies, ['place_order'], 'not sent again on a review no reconciler checked');
    await h.store.close();
  });

  it("a run whose retry meets another pass here asking the call's reconciler stops instead of failing, and retries nothing; the next resume reads the answer", async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailEffect: 'non_idempotent' });
    await (await crashedInsideEmail(path, world, 'order-asked')).store.close();
    let asks = 0;
    let answer: () => void = () => {};
    let asked: () => void = () => {};
    const firstAsked = new Promise<void>((resolve) => { asked = resolve; });
    const checking: Tool = {
      ...world.tools[1]!,
      // The first lookup (another pass) waits; the run's own pass gets a quick answer that leaves the person's review.
      reconcile: () => {
        asks += 1;
        if (asks > 1) return { outcome: 'not_executed', evidence: 'the outbox view shows nothing yet' };
        asked();
        return new Promise((resolve) => { answer = () => resolve({ outcome: 'completed', evidence: 'in the sent folder', output: 'sent' }); });
      },
    };
    const h = await host(path, [world.tools[0]!, checking]);
    const history = await h.store.loadHistory('shop');
    const email = history.flatMap((e) => (e.kind.type === 'tool_call' && e.kind.call.operation?.key === 'order-asked/2/0' ? [e.kind.call.id] : []))[0]!;
    await recordToolReview(h.owner, history, email, { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'not in the outbox view' });
    const pass = reconcileUncertainCalls(h.owner, [checking], await h.store.loadHistory('shop'));
    await firstAsked;
    const stopped = await resumeAgent({ ...h, model: scriptedModel([doneStep]), runId: 'order-asked', store: h.store, maxSteps: 4 });
    assert.equal(stopped.stopReason, 'needs_review');
    assert.deepEqual(world.bodies, ['place_order'], 'not sent again while the other lookup was under way');
    answer();
    assert.deepEqual((await pass).calls.map((c) => c.action), ['recorded']);
    const resumed = await resumeAgent({ ...h, model: scriptedModel([doneStep]), runId: 'order-asked', store: h.store, maxSteps: 4 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order']);
    await h.store.close();
  });

  it("a reconciler's completed answer about a call another writer settled meanwhile is not written again, and the run goes on", async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailEffect: 'non_idempotent' });
    await (await crashedInsideEmail(path, world, 'order-settled')).store.close();
    const holder: { h?: Awaited<ReturnType<typeof host>> } = {};
    const checking: Tool = {
      ...world.tools[1]!,
      reconcile: async (request) => {
        const h = holder.h!;
        await recordToolReview(h.owner, await h.store.loadHistory('shop'), request.callId, { actor: 'ops@example.com', outcome: 'completed', evidence: 'seen in the outbox' });
        return { outcome: 'completed', evidence: 'in the sent folder', output: 'sent' };
      },
    };
    const h = await host(path, [world.tools[0]!, checking]);
    holder.h = h;
    const result = await resumeAgent({ ...h, model: scriptedModel([doneStep]), runId: 'order-settled', store: h.store, maxSteps: 4 });
    assert.equal(result.stopReason, 'completed');
    const reviews = (await h.store.loadHistory('shop')).flatMap((e) => (e.kind.type === 'tool_review' ? [[e.kind.review.source, e.kind.review.outcome]] : []));
    assert.deepEqual(reviews, [['human', 'completed']]);
    assert.deepEqual(world.bodies, ['place_order']);
    await h.store.close();
  });

  it('a run with nothing to review does not wait for another run\'s reconcile pass on the same owner', { timeout: 20_000 }, async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailEffect: 'non_idempotent' });
    await (await crashedInsideEmail(path, world, 'order-slow')).store.close();
    let answer: () => void = () => {};
    let asked: () => void = () => {};
    const askedOnce = new Promise<void>((resolve) => { asked = resolve; });
    const checking: Tool = {
      ...world.tools[1]!,
      reconcile: () => new Promise((resolve) => {
        answer = () => resolve({ outcome: 'completed', evidence: 'in the sent folder', output: 'sent' });
        asked();
      }),
    };
    const h = await host(path, [world.tools[0]!, checking]);
    const slow = resumeAgent({ ...h, model: scriptedModel([doneStep]), runId: 'order-slow', store: h.store, maxSteps: 4 });
    await askedOnce;
    // The other run's model answers only once this run is past its reviews: waiting for the slow pass would never end.
    const other = await runAgent({ ...h, model: scriptedModel([() => { answer(); return doneStep; }]), input: 'Hello.', runId: 'order-quick', store: h.store, maxSteps: 4 });
    assert.equal(other.stopReason, 'completed');
    assert.equal((await slow).stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order'], 'the e-mail was found sent: not sent again');
    await h.store.close();
  });

  it("a tool's reconcileTimeoutMs is the reconciler's deadline in a run: a slower answer than it does not unlock a person's not_executed review, a quicker one settles the call", async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailEffect: 'non_idempotent' });
    const second = await crashedInsideEmail(path, world, 'order-deadline');
    const history = await second.store.loadHistory('shop');
    const emailCall = history.filter((e) => e.kind.type === 'tool_call').at(-1)!;
    assert.ok(emailCall.kind.type === 'tool_call');
    await recordToolReview(second.owner, history, emailCall.kind.call.id, { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'not in the outbox view yet' });
    const email = world.tools[1]!;
    const slowly = (reconcileTimeoutMs: number): Tool[] => [world.tools[0]!, {
      ...email,
      reconcileTimeoutMs,
      reconcile: async () => {
        await new Promise((resolve) => setTimeout(resolve, 150));
        return { outcome: 'completed', evidence: 'in the sent folder', output: 'sent' };
      },
    }];
    const stopped = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'order-deadline', store: second.store, maxSteps: 4, reconcilers: slowly(20) });
    assert.equal(stopped.stopReason, 'needs_review', 'the answer came after the tool\'s deadline: the review is not used');
    assert.deepEqual(world.bodies, ['place_order']);
    const done = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'order-deadline', store: second.store, maxSteps: 4, reconcilers: slowly(5_000) });
    assert.equal(done.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order'], 'the reconciler found it sent: not sent again');
    for (const bad of [0, 1.5, 2 ** 31, '100']) {
      await assert.rejects(
        resumeAgent({ ...second, model: scriptedModel([]), runId: 'order-deadline', store: second.store, maxSteps: 4, reconcilers: [{ ...email, reconcileTimeoutMs: bad as number }] }),
        { name: 'InvalidInputError', field: 'reconcilers[0].reconcileTimeoutMs' },
      );
    }
    await second.store.close();
  });

  it("a retry waiting for approval whose operation a completed review says was written reads as done, on this resume and the next: nothing is asked or made again", async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailEffect: 'non_idempotent', emailApprover: true });
    let answer: 'approved' | 'pending' = 'approved';
    const approver = async () => (answer === 'approved' ? { decision: 'approved' as const } : { decision: 'pending' as const, note: 'check again' });
    // Approved, the e-mail's attempt is killed once its start marker is durable: it may have been sent.
    const h = await crashedInsideEmail(path, world, 'order-approved', { approver });
    const emailCalls = async () => (await h.store.loadHistory('shop')).flatMap((e) => (e.kind.type === 'tool_call' && e.kind.call.name === 'send_email' ? [e.kind.call.id] : []));
    await recordToolReview(h.owner, await h.store.loadHistory('shop'), (await emailCalls())[0]!, { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'not in the outbox' });
    answer = 'pending';
    const waiting = await resumeAgent({ ...h, model: scriptedModel([]), runId: 'order-approved', store: h.store, maxSteps: 4 });
    assert.equal(waiting.stopReason, 'awaiting_approval');
    // A colleague finds the message in the customer's inbox: the operation's write was made, by the first attempt.
    await recordToolReview(h.owner, await h.store.loadHistory('shop'), (await emailCalls())[1]!, { actor: 'ops-2@example.com', outcome: 'completed', evidence: 'the customer has the e-mail' });
    const done = await resumeAgent({ ...h, model: scriptedModel([doneStep]), runId: 'order-approved', store: h.store, maxSteps: 4 });
    assert.equal(done.stopReason, 'completed');
    const again = await resumeAgent({ ...h, model: scriptedModel([]), runId: 'order-approved', store: h.store, maxSteps: 4 });
    assert.equal(again.stopReason, 'completed', 'read back the same way');
    assert.equal(world.emails.size, 0, 'not sent by any retry');
    await h.store.close();
  });

  for (const decision of ['approved', 'denied'] as const) {
    it(`a completed review recorded while the resumed run's retry waits for its approver (who then answers ${decision}) stops the run before the model reads the call; the next resume reads it as done`, async () => {
      const path = tempDbPath(dir);
      const world = outside({ emailEffect: 'non_idempotent', emailApprover: true });
      let gate: Promise<void> | null = null;
      let approve: () => void = () => {};
      let onAsked: () => void = () => {};
      const asked = new Promise<void>((resolve) => { onAsked = resolve; });
      const approver = async () => {
        if (gate !== null) {
          onAsked();
          await gate;
        }
        return gate === null || decision === 'approved' ? { decision: 'approved' as const } : { decision: 'denied' as const, code: 'cfo_no', message: 'not this one' };
      };
      // Approved, the e-mail's attempt is killed once its start marker is durable: it may have been sent.
      const h = await crashedInsideEmail(path, world, `order-waiting-${decision}`, { approver });
      const emailCalls = async () => (await h.store.loadHistory('shop')).flatMap((e) => (e.kind.type === 'tool_call' && e.kind.call.name === 'send_email' ? [e.kind.call.id] : []));
      await recordToolReview(h.owner, await h.store.loadHistory('shop'), (await emailCalls())[0]!, { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'not in the outbox' });
      gate = new Promise<void>((resolve) => { approve = resolve; });
      const resumed = resumeAgent({ ...h, model: scriptedModel([doneStep]), runId: `order-waiting-${decision}`, store: h.store, maxSteps: 4 });
      await asked;
      // While the retry waits for its approver, a colleague finds the message in the customer's inbox.
      await decisionInbox(h.store).recordReview({ sessionId: 'shop', callId: (await emailCalls())[1]!, outcome: 'completed', evidence: 'the customer has the e-mail', actor: 'ops-2@example.com' });
      approve();
      const stopped = await resumed;
      assert.equal(stopped.stopReason, 'needs_review', 'the model is not told the e-mail failed, nor that it was denied');
      assert.equal(world.emails.size, 0, 'the retry did not send it');
      gate = null;
      const done = await resumeAgent({ ...h, model: scriptedModel([doneStep]), runId: `order-waiting-${decision}`, store: h.store, maxSteps: 4 });
      assert.equal(done.stopReason, 'completed');
      const email = done.toolCalls.find((c) => c.name === 'send_email');
      assert.ok(email?.outcome.ok, JSON.stringify(email?.outcome));
      const again = await resumeAgent({ ...h, model: scriptedModel([]), runId: `order-waiting-${decision}`, store: h.store, maxSteps: 4 });
      assert.equal(again.stopReason, 'completed', 'read back the same way');
      assert.equal(world.emails.size, 0, 'not sent by any retry');
      await h.store.close();
    });
  }

  it("a review the host's own inbox pass journals while the resumed run's retry is under way stops the run instead of throwing; the next resume reads it", async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailEffect: 'non_idempotent' });
    const h = await crashedInsideEmail(path, world, 'order-own-pass');
    const email = (await h.store.loadHistory('shop')).flatMap((e) => (e.kind.type === 'tool_call' && e.kind.call.name === 'send_email' ? [e.kind.call.id] : []))[0]!;
    await recordToolReview(h.owner, await h.store.loadHistory('shop'), email, { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'not in the outbox' });
    // While the retry's guard runs, a colleague finds the e-mail and the host's own routine journals that at once.
    let during: (() => Promise<unknown>) | null = async () => {
      await decisionInbox(h.store).recordReview({ sessionId: 'shop', callId: email, outcome: 'completed', evidence: 'the customer has the e-mail', actor: 'ops-2@example.com' });
      await journalInboxReviews(h.owner, h.store, await h.store.loadHistory('shop'));
    };
    const guard = async () => {
      const record = during;
      during = null;
      if (record !== null) await record();
      return null;
    };
    const gateway = createToolRuntime({ tools: world.tools, grants: { agent: '*' }, guards: [guard] }).bind({ owner: h.owner, taskId: 'task', caller: 'agent' });
    const stopped = await resumeAgent({ ...h, gateway, model: scriptedModel([doneStep]), runId: 'order-own-pass', store: h.store, maxSteps: 4 });
    assert.equal(stopped.stopReason, 'needs_review');
    const done = await resumeAgent({ ...h, gateway, model: scriptedModel([doneStep]), runId: 'order-own-pass', store: h.store, maxSteps: 4 });
    assert.equal(done.stopReason, 'completed');
    assert.equal(world.emails.size, 0, 'not sent by any retry');
    await h.store.close();
  });

  it('a durable approval stops the run as awaiting_approval; after the operator approves, resuming continues', async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailApprover: true });
    const first = await host(path, world.tools, async () => ({ decision: 'pending', note: 'check the address' }));
    const stopped = await runAgent({ ...first, model: scriptedModel([orderStep, emailStep]), input: 'Buy tea.', maxSteps: 4, runId: 'order-5', store: first.store });
    assert.equal(stopped.stopReason, 'awaiting_approval');
    assert.equal(stopped.pendingCallIds.length, 1);

    const still = await resumeAgent({ ...first, model: scriptedModel([]), runId: 'order-5', store: first.store, maxSteps: 4 });
    assert.equal(still.stopReason, 'awaiting_approval', 'undecided: the run waits without a new attempt');
    const { decisionInbox } = await import('../../src/decisions.js');
    const inbox = decisionInbox(first.store);
    const open = await inbox.list({ sessionId: 'shop' });
    assert.equal(open.items.length, 1);
    await inbox.approve(open.items[0]!.id, { actor: 'ops@example.com' });

    const result = await resumeAgent({ ...first, model: scriptedModel([doneStep]), runId: 'order-5', store: first.store, maxSteps: 4 });
    assert.equal(result.stopReason, 'completed');
    assert.equal(world.emails.size, 1);
    assert.equal(world.orders.size, 1);
    await first.store.close();
  });

  it('a call refused before anything was recorded is read back with its refusal, and its oversized arguments are never journaled', async () => {
    const path = tempDbPath(dir);
    const world = outside();
    const first = await host(path, world.tools);
    const big = JSON.stringify({ p: 'x'.repeat(64 * 1024) });
    await assert.rejects(runAgent({
      ...first, model: scriptedModel([reply(null, calls(['z', 'fly_drone', big], ['n', 'bad\ud800', '{}'])), failing()]),
      input: 'Fly.', maxSteps: 3, runId: 'refused-1', store: first.store,
    }), Crash);
    const history = await first.store.loadHistory('shop');
    assert.ok(!JSON.stringify(history).includes('x'.repeat(1024)), 'the arguments are not journaled');
    assert.equal(history.filter((e) => e.kind.type === 'custom' && e.kind.kind === 'call_refused').length, 2);

    const model = scriptedModel([doneStep]);
    const result = await resumeAgent({ ...first, model, runId: 'refused-1', store: first.store, maxSteps: 3 });
    assert.equal(result.stopReason, 'completed');
    const tools = model.requests[0]!.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    assert.match(tools[0]!, /preflight \(unavailable_tool\)/);
    assert.match(tools[1]!, /preflight \(malformed_name\)/);
    assert.equal((await first.store.loadHistory('shop')).filter((e) => e.kind.type === 'tool_call').length, 0);
    await first.store.close();
  });

  it('a call whose provider id the journal cannot hold is refused when its step runs and when it is read back, naming its tool', async () => {
    // The gateway would run it (the provider id plays no part in the keys), but the journal keeps it elided: a call the
    // journal shows elided never runs, and a resume after a crash reads the same refusal as the live run.
    const path = tempDbPath(dir);
    const world = outside();
    const first = await host(path, world.tools);
    const longId = `call_${'x'.repeat(1100)}`;
    await assert.rejects(runAgent({
      ...first, model: scriptedModel([reply(null, calls([longId, 'place_order', '{"item":"tea"}'], ['c2', 'place_order', '{"item":"milk"}'])), failing()]),
      input: 'Buy.', maxSteps: 3, runId: 'long-id-1', store: first.store,
    }), Crash);
    assert.deepEqual([...world.orders.keys()], ['long-id-1/1/1'], 'only the call the journal holds as written ran');
    const history = await first.store.loadHistory('shop');
    const response = history.find((e) => e.kind.type === 'custom' && e.kind.kind === 'model_response');
    const journaledCalls = response?.kind.type === 'custom' ? (response.kind.payload as { toolCalls: unknown[] }).toolCalls : [];
    assert.deepEqual(journaledCalls[0], { id: '', name: 'place_order', arguments: '', omitted: true });

    const model = scriptedModel([doneStep]);
    const result = await resumeAgent({ ...first, model, runId: 'long-id-1', store: first.store, maxSteps: 3 });
    assert.equal(result.stopReason, 'completed');
    const tools = model.requests[0]!.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    assert.match(tools[0]!, /Tool "place_order" was refused before it ran: preflight \(not_journaled\)/);
    assert.deepEqual([...world.orders.keys()], ['long-id-1/1/1'], 'the resume ran nothing');
    const again = await runAgent({ ...first, model: scriptedModel([]), input: 'Buy.', maxSteps: 3, runId: 'long-id-1', store: first.store });
    assert.equal(again.stopReason, 'completed', 'the finished run reads back');
    await first.store.close();
  });

  it('validates run ids and refuses a resume of a run that is not journaled or that belongs to another task', async () => {
    const path = tempDbPath(dir);
    const world = outside();
    const h = await host(path, world.tools);
    for (const runId of ['', 'a/b', '-x', 'x'.repeat(161), 'é']) {
      await assert.rejects(runAgent({ ...h, model: scriptedModel([]), input: 'x', maxSteps: 1, runId, store: h.store }), { code: 'invalid_input', field: 'runId' });
    }
    await assert.rejects(runAgent({ owner: h.owner, gateway: h.gateway, model: scriptedModel([]), input: 'x', maxSteps: 1, runId: 'r1' }), { code: 'invalid_input', field: 'store' });
    await assert.rejects(resumeAgent({ ...h, model: scriptedModel([]), runId: 'missing', store: h.store, maxSteps: 1 }), { code: 'invalid_input', field: 'runId' });
    await runAgent({ ...h, model: scriptedModel([doneStep]), input: 'Hi.', maxSteps: 1, runId: 'r1', store: h.store });
    await assert.rejects(runAgent({ ...h, model: scriptedModel([]), input: 'Other.', maxSteps: 1, runId: 'r1', store: h.store }), { code: 'invalid_input', field: 'input' });
    await h.owner.startTask('other');
    const other = createToolRuntime({ tools: world.tools, grants: { agent: '*' } }).bind({ owner: h.owner, taskId: 'other', caller: 'agent' });
    await assert.rejects(resumeAgent({ ...h, gateway: other, model: scriptedModel([]), runId: 'r1', store: h.store, maxSteps: 1 }), { code: 'invalid_input', field: 'gateway' });
    await h.store.close();
  });
});
