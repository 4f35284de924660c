/**
 * A run's call cancelled the framework's way: `generateText({ abortSignal })` for `aiSdkRun`, `run(agent, input,
 * { signal })` for `openAiAgentsRun`. The framework's signal reaches the call as the run's own `signal` does: a body
 * honouring its signal stops without its write, the attempt is journaled `cancelled`, and the run opened again goes
 * on from there (the model reads the cancelled call).
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { it } from 'node:test';
import { generateText, stepCountIs } from 'ai';
import { Agent, run, setTracingDisabled } from '@openai/agents';
import { aiSdkRun, jingweiHalted } from '../../src/ai-sdk.js';
import { openAiAgentsRun } from '../../src/openai-agents.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { SessionStore } from '../../src/store/types.js';
import type { Tool } from '../../src/tool/types.js';
import { answer, scripted } from './fixtures/ai-sdk-mock.js';
import { say, ScriptedAgentsModel } from './fixtures/agents-mock.js';

setTracingDisabled(true);

/** How long the transfer's body takes when nothing cancels it: far longer than the tests wait for a cancellation. */
const BODY_MS = 2_000;

/** A transfer whose body waits on its signal; `started` resolves once a body runs. */
function bank() {
  const sent: string[] = [];
  let started!: () => void;
  const bodyStarted = new Promise<void>((resolve) => { started = resolve; });
  const tool: Tool = {
    name: 'transfer',
    metadata: new ToolMetadata('Sends money', { type: 'object', properties: { amount: { type: 'number' } }, required: ['amount'] }).withEffect('non_idempotent', 'bank-v1'),
    async execute(request, signal) {
      started();
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, BODY_MS);
        signal.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(signal.reason);
        }, { once: true });
      });
      sent.push(request.operation.key);
      return 'sent';
    },
  };
  return { sent, tool, bodyStarted };
}

async function host(tool: Tool) {
  const store = createMemoryStore();
  const owner = await store.acquire('bank', { owner: 'host' });
  await owner.startTask('task');
  const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 'task', caller: 'agent' });
  return { store, owner, gateway };
}

/** The journaled outcome of the run's first call, once it has one (waiting no longer than the body would take). */
async function journaledOutcome(store: SessionStore) {
  const until = Date.now() + BODY_MS + 1_000;
  for (;;) {
    const result = (await store.loadHistory('bank')).find((e) => e.kind.type === 'tool_result');
    if (result !== undefined && result.kind.type === 'tool_result') return result.kind.result.outcome;
    if (Date.now() > until) return undefined;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

for (const runSignal of [false, true]) {
  it(`aiSdkRun${runSignal ? ' (with a signal of its own)' : ''}: generateText's abortSignal cancels the running call, which is journaled cancelled without its write, and the run goes on when opened again`, async () => {
    const world = bank();
    const { store, owner, gateway } = await host(world.tool);
    const ofRun = new AbortController().signal;
    const options = { owner, gateway, store, runId: 'pay-1', ...(runSignal ? { signal: ofRun } : {}) };
    const first = await aiSdkRun({ ...options, prompt: 'Send 5.' });
    const cancel = new AbortController();
    void world.bodyStarted.then(() => cancel.abort());
    const model = scripted([answer([{ type: 'tool-call', toolCallId: 'c1', toolName: 'transfer', input: '{"amount":5}' }]), answer([{ type: 'text', text: 'Sent.' }])]);
    await assert.rejects(generateText({ model: first.model(model), tools: first.tools, messages: first.messages, abortSignal: cancel.signal, stopWhen: [stepCountIs(3), jingweiHalted] }));
    const outcome = await journaledOutcome(store);
    assert.equal(outcome?.status, 'failed');
    assert.equal(outcome.status === 'failed' ? outcome.category : undefined, 'cancelled');
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(world.sent, [], 'the body stopped before its write');
    assert.equal(getEventListeners(ofRun, 'abort').length, 0, 'the run\'s signal keeps no listener of the call once it ended');

    // Opened again: the cancelled call is read back (not run again), and the loop goes on from it.
    const again = await aiSdkRun(options);
    assert.equal(again.status, 'running');
    assert.equal(again.steps, 1);
    const read = again.toolCalls[0]!;
    assert.equal(read.execution?.replayed, true);
    assert.ok(!read.outcome.ok && read.outcome.category === 'cancelled' && read.outcome.mayHaveTakenEffect, 'the model reads the cancelled call, started, as one that may have taken effect');
    const next = scripted([answer([{ type: 'text', text: 'The transfer was cancelled.' }])]);
    const result = await generateText({ model: again.model(next), tools: again.tools, messages: again.messages, stopWhen: [stepCountIs(3), jingweiHalted] });
    assert.equal(result.text, 'The transfer was cancelled.');
    assert.equal(again.status, 'finished');
    assert.deepEqual(world.sent, []);
    await store.close();
  });
}

it('openAiAgentsRun: run()\'s signal cancels the running call, which is journaled cancelled without its write, and the run goes on when opened again', async () => {
  const world = bank();
  const { store, owner, gateway } = await host(world.tool);
  const options = { owner, gateway, store, runId: 'pay-1' };
  const first = await openAiAgentsRun({ ...options, prompt: 'Send 5.' });
  const cancel = new AbortController();
  void world.bodyStarted.then(() => cancel.abort());
  const model = new ScriptedAgentsModel([[{ type: 'function_call', callId: 'c1', name: 'transfer', arguments: '{"amount":5}', status: 'completed' }], [say('Sent.')]]);
  await assert.rejects(run(new Agent({ name: 'bank', model: first.model(model), tools: first.tools }), first.input, { signal: cancel.signal, maxTurns: 3 }));
  const outcome = await journaledOutcome(store);
  assert.equal(outcome?.status, 'failed');
  assert.equal(outcome.status === 'failed' ? outcome.category : undefined, 'cancelled');
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual(world.sent, [], 'the body stopped before its write');

  const again = await openAiAgentsRun(options);
  assert.equal(again.status, 'running');
  assert.equal(again.steps, 1);
  const read = again.toolCalls[0]!;
  assert.equal(read.execution?.replayed, true);
  assert.ok(!read.outcome.ok && read.outcome.category === 'cancelled' && read.outcome.mayHaveTakenEffect);
  const result = await run(new Agent({ name: 'bank', model: again.model(new ScriptedAgentsModel([[say('The transfer was cancelled.')]])), tools: again.tools }), again.input, { maxTurns: 3 });
  assert.equal(result.finalOutput, 'The transfer was cancelled.');
  assert.equal(again.status, 'finished');
  assert.deepEqual(world.sent, []);
  await store.close();
});
