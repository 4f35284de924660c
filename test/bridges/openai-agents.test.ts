/** The OpenAI Agents SDK bridge, driven by the SDK's own Agent and run() over a fake model. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Agent, run, setTracingDisabled, Usage, type AgentOutputItem, type Model, type ModelRequest, type ModelResponse } from '@openai/agents';
import { say } from './fixtures/agents-mock.js';
import { openAiAgentsTools, ToolRuntimeHaltedError } from '../../src/openai-agents.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { assertModelSawNoInternals, journaledCalls, openShop, outcomeOf } from './fixtures/shop.js';
import { tempDir } from '../support/tmp.js';

setTracingDisabled(true);
const dir = tempDir('jingwei-openai-agents-');

/** A model that answers from a script and keeps every request it got: what the model saw. */
class FakeModel implements Model {
  readonly requests: ModelRequest[] = [];
  constructor(private readonly turns: AgentOutputItem[][]) {}
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(structuredClone(request));
    const output = this.turns.shift();
    if (output === undefined) throw new Error('the fake model ran out of answers');
    return { usage: new Usage(), output };
  }
  // biome-ignore lint/correctness/useYield: the interface wants an iterable; this one fails on first use
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error('not streamed');
  }
}

const call = (callId: string, name: string, args: unknown): AgentOutputItem => ({
  type: 'function_call', callId, name, arguments: JSON.stringify(args), status: 'completed',
});

/** The function results the model was sent in its last request, by call id. */
function resultsSent(model: FakeModel): Map<string, unknown> {
  const input = model.requests.at(-1)!.input;
  const out = new Map<string, unknown>();
  for (const item of Array.isArray(input) ? input : []) {
    if (item.type === 'function_call_result') out.set(item.callId, item.output);
  }
  return out;
}

const text = (output: unknown): string => (typeof output === 'string' ? output : String((output as { text?: unknown }).text));

describe('jingwei/openai-agents with Agent and run()', () => {
  it('runs a multi-step task: every call journaled with its contract, outputs and failures readable by the model', async () => {
    const shop = await openShop(dir, 'approve');
    const model = new FakeModel([
      [call('c1', 'lookup_price', { item: 'tea' })],
      [call('c2', 'place_order', { item: 'tea' }), call('c3', 'restock', { item: 'tea' })],
      [say('Ordered tea; restocking failed.')],
    ]);
    const tools = openAiAgentsTools(shop.gateway);
    const agent = new Agent({ name: 'shopper', instructions: 'Buy what is asked.', model, tools });
    const result = await run(agent, 'Buy some tea.', { maxTurns: 5 });
    assert.equal(result.finalOutput, 'Ordered tea; restocking failed.');
    assert.deepEqual(result.interruptions, [], 'no SDK approval interruption: Jingwei asked its own approver');
    assert.equal(shop.log.approvals, 1);
    assert.deepEqual([...shop.log.bodies].sort(), ['lookup_price', 'place_order', 'restock']);

    const history = await shop.store.loadHistory(shop.sessionId);
    const calls = journaledCalls(history);
    const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : 1);
    assert.deepEqual(calls.map((c) => ({ name: c.call.name, contract: c.call.operation!.contract, outcome: outcomeOf(c) })).sort(byName), [
      { name: 'lookup_price', contract: { effect: 'read_only', revision: 'prices-v1' }, outcome: 'succeeded' },
      { name: 'place_order', contract: { effect: 'non_idempotent', revision: 'orders-v1' }, outcome: 'succeeded' },
      { name: 'restock', contract: { effect: 'unknown', revision: 'unspecified' }, outcome: 'body_failure' },
    ]);

    const sent = resultsSent(model);
    assert.equal(text(sent.get('c2')), 'order placed for tea');
    assert.equal(
      text(sent.get('c3')),
      'Tool "restock" failed: body_failure (supplier_closed): the supplier is closed today. The tool started, so it may have taken effect before failing; check before doing it again.',
    );
    assert.equal(model.requests[0]!.tools.length, 3);
    assertModelSawNoInternals(model.requests, history);
    await shop.store.close();
  });

  it("Jingwei's approver decides; the SDK's needsApproval is never set, so nothing interrupts or bypasses it", async () => {
    const shop = await openShop(dir, 'deny');
    const tools = openAiAgentsTools(shop.gateway, { tools: ['place_order'] });
    assert.equal(tools.length, 1);
    assert.equal(await tools[0]!.needsApproval({} as never, { item: 'tea' } as never, 'c1'), false);
    const model = new FakeModel([[call('c1', 'place_order', { item: 'tea' })], [say('The order was refused.')]]);
    const result = await run(new Agent({ name: 'shopper', model, tools }), 'Buy tea.', { maxTurns: 3 });
    assert.equal(result.finalOutput, 'The order was refused.');
    assert.deepEqual(result.interruptions, []);
    assert.equal(text(resultsSent(model).get('c1')), 'Tool "place_order" failed: approval_denied (over_limit): orders need a manager today. The tool did not run.');
    assert.deepEqual(shop.log.bodies, []);
    assert.equal(shop.log.approvals, 1);
    const history = await shop.store.loadHistory(shop.sessionId);
    assert.deepEqual(journaledCalls(history).map(outcomeOf), ['approval_denied']);
    assertModelSawNoInternals(model.requests, history);
    await shop.store.close();
  });

  it('a call the runtime refuses (stopped task) fails the run instead of reaching the model', async () => {
    const shop = await openShop(dir);
    await shop.owner.stopTask('shop-task', 'operator stopped it');
    const model = new FakeModel([[call('c1', 'lookup_price', { item: 'tea' })], [say('never asked')]]);
    const agent = new Agent({ name: 'shopper', model, tools: openAiAgentsTools(shop.gateway) });
    const error = await run(agent, 'Price of tea?', { maxTurns: 3 }).then(() => null, (e: unknown) => e);
    assert.ok(error instanceof Error, 'the run failed');
    const chain: unknown[] = [];
    for (let e: unknown = error; e instanceof Error && chain.length < 5; e = (e as { cause?: unknown }).cause ?? (e as { error?: unknown }).error) chain.push(e);
    const halted = chain.find((e) => e instanceof ToolRuntimeHaltedError) as ToolRuntimeHaltedError | undefined;
    assert.ok(halted, `ToolRuntimeHaltedError in ${chain.map((e) => (e as Error).name).join(' <- ')}`);
    assert.equal(halted.code, 'task_not_running');
    assert.equal(model.requests.length, 1, 'the model was not asked again');
    assert.deepEqual(journaledCalls(await shop.store.loadHistory(shop.sessionId)), []);
    await shop.store.close();
  });

  it('a host onExecution hook that throws halts the run with the recorded outcome, never "did not run"', async () => {
    const shop = await openShop(dir);
    const model = new FakeModel([[call('c1', 'lookup_price', { item: 'tea' })], [say('never asked')]]);
    const tools = openAiAgentsTools(shop.gateway, { onExecution: () => { throw new Error('metrics backend unreachable'); } });
    const agent = new Agent({ name: 'shopper', model, tools });
    const error = await run(agent, 'Price of tea?', { maxTurns: 3 }).then(() => null, (e: unknown) => e);
    const chain: unknown[] = [];
    for (let e: unknown = error; e instanceof Error && chain.length < 5; e = (e as { cause?: unknown }).cause ?? (e as { error?: unknown }).error) chain.push(e);
    const halted = chain.find((e) => e instanceof ToolRuntimeHaltedError) as ToolRuntimeHaltedError | undefined;
    assert.ok(halted, `ToolRuntimeHaltedError in ${chain.map((e) => (e as Error).name).join(' <- ')}`);
    assert.match(halted.message, /^The call of tool "lookup_price" was recorded \(succeeded\), but the host failed to handle its outcome/);
    assert.equal(model.requests.length, 1, 'the model was not told the tool did not run');
    assert.deepEqual(journaledCalls(await shop.store.loadHistory(shop.sessionId)).map(outcomeOf), ['succeeded']);
    assert.deepEqual(shop.log.bodies, ['lookup_price']);
    await shop.store.close();
  });

  it("maps names the SDK cannot take to its function tool names, and calls the tool by Jingwei's name", async () => {
    const store = createMemoryStore();
    const owner = await store.acquire('names', { owner: 'host' });
    await owner.startTask('t');
    const calledAs: string[] = [];
    const runtime = createToolRuntime({
      tools: [{
        name: 'fs.read',
        metadata: new ToolMetadata('Reads a file', { type: 'object' }).withEffect('read_only', 'fs-v1'),
        async execute(request) { calledAs.push('fs.read'); return JSON.stringify(request.arguments); },
      }],
      grants: { agent: '*' },
    });
    const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent' });
    const tools = openAiAgentsTools(gateway);
    assert.deepEqual(tools.map((t) => t.name), ['fs_read']);
    const clashing = createToolRuntime({
      tools: ['a.b', 'a_b'].map((name) => ({ name, metadata: new ToolMetadata(name, { type: 'object' }), execute: async () => 'x' })),
      grants: { agent: '*' },
    }).bind({ owner, taskId: 't', caller: 'agent' });
    assert.throws(() => openAiAgentsTools(clashing), { code: 'invalid_input' });
    const model = new FakeModel([[call('c1', 'fs_read', { path: 'a' })], [say('done')]]);
    const result = await run(new Agent({ name: 'reader', model, tools }), 'Read a.', { maxTurns: 3 });
    assert.equal(result.finalOutput, 'done');
    assert.deepEqual(calledAs, ['fs.read']);
    const calls = journaledCalls(await store.loadHistory('names'));
    assert.deepEqual(calls.map((c) => [c.call.name, outcomeOf(c)]), [['fs.read', 'succeeded']]);
    await store.close();
  });
});
