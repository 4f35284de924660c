/**
 * A call's options and its action are read once: what is checked is what the attempt uses and the journal records,
 * whatever getters, Proxies or later mutations the host's objects carry. A signal that is not a real AbortSignal is
 * refused before anything is reserved.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool, ToolCallOptions, ToolGuard } from '../../src/tool/types.js';
import type { ToolRetryPlan } from '../../src/tool/retry-plan.js';
import type { ActionContext } from '../../src/event/types.js';

async function rig(tools: Tool[], options: { maxInFlight?: number; guards?: ToolGuard[] } = {}) {
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  const runtime = createToolRuntime({ tools, grants: { agent: '*' }, ...options });
  return { store, owner, runtime, gateway: runtime.bind({ owner, taskId: 't', caller: 'agent' }) };
}

const echo: Tool = { name: 'echo', metadata: new ToolMetadata('echo', { type: 'object' }).withEffect('read_only', 'v1'), execute: async () => 'ok' };

it('a signal that is not a real AbortSignal is refused as invalid_options, and leaks no slot and no timer', async () => {
  const { store, owner, runtime, gateway } = await rig([echo], { maxInFlight: 1 });
  const fake = Object.create(AbortSignal.prototype) as AbortSignal;
  for (let i = 0; i < 3; i++) {
    await assert.rejects(gateway.callWithOptions('echo', {}, { signal: fake }), { name: 'ToolPreflightError', code: 'invalid_options', message: /signal must be an AbortSignal/ });
  }
  assert.throws(() => runtime.bind({ owner, taskId: 't', caller: 'agent', signal: fake }), { name: 'InvalidInputError' });
  const ran = await gateway.call('echo', {});
  assert.equal(ran.result.outcome.status, 'succeeded', 'the one in-flight slot is free');
  assert.equal((await store.loadHistory('s')).filter((e) => e.kind.type === 'tool_call').length, 1, 'only the real call is journaled');
  await store.close();
});

it('options that cannot be read are refused as invalid_options; each field is read exactly once', async () => {
  const { store, gateway } = await rig([echo]);
  const throwing = new Proxy({}, { get: () => { throw new Error('no options today'); } }) as ToolCallOptions;
  await assert.rejects(gateway.callWithOptions('echo', {}, throwing), { name: 'ToolPreflightError', code: 'invalid_options', message: /could not be read/ });
  const reads = new Map<string | symbol, number>();
  const counting = new Proxy({ timeoutMs: 1000 }, { get: (target, key) => { reads.set(key, (reads.get(key) ?? 0) + 1); return Reflect.get(target, key); } });
  const ran = await gateway.callWithOptions('echo', {}, counting);
  assert.equal(ran.result.outcome.status, 'succeeded');
  assert.ok([...reads.values()].every((n) => n === 1), JSON.stringify(Object.fromEntries([...reads].map(([k, n]) => [String(k), n]))));
  await store.close();
});

it('a retry plan behind a getter is the one checked for a running body: the retry is refused while it runs', async () => {
  let finish: () => void = () => {};
  let bodies = 0;
  const lookup: Tool = {
    name: 'lookup',
    metadata: new ToolMetadata('lookup', { type: 'object' }).withEffect('read_only', 'v1').withTimeoutCeiling(100),
    execute: () => new Promise<string>((resolve) => {
      bodies += 1;
      if (bodies > 1) resolve('found');
      else finish = () => resolve('late');
    }),
  };
  const { store, gateway } = await rig([lookup]);
  const first = await gateway.call('lookup', {});
  assert.equal(first.result.outcome.status === 'failed' && first.result.outcome.code, 'tool_timeout');
  const plan = prepareToolRetry(await store.loadHistory('s'), first.call.id);
  let reads = 0;
  const shifty = { get retry(): ToolRetryPlan | undefined { reads += 1; return reads === 1 ? undefined : plan; } } as ToolCallOptions;
  const attempt = await gateway.callWithOptions('lookup', {}, shifty).then((e) => e.result.outcome.status, (e: { code?: string }) => e.code);
  assert.equal(attempt, 'succeeded', 'read once as no retry: a new operation, not the plan');
  assert.equal(plan.consumed, false, 'the plan was never seen');
  await assert.rejects(gateway.callWithOptions('lookup', {}, { retry: plan }), { name: 'ToolRetryError', code: 'body_running' });
  finish();
  assert.equal(bodies, 2);
  await store.close();
});

it('the action is copied when the call starts: a change the caller makes while a guard runs is not journaled', async () => {
  let mutate: () => void = () => {};
  const guard: ToolGuard = async () => { mutate(); return null; };
  const { store, gateway } = await rig([echo], { guards: [guard] });
  const action = { decision: { taskId: 't', stepId: 'step-A' }, actionIndex: 0, providerCallId: 'prov-1' };
  mutate = () => {
    action.decision.taskId = 'other-task';
    action.actionIndex = 7;
    action.providerCallId = 'prov-2';
  };
  const ran = await gateway.callWithOptions('echo', {}, { action: action as ActionContext });
  assert.equal(ran.result.outcome.status, 'succeeded');
  const journaled = (await store.loadHistory('s')).find((e) => e.kind.type === 'tool_call');
  assert.deepEqual(journaled?.kind.type === 'tool_call' && journaled.kind.call.action, { decision: { taskId: 't', stepId: 'step-A' }, actionIndex: 0, providerCallId: 'prov-1' });
  assert.deepEqual(ran.call.action, { decision: { taskId: 't', stepId: 'step-A' }, actionIndex: 0, providerCallId: 'prov-1' });
  await store.close();
});

it('a malformed action is refused before anything is written, naming its field', async () => {
  const { store, gateway } = await rig([echo]);
  const cases: [unknown, RegExp][] = [
    [{ decision: { taskId: 'other', stepId: 's' }, actionIndex: 0 }, /action\.decision\.taskId/],
    [{ decision: { taskId: 't', stepId: 5 }, actionIndex: 0 }, /action\.decision\.stepId/],
    [{ decision: { taskId: 't', stepId: '\ud800' }, actionIndex: 0 }, /action\.decision\.stepId.*lone surrogate/],
    [{ decision: { taskId: 't', stepId: 's' }, actionIndex: Number.NaN }, /action\.actionIndex/],
    [{ decision: { taskId: 't', stepId: 's' }, actionIndex: -1 }, /action\.actionIndex/],
    [{ decision: { taskId: 't', stepId: 's' }, actionIndex: 0, providerCallId: 9 }, /action\.providerCallId/],
    [{ actionIndex: 0 }, /action\.decision/],
    ['step', /action/],
  ];
  for (const [action, field] of cases) {
    await assert.rejects(gateway.callWithOptions('echo', {}, { action: action as ActionContext }), { name: 'InvalidInputError', message: field });
  }
  assert.equal((await store.loadHistory('s')).length, 1, 'only the task ledger');
  await store.close();
});
