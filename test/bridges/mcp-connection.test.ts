/**
 * MCP connection state is evidence, against a real registry server (`@modelcontextprotocol/server-filesystem`
 * over stdio): kill the server mid-session, and the next call is `unavailable` (never sent, not in the review
 * queue); the bridge starts it again, journals the reconnect as a custom event, and the call after succeeds. A
 * connection lost while a call runs leaves that call uncertain, as it must.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { connectMcpServer, MCP_CONNECTION_EVENT, McpUnavailableError, type McpConnectionEvent } from '../../src/mcp.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { assessSession } from '../../src/tool/assess.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { ToolExecution } from '../../src/tool/types.js';
import { serverUnder, until } from './fixtures/processes.js';
import { filesystemServer, keyedServer } from './fixtures/registry-server.js';
import { tempDir } from '../support/tmp.js';

const dir = tempDir('jingwei-mcp-connection-');

async function session() {
  const store = createMemoryStore();
  const owner = await store.acquire('mcp-session', { owner: 'host' });
  await owner.startTask('files');
  return { store, owner };
}

const outcome = (e: ToolExecution) => (e.result.outcome.status === 'succeeded' ? 'succeeded' : `${e.result.outcome.category}/${e.result.outcome.code}`);

describe('connecting: bad addresses and servers that cannot be reached are typed', () => {
  it('an address of the wrong shape is InvalidInputError before anything starts; a missing command or a refused URL is mcp_unavailable', async () => {
    const cases: Array<[unknown, string]> = [
      [undefined, 'address'],
      [{}, 'address'],
      [{ stdio: {} }, 'address.stdio.command'],
      [{ stdio: { command: 'node', args: 'x' } }, 'address.stdio.args'],
      [{ url: 'not a url' }, 'address.url'],
      [{ url: 'ftp://example.com/mcp' }, 'address.url'],
    ];
    for (const [address, field] of cases) {
      await assert.rejects(connectMcpServer(address as Parameters<typeof connectMcpServer>[0], { reconnect: false }), { name: 'InvalidInputError', field }, field);
    }
    // Options of the wrong type are refused before a server is started, not read as their defaults (r99 #5).
    const good = { stdio: { command: join(dir, 'never-started') } };
    for (const [options, field] of [[{ reconnect: 'x' }, 'reconnect'], [{ trusted: 'yes' }, 'trusted']] as const) {
      await assert.rejects(connectMcpServer(good, options as never), { name: 'InvalidInputError', field }, field);
    }
    await assert.rejects(connectMcpServer({ stdio: { command: join(dir, 'no-such-server') } }, { reconnect: false, orphanGuard: false }),
      (error: unknown) => error instanceof McpUnavailableError && error.code === 'mcp_unavailable' && /could not connect/.test(error.message));
    await assert.rejects(connectMcpServer({ url: 'http://127.0.0.1:1/mcp' }, { reconnect: false }),
      (error: unknown) => error instanceof McpUnavailableError && error.state === 'failed' && error.cause !== undefined);
  });
});

describe('a managed MCP connection (real registry server over stdio)', () => {
  it('server killed: the next call is unavailable and unsent; the bridge reconnects, journals it, and the call after succeeds', async () => {
    const root = tempDir('jingwei-fs-root-');
    const { store, owner } = await session();
    const events: McpConnectionEvent[] = [];
    let refused: Promise<ToolExecution> | null = null;
    const connection = await connectMcpServer(filesystemServer(root), {
      tools: ['write_file', 'read_text_file'],
      reconnect: { initialDelayMs: 50 },
      journal: { owner },
      onConnectionEvent: (event) => {
        events.push(event);
        // The first call after the loss is made the moment the bridge knows: before any reconnect can happen.
        if (event.type === 'disconnected') refused = gateway.call('write_file', { path: join(root, 'b.txt'), content: 'two' });
      },
    });
    const gateway = createToolRuntime({ tools: connection.tools, grants: { agent: '*' } }).bind({ owner, taskId: 'files', caller: 'agent' });
    assert.equal(connection.server.name, 'secure-filesystem-server');
    assert.equal(connection.state, 'connected');

    assert.equal(outcome(await gateway.call('write_file', { path: join(root, 'a.txt'), content: 'one' })), 'succeeded');
    const guard = connection.processId!;
    const server = serverUnder(guard);
    assert.ok(server !== undefined, 'the server runs under the watch');
    process.kill(server, 'SIGKILL');

    await until(() => refused !== null, 'the disconnect');
    const first = await refused!;
    assert.equal(outcome(first), 'unavailable/mcp_disconnected');
    assert.equal(first.startedEvent, null, 'refused before its start marker');
    assert.ok(first.result.outcome.status === 'failed' && first.result.outcome.retryable);
    assert.equal(existsSync(join(root, 'b.txt')), false, 'never sent');

    await connection.ready();
    assert.equal(connection.state, 'connected');
    assert.notEqual(connection.processId, guard, 'a new server process');
    assert.equal(outcome(await gateway.call('write_file', { path: join(root, 'c.txt'), content: 'three' })), 'succeeded');
    assert.equal(readFileSync(join(root, 'c.txt'), 'utf8'), 'three');
    await connection.close();
    assert.equal(connection.state, 'closed');
    assert.equal(outcome(await gateway.call('read_text_file', { path: join(root, 'c.txt') })), 'unavailable/mcp_connection_closed');

    const history = await store.loadHistory('mcp-session');
    const journaled = history.flatMap((e) => (e.kind.type === 'custom' && e.kind.plugin === MCP_CONNECTION_EVENT.plugin ? [e.kind] : []));
    assert.deepEqual(journaled.map((k) => [k.kind, (k.payload as { type: string }).type]), [['connection', 'disconnected'], ['connection', 'reconnected']]);
    assert.deepEqual(events.map((e) => e.type), ['disconnected', 'reconnected']);
    const reconnected = events[1]!;
    assert.ok(reconnected.type === 'reconnected');
    assert.deepEqual(reconnected.changedTools, []);
    assert.equal(connection.journalError, null);

    // Not in the review queue: the refused calls provably did not run.
    const assessment = assessSession(history);
    assert.equal(assessment.totals.byNextStep.needs_review, 0);
    assert.ok(assessment.calls.every((c) => c.status === 'not_executed'));
    await store.close();
  });

  it('a connection lost while a call runs leaves that call started and uncertain (needs review)', async () => {
    const log = join(dir, 'hang.jsonl');
    const { store, owner } = await session();
    const connection = await connectMcpServer(keyedServer('conforming', log), { reconnect: { initialDelayMs: 50 } });
    const gateway = createToolRuntime({ tools: connection.tools, grants: { agent: '*' } }).bind({ owner, taskId: 'files', caller: 'agent' });
    const running = gateway.call('hang', {});
    await until(() => existsSync(log) && readFileSync(log, 'utf8').includes('"hang"'), 'the hang body to start');
    const serverPid = (JSON.parse(readFileSync(log, 'utf8').trim().split('\n').at(-1)!) as { hang: number }).hang;
    process.kill(serverPid, 'SIGKILL');
    const lost = await running;
    assert.notEqual(lost.startedEvent, null);
    assert.ok(lost.result.outcome.status === 'failed' && lost.result.outcome.category === 'body_failure');
    const assessment = assessSession(await store.loadHistory('mcp-session'));
    assert.deepEqual(assessment.calls.map((c) => [c.status, c.nextStep]), [['outcome_unknown', 'needs_review']]);
    await connection.ready();
    assert.equal(outcome(await gateway.call('create_order', { item: 'tea' })), 'succeeded');
    await connection.close();
    await store.close();
  });

  it('reconnecting gives up after its bounded attempts; ready() then rejects with mcp_unavailable and calls stay unsent', async () => {
    const root = tempDir('jingwei-fs-gone-');
    const { store, owner } = await session();
    const events: McpConnectionEvent[] = [];
    const connection = await connectMcpServer(filesystemServer(root), {
      tools: ['list_directory'],
      reconnect: { initialDelayMs: 10, maxDelayMs: 20, maxAttempts: 2 },
      onConnectionEvent: (event) => events.push(event),
    });
    const gateway = createToolRuntime({ tools: connection.tools, grants: { agent: '*' } }).bind({ owner, taskId: 'files', caller: 'agent' });
    // The allowed directory disappears: the server refuses to start again.
    const { rmSync } = await import('node:fs');
    rmSync(root, { recursive: true, force: true });
    process.kill(serverUnder(connection.processId!)!, 'SIGKILL');
    await until(() => connection.state === 'failed', 'the bridge to give up');
    await assert.rejects(connection.ready(), { code: 'mcp_unavailable' });
    assert.deepEqual(events.map((e) => e.type), ['disconnected', 'reconnect_failed', 'reconnect_failed']);
    const last = events.at(-1)!;
    assert.ok(last.type === 'reconnect_failed' && last.retryInMs === null && last.attempt === 2);
    assert.equal(outcome(await gateway.call('list_directory', { path: root })), 'unavailable/mcp_disconnected');
    await connection.close();
    await store.close();
  });

  it('a tool that changed while reconnecting is refused as mcp_tool_changed, unsent; unchanged tools run', async () => {
    const variant = join(dir, 'variant-flag');
    const log = join(dir, 'changed.jsonl');
    const { store, owner } = await session();
    const events: McpConnectionEvent[] = [];
    const connection = await connectMcpServer(keyedServer('conforming', log, variant), {
      reconnect: { initialDelayMs: 50 },
      onConnectionEvent: (event) => events.push(event),
    });
    const gateway = createToolRuntime({ tools: connection.tools, grants: { agent: '*' } }).bind({ owner, taskId: 'files', caller: 'agent' });
    assert.equal(outcome(await gateway.call('create_order', { item: 'tea' })), 'succeeded');
    writeFileSync(variant, 'create_order takes a note from now on');
    process.kill(serverUnder(connection.processId!)!, 'SIGKILL');
    await until(() => events.some((e) => e.type === 'reconnected'), 'the reconnect');
    const reconnected = events.find((e) => e.type === 'reconnected')!;
    assert.ok(reconnected.type === 'reconnected');
    assert.deepEqual(reconnected.changedTools, ['create_order']);
    const refusedCall = await gateway.call('create_order', { item: 'cake' });
    assert.equal(outcome(refusedCall), 'unavailable/mcp_tool_changed');
    assert.equal(refusedCall.startedEvent, null);
    assert.equal(readFileSync(log, 'utf8').trim().split('\n').length, 1, 'the changed tool was never called');
    await connection.close();
    await store.close();
  });

  it('a tool that changed while its call waited for a person is refused as mcp_tool_changed once approved, unsent', async () => {
    const variant = join(dir, 'variant-flag-approval');
    const log = join(dir, 'changed-approval.jsonl');
    const { store, owner } = await session();
    const events: McpConnectionEvent[] = [];
    const connection = await connectMcpServer(keyedServer('conforming', log, variant), {
      reconnect: { initialDelayMs: 50 },
      configure: (metadata) => metadata.withApproval('human'),
      onConnectionEvent: (event) => events.push(event),
    });
    let approve: () => void = () => {};
    let asked = false;
    const human = () => new Promise<{ decision: 'approved' }>((resolve) => {
      asked = true;
      approve = () => resolve({ decision: 'approved' });
    });
    try {
      const gateway = createToolRuntime({ tools: connection.tools, grants: { agent: '*' }, approvers: { human } }).bind({ owner, taskId: 'files', caller: 'agent' });
      const waiting = gateway.call('create_order', { item: 'cake' });
      await until(() => asked, 'the approver to be asked');
      writeFileSync(variant, 'create_order takes a note from now on');
      process.kill(serverUnder(connection.processId!)!, 'SIGKILL');
      await until(() => events.some((e) => e.type === 'reconnected'), 'the reconnect');
      approve();
      const refusedCall = await waiting;
      assert.equal(outcome(refusedCall), 'unavailable/mcp_tool_changed');
      assert.equal(refusedCall.startedEvent, null);
      assert.ok(!existsSync(log) || !readFileSync(log, 'utf8').includes('"cake"'), 'the changed tool was never called');
      const assessment = assessSession(await store.loadHistory('mcp-session'));
      assert.deepEqual(assessment.calls.map((c) => c.status), ['not_executed']);
    } finally {
      await connection.close();
      await store.close();
    }
  });
});
