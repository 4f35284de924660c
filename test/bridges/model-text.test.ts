/**
 * The model reads text, never internals: a tool that throws an unexpected error carrying a host, a port and a
 * password reaches the model (through runAgent, the AI SDK bridge and the OpenAI Agents bridge) as a fixed sentence
 * with its category; the journal keeps the detail for operators, and the host's describePanic hook can redact it.
 */
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { describe, it } from 'node:test';
import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { Agent, run, setTracingDisabled, Usage, type AgentOutputItem, type Model, type ModelRequest, type ModelResponse } from '@openai/agents';
import { runAgent, scriptedModel } from '../../src/agent.js';
import { aiSdkTools } from '../../src/ai-sdk.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { INTERNAL_FAILURE_MESSAGE, MCP_REQUEST_FAILURE_MESSAGE } from '../../src/bridges/outcome.js';
import { importMcpTools } from '../../src/mcp.js';
import { openAiAgentsTools } from '../../src/openai-agents.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { SessionEvent } from '../../src/event/types.js';
import type { ToolRuntimeConfig } from '../../src/tool/types.js';

setTracingDisabled(true);
const SECRET = 'ECONNREFUSED 10.0.0.7:5432 password=hunter2';
const FRAGMENTS = ['ECONNREFUSED', '10.0.0.7', '5432', 'hunter2', 'password'];

async function setup(config: Partial<ToolRuntimeConfig> = {}) {
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('task');
  const runtime = createToolRuntime({
    tools: [{
      name: 'read_orders',
      metadata: new ToolMetadata('Reads the orders', { type: 'object' }).withEffect('read_only', 'orders-v1'),
      async execute() {
        throw new Error(SECRET);
      },
    }],
    grants: { agent: '*' },
    ...config,
  });
  return { store, owner, gateway: runtime.bind({ owner, taskId: 'task', caller: 'agent' }) };
}

function recordedFailure(history: SessionEvent[]) {
  const result = history.find((e) => e.kind.type === 'tool_result');
  assert.ok(result && result.kind.type === 'tool_result' && result.kind.result.outcome.status === 'failed');
  return result.kind.result.outcome;
}

function assertNoSecret(seen: unknown) {
  const text = JSON.stringify(seen);
  for (const fragment of FRAGMENTS) assert.ok(!text.includes(fragment), `the model saw ${fragment}`);
}

describe('a panic reaches the model as a fixed sentence; the journal keeps it', () => {
  it('runAgent: the model reads the category and the fixed sentence; the journal keeps message and stack', async () => {
    const { store, owner, gateway } = await setup();
    const model = scriptedModel([
      { text: null, toolCalls: [{ id: 'c1', name: 'read_orders', arguments: '{}' }] },
      { text: 'Could not read the orders.', toolCalls: [] },
    ]);
    const result = await runAgent({ model, owner, gateway, input: 'Read my orders.', maxSteps: 3 });
    const outcome = result.toolCalls[0]!.outcome;
    assert.ok(!outcome.ok);
    assert.equal(outcome.category, 'body_panic');
    assert.equal(outcome.message, INTERNAL_FAILURE_MESSAGE);
    assert.equal(
      outcome.text,
      `Tool "read_orders" failed: body_panic (tool_body_panicked): ${INTERNAL_FAILURE_MESSAGE}. The tool started, so it may have taken effect before failing; check before doing it again.`,
    );
    assertNoSecret(model.requests);
    assertNoSecret(result.messages);

    const failure = recordedFailure(await store.loadHistory('s'));
    assert.equal(failure.category, 'body_panic');
    assert.ok(failure.message.startsWith(`Error: ${SECRET}\n`), 'the journal keeps the message');
    assert.match(failure.message, /\n {4}at /, 'and the stack');
  });

  it('describePanic redacts what the journal keeps; the model text is unchanged', async () => {
    const seen: Array<{ tool: string; callId: string }> = [];
    const { store, owner, gateway } = await setup({
      describePanic: (error, context) => {
        seen.push({ tool: context.tool, callId: context.callId });
        return (error as Error).message.replace(/password=\S+/g, 'password=[redacted]');
      },
    });
    const model = scriptedModel([
      { text: null, toolCalls: [{ id: 'c1', name: 'read_orders', arguments: '{}' }] },
      { text: 'Sorry.', toolCalls: [] },
    ]);
    await runAgent({ model, owner, gateway, input: 'Read my orders.', maxSteps: 3 });
    const failure = recordedFailure(await store.loadHistory('s'));
    assert.equal(failure.message, 'ECONNREFUSED 10.0.0.7:5432 password=[redacted]');
    assert.equal(seen.length, 1);
    assert.equal(seen[0]!.tool, 'read_orders');
    assertNoSecret(model.requests);
  });

  it('an output whose serialization throws is a panic too: describePanic describes it, the model reads the fixed sentence', async () => {
    const store = createMemoryStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('task');
    const described: unknown[] = [];
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const outputs: unknown[] = [{ toJSON() { throw new Error(SECRET); } }, cyclic];
    const runtime = createToolRuntime({
      tools: [{
        name: 'read_orders',
        metadata: new ToolMetadata('Reads the orders', { type: 'object' }).withEffect('read_only', 'orders-v1'),
        async execute() {
          return outputs.shift() as never;
        },
      }],
      grants: { agent: '*' },
      describePanic: (error) => {
        described.push(error);
        return (error as Error).message.replace(/password=\S+/g, 'password=[redacted]');
      },
    });
    const gateway = runtime.bind({ owner, taskId: 'task', caller: 'agent' });
    const model = scriptedModel([
      { text: null, toolCalls: [{ id: 'c1', name: 'read_orders', arguments: '{}' }, { id: 'c2', name: 'read_orders', arguments: '{"again":true}' }] },
      { text: 'Sorry.', toolCalls: [] },
    ]);
    const result = await runAgent({ model, owner, gateway, input: 'Read my orders.', maxSteps: 3 });
    for (const call of result.toolCalls) {
      assert.ok(!call.outcome.ok);
      assert.equal(call.outcome.text, `Tool "read_orders" failed: body_panic (tool_output_panicked): ${INTERNAL_FAILURE_MESSAGE}. The tool started, so it may have taken effect before failing; check before doing it again.`);
    }
    assertNoSecret(model.requests);
    assertNoSecret(result.messages);
    assert.equal(described.length, 2, 'the host describes both throws');
    const failures = (await store.loadHistory('s')).flatMap((e) => (e.kind.type === 'tool_result' && e.kind.result.outcome.status === 'failed' ? [e.kind.result.outcome] : []));
    assert.deepEqual(failures.map((f) => [f.category, f.code]), [['body_panic', 'tool_output_panicked'], ['body_panic', 'tool_output_panicked']]);
    assert.equal(failures[0]!.message, "the tool's output cannot be serialized: ECONNREFUSED 10.0.0.7:5432 password=[redacted]");
    assert.match(failures[1]!.message, /^the tool's output cannot be serialized: Converting circular structure to JSON/);
  });

  it('a guard, an approver or an availability check that throws: describePanic describes it for the journal, the model reads a fixed sentence', async () => {
    const store = createMemoryStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('task');
    const boom = () => { throw new Error(SECRET); };
    const runtime = createToolRuntime({
      tools: [
        { name: 'guarded', metadata: new ToolMetadata('guarded', { type: 'object' }).withEffect('read_only', 'g1'), execute: async () => 'ran' },
        { name: 'approved', metadata: new ToolMetadata('approved', { type: 'object' }).withEffect('read_only', 'a1').withApproval('finance'), execute: async () => 'ran' },
        { name: 'flaky', metadata: new ToolMetadata('flaky', { type: 'object' }).withEffect('read_only', 'f1'), availability: boom, execute: async () => 'ran' },
      ],
      grants: { agent: '*' },
      guards: [(ctx) => (ctx.call.name === 'guarded' ? boom() : undefined)],
      approvers: { finance: boom },
      describePanic: (error) => (error as Error).message.replace(/password=\S+/g, 'password=[redacted]'),
    });
    const gateway = runtime.bind({ owner, taskId: 'task', caller: 'agent' });
    const model = scriptedModel([
      { text: null, toolCalls: [{ id: 'c1', name: 'guarded', arguments: '{}' }, { id: 'c2', name: 'approved', arguments: '{}' }, { id: 'c3', name: 'flaky', arguments: '{}' }] },
      { text: 'Sorry.', toolCalls: [] },
    ]);
    const result = await runAgent({ model, owner, gateway, input: 'Go.', maxSteps: 3 });
    assertNoSecret(model.requests);
    assertNoSecret(result.messages);
    const failures = (await store.loadHistory('s')).flatMap((e) => (e.kind.type === 'tool_result' && e.kind.result.outcome.status === 'failed' ? [e.kind.result.outcome] : []));
    assert.deepEqual(failures.map((f) => [f.category, f.code]), [['guard_fault', 'tool_guard_panicked'], ['approval_fault', 'tool_authorizer_panicked'], ['unavailable', 'tool_availability_fault']]);
    for (const f of failures) {
      assert.ok(!f.message.includes('hunter2'), `the journal keeps the redacted text: ${f.message}`);
      assert.match(f.message, /password=\[redacted\]/);
    }
  });

  it('a Node system error with a string code is a panic too, not the tool’s own failure text', async () => {
    const store = createMemoryStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('task');
    const runtime = createToolRuntime({
      tools: [{
        name: 'connect',
        metadata: new ToolMetadata('Connects', { type: 'object' }),
        async execute() {
          throw Object.assign(new Error('connect ECONNREFUSED 10.0.0.7:5432'), { code: 'ECONNREFUSED', errno: -111, syscall: 'connect' });
        },
      }],
      grants: { agent: '*' },
    });
    const execution = await runtime.bind({ owner, taskId: 'task', caller: 'agent' }).call('connect', {});
    assert.deepEqual(execution.result.outcome.status === 'failed' && [execution.result.outcome.category, execution.result.outcome.code], ['body_panic', 'tool_body_panicked']);
  });

  it("a database driver's error with a string code is a panic too: the model never reads the data its text quotes", async () => {
    const store = createMemoryStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('task');
    const db = new Database(':memory:');
    db.exec('CREATE TABLE cards (token TEXT UNIQUE)');
    db.prepare('INSERT INTO cards VALUES (?)').run('sk_live_4242');
    const pgLike = Object.assign(new Error('invalid input syntax for type bigint: "sk_live_4242"'), { code: '22P02', severity: 'ERROR', routine: 'pg_strtoint64' });
    const runtime = createToolRuntime({
      tools: [
        { name: 'save_card', metadata: new ToolMetadata('Saves', { type: 'object' }), async execute() { db.prepare('INSERT INTO cards VALUES (?)').run('sk_live_4242'); return 'saved'; } },
        { name: 'charge', metadata: new ToolMetadata('Charges', { type: 'object' }), async execute() { throw pgLike; } },
      ],
      grants: { agent: '*' },
      describePanic: () => 'a database error (detail redacted)',
    });
    const gateway = runtime.bind({ owner, taskId: 'task', caller: 'agent' });
    for (const name of ['save_card', 'charge']) {
      const execution = await gateway.call(name, {});
      const o = execution.result.outcome;
      assert.deepEqual(o.status === 'failed' && [o.category, o.code, o.message], ['body_panic', 'tool_body_panicked', 'a database error (detail redacted)'], name);
    }
    assert.ok(!JSON.stringify(await store.loadHistory('s')).includes('sk_live_4242'));
    db.close();
  });

  it('the AI SDK bridge: the tool error the model reads has no part of the message', async () => {
    const { store, gateway } = await setup();
    const usage = {
      inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: 1, text: 1, reasoning: undefined },
    };
    const model = new MockLanguageModelV3({
      doGenerate: [
        { content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'read_orders', input: '{}' }], finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] },
        { content: [{ type: 'text', text: 'Sorry.' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] },
      ],
    });
    await generateText({ model, tools: aiSdkTools(gateway), prompt: 'Read my orders.', stopWhen: stepCountIs(3) });
    const prompt = model.doGenerateCalls.at(-1)!.prompt;
    const results = prompt.flatMap((m) => (m.role === 'tool' ? m.content : []));
    assert.equal(results.length, 1);
    assert.match(JSON.stringify(results), /body_panic \(tool_body_panicked\): it failed unexpectedly/);
    assertNoSecret(model.doGenerateCalls.map((c) => c.prompt));
    assert.match(recordedFailure(await store.loadHistory('s')).message, /hunter2/);
  });

  it('the OpenAI Agents bridge: the function result the model reads has no part of the message', async () => {
    const { store, gateway } = await setup();
    const requests: ModelRequest[] = [];
    const turns: AgentOutputItem[][] = [
      [{ type: 'function_call', callId: 'c1', name: 'read_orders', arguments: '{}', status: 'completed' }],
      [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Sorry.' }] }],
    ];
    const model: Model = {
      async getResponse(request: ModelRequest): Promise<ModelResponse> {
        requests.push(structuredClone(request));
        return { usage: new Usage(), output: turns.shift()! };
      },
      // biome-ignore lint/correctness/useYield: the interface wants an iterable; this one fails on first use
      async *getStreamedResponse(): AsyncIterable<never> {
        throw new Error('not streamed');
      },
    };
    await run(new Agent({ name: 'reader', model, tools: openAiAgentsTools(gateway) }), 'Read my orders.', { maxTurns: 3 });
    assert.equal(requests.length, 2);
    assert.match(JSON.stringify(requests[1]!.input), /body_panic \(tool_body_panicked\): it failed unexpectedly/);
    assertNoSecret(requests);
    assert.match(recordedFailure(await store.loadHistory('s')).message, /hunter2/);
  });
});

describe('a failed MCP request reaches the model as a fixed sentence; the journal keeps the server\'s words', () => {
  /** A server whose one tool answers as `mode` says: an internal JSON-RPC error, a malformed result, or its own error result. */
  async function mcpGateway(mode: 'internal_error' | 'malformed' | 'tool_error') {
    const server = new Server({ name: 'leaky', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: 'pay', inputSchema: { type: 'object' as const } }] }));
    server.setRequestHandler(CallToolRequestSchema, async () => {
      if (mode === 'internal_error') throw new McpError(ErrorCode.InternalError, `Internal error: ${SECRET} at db.connect`);
      if (mode === 'malformed') return { content: [{ type: 'text', text: 42, note: SECRET }] } as never;
      return { isError: true, content: [{ type: 'text', text: 'the amount is over your daily limit' }] };
    });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: 'model-text', version: '1.0.0' });
    await client.connect(clientSide);
    const store = createMemoryStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('task');
    const runtime = createToolRuntime({ tools: (await importMcpTools(client)).tools, grants: { agent: '*' } });
    return { client, store, owner, gateway: runtime.bind({ owner, taskId: 'task', caller: 'agent' }) };
  }

  for (const mode of ['internal_error', 'malformed'] as const) {
    it(`${mode}: the model reads the code and the fixed sentence, the journal the server's or the SDK's text`, async () => {
      const { client, store, owner, gateway } = await mcpGateway(mode);
      const model = scriptedModel([
        { text: null, toolCalls: [{ id: 'c1', name: 'pay', arguments: '{}' }] },
        { text: 'Could not pay.', toolCalls: [] },
      ]);
      const result = await runAgent({ model, owner, gateway, input: 'Pay.', maxSteps: 3 });
      const outcome = result.toolCalls[0]!.outcome;
      assert.ok(!outcome.ok);
      assert.equal(outcome.category, 'body_failure');
      assert.match(outcome.code, mode === 'internal_error' ? /^mcp_error_-32603$/ : /^mcp_(request_failed|error_-?\d+)$/);
      assert.equal(outcome.message, MCP_REQUEST_FAILURE_MESSAGE);
      assert.match(outcome.text, new RegExp(`^Tool "pay" failed: body_failure \\(${outcome.code}\\): ${MCP_REQUEST_FAILURE_MESSAGE}\\. The tool started`));
      assertNoSecret(model.requests);
      const recorded = recordedFailure(await store.loadHistory('s'));
      assert.equal(recorded.code, outcome.code);
      if (mode === 'internal_error') assert.match(recorded.message, /hunter2/, 'the journal keeps the server\'s words for the operator');
      await client.close();
    });
  }

  it('the tool\'s own error result is its words for the model', async () => {
    const { client, owner, gateway } = await mcpGateway('tool_error');
    const model = scriptedModel([
      { text: null, toolCalls: [{ id: 'c1', name: 'pay', arguments: '{}' }] },
      { text: 'Over the limit.', toolCalls: [] },
    ]);
    const result = await runAgent({ model, owner, gateway, input: 'Pay.', maxSteps: 3 });
    const outcome = result.toolCalls[0]!.outcome;
    assert.ok(!outcome.ok);
    assert.equal(outcome.code, 'mcp_tool_error');
    assert.equal(outcome.message, 'the amount is over your daily limit');
    await client.close();
  });
});
