/**
 * The OpenAI Agents bridge resumes (SQLite and PostgreSQL, in process, the SDK's own Agent and run() over a
 * scripted model): a run placing an order and then sending its confirmation is stopped after the order (at the
 * model turn between the calls, or inside the e-mail's body); a fresh store handle, owner and runtime open the same
 * run id and run the agent on the input rebuilt from the journal: the order is replayed (never run), the open e-mail goes through the
 * recovery policy, the run finishes, and exactly one order and one e-mail reach the outside system.
 */
import assert from 'node:assert/strict';
import { afterEach, it } from 'node:test';
import { Agent, run, setTracingDisabled, Usage, type AgentOutputItem, type Model, type ModelRequest } from '@openai/agents';
import { openAiAgentsRun, openAiAgentsTools } from '../../src/openai-agents.js';
import { setFaultHook } from '../../src/fault.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { Crash, hostOn, outsideWorld, type World } from './fixtures/resume-world.js';
import { say, ScriptedAgentsModel } from './fixtures/agents-mock.js';
import { forEachStore } from '../support/stores.js';

setTracingDisabled(true);

const fn = (callId: string, name: string): AgentOutputItem => ({ type: 'function_call', callId, name, arguments: '{"item":"tea"}', status: 'completed' });
const orderTurn = [say('Ordering.'), fn('c1', 'place_order')];
const emailTurn = (id = 'c2') => [fn(id, 'send_email')];
const doneTurn = [say('Ordered and confirmed.')];
const dies = (): never => { throw new Crash('the host died while the model was thinking'); };

/** The function results the model was sent in a request, in order. */
function resultsIn(request: ModelRequest): string[] {
  return (Array.isArray(request.input) ? request.input : []).flatMap((item) =>
    item.type === 'function_call_result' ? [typeof item.output === 'string' ? item.output : String((item.output as { text?: unknown }).text)] : []);
}

forEachStore('openAiAgentsRun: kill and resume', (target) => {
  afterEach(() => setFaultHook(null));

  it('stopped at the model turn between the order and the e-mail: the order is replayed, the e-mail sent once, the run finishes', async () => {
    const journal = target.fresh();
    const open = () => journal.open();
    const world = outsideWorld();
    const first = await hostOn(open, world);
    const run1 = await openAiAgentsRun({ ...first, runId: 'order-1', prompt: 'Buy tea.' });
    const agent1 = new Agent({ name: 'shop', model: run1.model(new ScriptedAgentsModel([orderTurn, dies])), tools: run1.tools });
    await assert.rejects(run(agent1, run1.input, { maxTurns: 5 }), (e: unknown) => chain(e).some((x) => x instanceof Crash));
    assert.deepEqual(world.bodies, ['place_order']);
    await first.store.close();

    const second = await hostOn(open, world);
    const run2 = await openAiAgentsRun({ ...second, runId: 'order-1' });
    assert.equal(run2.status, 'running');
    assert.equal(run2.steps, 1);
    assert.equal(run2.toolCalls[0]!.execution!.replayed, true);
    const model = new ScriptedAgentsModel([emailTurn('fresh-id'), doneTurn]);
    const result = await run(new Agent({ name: 'shop', model: run2.model(model), tools: run2.tools }), run2.input, { maxTurns: 5 - run2.steps });
    assert.equal(result.finalOutput, 'Ordered and confirmed.');
    assert.equal(run2.status, 'finished');
    assert.deepEqual(resultsIn(model.requests[0]!), ['order 1 placed']);
    assert.deepEqual(resultsIn(model.requests[1]!), ['order 1 placed', 'sent']);
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    assert.deepEqual([...world.orders.keys()], ['order-1/1/0']);
    assert.deepEqual([...world.emails.keys()], ['order-1/2/0']);

    const again = await openAiAgentsRun({ ...second, runId: 'order-1', prompt: 'Buy tea.' });
    assert.equal(again.status, 'finished');
    assert.equal(again.text, 'Ordered and confirmed.');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    await second.store.close();
  });

  it('the gateway\'s own bridge tools in a run\'s loop, the host killed after the order: opened again, the order is read back, not made again (r111 F1)', async () => {
    const journal = target.fresh();
    const world = outsideWorld();
    const first = await hostOn(() => journal.open(), world);
    const run1 = await openAiAgentsRun({ ...first, runId: 'mixed-1', prompt: 'Buy tea.' });
    await assert.rejects(run(new Agent({ name: 'shop', model: run1.model(new ScriptedAgentsModel([orderTurn, dies])), tools: openAiAgentsTools(first.gateway) }), run1.input, { maxTurns: 5 }),
      (e: unknown) => chain(e).some((x) => x instanceof Crash));
    assert.deepEqual(world.bodies, ['place_order'], 'placed by the tool outside the run');
    await first.store.close();

    const second = await hostOn(() => journal.open(), world);
    const run2 = await openAiAgentsRun({ ...second, runId: 'mixed-1' });
    assert.equal(run2.toolCalls[0]!.execution?.replayed, true, 'read back from the attempt the tool outside the run made');
    const model = new ScriptedAgentsModel([doneTurn]);
    await run(new Agent({ name: 'shop', model: run2.model(model), tools: run2.tools }), run2.input, { maxTurns: 5 });
    assert.equal(run2.status, 'finished');
    assert.deepEqual(resultsIn(model.requests[0]!), ['order 1 placed'], 'the model reads the order placed, not a call that did not run');
    assert.deepEqual(world.bodies, ['place_order'], 'placed once');
    await second.store.close();
  });

  it('a call whose arguments the SDK could not parse, answered by the SDK itself: the next turn goes on (r112 #2)', async () => {
    const world = outsideWorld();
    const host = await hostOn(() => target.fresh().open(), world);
    const run1 = await openAiAgentsRun({ ...host, runId: 'unparsed-1', prompt: 'Buy tea.' });
    const unparsed: AgentOutputItem = { type: 'function_call', callId: 'c1', name: 'place_order', arguments: '', status: 'completed' };
    const model = new ScriptedAgentsModel([[unparsed], doneTurn]);
    await run(new Agent({ name: 'shop', model: run1.model(model), tools: run1.tools }), run1.input, { maxTurns: 5 });
    assert.equal(run1.status, 'finished');
    assert.deepEqual(world.bodies, []);
    await host.store.close();
  });

  it('a loop driven a turn at a time reads the run\'s input as it is now; input read before a turn is refused, not asked again (r99 #1)', async () => {
    const journal = target.fresh();
    const world = outsideWorld();
    const h = await hostOn(() => journal.open(), world);
    const run1 = await openAiAgentsRun({ ...h, runId: 'turns', prompt: 'Buy tea.' });
    const stale = run1.input;
    const model = new ScriptedAgentsModel([orderTurn, doneTurn]);
    const agent = new Agent({ name: 'shop', model: run1.model(model), tools: run1.tools });
    await run(agent, run1.input, { maxTurns: 1 }).catch(() => undefined);
    assert.equal(world.orders.size, 1);
    await assert.rejects(run(agent, stale, { maxTurns: 1 }), (e: unknown) => chain(e).some((x) => x instanceof Error && x.message.includes('does not hold step 1 of run turns')));
    assert.equal(model.requests.length, 1, 'the model was not asked with the stale input');
    const result = await run(agent, run1.input, { maxTurns: 1 });
    assert.equal(result.finalOutput, 'Ordered and confirmed.');
    assert.deepEqual(resultsIn(model.requests[1]!), ['order 1 placed'], 'the next turn read the order\'s result');
    assert.deepEqual([run1.status, world.orders.size], ['finished', 1], 'one order');
    await h.store.close();
  });

  it('a provider that keeps the conversation: a request on a response older than the run\'s last step is refused (r103 C)', async () => {
    const journal = target.fresh();
    const world = outsideWorld();
    const h = await hostOn(() => journal.open(), world);
    const r = await openAiAgentsRun({ ...h, runId: 'prev', prompt: 'Buy tea.' });
    // A provider keeping each response's conversation by id, as the Responses API does.
    const kept = new Map<string, unknown[]>();
    let n = 0;
    const provider: Model = {
      async getResponse(request: ModelRequest) {
        const conversation = [...(kept.get(request.previousResponseId ?? '') ?? []), ...(typeof request.input === 'string' ? [{ role: 'user', content: request.input }] : request.input)];
        const output: AgentOutputItem[] = JSON.stringify(conversation).includes('order 1 placed') ? doneTurn : [fn(`call_${n}`, 'place_order')];
        const responseId = `resp_${++n}`;
        kept.set(responseId, [...conversation, ...output]);
        return { usage: new Usage(), output, responseId };
      },
      async *getStreamedResponse() {},
    };
    const greeting = await provider.getResponse({ input: 'Hi' } as ModelRequest);
    const agent = new Agent({ name: 'shop', model: r.model(provider), tools: r.tools });
    await run(agent, 'Buy tea.', { previousResponseId: greeting.responseId!, maxTurns: 1 }).catch(() => undefined);
    assert.equal(world.orders.size, 1);
    await assert.rejects(run(agent, 'Buy tea.', { previousResponseId: greeting.responseId!, maxTurns: 3 }), (e: unknown) => chain(e).some((x) => x instanceof Error && x.message.includes('is not the response of the last step of run prev')));
    assert.equal(world.orders.size, 1, 'the request retried on the old response placed no second order');
    await h.store.close();
  });

  it('killed inside the e-mail body: suspend stops the run as needs_review; retry_safe retries the e-mail once; streamed turns are journaled too', async () => {
    const journal = target.fresh();
    const open = () => journal.open();
    const world = outsideWorld();
    const first = await hostOn(open, world);
    const run1 = await openAiAgentsRun({ ...first, runId: 'order-2', prompt: 'Buy tea.' });
    setFaultHook((point) => { if (point === 'started:after' && world.bodies.length === 1) throw new Crash('killed after the e-mail started'); });
    const agent1 = new Agent({ name: 'shop', model: run1.model(new ScriptedAgentsModel([orderTurn, emailTurn(), dies])), tools: run1.tools });
    const streamed = await run(agent1, run1.input, { maxTurns: 5, stream: true });
    await streamed.completed.catch(() => undefined);
    assert.ok(chain(streamed.error).some((x) => x instanceof Crash), String(streamed.error));
    setFaultHook(null);
    await first.store.close();

    const second = await hostOn(open, world);
    const suspended = await openAiAgentsRun({ ...second, runId: 'order-2' });
    assert.equal(suspended.status, 'needs_review');
    assert.equal(suspended.pendingCallIds.length, 1);
    assert.deepEqual(world.bodies, ['place_order']);

    const resumed = await openAiAgentsRun({ ...second, runId: 'order-2', recovery: 'retry_safe' });
    assert.equal(resumed.status, 'running');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    assert.equal(resumed.toolCalls[1]!.execution!.call.operation!.retry!.review!.actor, 'policy:retry_safe');
    const model = new ScriptedAgentsModel([doneTurn]);
    const result = await run(new Agent({ name: 'shop', model: resumed.model(model), tools: resumed.tools }), resumed.input, { maxTurns: 3 });
    assert.equal(result.finalOutput, 'Ordered and confirmed.');
    assert.deepEqual(resultsIn(model.requests[0]!), ['order 1 placed', 'sent']);
    assert.equal(world.orders.size, 1);
    assert.equal(world.emails.size, 1);
    await second.store.close();
  });

  it('a response the SDK rejected (it also names an unknown tool) runs none of its calls, now or when the run is opened again', async () => {
    const journal = target.fresh();
    const open = () => journal.open();
    const world = outsideWorld();
    const first = await hostOn(open, world);
    const run1 = await openAiAgentsRun({ ...first, runId: 'reject-1', prompt: 'Buy tea.' });
    const agent1 = new Agent({ name: 'shop', model: run1.model(new ScriptedAgentsModel([[fn('c1', 'place_order'), fn('c2', 'nope')]])), tools: run1.tools });
    await assert.rejects(run(agent1, run1.input, { maxTurns: 5 }), (e: unknown) => chain(e).some((x) => (x as Error).name === 'ModelBehaviorError'));
    assert.deepEqual(world.bodies, [], 'the SDK ran none of the rejected response\'s calls');
    await first.store.close();

    const second = await hostOn(open, world);
    const run2 = await openAiAgentsRun({ ...second, runId: 'reject-1', recovery: 'retry_safe' });
    assert.deepEqual(world.bodies, [], 'opening the run again does not place the order the SDK never ran');
    assert.equal(run2.status, 'running');
    const read = run2.toolCalls[0]!.outcome;
    assert.ok(!read.ok && read.code === 'not_run_by_framework', JSON.stringify(read));
    await second.store.close();
  });

  it('a response whose only call is a handoff does not end the run: killed after the handoff, the run opens as running', async () => {
    const journal = target.fresh();
    const open = () => journal.open();
    const world = outsideWorld();
    const first = await hostOn(open, world);
    const run1 = await openAiAgentsRun({ ...first, runId: 'handoff-1', prompt: 'Buy tea.' });
    const model = run1.model(new ScriptedAgentsModel([[fn('h1', 'transfer_to_billing')], dies]));
    const billing = new Agent({ name: 'billing', model, tools: run1.tools });
    const shop = new Agent({ name: 'shop', model, tools: run1.tools, handoffs: [billing] });
    await assert.rejects(run(shop, run1.input, { maxTurns: 5 }), (e: unknown) => chain(e).some((x) => x instanceof Crash));
    assert.equal(run1.status, 'running', 'the handoff is not an answer');
    const kinds = (await first.store.loadHistory('shop')).flatMap((e) => (e.kind.type === 'custom' ? [e.kind.kind] : []));
    assert.ok(!kinds.includes('run_finished'), `no run_finished: ${kinds.join(', ')}`);
    await first.store.close();

    const second = await hostOn(open, world);
    const run2 = await openAiAgentsRun({ ...second, runId: 'handoff-1' });
    assert.equal(run2.status, 'running', 'the user\'s request is not dropped: the run goes on');
    const result = await run(new Agent({ name: 'shop', model: run2.model(new ScriptedAgentsModel([orderTurn, doneTurn])), tools: run2.tools }), run2.input, { maxTurns: 5 });
    assert.equal(result.finalOutput, 'Ordered and confirmed.');
    assert.equal(run2.status, 'finished');
    assert.deepEqual(world.bodies, ['place_order']);
    await second.store.close();
  });

  for (const [what, output] of [['a reasoning item alone', [{ type: 'reasoning', id: 'rs_1', content: [] }]], ['an empty output', []]] as const) {
    it(`a response with no message (${what}) is not the run's answer: the SDK asks again and the run goes on (pass r63 #4)`, async () => {
      const journal = target.fresh();
      const world = outsideWorld();
      const host = await hostOn(() => journal.open(), world);
      const opened = await openAiAgentsRun({ ...host, runId: 'quiet-1', prompt: 'Buy tea.' });
      const model = new ScriptedAgentsModel([output as unknown as AgentOutputItem[], orderTurn, doneTurn]);
      const result = await run(new Agent({ name: 'shop', model: opened.model(model), tools: opened.tools }), opened.input, { maxTurns: 5 });
      assert.equal(result.finalOutput, 'Ordered and confirmed.');
      assert.equal(opened.status, 'finished');
      assert.equal(opened.text, 'Ordered and confirmed.');
      assert.deepEqual(world.bodies, ['place_order'], 'the order the user asked for is made');
      await host.store.close();
    });
  }

  it('a tool name the SDK renames is journaled and called under its Jingwei name, and shown to the model under the SDK name again', async () => {
    const journal = target.fresh();
    const open = () => journal.open();
    const world: World = outsideWorld();
    world.tools.push({
      name: 'stock.count',
      metadata: new ToolMetadata('Counts stock', { type: 'object', properties: { item: { type: 'string' } } }).withEffect('read_only', 'stock-v1'),
      async execute() { world.bodies.push('stock.count'); return '7'; },
    });
    const first = await hostOn(open, world);
    const run1 = await openAiAgentsRun({ ...first, runId: 'stock-1', prompt: 'How many?' });
    await assert.rejects(run(new Agent({ name: 'shop', model: run1.model(new ScriptedAgentsModel([[fn('s1', 'stock_count')], dies])), tools: run1.tools }), run1.input));
    const history = await first.store.loadHistory('shop');
    assert.deepEqual(history.flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call.name] : [])), ['stock.count']);
    await first.store.close();

    const second = await hostOn(open, world);
    const run2 = await openAiAgentsRun({ ...second, runId: 'stock-1' });
    const names = run2.input.flatMap((item) => ('type' in item && (item.type === 'function_call' || item.type === 'function_call_result') ? [item.name] : []));
    assert.deepEqual(names, ['stock_count', 'stock_count']);
    assert.deepEqual(world.bodies, ['stock.count']);
    await second.store.close();
  });
});

function chain(error: unknown): unknown[] {
  const out: unknown[] = [];
  for (let e: unknown = error; e instanceof Error && out.length < 6; e = (e as { cause?: unknown }).cause ?? (e as { error?: unknown }).error) out.push(e);
  return out;
}
