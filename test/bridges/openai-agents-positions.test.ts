/**
 * openAiAgentsRun with a provider that sends one id for every call: each call the SDK runs is journaled at its own
 * position (r83 H2). The Agents SDK refuses a call with no argument text, where the AI SDK runs it as {}; read as {}
 * first, the {} call beside it took its position, and the journal put the payment on the refused call.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { Agent, run, setTracingDisabled, type AgentOutputItem } from '@openai/agents';
import { openAiAgentsRun } from '../../src/openai-agents.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { say, ScriptedAgentsModel } from './fixtures/agents-mock.js';

setTracingDisabled(true);

const pay = (args: string): AgentOutputItem => ({ type: 'function_call', callId: '', name: 'pay', arguments: args, status: 'completed' });

it('a call with no argument text, which the Agents SDK refuses, keeps its position beside a {} call', async () => {
  const paid: string[] = [];
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  const gateway = createToolRuntime({
    tools: [{ name: 'pay', metadata: new ToolMetadata('pays', { type: 'object' }).withEffect('non_idempotent', 'v1'), execute: async (r) => { paid.push(JSON.stringify(r.arguments)); return `paid ${JSON.stringify(r.arguments)}`; } }],
    grants: { agent: '*' },
  }).bind({ owner, taskId: 't', caller: 'agent' });
  const r = await openAiAgentsRun({ owner, gateway, store, runId: 'run-1', prompt: 'pay' });
  const model = new ScriptedAgentsModel([[pay(''), pay('{}')], [say('done')]]);
  await run(new Agent({ name: 'a', model: r.model(model), tools: r.tools }), r.input).catch(() => undefined);
  assert.deepEqual(paid, ['{}']);
  const reopened = await openAiAgentsRun({ owner, gateway, store, runId: 'run-1' });
  assert.deepEqual(reopened.toolCalls.map((c) => (c.outcome.ok ? c.outcome.output : c.outcome.code)), ['not_run_by_framework', 'paid {}'], 'the payment is on the call that made it');
  await store.close();
});
