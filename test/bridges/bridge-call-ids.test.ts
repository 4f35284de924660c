/**
 * A bridge run journals each model call under an id that names its position, and hands the framework the call under
 * that id: a provider that sends no ids, one id per response, or the same id twice no longer leaves the run to guess
 * a framework's call's position from its arguments. Guessing gave a call another call's position (r84 F1, F2): a
 * repaired call took the payment of the well-formed call beside it, and the model was told that call did not run.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateText, stepCountIs, type ModelMessage } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { Agent, run, setTracingDisabled, type AgentOutputItem } from '@openai/agents';
import { aiSdkRun, jingweiHalted } from '../../src/ai-sdk.js';
import { openAiAgentsRun } from '../../src/openai-agents.js';
import { distinctCallIds } from '../../src/bridges/call-ids.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { JsonValue } from '../../src/json/types.js';
import type { JsonSchema } from '../../src/tool/metadata.js';
import { answer, type MockContent, type MockResult } from './fixtures/ai-sdk-mock.js';
import { say, ScriptedAgentsModel } from './fixtures/agents-mock.js';

setTracingDisabled(true);

/** A host whose `pay` and `charge` write a receipt each time a body runs; `paid` lists each body's arguments. */
async function host() {
  const paid: JsonValue[] = [];
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  const write = (name: string, schema: JsonSchema) => ({
    name,
    metadata: new ToolMetadata(name, schema).withEffect('non_idempotent', 'v1'),
    execute: async (request: { arguments: JsonValue }) => {
      paid.push(request.arguments);
      return `receipt ${paid.length} for ${JSON.stringify(request.arguments)}`;
    },
  });
  const gateway = createToolRuntime({
    tools: [write('pay', { type: 'object', properties: { amount: { type: 'number' } } }), write('charge', { type: 'object', properties: {} })],
    grants: { agent: '*' },
  }).bind({ owner, taskId: 't', caller: 'agent' });
  return { paid, store, owner, gateway };
}

/** The journal's outcome text at each operation key (`run/step/index`). */
async function journaledAt(store: ReturnType<typeof createMemoryStore>): Promise<Map<string, string>> {
  const history = await store.loadHistory('s');
  const keys = new Map(history.flatMap((e) => (e.kind.type === 'tool_call' ? [[e.kind.call.id, e.kind.call.operation?.key ?? '?'] as const] : [])));
  return new Map(history.flatMap((e) => {
    if (e.kind.type !== 'tool_result') return [];
    const o = e.kind.result.outcome;
    return [[keys.get(e.kind.result.callId)!, o.status === 'succeeded' ? String(o.output) : `${o.status} ${o.status === 'failed' ? o.category : ''}`] as const];
  }));
}

/** An AI SDK mock that answers from a script and keeps the prompt of each request. */
function recording(turns: MockResult[]) {
  const prompts: ModelMessage[][] = [];
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      prompts.push(options.prompt as unknown as ModelMessage[]);
      const turn = turns.shift();
      if (turn === undefined) throw new Error('the mock model ran out of answers');
      return turn;
    },
  });
  return { model, prompts };
}

/** What the model was told for each of its calls in the step before `prompt`: [call id, tool, text read back]. */
function told(prompt: ModelMessage[]): [string, string, string][] {
  const assistant = [...prompt].reverse().find((m) => m.role === 'assistant' && Array.isArray(m.content) && m.content.some((p) => p.type === 'tool-call'));
  const results = new Map(prompt.filter((m) => m.role === 'tool').flatMap((m) => (m.content as Array<{ toolCallId: string; output: { value: unknown } }>).map((p) => [p.toolCallId, String(p.output.value)] as const)));
  return (assistant!.content as Array<{ type: string; toolCallId: string; toolName: string }>).filter((p) => p.type === 'tool-call').map((p) => [p.toolCallId, p.toolName, results.get(p.toolCallId) ?? '(nothing)']);
}

const call = (toolName: string, input: string, toolCallId = ''): MockContent => ({ type: 'tool-call', toolCallId, toolName, input });

describe('distinctCallIds', () => {
  it('keeps an id that names its position and replaces a missing one, a repeated one and one an open call holds', () => {
    const calls = [
      { id: 'a', name: 'pay', arguments: '{}' },
      { id: '', name: 'pay', arguments: '{}' },
      { id: 'a', name: 'pay', arguments: '{}' },
      { id: 'held', name: 'pay', arguments: '{}' },
      { id: 'jw-3-1', name: 'pay', arguments: '{}' },
    ];
    assert.deepEqual(distinctCallIds(calls, 3, new Set(['held'])).map((c) => c.id), ['a', 'jw-3-1-2', 'jw-3-2', 'jw-3-3', 'jw-3-1']);
    assert.deepEqual(distinctCallIds([{ id: '', name: 'pay', arguments: '{}' }], 1, new Set(['jw-1-0'])).map((c) => c.id), ['jw-1-0-2'], 'an id a call that is not the run\'s has is never given');
    const kept = [{ id: 'x', name: 'pay', arguments: '{}' }];
    assert.equal(distinctCallIds(kept, 1, new Set())[0], kept[0], 'unchanged calls are the same objects');
  });
});

describe('aiSdkRun: a provider without call ids', () => {
  it('a call with no argument text and one with {}: each is told its own receipt, and the journal agrees (r84 F1)', async () => {
    const { paid, store, owner, gateway } = await host();
    const r = await aiSdkRun({ owner, gateway, store, runId: 'r', prompt: 'charge twice' });
    const { model, prompts } = recording([answer([call('charge', ''), call('charge', '{}')]), answer([{ type: 'text', text: 'done' }])]);
    await generateText({ model: r.model(model), tools: r.tools, messages: r.messages, stopWhen: [stepCountIs(5), jingweiHalted] });
    assert.equal(paid.length, 2);
    const journal = await journaledAt(store);
    const live = told(prompts[1]!);
    assert.deepEqual(live.map(([id]) => id), ['jw-1-0', 'jw-1-1'], 'the framework ran each call under an id of its own');
    assert.deepEqual(live.map(([, , text]) => text), [journal.get('r/1/0'), journal.get('r/1/1')], 'each call is told the result the journal holds at its position');
    const again = await aiSdkRun({ owner, gateway, store, runId: 'r' });
    assert.deepEqual(told(again.messages).map(([, , text]) => text), live.map(([, , text]) => text), 'a resume reads the same back');
  });

  it('a repaired call beside a well-formed one with the arguments it was repaired to: the repair runs nothing, the well-formed call pays once (r84 F1)', async () => {
    const { paid, store, owner, gateway } = await host();
    const r = await aiSdkRun({ owner, gateway, store, runId: 'r', prompt: 'pay 5 and 7' });
    const { model, prompts } = recording([answer([call('pay', '{"amount":5,}'), call('pay', '{"amount":7}')]), answer([{ type: 'text', text: 'done' }])]);
    await generateText({
      model: r.model(model), tools: r.tools, messages: r.messages, stopWhen: [stepCountIs(5), jingweiHalted],
      experimental_repairToolCall: async ({ toolCall }) => ({ ...toolCall, input: '{"amount":7}' }),
    });
    assert.deepEqual(paid, [{ amount: 7 }], 'one payment');
    const journal = await journaledAt(store);
    assert.equal(journal.get('r/1/1'), 'receipt 1 for {"amount":7}', 'made by the well-formed call, at its own position');
    assert.match(journal.get('r/1/0')!, /^failed invalid_arguments/, 'the repaired call reads as its text: not arguments');
    const live = told(prompts[1]!);
    assert.equal(live[1]![2], 'receipt 1 for {"amount":7}', 'the call that paid is told so');
    assert.match(live[0]![2], /invalid_arguments/, 'the repaired call is told it did not run');
  });

  it('a call repaired from a tool the run does not offer runs nothing; the real call of that tool pays under its own position (r84 F1)', async () => {
    const { paid, store, owner, gateway } = await host();
    const r = await aiSdkRun({ owner, gateway, store, runId: 'r', prompt: 'pay 7' });
    const { model } = recording([answer([call('paay', '{"amount":7}'), call('pay', '{"amount":7}')]), answer([{ type: 'text', text: 'done' }])]);
    const result = await generateText({
      model: r.model(model), tools: r.tools, messages: r.messages, stopWhen: [stepCountIs(5), jingweiHalted],
      experimental_repairToolCall: async ({ toolCall }) => ({ ...toolCall, toolName: 'pay' }),
    });
    assert.deepEqual(paid, [{ amount: 7 }]);
    const journal = await journaledAt(store);
    assert.equal(journal.get('r/1/1'), 'receipt 1 for {"amount":7}', 'the real call paid at its own position');
    assert.equal(journal.has('r/1/0'), false, 'the repaired call has no attempt: it was journaled refused with its step');
    const errors = result.steps[0]!.content.flatMap((p) => (p.type === 'tool-error' ? [String(((p.error as Error).cause as Error).message)] : []));
    assert.equal(errors.length, 1);
    assert.match(errors[0]!, /"paay", a tool the run does not offer/, 'the refusal names the call the model made');
  });

  it('a call without an id beside a provider-run call whose id reads jw-1-0: the run\'s call takes another id, and its result is its own (r85 #1)', async () => {
    const { paid, store, owner, gateway } = await host();
    const r = await aiSdkRun({ owner, gateway, store, runId: 'r', prompt: 'search and pay' });
    const searched = [
      { type: 'tool-call', toolCallId: 'jw-1-0', toolName: 'web_search', input: '{"q":"x"}', providerExecuted: true, dynamic: true },
      { type: 'tool-result', toolCallId: 'jw-1-0', toolName: 'web_search', result: { hits: 3 }, providerExecuted: true, dynamic: true },
      call('pay', '{"amount":1}'),
    ] as MockContent[];
    const { model, prompts } = recording([answer(searched), answer([{ type: 'text', text: 'done' }])]);
    await generateText({ model: r.model(model), tools: r.tools, messages: r.messages, stopWhen: [stepCountIs(5), jingweiHalted] });
    assert.deepEqual(paid, [{ amount: 1 }]);
    const ids = prompts[1]!.flatMap((m) => (Array.isArray(m.content) ? m.content.flatMap((p) => ('toolCallId' in p && 'toolName' in p ? [`${p.type} ${p.toolName} ${p.toolCallId}`] : [])) : []));
    assert.deepEqual(ids, ['tool-call web_search jw-1-0', 'tool-result web_search jw-1-0', 'tool-call pay jw-1-0-2', 'tool-result pay jw-1-0-2']);
  });

  it('two loops on one run asked at once, whose provider numbers ids per response: one answer is journaled and its call runs, the other runs nothing (r84 F2, r103 B)', async () => {
    const { paid, store, owner, gateway } = await host();
    const r = await aiSdkRun({ owner, gateway, store, runId: 'r', prompt: 'pay' });
    const loop = (amount: number) => generateText({
      model: r.model(recording([answer([call('pay', JSON.stringify({ amount }), 'call_0')])]).model),
      tools: r.tools, messages: r.messages, stopWhen: [stepCountIs(1), jingweiHalted],
    });
    // Both asked from the same messages: the second answer was made without the first step, and is refused.
    const settled = await Promise.allSettled([loop(5), loop(6)]);
    const done = settled.flatMap((s, i) => (s.status === 'fulfilled' ? [{ amount: i === 0 ? 5 : 6, result: s.value }] : []));
    const refused = settled.flatMap((s) => (s.status === 'rejected' ? [String((s.reason as Error)?.message)] : []));
    assert.equal(done.length, 1, refused.join(' | '));
    assert.ok(refused[0]!.includes('does not hold step 1 of run r'), refused[0]);
    const output = done[0]!.result.steps[0]!.content.flatMap((p) => (p.type === 'tool-result' ? [String(p.output)] : p.type === 'tool-error' ? [String(p.error)] : []));
    assert.deepEqual(output, [`receipt 1 for {"amount":${done[0]!.amount}}`]);
    assert.deepEqual(paid, [{ amount: done[0]!.amount }], 'one payment, the journaled answer\'s');
    const history = await store.loadHistory('s');
    const made = new Map(history.flatMap((e) => (e.kind.type === 'tool_call' ? [[e.kind.call.operation?.key ?? '?', JSON.stringify(e.kind.call.arguments)] as const] : [])));
    assert.deepEqual([...made.entries()], [['r/1/0', `{"amount":${done[0]!.amount}}`]]);
    const journal = await journaledAt(store);
    assert.ok(journal.get('r/1/0')!.endsWith(`for {"amount":${done[0]!.amount}}`), 'the result at its step is its own call\'s');
  });
});

describe('openAiAgentsRun: a provider that repeats a call id', () => {
  it('three calls under one id and one without: each is told its own result, and the model reads distinct ids (r84 F1)', async () => {
    const { paid, store, owner, gateway } = await host();
    const r = await openAiAgentsRun({ owner, gateway, store, runId: 'r', prompt: 'pay' });
    const fn = (callId: string, name: string, args: string): AgentOutputItem => ({ type: 'function_call', callId, name, arguments: args, status: 'completed' });
    const model = new ScriptedAgentsModel([[fn('dup', 'pay', '{"amount":5}'), fn('dup', 'pay', '{"amount":7}'), fn('', 'charge', '{}'), fn('dup', 'pay', '{"amount":9}')], [say('done')]]);
    await run(new Agent({ name: 'a', model: r.model(model), tools: r.tools }), r.input);
    assert.equal(paid.length, 4);
    const journal = await journaledAt(store);
    const input = model.requests[1]!.input as Array<{ type?: string; callId?: string; arguments?: string; output?: { text?: string } }>;
    const calls = input.filter((i) => i.type === 'function_call');
    const results = new Map(input.filter((i) => i.type === 'function_call_result').map((i) => [i.callId, i.output?.text]));
    assert.deepEqual(calls.map((c) => c.callId), ['dup', 'jw-1-1', 'jw-1-2', 'jw-1-3']);
    for (const [index, c] of calls.entries()) {
      assert.equal(results.get(c.callId), journal.get(`r/1/${index}`), `call ${index} is told what the journal holds at its position`);
      if (c.arguments !== '{}') assert.ok(results.get(c.callId)!.endsWith(`for ${c.arguments}`), `call ${index} is told its own payment`);
    }
  });
});
