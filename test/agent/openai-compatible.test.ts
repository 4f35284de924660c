/**
 * runAgent over the OpenAI-compatible client against a local chat-completions server (127.0.0.1 only): a
 * multi-step task with tool calls, and a run killed in the middle of a tool whose journal the host's ordinary
 * recovery flow handles.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { ChatModelError, openAiCompatibleModel, runAgent } from '../../src/agent.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { assessSession } from '../../src/tool/assess.js';
import { inspectToolRecovery, prepareToolRetry } from '../../src/tool/recovery.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { agentTools } from './fixtures/agent-tools.js';
import { completion, shopPolicy, startChatServer, type ChatServer } from './fixtures/chat-server.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir('jingwei-agent-http-');
const child = fileURLToPath(new URL('./children/agent-child.js', import.meta.url));
const orders = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { key: string; item: string }) : []);
let files = 0;
const ordersFile = () => join(dir, `orders-${++files}.jsonl`);

let server: ChatServer;
before(async () => { server = await startChatServer(shopPolicy); });
after(async () => { await server.close(); });

// The run's own events (docs/design.md#resumable-runs) show as `jingwei.run:<kind>`; the store's record of a task
// change (docs/design.md#the-task-ledger-in-the-chain) as `task_ledger:<change>`.
const kinds = (history: Array<{ kind: { type: string; plugin?: string; kind?: string; ledger?: { change: string } } }>) =>
  history.map((e) => (e.kind.type === 'custom' ? `${e.kind.plugin}:${e.kind.kind}` : e.kind.type === 'task_ledger' ? `task_ledger:${e.kind.ledger!.change}` : e.kind.type));

describe('runAgent with the OpenAI-compatible client', () => {
  it('completes a multi-step task with tool calls against a local server; everything the model saw is journaled', async () => {
    const file = ordersFile();
    const store = openSqliteStore(tempDbPath(dir, 'agent'));
    const owner = await store.acquire('http-run', { owner: 'host' });
    await owner.startTask('shop-task');
    const gateway = createToolRuntime({ tools: agentTools(file), grants: { agent: '*' } }).bind({ owner, taskId: 'shop-task', caller: 'agent' });
    const before = server.requests.length;
    const model = openAiCompatibleModel({ baseUrl: server.baseUrl, model: 'local-test', apiKey: 'sk-local', body: { temperature: 0 } });

    const result = await runAgent({ model, owner, gateway, input: 'Buy some tea.', system: 'You run a shop.', maxSteps: 5 });
    assert.equal(result.stopReason, 'completed');
    assert.equal(result.steps, 3);
    assert.equal(result.text, 'Done: order placed for tea');
    assert.deepEqual(result.toolCalls.map((c) => [c.providerCallId, c.name, c.outcome.ok]), [['call_price', 'lookup_price', true], ['call_order', 'place_order', true]]);
    assert.equal(orders(file).length, 1);

    const sent = server.requests.slice(before);
    assert.equal(sent.length, 3);
    assert.equal(sent[0]!.headers.authorization, 'Bearer sk-local');
    assert.equal(sent[0]!.body.model, 'local-test');
    assert.equal((sent[0]!.body as unknown as { temperature: number }).temperature, 0);
    assert.deepEqual(sent[0]!.body.tools!.map((t) => t.function.name), ['lookup_price', 'place_order']);
    assert.deepEqual(sent[2]!.body.messages.map((m) => m.role), ['system', 'user', 'assistant', 'tool', 'assistant', 'tool']);
    assert.deepEqual(sent[2]!.body.messages[3], { role: 'tool', tool_call_id: 'call_price', content: '{"item":"tea","cents":1299}' });

    const history = await store.loadHistory('http-run');
    // The host's startTask journaled the task's start before the run began.
    assert.deepEqual(kinds(history), [
      'task_ledger:started', 'jingwei.run:run_started', 'user_message', 'assistant_message', 'jingwei.run:model_response', 'tool_call', 'tool_started', 'tool_result',
      'jingwei.run:model_response', 'tool_call', 'tool_started', 'tool_result', 'assistant_message', 'jingwei.run:model_response', 'jingwei.run:run_finished',
    ]);
    assert.ok(history.slice(1).every((e) => e.turnId === gateway.turnId), 'one turn (after the task\'s start, which the store journals in a turn of its own)');
    const calls = history.flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call] : []));
    assert.deepEqual(calls.map((c) => [c.name, c.operation!.contract.effect, c.action?.providerCallId]), [
      ['lookup_price', 'read_only', 'call_price'],
      ['place_order', 'non_idempotent', 'call_order'],
    ]);
    const everything = JSON.stringify(sent.map((r) => r.body));
    for (const call of calls) {
      assert.ok(!everything.includes(call.id) && !everything.includes(call.operation!.key), 'the model never sees call ids or operation keys');
    }
    assert.doesNotMatch(everything, /toolcall_|operation_|evt_/);
    await store.close();
  });

  it('killed in the middle of a tool: the journal is recovered by the host flow unchanged, with one explicit retry', async () => {
    const file = ordersFile();
    const journal = tempDbPath(dir, 'agent-crash');
    const proc = spawn(process.execPath, [child, journal, 'crash-run', server.baseUrl, file], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    proc.stdout.on('data', (d: Buffer) => { output += d.toString(); });
    proc.stderr.on('data', (d: Buffer) => { output += d.toString(); });
    const signal = await new Promise<NodeJS.Signals | null>((resolve) => proc.on('exit', (_code, s) => resolve(s)));
    assert.equal(signal, 'SIGKILL', `the agent was not killed: ${output}`);
    assert.deepEqual(orders(file), [], 'killed after the start marker, before the body');

    const store = openSqliteStore(journal);
    const history = await store.loadHistory('crash-run');
    // The host's startTask journaled the task's start before the run began.
    assert.deepEqual(kinds(history), [
      'task_ledger:started', 'jingwei.run:run_started', 'user_message', 'assistant_message', 'jingwei.run:model_response', 'tool_call', 'tool_started', 'tool_result',
      'jingwei.run:model_response', 'tool_call', 'tool_started',
    ]);
    const assessment = assessSession(history);
    assert.deepEqual(assessment.calls.map((c) => [c.name, c.effect, c.status, c.nextStep]), [['place_order', 'non_idempotent', 'outcome_unknown', 'needs_review']]);
    const uncertain = assessment.calls[0]!;
    assert.throws(() => prepareToolRetry(history, uncertain.callId, null), { code: 'needs_review' });

    // The host checks the orders (none), records that in a review, and retries exactly once with the same key.
    const owner = await store.acquire('crash-run', { owner: 'recovery-host', takeover: true });
    const gateway = createToolRuntime({ tools: agentTools(file), grants: { agent: '*' } }).bind({ owner, taskId: 'shop-task', caller: 'agent' });
    const plan = prepareToolRetry(history, uncertain.callId, { actor: 'ops@example.org', evidence: 'no order with this key in the orders file', outcome: 'not_executed' });
    const { call } = inspectToolRecovery(history, uncertain.callId);
    const retried = await gateway.callWithOptions(call.name, call.arguments, { retry: plan });
    assert.deepEqual(retried.result.outcome, { status: 'succeeded', output: 'order placed for tea' });
    assert.deepEqual(orders(file), [{ key: uncertain.key, item: 'tea' }]);
    assert.equal(retried.call.operation!.retry!.callId, uncertain.callId);
    const after = await store.loadHistory('crash-run');
    assert.deepEqual(assessSession(after).calls.map((c) => c.nextStep), ['completed']);
    await store.close();
  });

  it('reports a refusing or broken server as a ChatModelError and never retries the request', async () => {
    let calls = 0;
    const failing = await startChatServer(() => {
      calls += 1;
      return calls === 1 ? { status: 503, body: { error: { message: 'overloaded' } } } : { body: '{"choices": []}' };
    });
    try {
      const store = openSqliteStore(tempDbPath(dir, 'agent'));
      const owner = await store.acquire('broken', { owner: 'host' });
      await owner.startTask('shop-task');
      const gateway = createToolRuntime({ tools: agentTools(ordersFile()), grants: { agent: '*' } }).bind({ owner, taskId: 'shop-task', caller: 'agent' });
      const model = openAiCompatibleModel({ baseUrl: `${failing.baseUrl}/`, model: 'm' });
      await assert.rejects(runAgent({ model, owner, gateway, input: 'hi', maxSteps: 3 }), (e: unknown) => e instanceof ChatModelError && e.code === 'model_http_error' && e.status === 503);
      assert.equal(calls, 1, 'no automatic retry');
      await assert.rejects(runAgent({ model, owner, gateway, input: 'hi', maxSteps: 3 }), (e: unknown) => e instanceof ChatModelError && e.code === 'model_bad_response');
      assert.deepEqual(kinds(await store.loadHistory('broken')), ['task_ledger:started', 'jingwei.run:run_started', 'user_message', 'jingwei.run:run_started', 'user_message']);
      await store.close();
    } finally {
      await failing.close();
    }
  });

  it('reads tool calls whose arguments come as an object, and fills in a missing call id', async () => {
    const odd = await startChatServer((request) => {
      if (request.messages.some((m) => m.role === 'tool')) return completion('ok');
      const reply = completion(null, [{ id: '', name: 'lookup_price', args: 'x' }]);
      const message = (reply.body as { choices: Array<{ message: { tool_calls: Array<{ function: { arguments: unknown } }> } }> }).choices[0]!.message;
      message.tool_calls[0]!.function.arguments = { item: 'tea' };
      return reply;
    });
    try {
      const model = openAiCompatibleModel({ baseUrl: odd.baseUrl, model: 'm' });
      const response = await model.complete({ messages: [{ role: 'user', content: 'price?' }], tools: [] });
      assert.deepEqual(response, { text: null, toolCalls: [{ id: 'call_0', name: 'lookup_price', arguments: '{"item":"tea"}' }] });
      assert.equal(odd.requests[0]!.body.tools, undefined, 'no tools field when there are no tools');
    } finally {
      await odd.close();
    }
  });
});
