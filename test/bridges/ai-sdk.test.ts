/** The Vercel AI SDK bridge, driven by the SDK's own generateText and the mock language model of `ai/test`. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { aiSdkTools, jingweiHalted, ToolCallFailedError, ToolRuntimeHaltedError } from '../../src/ai-sdk.js';
import { assessSession } from '../../src/tool/assess.js';
import type { ToolExecution } from '../../src/tool/types.js';
import { assertModelSawNoInternals, journaledCalls, openShop, outcomeOf } from './fixtures/shop.js';
import { tempDir } from '../support/tmp.js';

const dir = tempDir('jingwei-ai-sdk-');

type LanguageModelV3GenerateResult = Awaited<ReturnType<MockLanguageModelV3['doGenerate']>>;
type LanguageModelV3Content = LanguageModelV3GenerateResult['content'][number];

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
};

function answer(content: LanguageModelV3Content[]): LanguageModelV3GenerateResult {
  const calls = content.some((part) => part.type === 'tool-call');
  return { content, finishReason: { unified: calls ? 'tool-calls' : 'stop', raw: undefined }, usage, warnings: [] };
}

const call = (toolCallId: string, toolName: string, input: unknown): LanguageModelV3Content => ({
  type: 'tool-call', toolCallId, toolName, input: JSON.stringify(input),
});

/** The tool results the model was sent in its last prompt, by tool call id. */
function toolResultsSent(model: MockLanguageModelV3): Map<string, { type: string; value: unknown }> {
  const prompt = model.doGenerateCalls.at(-1)!.prompt;
  const out = new Map<string, { type: string; value: unknown }>();
  for (const message of prompt) {
    if (message.role !== 'tool') continue;
    for (const part of message.content) {
      if (part.type === 'tool-result') out.set(part.toolCallId, part.output as { type: string; value: unknown });
    }
  }
  return out;
}

describe('jingwei/ai-sdk with generateText', () => {
  it('runs a multi-step task: every call journaled with its contract, outputs and failures readable by the model', async () => {
    const shop = await openShop(dir, 'approve');
    const model = new MockLanguageModelV3({
      doGenerate: [
        answer([call('c1', 'lookup_price', { item: 'tea' })]),
        answer([call('c2', 'place_order', { item: 'tea' }), call('c3', 'restock', { item: 'tea' })]),
        answer([{ type: 'text', text: 'Ordered tea for 12.99; restocking failed.' }]),
      ],
    });
    const seen: Array<{ execution: ToolExecution; toolCallId: string }> = [];
    const tools = aiSdkTools(shop.gateway, { onExecution: (execution, { toolCallId }) => seen.push({ execution, toolCallId }) });
    assert.deepEqual(Object.keys(tools).sort(), ['lookup_price', 'place_order', 'restock']);
    for (const t of Object.values(tools)) assert.equal(t.needsApproval, undefined, 'approval stays with Jingwei');

    const result = await generateText({ model, tools, prompt: 'Buy some tea.', stopWhen: stepCountIs(5) });
    assert.equal(result.text, 'Ordered tea for 12.99; restocking failed.');
    assert.equal(result.steps.length, 3);
    // The SDK runs the calls of one step concurrently: place_order waits for its approval, restock does not.
    assert.deepEqual([...shop.log.bodies].sort(), ['lookup_price', 'place_order', 'restock']);
    assert.equal(shop.log.approvals, 1);

    const history = await shop.store.loadHistory(shop.sessionId);
    const calls = journaledCalls(history);
    const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : 1);
    assert.deepEqual(calls.map((c) => ({ name: c.call.name, contract: c.call.operation!.contract, outcome: outcomeOf(c) })).sort(byName), [
      { name: 'lookup_price', contract: { effect: 'read_only', revision: 'prices-v1' }, outcome: 'succeeded' },
      { name: 'place_order', contract: { effect: 'non_idempotent', revision: 'orders-v1' }, outcome: 'succeeded' },
      { name: 'restock', contract: { effect: 'unknown', revision: 'unspecified' }, outcome: 'body_failure' },
    ]);
    assert.deepEqual(seen.map((s) => s.toolCallId).sort(), ['c1', 'c2', 'c3']);
    for (const { execution } of seen) assert.ok(calls.some((c) => c.call.id === execution.call.id && c.result !== null));

    const sent = toolResultsSent(model);
    assert.deepEqual(sent.get('c2'), { type: 'text', value: 'order placed for tea' });
    const failure = sent.get('c3')!;
    assert.equal(failure.type, 'error-text');
    assert.match(String(failure.value), /restock.*body_failure \(supplier_closed\): the supplier is closed today/);
    assert.match(String(failure.value), /may have taken effect/);
    assertModelSawNoInternals(model.doGenerateCalls.map((c) => c.prompt), history);

    // The journal is an ordinary one: the failed restock (Unknown, body started) needs a review.
    const assessment = assessSession(history);
    assert.deepEqual(assessment.calls.map((c) => [c.name, c.nextStep]), [['restock', 'needs_review']]);
    await shop.store.close();
  });

  it("a denial by Jingwei's approver reaches the model as text saying the tool did not run", async () => {
    const shop = await openShop(dir, 'deny');
    const model = new MockLanguageModelV3({
      doGenerate: [answer([call('c1', 'place_order', { item: 'tea' })]), answer([{ type: 'text', text: 'Could not order.' }])],
    });
    const result = await generateText({ model, tools: aiSdkTools(shop.gateway), prompt: 'Buy tea.', stopWhen: stepCountIs(3) });
    assert.equal(result.text, 'Could not order.');
    const error = result.steps[0]!.content.find((p) => p.type === 'tool-error')!;
    assert.ok(error.type === 'tool-error' && error.error instanceof ToolCallFailedError);
    assert.equal(error.error.category, 'approval_denied');
    assert.equal(error.error.started, false);
    const text = String(toolResultsSent(model).get('c1')!.value);
    assert.equal(text, 'Tool "place_order" failed: approval_denied (over_limit): orders need a manager today. The tool did not run.');
    assert.deepEqual(shop.log.bodies, []);
    assert.equal(shop.log.approvals, 1);
    const history = await shop.store.loadHistory(shop.sessionId);
    assert.deepEqual(journaledCalls(history).map(outcomeOf), ['approval_denied']);
    assertModelSawNoInternals(model.doGenerateCalls.map((c) => c.prompt), history);
    await shop.store.close();
  });

  it('invalid arguments are journaled and read by the model; a stopped task halts the run with jingweiHalted', async () => {
    const shop = await openShop(dir);
    const model = new MockLanguageModelV3({
      doGenerate: [
        answer([call('c1', 'lookup_price', { sku: 7 })]),
        answer([call('c2', 'lookup_price', { item: 'tea' })]),
        answer([{ type: 'text', text: 'never asked' }]),
      ],
    });
    const tools = aiSdkTools(shop.gateway, { tools: ['lookup_price'] });
    assert.deepEqual(Object.keys(tools), ['lookup_price']);
    const stopAfterFirst = async () => {
      if (model.doGenerateCalls.length === 1) await shop.owner.stopTask('shop-task', 'operator stopped it');
    };
    const result = await generateText({
      model,
      tools,
      prompt: 'Price of tea?',
      stopWhen: [stepCountIs(5), jingweiHalted],
      prepareStep: async () => { await stopAfterFirst(); return undefined; },
    });
    assert.equal(result.steps.length, 2, 'the run ended at the halted step');
    assert.equal(model.doGenerateCalls.length, 2);
    const first = result.steps[0]!.content.find((p) => p.type === 'tool-error')!;
    assert.ok(first.type === 'tool-error' && first.error instanceof ToolCallFailedError);
    assert.equal(first.error.category, 'invalid_arguments');
    const halted = result.steps[1]!.content.find((p) => p.type === 'tool-error')!;
    assert.ok(halted.type === 'tool-error' && halted.error instanceof ToolRuntimeHaltedError);
    assert.equal(halted.error.code, 'task_not_running');
    assert.doesNotMatch(halted.error.message, /shop-task|operator/);
    const history = await shop.store.loadHistory(shop.sessionId);
    assert.deepEqual(journaledCalls(history).map(outcomeOf), ['invalid_arguments'], 'the refused call wrote nothing');
    await shop.store.close();
  });
});
