/**
 * A call that fails the OpenAI Agents SDK's run (an approval that waits on a person, a budget refusal, or a host's own
 * tool that throws) must not abort the write running beside it in the same step. The SDK aborts a step's other calls
 * through their signals when one fails the run; before, a `ship` whose body had started was cut off mid-shipment and
 * left in doubt (recorded `cancelled`, may have taken effect) only because its sibling `refund` waited for an
 * approver. Both bridges: openAiAgentsRun and openAiAgentsTools. The failing call fails at once (a sub-run inside a
 * tool's body is not held up by its caller), and the host's own abort still reaches a running body.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { Agent, run, setTracingDisabled, tool, ToolCallError, type AgentOutputItem } from '@openai/agents';
import { openAiAgentsRun, openAiAgentsTools } from '../../src/openai-agents.js';
import { ToolRuntimeHaltedError } from '../../src/errors.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { say, ScriptedAgentsModel } from './fixtures/agents-mock.js';

setTracingDisabled(true);

const schema = { type: 'object', properties: { v: { type: 'string' } }, required: ['v'] };
const fn = (callId: string, name: string, v: string): AgentOutputItem => ({ type: 'function_call', callId, name, arguments: JSON.stringify({ v }), status: 'completed' });

/** A shipment whose body takes `ms` unless its signal stops it first; it notes its start and its end in `world`. */
function shipTaking(ms: number, world: string[]) {
  return {
    name: 'ship',
    metadata: new ToolMetadata('ship', schema).withEffect('non_idempotent', 'v1'),
    execute: async (_request: unknown, signal: AbortSignal) => {
      world.push('ship started');
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, ms);
        signal.addEventListener('abort', () => { clearTimeout(timer); reject(new Error('aborted mid-shipment')); }, { once: true });
      });
      world.push('ship done');
      return 'shipped';
    },
  };
}

async function host(toolCalls?: number) {
  const world: string[] = [];
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t', toolCalls === undefined ? {} : { limits: { toolCalls } });
  const gateway = createToolRuntime({
    tools: [
      { name: 'refund', metadata: new ToolMetadata('refund', schema).withEffect('non_idempotent', 'v1').withApproval('boss'), execute: async () => { world.push('refund'); return 'refunded'; } },
      shipTaking(300, world),
    ],
    grants: { agent: '*' },
    approvers: { boss: async () => ({ decision: 'pending' as const }) },
  }).bind({ owner, taskId: 't', caller: 'agent' });
  return { world, store, owner, gateway };
}

/** Each tool's recorded result statuses, in order. */
async function outcomes(store: ReturnType<typeof createMemoryStore>): Promise<string[]> {
  const history = await store.loadHistory('s');
  const names = new Map(history.flatMap((e) => (e.kind.type === 'tool_call' ? [[e.kind.call.id, e.kind.call.name] as const] : [])));
  return history.flatMap((e) => (e.kind.type === 'tool_result' ? [`${names.get(e.kind.result.callId)} ${e.kind.result.outcome.status}`] : []));
}

/** The run's rejection as the docs give it: the SDK's ToolCallError, whose `error` is the bridge's halt. */
const halted = (e: unknown): boolean => e instanceof ToolCallError && e.error instanceof ToolRuntimeHaltedError;

it('openAiAgentsRun: a sibling waiting for its approver halts the run only once the running write has finished', async () => {
  const { world, store, owner, gateway } = await host();
  const r = await openAiAgentsRun({ owner, gateway, store, runId: 'run-1', prompt: 'ship and refund' });
  const model = new ScriptedAgentsModel([[fn('c1', 'ship', 'box'), fn('c2', 'refund', '10')], [say('done')]]);
  await assert.rejects(run(new Agent({ name: 'a', model: r.model(model), tools: r.tools }), r.input), halted);
  assert.equal(r.status, 'awaiting_approval');
  assert.deepEqual(world, ['ship started', 'ship done'], 'the shipment finished; the refund waits');
  assert.deepEqual((await outcomes(store)).sort(), ['refund failed', 'ship succeeded'], 'the shipment is recorded made, nothing in doubt; the refund waits');
  await store.close();
});

it('openAiAgentsTools: a sibling refused for the task\'s budget halts the run only once the running write has finished', async () => {
  // The plain tools give the model an approval that waits as a recorded failure; a budget refusal halts the run.
  const { world, store, gateway } = await host(1);
  const model = new ScriptedAgentsModel([[fn('c1', 'ship', 'box'), fn('c2', 'refund', '10')], [say('done')]]);
  await assert.rejects(run(new Agent({ name: 'a', model, tools: openAiAgentsTools(gateway) }), 'ship and refund'), halted);
  assert.deepEqual(world, ['ship started', 'ship done']);
  assert.deepEqual(await outcomes(store), ['ship succeeded'], 'the refund was never admitted');
  await store.close();
});

it('openAiAgentsTools: a host\'s own tool that throws beside a running write lets the write finish', async () => {
  const { world, store, gateway } = await host();
  const broken = tool({ name: 'lookup', description: 'the host\'s own', parameters: { type: 'object', properties: {}, required: [], additionalProperties: false }, errorFunction: null, execute: async () => { throw new Error('lookup is down'); } });
  const model = new ScriptedAgentsModel([[fn('c1', 'ship', 'box'), { type: 'function_call', callId: 'c2', name: 'lookup', arguments: '{}', status: 'completed' }], [say('done')]]);
  await assert.rejects(run(new Agent({ name: 'a', model, tools: [...openAiAgentsTools(gateway), broken] }), 'ship'), /lookup is down/);
  assert.deepEqual(world, ['ship started', 'ship done']);
  assert.deepEqual(await outcomes(store), ['ship succeeded']);
  await store.close();
});

it('openAiAgentsTools: a halt inside a sub-run of a tool\'s body fails the sub-run at once, and the tool finishes', async () => {
  // The same tool set given to a sub-agent inside one of its tools' bodies: a halting call that waited for the calls
  // under way of its tool set waited for that body, which waited for the sub-run, until the body's deadline, and the
  // body that had finished its work was recorded timed out, in doubt.
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t', { limits: { toolCalls: 1 } });
  let tools: ReturnType<typeof openAiAgentsTools> = [];
  let subRun = '';
  const gateway = createToolRuntime({
    tools: [
      { name: 'refund', metadata: new ToolMetadata('refund', schema).withEffect('non_idempotent', 'v1'), execute: async () => 'refunded' },
      {
        name: 'delegate',
        metadata: new ToolMetadata('runs a sub-agent', schema).withEffect('non_idempotent', 'v1'),
        execute: async () => {
          const sub = new ScriptedAgentsModel([[fn('s1', 'refund', '10')], [say('sub done')]]);
          await run(new Agent({ name: 'sub', model: sub, tools }), 'refund').catch((e: unknown) => { subRun = halted(e) ? 'halted' : String(e); });
          return 'delegated';
        },
      },
    ],
    grants: { agent: '*' },
  }).bind({ owner, taskId: 't', caller: 'agent' });
  tools = openAiAgentsTools(gateway);
  const model = new ScriptedAgentsModel([[fn('c1', 'delegate', 'x')], [say('done')]]);
  const result = await run(new Agent({ name: 'a', model, tools }), 'delegate');
  assert.equal(subRun, 'halted', 'the refund, over the task\'s budget of one call, halted the sub-run');
  assert.equal(result.finalOutput, 'done');
  assert.deepEqual(await outcomes(store), ['delegate succeeded'], 'the delegate finished its work and is recorded so, not timed out');
  await store.close();
});

it('openAiAgentsTools: a write not yet at its body when a sibling fails is cancelled with nothing run (r80 G2)', async () => {
  // Shielding the whole call let a write waiting for its approver start its body after the run had already failed:
  // the host never saw its result, and a retried run made it again. The approver answers just after the sibling fails.
  const world: string[] = [];
  let approve!: () => void;
  const asked = new Promise<void>((resolve) => { approve = resolve; });
  const answered = asked.then(() => new Promise<void>((resolve) => setTimeout(resolve, 20)));
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  const gateway = createToolRuntime({
    tools: [{ name: 'ship', metadata: new ToolMetadata('ship', schema).withEffect('non_idempotent', 'v1').withApproval('slow'), execute: async () => { world.push('ship started'); return 'shipped'; } }],
    grants: { agent: '*' },
    approvers: { slow: async () => { await answered; return { decision: 'approved' as const }; } },
  }).bind({ owner, taskId: 't', caller: 'agent' });
  const broken = tool({
    name: 'lookup', description: 'the host\'s own', parameters: { type: 'object', properties: {}, required: [], additionalProperties: false }, errorFunction: null,
    execute: async () => { approve(); throw new Error('lookup is down'); },
  });
  const model = new ScriptedAgentsModel([[fn('c1', 'ship', 'box'), { type: 'function_call', callId: 'c2', name: 'lookup', arguments: '{}', status: 'completed' }], [say('done')]]);
  await assert.rejects(run(new Agent({ name: 'a', model, tools: [...openAiAgentsTools(gateway), broken] }), 'ship'), /lookup is down/);
  await answered;
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(world, [], 'the shipment never started');
  const failures = (await store.loadHistory('s')).flatMap((e) => (e.kind.type === 'tool_result' && e.kind.result.outcome.status === 'failed' ? [e.kind.result.outcome.category] : []));
  assert.deepEqual(failures, ['cancelled'], 'recorded cancelled before its body');
  await store.close();
});

for (const path of ['runtime.bind', 'openAiAgentsRun'] as const) {
  it(`once a sibling failed, the host's abort reaches a running body through ${path}({ signal }) (r81 R2)`, async () => {
    // The SDK's one signal per call has fired for the sibling by then, so run(…, { signal }) no longer reaches the body
    // through the SDK; the docs say to give the same signal to openAiAgentsRun or runtime.bind. Through the run, its
    // signal and the SDK's were joined into one, which had fired for the sibling too.
    const world: string[] = [];
    const host = new AbortController();
    const store = createMemoryStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('t');
    const gateway = createToolRuntime({
      tools: [shipTaking(30_000, world)],
      grants: { agent: '*' },
    }).bind({ owner, taskId: 't', caller: 'agent', ...(path === 'runtime.bind' ? { signal: host.signal } : {}) });
    const broken = tool({
      name: 'lookup', description: 'the host\'s own', parameters: { type: 'object', properties: {}, required: [], additionalProperties: false }, errorFunction: null,
      execute: async () => { await new Promise((resolve) => setTimeout(resolve, 20)); setTimeout(() => host.abort(new Error('the user left')), 20); throw new Error('lookup is down'); },
    });
    const model = new ScriptedAgentsModel([[fn('c1', 'ship', 'box'), { type: 'function_call', callId: 'c2', name: 'lookup', arguments: '{}', status: 'completed' }], [say('done')]]);
    if (path === 'runtime.bind') {
      await assert.rejects(run(new Agent({ name: 'a', model, tools: [...openAiAgentsTools(gateway), broken] }), 'ship', { signal: host.signal }));
    } else {
      const r = await openAiAgentsRun({ owner, gateway, store, runId: 'run-1', prompt: 'ship', signal: host.signal });
      await assert.rejects(run(new Agent({ name: 'a', model: r.model(model), tools: [...r.tools, broken] }), r.input, { signal: host.signal }));
    }
    assert.deepEqual(world, ['ship started']);
    const failures = (await store.loadHistory('s')).flatMap((e) => (e.kind.type === 'tool_result' && e.kind.result.outcome.status === 'failed' ? [e.kind.result.outcome.category] : []));
    assert.deepEqual(failures, ['cancelled'], 'the host\'s abort stopped the running body');
    await store.close();
  });
}
