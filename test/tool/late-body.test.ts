/**
 * A body that outlives its attempt. A non-idempotent transfer hit its deadline while its body, which ignored its
 * AbortSignal, went on; the host stayed up. An operator who saw no transfer yet recorded `not_executed` from another
 * process, which the inbox took (the call had a result: `tool_timeout`); the host journaled the review and retried,
 * and the first body then got through: two transfers. Until the body ends, the call is still running: the inbox
 * refuses a review (`call_in_flight`), so does recordToolReview in the host, reconcilers are not asked, and a retry
 * is refused (`body_running`); once the body ends, the host journals it (`jingwei.runtime` / `body_ended`) and each of
 * them is taken.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolBodyError } from '../../src/errors.js';
import { decisionInbox } from '../../src/store/inbox.js';
import { assessSession, inspectToolRecovery } from '../../src/index.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { journalInboxReviews } from '../../src/tool/inbox-review.js';
import { hasPendingBodyEnds } from '../../src/tool/late-bodies.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { reconcileUncertainCalls } from '../../src/tool/reconcile.js';
import { recordToolReview } from '../../src/tool/review.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool } from '../../src/tool/types.js';
import type { SessionStore } from '../../src/store/types.js';
import { cli } from '../cli/helpers.js';
import { untilBodyEnded } from '../support/body-ended.js';
import { sleep } from '../support/runtime.js';
import { forEachStore, type StoreTarget } from '../support/stores.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { setFaultHook } from '../../src/fault.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

/**
 * A tool whose body ignores its signal and ends when `end()` is called (returning) or `fail()` (throwing). Its
 * deadline leaves the call's two commits ample time, so the body has started when it passes.
 */
function lateTool(name: string, effect: 'non_idempotent' | 'idempotent') {
  const state = { bodies: 0, end: () => {}, fail: () => {} };
  const t: Tool = {
    name,
    metadata: new ToolMetadata(`the ${name} tool`, { type: 'object' }).withEffect(effect, 'v1').withTimeoutCeiling(250),
    execute: () => new Promise<string>((resolve, reject) => {
      state.bodies += 1;
      if (state.bodies > 1) return resolve('done');
      state.end = () => resolve('done late');
      state.fail = () => reject(new Error('the bank hung up'));
    }),
    reconcile: async () => ({ outcome: 'not_executed', evidence: 'no transfer in the bank yet' }),
  };
  return { tool: t, state };
}

/** A session `s` with task `t` and a gateway over lateTool(`name`, `effect`), on a fresh journal of `target`. */
async function lateSession(target: StoreTarget, name: string, effect: 'non_idempotent' | 'idempotent') {
  const location = target.fresh();
  const store = await location.open();
  const { tool, state } = lateTool(name, effect);
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  return { location, store, owner, gateway, tool, state };
}

forEachStore('a body that outlives its attempt', (target) => {
  it('keeps its call running until the body ends: a review from the inbox or the host is refused, reconcilers are not asked', async () => {
    const location = target.fresh();
    const store = await location.open();
    const operator = await location.open();
    const inbox = decisionInbox(operator);
    const { tool, state } = lateTool('transfer', 'non_idempotent');
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('t');
    const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
    const first = await gateway.call('transfer', { to: 'acme' });
    assert.equal(first.result.outcome.status === 'failed' && first.result.outcome.code, 'tool_timeout');
    const review = () => inbox.recordReview({ sessionId: 's', callId: first.call.id, outcome: 'not_executed', evidence: 'no transfer seen yet', actor: 'ops' });

    await assert.rejects(review(), { name: 'DecisionError', code: 'call_in_flight', message: /interrupted while its body ran/ });
    assert.deepEqual((await inbox.list({ kind: 'review' })).items, [], 'nothing recorded in the inbox');
    const before = await store.loadHistory('s');
    await assert.rejects(
      recordToolReview(owner, before, first.call.id, { actor: 'ops', outcome: 'not_executed', evidence: 'no transfer seen yet' }),
      { name: 'DecisionError', code: 'call_in_flight', message: /still running in this process/ },
    );
    const reconciled = await reconcileUncertainCalls(owner, [tool], before);
    assert.deepEqual(reconciled.calls.map((c) => c.action), ['body_running']);
    assert.deepEqual(reconciled.needsReview, [first.call.id]);
    assert.equal((await store.loadHistory('s')).length, before.length, 'nothing journaled');
    const inspect = () => cli(['inspect', location.target, 's', first.call.id]).stdout;
    if (target.name === 'sqlite') assert.match(inspect(), /late body {3}may still be running: its result records an interrupt while it ran/);

    state.end();
    const ended = await untilBodyEnded(store, 's', first.call.id);
    assert.deepEqual(ended.kind.type === 'custom' && ended.kind.payload, { callId: first.call.id, ended: 'returned' });
    if (target.name === 'sqlite') {
      assert.match(inspect(), new RegExp(`late body {3}went on after its result and ended: returned \\(its output was not recorded: it most likely made its write\\), .* \\(seq ${ended.seq}\\)`));
      const json = JSON.parse(cli(['inspect', location.target, 's', first.call.id, '--json']).stdout) as { body_ended: { ended: string; seq: number }; body_may_still_run: boolean };
      assert.deepEqual([json.body_ended.ended, json.body_ended.seq, json.body_may_still_run], ['returned', ended.seq, false]);
    }
    // The API says it too, for a host's own review screen: the end, and the fact and reason that name it.
    const after = await store.loadHistory('s');
    const inspected = inspectToolRecovery(after, first.call.id);
    assert.equal(inspected.bodyEnded?.ended, 'returned');
    assert.equal(inspected.bodyEnded?.event.eventId, ended.eventId);
    assert.match(inspected.fact, /; then its body went on and returned \(its output was not recorded: it most likely made its write\)$/);
    assert.equal(inspectToolRecovery(before, first.call.id).bodyEnded, null);
    const [listed] = assessSession(after).calls;
    assert.equal(listed?.bodyEnded?.event.seq, ended.seq);
    assert.match(listed!.reason, /then its body went on and returned/);
    // The body ended: the operator can look now. It returned, so not_executed takes their word that they checked.
    await assert.rejects(review(), { name: 'DecisionError', code: 'decision_stale', message: /went on after its result and returned .*most likely made its write/ });
    await assert.rejects(inbox.recordReview({ sessionId: 's', callId: first.call.id, outcome: 'not_executed', evidence: 'x', actor: 'ops', despiteLateReturn: 'yes' as never }), { name: 'InvalidInputError', field: 'despiteLateReturn' });
    assert.deepEqual((await inbox.list({ kind: 'review' })).items, [], 'nothing recorded');
    const checked = await inbox.recordReview({ sessionId: 's', callId: first.call.id, outcome: 'not_executed', evidence: 'the bank shows no transfer', actor: 'ops', despiteLateReturn: true });
    assert.equal(checked.state, 'decided');
    // The owner journals it as taken: the person said they checked when the inbox asked.
    const journaled = await journalInboxReviews(owner, store, await store.loadHistory('s'));
    assert.deepEqual(journaled.journaled.map((j) => [j.decisionId, j.outcome]), [[checked.id, 'not_executed']]);
    await owner.release();
    await store.close();
    await operator.close();
  });

  it('the host\'s recordToolReview refuses a person\'s not_executed after the body returned late, unless they say they checked', async () => {
    const { store, owner, gateway, state } = await lateSession(target, 'transfer', 'non_idempotent');
    const first = await gateway.call('transfer', { to: 'acme' });
    state.end();
    await untilBodyEnded(store, 's', first.call.id);
    const history = await store.loadHistory('s');
    const review = { actor: 'ops', outcome: 'not_executed', evidence: 'no transfer in the bank' } as const;
    await assert.rejects(recordToolReview(owner, history, first.call.id, review), { name: 'DecisionError', code: 'decision_stale', message: /went on after its result and returned/ });
    await assert.rejects(recordToolReview(owner, history, first.call.id, { ...review, despiteLateReturn: 1 as never }), { name: 'InvalidInputError' });
    // Neither a ticket id nor a claimed source stands for having checked.
    await assert.rejects(recordToolReview(owner, history, first.call.id, { ...review, decisionId: 'OPS-4711' }), { code: 'decision_stale' });
    await assert.rejects(recordToolReview(owner, history, first.call.id, { ...review, source: 'reconciler' }), { code: 'decision_stale' });
    assert.equal((await store.loadHistory('s')).length, history.length, 'nothing journaled');
    const event = await recordToolReview(owner, history, first.call.id, { ...review, despiteLateReturn: true });
    assert.equal(event.kind.type === 'tool_review' && event.kind.review.outcome, 'not_executed');
    await owner.release();
    await store.close();
  });

  it('refuses a retry while an earlier attempt\'s body still runs in this process, and takes the same plan once it ended', async () => {
    const { store, owner, gateway, state } = await lateSession(target, 'lookup', 'idempotent');
    const first = await gateway.call('lookup', { order: 7 });
    assert.equal(first.result.outcome.status === 'failed' && first.result.outcome.code, 'tool_timeout');
    const history = await store.loadHistory('s');
    const plan = prepareToolRetry(history, first.call.id);
    await assert.rejects(gateway.callWithOptions('lookup', { order: 7 }, { retry: plan }), { name: 'ToolRetryError', code: 'body_running' });
    assert.equal(plan.consumed, false, 'the plan was not taken');
    assert.equal((await store.loadHistory('s')).length, history.length, 'nothing journaled');
    assert.equal(state.bodies, 1);

    state.fail();
    const ended = await untilBodyEnded(store, 's', first.call.id);
    assert.deepEqual(ended.kind.type === 'custom' && ended.kind.payload, { callId: first.call.id, ended: 'threw' });
    const retry = await gateway.callWithOptions('lookup', { order: 7 }, { retry: plan });
    assert.equal(retry.result.outcome.status, 'succeeded');
    assert.equal(state.bodies, 2);
    await owner.release();
    await store.close();
  });

  it('a not_executed review passed to prepareToolRetry while the body ran is refused at use once that body returned or threw', async () => {
    // The host's own path (no inbox): a plan prepared with a not_executed review on a history where the body could
    // still run. The body then returns (it made the transfer): the plan must not make it a second time.
    for (const how of ['end', 'fail'] as const) {
      const { store, owner, gateway, state } = await lateSession(target, 'transfer', 'non_idempotent');
      const first = await gateway.call('transfer', { to: 'acme' });
      const history = await store.loadHistory('s');
      const plan = prepareToolRetry(history, first.call.id, { actor: 'ops', evidence: 'no transfer seen yet', outcome: 'not_executed' });
      await assert.rejects(gateway.callWithOptions('transfer', { to: 'acme' }, { retry: plan }), { name: 'ToolRetryError', code: 'body_running' });
      state[how]();
      await untilBodyEnded(store, 's', first.call.id);
      const before = (await store.loadHistory('s')).length;
      await assert.rejects(gateway.callWithOptions('transfer', { to: 'acme' }, { retry: plan }), {
        name: 'ToolRetryError',
        code: 'needs_review',
        message: new RegExp(`decided while its body could still run, and the body has since ${how === 'end' ? 'returned' : 'threw'}`),
      });
      assert.equal(plan.consumed, false, 'the plan was not taken');
      assert.equal((await store.loadHistory('s')).length, before, 'nothing journaled');
      assert.equal(state.bodies, 1, 'no second transfer');
      // Prepared again on the journal that records the body's end, the operator's review is an informed one.
      // It returned: the operator says they checked the bank all the same.
      const informed = prepareToolRetry(await store.loadHistory('s'), first.call.id, { actor: 'ops', evidence: 'the bank shows nothing', outcome: 'not_executed', despiteLateReturn: how === 'end' });
      const retry = await gateway.callWithOptions('transfer', { to: 'acme' }, { retry: informed });
      assert.equal(retry.result.outcome.status, 'succeeded');
      assert.equal(state.bodies, 2);
      await owner.release();
      await store.close();
    }
  });

  it('refuses a retry of a call that is still running in this process, before any result', async () => {
    const location = target.fresh();
    const store = await location.open();
    let release: () => void = () => {};
    let bodies = 0;
    const transfer: Tool = {
      name: 'transfer',
      metadata: new ToolMetadata('the transfer tool', { type: 'object' }).withEffect('non_idempotent', 'v1'),
      execute: async () => {
        bodies += 1;
        if (bodies === 1) await new Promise<void>((resolve) => { release = resolve; });
        return 'sent';
      },
    };
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('t');
    const gateway = createToolRuntime({ tools: [transfer], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
    const running = gateway.call('transfer', { to: 'acme' });
    while (bodies === 0) await sleep(5);
    const history = await store.loadHistory('s');
    const callId = history.flatMap((e) => (e.kind.type === 'tool_started' ? [e.kind.callId] : []))[0]!;
    const plan = prepareToolRetry(history, callId, { actor: 'ops', evidence: 'nothing sent', outcome: 'not_executed' });
    await assert.rejects(gateway.callWithOptions('transfer', { to: 'acme' }, { retry: plan }), { name: 'ToolRetryError', code: 'body_running', message: new RegExp(`call ${callId} .* still running in this process`) });
    assert.equal(plan.consumed, false);
    release();
    assert.equal((await running).result.outcome.status, 'succeeded');
    assert.equal(bodies, 1, 'one transfer');
    await owner.release();
    await store.close();
  });

  it('a not_executed review taken while a paused host\'s lease had run out is refused once the body\'s end is journaled after it', async () => {
    // The host is alive but its lease runs out (no heartbeat: a paused process), nobody takes the session over, and
    // the inbox takes an operator's review while the body still runs. The body then returns (it made the transfer),
    // the host journals that, and its startup routine must not journal the review and retry: a second transfer.
    const location = target.fresh();
    const store = await location.open();
    const operator = await location.open();
    const inbox = decisionInbox(operator);
    const { tool, state } = lateTool('transfer', 'non_idempotent');
    const owner = await store.acquire('s', { owner: 'host', leaseMs: 100, heartbeat: false });
    await owner.startTask('t');
    const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
    const first = await gateway.call('transfer', { to: 'acme' });
    assert.equal(first.result.outcome.status === 'failed' && first.result.outcome.code, 'tool_timeout');
    await sleep(150);
    const blind = await inbox.recordReview({ sessionId: 's', callId: first.call.id, outcome: 'not_executed', evidence: 'no transfer seen yet', actor: 'ops' });
    assert.equal(blind.state, 'decided', 'the lease ran out: the inbox cannot tell a paused host from a dead one');

    state.end();
    const ended = await untilBodyEnded(store, 's', first.call.id);
    const report = await journalInboxReviews(owner, store, await store.loadHistory('s'));
    assert.deepEqual(report.journaled, []);
    assert.deepEqual(report.stale.map((r) => r.decisionId), [blind.id]);
    assert.match(report.stale[0]!.reason, new RegExp(`its body returned after its result \\(seq ${ended.seq}\\).*review the call again`));
    assert.equal((await inbox.get(blind.id))?.state, 'stale');
    assert.throws(() => prepareToolRetry(report.history, first.call.id), { name: 'ToolRetryError', code: 'needs_review' });
    assert.equal(state.bodies, 1, 'no second transfer');

    // A review recorded with the body's end in the journal is the operator's informed decision: it is journaled.
    const informed = await inbox.recordReview({ sessionId: 's', callId: first.call.id, outcome: 'completed', evidence: 'the bank shows the transfer', actor: 'ops' });
    const again = await journalInboxReviews(owner, store, report.history);
    assert.deepEqual(again.journaled.map((r) => [r.decisionId, r.outcome]), [[informed.id, 'completed']]);
    await owner.release();
    await store.close();
    await operator.close();
  });

  it('a not_executed review is refused once the call\'s result is journaled after it', async () => {
    // The same staleness without a late body: a review recorded while the call had a start marker and no result (its
    // host paused in the body, its lease run out), then the host woke, the body went on and threw after its request
    // went out, and the result says so. The call is in doubt, but the review was made before that evidence.
    const location = target.fresh();
    const store = await location.open();
    const operator = await location.open();
    const inbox = decisionInbox(operator);
    let release: () => void = () => {};
    let bodies = 0;
    const transfer: Tool = {
      name: 'transfer',
      metadata: new ToolMetadata('the transfer tool', { type: 'object' }).withEffect('non_idempotent', 'v1'),
      execute: async () => {
        bodies += 1;
        await new Promise<void>((resolve) => { release = resolve; });
        throw new Error('the bank hung up after the request went out');
      },
    };
    const owner = await store.acquire('s', { owner: 'host', leaseMs: 100, heartbeat: false });
    await owner.startTask('t');
    const gateway = createToolRuntime({ tools: [transfer], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
    const running = gateway.call('transfer', { to: 'acme' });
    while (bodies === 0) await sleep(5);
    const callId = (await store.loadHistory('s')).flatMap((e) => (e.kind.type === 'tool_started' ? [e.kind.callId] : []))[0]!;
    await sleep(150);
    const blind = await inbox.recordReview({ sessionId: 's', callId, outcome: 'not_executed', evidence: 'nothing sent', actor: 'ops' });
    release();
    const ran = await running;
    assert.equal(ran.result.outcome.status === 'failed' && ran.result.outcome.category, 'body_panic', 'in doubt: the body started and threw');
    const report = await journalInboxReviews(owner, store, await store.loadHistory('s'));
    assert.deepEqual(report.journaled, []);
    assert.deepEqual(report.stale.map((r) => r.decisionId), [blind.id]);
    assert.match(report.stale[0]!.reason, /a result \(seq \d+\) of call .* since this not_executed review was recorded/);
    assert.throws(() => prepareToolRetry(report.history, callId), { name: 'ToolRetryError', code: 'needs_review' });
    // Recorded now, with the result in the journal, the same review is the operator's informed decision.
    const informed = await inbox.recordReview({ sessionId: 's', callId, outcome: 'not_executed', evidence: 'the bank shows nothing', actor: 'ops' });
    const again = await journalInboxReviews(owner, store, report.history);
    assert.deepEqual(again.journaled.map((r) => r.decisionId), [informed.id]);
    assert.equal(bodies, 1);
    await owner.release();
    await store.close();
    await operator.close();
  });
});

it('the queue does not say how long an interrupted body ran, says how it ended once journaled, and jingwei review asks before not_executed once it returned', async () => {
  const path = tempDbPath(tempDir(), 'journal');
  const location = { target: path, open: async () => openSqliteStore(path) };
  const store = await location.open();
  const { tool, state } = lateTool('transfer', 'non_idempotent');
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  const first = await gateway.call('transfer', { to: 'acme' });
  const running = cli(['queue', location.target]).stdout;
  assert.match(running, /timeout\s+interrupted after \d+ (ms|s); its body may have gone on \(no end of it is journaled: it runs still, or its host stopped first\)/);
  state.end();
  const ended = await untilBodyEnded(store, 's', first.call.id);
  await owner.release();
  await store.close();
  // Before, the queue read "timeout  body ran 250 ms": the body ran on and made the transfer. Then it said only that
  // the body may have gone on, and the operator had to open the call to learn it had returned (r108 F6, r110 F3).
  const queued = cli(['queue', location.target]).stdout;
  assert.match(queued, /timeout\s+interrupted after \d+ (ms|s); its body went on, and returned \(its output was not recorded: it most likely made its write\)/);
  assert.doesNotMatch(queued, /body ran/);
  const listed = JSON.parse(cli(['queue', location.target, '--json']).stdout) as { items: { call_id: string; body_ended: string | null; in_doubt: boolean }[] };
  assert.deepEqual(listed.items.map((i) => [i.call_id, i.body_ended, i.in_doubt]), [[first.call.id, 'returned', true]]);
  const review = (...extra: string[]) => cli(['review', location.target, first.call.id, '--session', 's', '--outcome', 'not_executed', '--evidence', 'no transfer in the bank', '--actor', 'ops', ...extra]);
  const refused = review();
  assert.equal(refused.code, 1, refused.stdout + refused.stderr);
  assert.match(refused.stderr, new RegExp(`nothing was recorded: the journal records that the body of call ${first.call.id} went on after its result and returned \\(seq ${ended.seq}, .*\\), so it most likely made its write\\. .*--despite-late-return`));
  const inbox = await location.open();
  assert.deepEqual((await decisionInbox(inbox).list({ kind: 'review' })).items, [], 'nothing recorded');
  const recorded = review('--despite-late-return');
  assert.equal(recorded.code, 0, recorded.stderr);
  assert.equal((await decisionInbox(inbox).list({ kind: 'review' })).items.length, 1);
  // completed needs no confirmation.
  assert.equal(cli(['review', location.target, first.call.id, '--session', 's', '--outcome', 'completed', '--evidence', 'the bank shows it', '--actor', 'ops', '--replaces', (await decisionInbox(inbox).list({ kind: 'review' })).items[0]!.id]).code, 0);
  await inbox.close();
});

it('a result whose commit landed but whose answer was lost: the body end journaled after it is not read as a body that went on', async () => {
  const path = tempDbPath(tempDir(), 'journal');
  const store = openSqliteStore(path);
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  const transfer: Tool = {
    name: 'transfer',
    metadata: new ToolMetadata('moves money', { type: 'object' }).withEffect('non_idempotent', 'v1'),
    execute: async () => 'sent',
  };
  const gateway = createToolRuntime({ tools: [transfer], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  // The result is durable, and then the answer is lost on the way back (a connection cut after COMMIT).
  let lost = true;
  setFaultHook((point) => {
    if (point === 'result:after' && lost) {
      lost = false;
      throw new Error('the connection was cut after COMMIT');
    }
  });
  try {
    await assert.rejects(gateway.call('transfer', { to: 'acme' }), /cut after COMMIT/);
  } finally {
    setFaultHook(null);
  }
  await gateway.call('transfer', { to: 'bank' }); // the owner's next write journals the end it kept
  const history = await store.loadHistory('s');
  const first = history.find((e) => e.kind.type === 'tool_call')!;
  const callId = first.kind.type === 'tool_call' ? first.kind.call.id : '';
  assert.ok(history.some((e) => e.kind.type === 'custom' && e.kind.kind === 'body_ended'), 'the runtime could not tell the result landed, so it journaled the end');
  const recovery = inspectToolRecovery(history, callId);
  assert.equal(recovery.status, 'completed');
  assert.equal(recovery.bodyEnded, null, 'not a body that went on after its result');
  assert.doesNotMatch(recovery.fact, /went on/);
  await owner.release();
  await store.close();
  const inspected = cli(['inspect', path, 's', callId]).stdout;
  assert.doesNotMatch(inspected, /late body|went on/, inspected);
});

it("a start marker whose commit landed with its answer lost, the host then idle: its heartbeat journals that the body was never called, and an operator's review is taken", { timeout: 30_000 }, async () => {
  const store = openSqliteStore(tempDbPath(tempDir(), 'journal'));
  // The backend's commit of the call and its marker lands, and its answer is lost (a connection cut after COMMIT).
  const backend = (store as unknown as { backend: { transact: (...args: unknown[]) => Promise<unknown> } }).backend;
  const transact = backend.transact.bind(backend);
  let armed = true;
  backend.transact = async (...args: unknown[]) => {
    const result = await transact(...args);
    if (armed && JSON.stringify(result).includes('tool_started')) {
      armed = false;
      throw Object.assign(new Error('the connection was cut after COMMIT'), { code: 'store_unavailable' });
    }
    return result;
  };
  const owner = await store.acquire('s', { owner: 'host', leaseMs: 300 });
  await owner.startTask('t');
  let bodies = 0;
  const pay: Tool = { name: 'pay', metadata: new ToolMetadata('pays', { type: 'object' }).withEffect('non_idempotent', 'v1'), execute: async () => { bodies += 1; return 'paid'; } };
  const gateway = createToolRuntime({ tools: [pay], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  // The host is told its body was not called, and what the journal may say all the same.
  await assert.rejects(gateway.call('pay', {}), { code: 'recording_failed', message: /The body was not called\. If the commit landed all the same .*in doubt until a person reviews it/ });
  assert.equal(bodies, 0);
  const callId = (await store.loadHistory('s')).flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call.id] : []))[0]!;
  // The host makes no other call: before, nothing journaled it, and the inbox refused every review (call_in_flight).
  const ended = await untilBodyEnded(store, 's', callId);
  assert.deepEqual(ended.kind.type === 'custom' ? ended.kind.payload : null, { callId, ended: 'not_called' });
  const row = await decisionInbox(store).recordReview({ sessionId: 's', callId, outcome: 'not_executed', evidence: 'the bank shows nothing', actor: 'ops' });
  assert.equal(row.decision, 'not_executed');
  await owner.release();
  await store.close();
});

/** A SQLite store whose next commit, once armed, is cut before COMMIT (nothing lands): `arm()` arms it. */
function cuttingStore(): { store: SessionStore; arm: () => void; armed: () => boolean } {
  const store = openSqliteStore(tempDbPath(tempDir(), 'journal'));
  const backend = (store as unknown as { backend: { transact: (...args: unknown[]) => Promise<unknown> } }).backend;
  const transact = backend.transact.bind(backend);
  let armed = false;
  backend.transact = async (...args: unknown[]) => {
    if (armed) {
      armed = false;
      throw Object.assign(new Error('the connection was cut before COMMIT'), { code: 'store_unavailable' });
    }
    return transact(...args);
  };
  return { store, arm: () => { armed = true; }, armed: () => armed };
}

it('a start marker whose commit did not land: the end kept for it goes once its own journal refuses it, not kept for every later call to try', async () => {
  const { store, arm, armed } = cuttingStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  let bodies = 0;
  const pay: Tool = { name: 'pay', metadata: new ToolMetadata('pays', { type: 'object' }).withEffect('non_idempotent', 'v1'), execute: async () => { bodies += 1; return 'paid'; } };
  const gateway = createToolRuntime({ tools: [pay], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  arm(); // the call's one commit, of the call and its start marker, is refused
  await assert.rejects(gateway.call('pay', {}), { code: 'recording_failed' });
  assert.equal(armed(), false, 'the commit of the call and its start marker was refused');
  assert.ok(hasPendingBodyEnds(owner), 'the end is kept until a journal says whether it holds the call');
  await gateway.call('pay', { again: true }); // the owner's next write tries it: its journal does not hold the call
  assert.equal(bodies, 1);
  assert.ok(!(await store.loadHistory('s')).some((e) => e.kind.type === 'custom' && e.kind.kind === 'body_ended'), 'nothing journaled for a call the journal never held');
  assert.equal(hasPendingBodyEnds(owner), false, 'dropped: no later call of the session tries it again');
  await owner.release();
  await store.close();
});

it("a body that ran and threw a failure carrying the runtime's stopped-before-body code, its result unwritten: its end is journaled as thrown, never as not called", async () => {
  const { store, arm } = cuttingStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  let paid = 0;
  const pay: Tool = {
    name: 'pay',
    metadata: new ToolMetadata('pays', { type: 'object' }).withEffect('non_idempotent', 'v1'),
    execute: async () => {
      paid += 1;
      arm(); // the result's commit fails
      throw new ToolBodyError('tool_stopped_before_body', 'forwarded from a nested gateway');
    },
  };
  const gateway = createToolRuntime({ tools: [pay], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  await assert.rejects(gateway.call('pay', {}), { code: 'recording_failed' });
  assert.equal(paid, 1);
  await gateway.call('pay', { again: true }).catch(() => undefined); // the owner's next write journals the end it kept
  const ends = (await store.loadHistory('s')).flatMap((e) => (e.kind.type === 'custom' && e.kind.kind === 'body_ended' ? [e.kind.payload] : []));
  assert.equal(ends.length, 1);
  assert.equal((ends[0] as { ended: string }).ended, 'threw', 'the body ran: it is never journaled as not called');
  await owner.release();
  await store.close();
});

it('a body that holds the event loop past its deadline and then returns is recorded as the timeout the timer records, its output discarded', async () => {
  const store = await openSqliteStore(tempDbPath(tempDir(), 'journal'));
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  const metadata = (name: string) => new ToolMetadata(`the ${name} tool`, { type: 'object' }).withEffect('non_idempotent', 'v1');
  const tools: Tool[] = [
    // CPU-bound, its signal ignored: the deadline's timer cannot run before it returns.
    { name: 'render', metadata: metadata('render'), execute: async () => {
      const until = Date.now() + 250;
      while (Date.now() < until) { /* rendering */ }
      return 'rendered';
    } },
    // Awaits: the deadline's timer runs, and the body returns once it is told.
    { name: 'wait', metadata: metadata('wait'), execute: (_request, signal) => new Promise<string>((resolve) => {
      signal.addEventListener('abort', () => resolve('waited'), { once: true });
    }) },
    { name: 'quick', metadata: metadata('quick'), execute: async () => 'quick' },
  ];
  const gateway = createToolRuntime({ tools, grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  const rendered = await gateway.callWithOptions('render', {}, { timeoutMs: 100 });
  const waited = await gateway.callWithOptions('wait', {}, { timeoutMs: 100 });
  assert.deepEqual(waited.result.outcome, { status: 'failed', category: 'timeout', code: 'tool_timeout', message: 'the call deadline passed', retryable: true });
  assert.deepEqual(rendered.result.outcome, waited.result.outcome);
  assert.ok(rendered.startedEvent !== null, 'the body started');
  for (const ran of [rendered, waited]) {
    const ended = await untilBodyEnded(store, 's', ran.call.id);
    assert.deepEqual(ended.kind.type === 'custom' && ended.kind.payload, { callId: ran.call.id, ended: 'returned' });
  }
  const history = await store.loadHistory('s');
  assert.equal(inspectToolRecovery(history, rendered.call.id).status, inspectToolRecovery(history, waited.call.id).status);
  // A body that returns in time still succeeds.
  const quick = await gateway.callWithOptions('quick', {}, { timeoutMs: 100 });
  assert.deepEqual(quick.result.outcome, { status: 'succeeded', output: 'quick' });
  await owner.release();
  await store.close();
});
