/**
 * What hooks and bodies are handed cannot change what is journaled, checked and tracked: a body gets a frozen copy
 * of its operation, guards and the approver one frozen context, and a body's own error code never reads as an
 * interrupt of the runtime.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolBodyError } from '../../src/errors.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { decisionInbox } from '../../src/store/inbox.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { inspectToolRecovery } from '../../src/tool/recovery.js';
import { assessSession } from '../../src/tool/assess.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import type { Tool, ToolGuard } from '../../src/tool/types.js';
import { modelFacingOutcome } from '../../src/bridges/outcome.js';
import { attentionTimes } from '../../src/cli/assessment.js';
import { setFaultHook } from '../../src/fault.js';

/** A non-idempotent transfer whose body is `execute`. */
const transfer = (execute: Tool['execute']): Tool => ({
  name: 'transfer',
  metadata: new ToolMetadata('transfer', { type: 'object' }).withEffect('non_idempotent', 'v1'),
  execute,
});

async function session() {
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  return { store, owner };
}

it('a body gets a frozen copy of its operation: changing its key fails and the journal, the execution and the tracking keep the real one', async () => {
  const { store, owner } = await session();
  const seen: { frozen?: boolean; threw?: string } = {};
  const tool: Tool = {
    name: 'transfer',
    metadata: new ToolMetadata('transfer', { type: 'object' }).withEffect('non_idempotent', 'v1'),
    execute: async (request) => {
      seen.frozen = Object.isFrozen(request.operation) && Object.isFrozen(request.operation?.contract);
      try {
        (request.operation as { key: string }).key = 'another-key';
      } catch (error) {
        seen.threw = (error as Error).name;
      }
      return 'sent';
    },
  };
  const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  const ran = await gateway.call('transfer', { to: 'acme' });
  assert.deepEqual(seen, { frozen: true, threw: 'TypeError' });
  assert.equal(ran.result.outcome.status, 'succeeded');
  const journaled = (await store.loadHistory('s')).find((e) => e.kind.type === 'tool_call');
  assert.equal(journaled?.kind.type === 'tool_call' && journaled.kind.call.operation?.key, ran.call.operation?.key);
  assert.notEqual(ran.call.operation?.key, 'another-key');
  assert.equal(ran.callEvent.kind.type === 'tool_call' && ran.callEvent.kind.call.operation?.key, ran.call.operation?.key);
  await store.close();
});

it('guards and the approver share one frozen context: a guard cannot show the approver another call or caller', async () => {
  const { store, owner } = await session();
  let bodies = 0;
  const tool: Tool = {
    name: 'pay',
    metadata: new ToolMetadata('pay', { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('finance'),
    execute: async () => { bodies += 1; return 'paid'; },
  };
  const swaps: boolean[] = [];
  const guard: ToolGuard = (ctx) => {
    swaps.push(Reflect.set(ctx, 'call', { ...ctx.call, arguments: { amount: 1 } }), Reflect.set(ctx, 'caller', 'trusted-admin'));
    return null;
  };
  const asked: { caller: string; amount: unknown }[] = [];
  const gateway = createToolRuntime({
    tools: [tool],
    grants: { agent: '*' },
    guards: [guard],
    approvers: {
      finance: async (ctx) => {
        asked.push({ caller: ctx.caller, amount: (ctx.call.arguments as { amount?: unknown }).amount });
        return (ctx.call.arguments as { amount: number }).amount > 100 ? { decision: 'denied', code: 'too_much', message: 'over the limit' } : { decision: 'approved' };
      },
    },
  }).bind({ owner, taskId: 't', caller: 'agent' });
  const ran = await gateway.call('pay', { amount: 1_000_000 });
  assert.deepEqual(swaps, [false, false], 'the context refused both assignments');
  assert.deepEqual(asked, [{ caller: 'agent', amount: 1_000_000 }]);
  assert.equal(ran.result.outcome.status === 'failed' && ran.result.outcome.category, 'approval_denied');
  assert.equal(bodies, 0);
  await store.close();
});

it('a body that throws the code tool_timeout has ended: the inbox takes a review of its call', async () => {
  const { store, owner } = await session();
  const tool = transfer(async () => { throw new ToolBodyError('tool_timeout', 'the bank timed out'); });
  const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  const ran = await gateway.call('transfer', { to: 'acme' });
  const outcome = ran.result.outcome;
  assert.deepEqual(outcome.status === 'failed' && [outcome.category, outcome.code], ['body_failure', 'tool_timeout']);
  const review = await decisionInbox(store).recordReview({ sessionId: 's', callId: ran.call.id, outcome: 'not_executed', evidence: 'the bank shows nothing', actor: 'ops' });
  assert.equal(review.state, 'decided');
  await store.close();
});

it('the late-body tracking keeps its own copy of the call id: relabelling the returned execution changes nothing', async () => {
  const { store, owner } = await session();
  let finish: () => void = () => {};
  const tool: Tool = {
    name: 'transfer',
    metadata: new ToolMetadata('transfer', { type: 'object' }).withEffect('non_idempotent', 'v1').withTimeoutCeiling(100),
    execute: () => new Promise<string>((resolve) => { finish = () => resolve('sent late'); }),
  };
  const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  const ran = await gateway.call('transfer', { to: 'acme' });
  const realId = ran.call.id;
  (ran.call as { id: string }).id = 'toolcall_relabelled';
  finish();
  let ended: unknown[] = [];
  for (let waited = 0; ended.length === 0 && waited < 5000; waited += 5) {
    await new Promise((resolve) => setTimeout(resolve, 5));
    ended = (await store.loadHistory('s')).flatMap((e) => (e.kind.type === 'custom' && e.kind.kind === 'body_ended' ? [e.kind.payload] : []));
  }
  assert.deepEqual(ended, [{ callId: realId, ended: 'returned' }]);
  await store.close();
});

it('an interrupt between the start marker and the body is recorded as such: the body never ran, and recovery says not_executed', async () => {
  const { store, owner } = await session();
  let bodies = 0;
  const tool = transfer(async () => { bodies += 1; return 'sent'; });
  const caller = new AbortController();
  const runtime = createToolRuntime({ tools: [tool], grants: { agent: '*' }, onEvent: (event) => { if (event.type === 'body_started') caller.abort(); } });
  const ran = await runtime.bind({ owner, taskId: 't', caller: 'agent' }).callWithOptions('transfer', { to: 'acme' }, { signal: caller.signal });
  const outcome = ran.result.outcome;
  assert.deepEqual(outcome.status === 'failed' && [outcome.category, outcome.code], ['cancelled', 'tool_stopped_before_body']);
  assert.ok(ran.startedEvent, 'the marker was written');
  assert.equal(bodies, 0);
  await new Promise((resolve) => setTimeout(resolve, 20));
  const history = await store.loadHistory('s');
  assert.deepEqual(history.map((e) => e.kind.type), ['task_ledger', 'tool_call', 'tool_started', 'tool_result'], 'no body_ended: there was no body');
  const recovery = inspectToolRecovery(history, ran.call.id);
  assert.equal(recovery.status, 'not_executed');
  assert.match(recovery.fact, /start marker recorded, then cancelled before the body was called/);
  assert.equal(assessSession(history).calls[0]!.nextStep, 'retry_allowed');
  assert.deepEqual((await store.attention()).items, [], 'nothing in doubt for the queue');
  // What the model reads: the body never started, so nothing may have taken effect (pass r54 #3).
  const facing = modelFacingOutcome(ran);
  assert.ok(!facing.ok && !facing.started && !facing.mayHaveTakenEffect);
  assert.doesNotMatch(facing.ok ? '' : facing.text, /may have taken effect/);
  // Nothing charged for output a body never produced (pass r54 #5).
  assert.equal((await owner.task('t')).charged.toolOutputBytes, 0);
  // An operator reads that it stopped before its body, not that a body may have gone on (pass r55 #2).
  const [item] = (await store.attention({ status: 'not_executed' })).items;
  assert.match(attentionTimes(item!, new Date().toISOString()), /^stopped before its body was called/);
  const plan = prepareToolRetry(history, ran.call.id);
  assert.equal((await runtime.bind({ owner, taskId: 't', caller: 'agent' }).callWithOptions('transfer', { to: 'acme' }, { retry: plan })).result.outcome.status, 'succeeded');
  assert.equal(bodies, 1);
  await store.close();
});

it('a body that made its write and threw the code of a stop before the body is a body failure: the model reads it may have taken effect (pass r55 #1)', async () => {
  const { store, owner } = await session();
  let bodies = 0;
  const tool = transfer(async () => { bodies += 1; throw new ToolBodyError('tool_stopped_before_body', 'passed on from the nested gateway'); });
  const ran = await createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' }).call('transfer', { to: 'acme' });
  assert.equal(bodies, 1);
  const facing = modelFacingOutcome(ran);
  assert.ok(!facing.ok && facing.started && facing.mayHaveTakenEffect, JSON.stringify(facing));
  assert.match(facing.ok ? '' : facing.text, /may have taken effect/);
  assert.equal(inspectToolRecovery(await store.loadHistory('s'), ran.call.id).status, 'outcome_unknown');
  await store.close();
});

it('a deadline that passes between the start marker and the body is recorded as a timeout before the body, not a cancel (pass r54 #4)', async () => {
  const { store, owner } = await session();
  let bodies = 0;
  const tool = transfer(async () => { bodies += 1; return 'sent'; });
  setFaultHook((point) => {
    if (point !== 'started:after') return;
    const until = Date.now() + 80;
    while (Date.now() < until) { /* the deadline passes while the event loop is held */ }
  });
  try {
    const ran = await createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' }).callWithOptions('transfer', { to: 'acme' }, { timeoutMs: 30 });
    const outcome = ran.result.outcome;
    assert.deepEqual(outcome.status === 'failed' && [outcome.category, outcome.code], ['timeout', 'tool_stopped_before_body']);
    assert.equal(bodies, 0);
    assert.equal(inspectToolRecovery(await store.loadHistory('s'), ran.call.id).status, 'not_executed');
  } finally {
    setFaultHook(null);
    await store.close();
  }
});
