/** The MCP bridge against a real MCP server built with the official SDK: over stdio, and over Streamable HTTP. */
import assert from 'node:assert/strict';
import { externalIdempotencyKey, operationOriginIn } from '../../src/tool/idempotency.js';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { connectMcpServer, MCP_IDEMPOTENCY_META_KEY, mcpToolEffect, type McpConnection } from '../../src/mcp.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { assessSession } from '../../src/tool/assess.js';
import { prepareToolRetry } from '../../src/tool/recovery.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { ToolGateway } from '../../src/tool/types.js';
import { fixtureAddress } from './fixtures/mcp-address.js';
import { fixtureServer, type LoggedRun } from './fixtures/mcp-tools.js';
import { journaledCalls, outcomeOf } from './fixtures/shop.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir('jingwei-mcp-');
const crashChild = fileURLToPath(new URL('./children/mcp-crash-child.js', import.meta.url));
let logs = 0;
const newLog = () => join(dir, `server-${++logs}.jsonl`);
const runs = (log: string): LoggedRun[] =>
  existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as LoggedRun) : [];

const open: McpConnection[] = [];
after(async () => {
  for (const connection of open) await connection.close();
});
async function connect(...args: Parameters<typeof connectMcpServer>): Promise<McpConnection> {
  const connection = await connectMcpServer(...args);
  open.push(connection);
  return connection;
}

async function gatewayFor(connection: McpConnection, sessionId: string) {
  const store = openSqliteStore(tempDbPath(dir, 'mcp'));
  const owner = await store.acquire(sessionId, { owner: 'host' });
  await owner.startTask('weather-task');
  const runtime = createToolRuntime({ tools: connection.tools, grants: { agent: '*' } });
  return { store, owner, gateway: runtime.bind({ owner, taskId: 'weather-task', caller: 'agent' }) };
}

const effects = (connection: McpConnection) => Object.fromEntries(connection.manifest.map((t) => [t.mcpName, t.contract.effect]));

describe('jingwei/mcp over stdio, against a real server', () => {
  it('an untrusted server: every tool is unknown whatever its annotations say; calls run through the journal', async () => {
    const log = newLog();
    const server = await connect(fixtureAddress({ log }));
    assert.equal(server.trusted, false);
    assert.deepEqual(server.server, { name: 'fixture-weather', version: '1.0.0' });
    assert.deepEqual(server.skipped, []);
    assert.deepEqual(effects(server), { lookup_weather: 'unknown', send_email: 'unknown', set_status: 'unknown', mailbox_full: 'unknown' });
    for (const t of server.manifest) assert.match(t.contract.revision, /^mcp:fixture-weather@1\.0\.0:[0-9a-f]{64}$/);
    assert.deepEqual(server.manifest.find((t) => t.mcpName === 'lookup_weather')!.annotations, { readOnlyHint: true });

    const { store, gateway } = await gatewayFor(server, 'untrusted-calls');
    const weather = await gateway.call('lookup_weather', { city: 'Hangzhou' });
    assert.deepEqual(weather.result.outcome, { status: 'succeeded', output: 'Sunny in Hangzhou' });
    const status = await gateway.call('set_status', { status: 'away' });
    assert.deepEqual(status.result.outcome, { status: 'succeeded', output: JSON.stringify({ status: 'away', changed: true }) });
    const full = await gateway.call('mailbox_full', { to: 'a@example.org' });
    assert.deepEqual(full.result.outcome, { status: 'failed', category: 'body_failure', code: 'mcp_tool_error', message: 'the mailbox is full', retryable: false });
    const invalid = await gateway.call('lookup_weather', { city: 5 });
    assert.equal(invalid.result.outcome.status === 'failed' && invalid.result.outcome.category, 'invalid_arguments');

    const history = await store.loadHistory('untrusted-calls');
    const calls = journaledCalls(history);
    assert.deepEqual(calls.map((c) => [c.call.name, c.call.operation!.contract.effect, outcomeOf(c)]), [
      ['lookup_weather', 'unknown', 'succeeded'],
      ['set_status', 'unknown', 'succeeded'],
      ['mailbox_full', 'unknown', 'body_failure'],
      ['lookup_weather', 'unknown', 'invalid_arguments'],
    ]);
    // The server saw three calls (not the invalid one), each with its operation's external key in `_meta`.
    const seen = runs(log);
    assert.deepEqual(seen.map((r) => r.tool), ['lookup_weather', 'set_status', 'mailbox_full']);
    assert.deepEqual(seen.map((r) => r.meta?.[MCP_IDEMPOTENCY_META_KEY]), calls.slice(0, 3).map((c) => externalIdempotencyKey({ sessionId: 'untrusted-calls', operationOrigin: operationOriginIn(history, c.call.operation!)!, operation: c.call.operation! })));
    await store.close();
  });

  it('a trusted server: its annotations become the contract, and calls are journaled with it', async () => {
    const server = await connect(fixtureAddress(), { trusted: true, prefix: 'weather.' });
    assert.deepEqual(effects(server), { lookup_weather: 'read_only', send_email: 'non_idempotent', set_status: 'idempotent', mailbox_full: 'unknown' });
    assert.deepEqual(server.tools.map((t) => t.name), ['weather.lookup_weather', 'weather.send_email', 'weather.set_status', 'weather.mailbox_full']);
    const { store, gateway } = await gatewayFor(server, 'trusted-calls');
    await gateway.call('weather.lookup_weather', { city: 'Lhasa' });
    await gateway.call('weather.send_email', { to: 'a@example.org', body: 'hi' });
    const calls = journaledCalls(await store.loadHistory('trusted-calls'));
    assert.deepEqual(calls.map((c) => [c.call.name, c.call.operation!.contract, outcomeOf(c)]), [
      ['weather.lookup_weather', server.manifest[0]!.contract, 'succeeded'],
      ['weather.send_email', server.manifest[1]!.contract, 'succeeded'],
    ]);
    assert.equal(calls[0]!.call.operation!.contract.effect, 'read_only');
    await store.close();
  });

  it('a changed tool, or a new server version, gets a new revision; unchanged tools keep theirs', async () => {
    const revisions = async (env: { version?: string; variant?: string }) => {
      const server = await connect(fixtureAddress(env), { trusted: true });
      return Object.fromEntries(server.manifest.map((t) => [t.mcpName, t.contract.revision]));
    };
    const v1 = await revisions({});
    const again = await revisions({});
    const changed = await revisions({ variant: '2' });
    const v11 = await revisions({ version: '1.1.0' });
    assert.deepEqual(again, v1, 'the revision is a pure function of the server and the tool');
    assert.notEqual(changed.lookup_weather, v1.lookup_weather);
    assert.equal(changed.send_email, v1.send_email);
    for (const name of Object.keys(v1)) {
      assert.notEqual(v11[name], v1[name]);
      assert.match(v11[name]!, /^mcp:fixture-weather@1\.1\.0:/);
    }
  });

  it('maps annotations to effects only for a trusted server', () => {
    const table: Array<[Parameters<typeof mcpToolEffect>[0], string, string]> = [
      [undefined, 'unknown', 'unknown'],
      [{}, 'unknown', 'unknown'],
      [{ title: 'Weather' }, 'unknown', 'unknown'],
      [{ readOnlyHint: true }, 'read_only', 'unknown'],
      [{ readOnlyHint: true, idempotentHint: false, destructiveHint: true }, 'read_only', 'unknown'],
      [{ idempotentHint: true }, 'idempotent', 'unknown'],
      [{ idempotentHint: true, destructiveHint: true }, 'idempotent', 'unknown'],
      [{ readOnlyHint: false }, 'non_idempotent', 'unknown'],
      [{ destructiveHint: false }, 'non_idempotent', 'unknown'],
      [{ idempotentHint: false }, 'non_idempotent', 'unknown'],
    ];
    for (const [annotations, trusted, untrusted] of table) {
      assert.equal(mcpToolEffect(annotations, true), trusted, JSON.stringify(annotations));
      assert.equal(mcpToolEffect(annotations, false), untrusted, JSON.stringify(annotations));
    }
  });
});

/** Runs the crash child: it SIGKILLs itself once lookup_weather's start marker is durable. */
async function crashInTheMiddle(journal: string, sessionId: string, trust: 'trusted' | 'untrusted', log: string): Promise<void> {
  const child = spawn(process.execPath, [crashChild, journal, sessionId, trust, log], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => { output += d.toString(); });
  child.stderr.on('data', (d: Buffer) => { output += d.toString(); });
  const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, s) => resolve(s)));
  assert.equal(signal, 'SIGKILL', `the child was not killed: ${output}`);
}

async function recoverWith(journal: string, sessionId: string, trusted: boolean, log: string) {
  const store = openSqliteStore(journal);
  const owner = await store.acquire(sessionId, { owner: 'recovery-host', takeover: true });
  const server = await connect(fixtureAddress({ log }), { trusted });
  const runtime = createToolRuntime({ tools: server.tools, grants: { agent: '*' } });
  const gateway: ToolGateway = runtime.bind({ owner, taskId: 'weather-task', caller: 'agent' });
  return { store, gateway };
}

/** A child killed inside lookup_weather under one trust, then a host recovering it under `trustedNow`. */
async function crashThenRecover(sessionId: string, trust: 'trusted' | 'untrusted', trustedNow: boolean) {
  const journal = tempDbPath(dir, 'crash');
  const log = newLog();
  await crashInTheMiddle(journal, sessionId, trust, log);
  const recovered = await recoverWith(journal, sessionId, trustedNow, log);
  const history = await recovered.store.loadHistory(sessionId);
  return { log, recovered, history, call: assessSession(history).calls[0] };
}

describe('jingwei/mcp: killed in the middle of a tool', () => {
  it('an untrusted server that claims readOnlyHint yields an unknown call that needs review; a review lets the host retry once', async () => {
    const journal = tempDbPath(dir, 'crash');
    const log = newLog();
    await crashInTheMiddle(journal, 'crash-untrusted', 'untrusted', log);
    assert.deepEqual(runs(log), [], 'killed before the request was sent');

    const { store, gateway } = await recoverWith(journal, 'crash-untrusted', false, log);
    const history = await store.loadHistory('crash-untrusted');
    const [call] = assessSession(history).calls;
    assert.ok(call);
    assert.deepEqual([call.name, call.effect, call.status, call.nextStep], ['lookup_weather', 'unknown', 'outcome_unknown', 'needs_review']);
    assert.throws(() => prepareToolRetry(history, call.callId, null), { code: 'needs_review' });

    const plan = prepareToolRetry(history, call.callId, { actor: 'ops@example.org', evidence: 'the server log shows no request', outcome: 'not_executed' });
    const retried = await gateway.callWithOptions('lookup_weather', { city: 'Hangzhou' }, { retry: plan });
    assert.deepEqual(retried.result.outcome, { status: 'succeeded', output: 'Sunny in Hangzhou' });
    assert.equal(retried.call.operation!.key, call.key, 'the retry reuses the operation key');
    assert.deepEqual(runs(log).map((r) => r.meta?.[MCP_IDEMPOTENCY_META_KEY]), [externalIdempotencyKey({ sessionId: 'crash-untrusted', operationOrigin: operationOriginIn(history, { taskId: 'weather-task', key: call.key! })!, operation: { taskId: 'weather-task', key: call.key! } })]);
    assert.throws(() => plan.takeOperation({ sessionId: 'crash-untrusted', taskId: 'weather-task', name: 'lookup_weather', arguments: { city: 'Hangzhou' }, contract: retried.call.operation!.contract }), { code: 'consumed' });
    await store.close();
  });

  it('a trusted server yields a read_only call the host may retry; trusting it only after the crash changes the binding', async () => {
    const journal = tempDbPath(dir, 'crash');
    const log = newLog();
    await crashInTheMiddle(journal, 'crash-trusted', 'trusted', log);
    assert.deepEqual(runs(log), []);

    const { store, gateway } = await recoverWith(journal, 'crash-trusted', true, log);
    const history = await store.loadHistory('crash-trusted');
    const [call] = assessSession(history).calls;
    assert.ok(call);
    assert.deepEqual([call.name, call.effect, call.status, call.nextStep], ['lookup_weather', 'read_only', 'outcome_unknown', 'retry_allowed']);
    const retried = await gateway.callWithOptions('lookup_weather', { city: 'Hangzhou' }, { retry: prepareToolRetry(history, call.callId, null) });
    assert.equal(retried.result.outcome.status, 'succeeded');
    assert.equal(runs(log).length, 1);
    assert.deepEqual(assessSession(await store.loadHistory('crash-trusted')).calls.map((c) => [c.callId, c.nextStep]), [[call.callId, 'completed']], 'settled by its retry');
    await store.close();

    // The same crash under an untrusted import, recovered by a host that now trusts the server: the contract
    // changed (unknown → read_only), so the retry never runs. A person reviewed the call as not executed, so the
    // retry is recorded as not run (docs/design.md#a-redeploy-while-a-call-waits).
    const { log: driftLog, recovered: drift, history: driftHistory, call: drifted } = await crashThenRecover('crash-drift', 'untrusted', true);
    const plan = prepareToolRetry(driftHistory, drifted!.callId, { actor: 'ops@example.org', evidence: 'checked the server', outcome: 'not_executed' });
    const refused = await drift.gateway.callWithOptions('lookup_weather', { city: 'Hangzhou' }, { retry: plan });
    assert.deepEqual(refused.result.outcome.status === 'failed' ? [refused.result.outcome.category, refused.result.outcome.code] : [], ['unavailable', 'tool_contract_changed']);
    assert.equal(refused.call.operation!.contract.effect, 'unknown', 'recorded under the contract its operation recorded');
    assert.deepEqual(runs(driftLog), [], 'nothing was sent to the server');
    await drift.store.close();

    // The reverse, with no review: a read_only call that may have run, recovered by a host that no longer trusts the
    // server (read_only → unknown). The plan is refused without being consumed, and nothing is written.
    const { log: reverseLog, recovered: distrust, history: reverseHistory, call: distrusted } = await crashThenRecover('crash-distrust', 'trusted', false);
    const free = prepareToolRetry(reverseHistory, distrusted!.callId, null);
    await assert.rejects(distrust.gateway.callWithOptions('lookup_weather', { city: 'Hangzhou' }, { retry: free }), { code: 'binding_changed' });
    assert.equal(free.consumed, false);
    assert.equal((await distrust.store.loadHistory('crash-distrust')).length, reverseHistory.length);
    assert.deepEqual(runs(reverseLog), []);
    await distrust.store.close();
  });
});

describe('jingwei/mcp over Streamable HTTP on 127.0.0.1', () => {
  it('imports and calls the tools of an HTTP server the same way', async () => {
    const log = newLog();
    const mcp = fixtureServer({ name: 'http-weather', version: '2.0.0', log });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID() });
    await mcp.connect(transport);
    const http: Server = createServer((req, res) => { void transport.handleRequest(req, res); });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = http.address() as AddressInfo;
      const server = await connectMcpServer({ url: `http://127.0.0.1:${port}/mcp` }, { trusted: true, tools: ['lookup_weather', 'send_email'] });
      assert.deepEqual(server.server, { name: 'http-weather', version: '2.0.0' });
      assert.deepEqual(effects(server), { lookup_weather: 'read_only', send_email: 'non_idempotent' });
      const { store, gateway } = await gatewayFor(server, 'http-calls');
      const weather = await gateway.call('lookup_weather', { city: 'Kunming' });
      assert.deepEqual(weather.result.outcome, { status: 'succeeded', output: 'Sunny in Kunming' });
      const calls = journaledCalls(await store.loadHistory('http-calls'));
      assert.deepEqual(calls.map((c) => [c.call.name, c.call.operation!.contract.effect, outcomeOf(c)]), [['lookup_weather', 'read_only', 'succeeded']]);
      assert.equal(runs(log).length, 1);
      await server.close();
      await store.close();
    } finally {
      await mcp.close();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    }
  });
});
