/**
 * Over Streamable HTTP, a lost session (the server restarted and forgot it) marks the connection down: the request
 * that found out stays as it was (started, failed), the next call is `unavailable` and unsent, and the bridge opens
 * a new session.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { connectMcpServer, type McpConnectionEvent } from '../../src/mcp.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { ToolExecution } from '../../src/tool/types.js';
import { fixtureServer, SLOW_MS } from './fixtures/mcp-tools.js';
import { until } from './fixtures/processes.js';
import { tempDir } from '../support/tmp.js';

const outcome = (e: ToolExecution) => (e.result.outcome.status === 'succeeded' ? 'succeeded' : `${e.result.outcome.category}/${e.result.outcome.code}`);

describe('a managed MCP connection over Streamable HTTP', () => {
  it('a forgotten session: down, the next call unavailable, then a new session', async () => {
    const sessions = new Map<string, StreamableHTTPServerTransport>();
    const http: Server = createServer((req, res) => {
      const id = req.headers['mcp-session-id'];
      if (typeof id === 'string') {
        const known = sessions.get(id);
        if (known === undefined) {
          res.writeHead(404).end('{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}');
          return;
        }
        void known.handleRequest(req, res);
        return;
      }
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sessionId) => { sessions.set(sessionId, transport); },
      });
      void fixtureServer({ name: 'http-weather', version: '2.0.0' }).connect(transport).then(() => transport.handleRequest(req, res));
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const { port } = http.address() as AddressInfo;
    const store = createMemoryStore();
    const owner = await store.acquire('http', { owner: 'host' });
    await owner.startTask('t');
    const events: McpConnectionEvent[] = [];
    let refused: Promise<ToolExecution> | null = null;
    const connection = await connectMcpServer({ url: `http://127.0.0.1:${port}/mcp` }, {
      tools: ['lookup_weather'],
      reconnect: { initialDelayMs: 50 },
      journal: { owner },
      onConnectionEvent: (event) => {
        events.push(event);
        if (event.type === 'disconnected') refused = gateway.call('lookup_weather', { city: 'Xi’an' });
      },
    });
    const gateway = createToolRuntime({ tools: connection.tools, grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
    try {
      assert.equal(outcome(await gateway.call('lookup_weather', { city: 'Kunming' })), 'succeeded');
      sessions.clear();
      const lost = await gateway.call('lookup_weather', { city: 'Dali' });
      assert.notEqual(lost.startedEvent, null, 'the request that found out had started');
      assert.ok(lost.result.outcome.status === 'failed' && lost.result.outcome.category === 'body_failure');
      await until(() => refused !== null, 'the disconnect');
      const first = await refused!;
      assert.equal(outcome(first), 'unavailable/mcp_disconnected');
      assert.equal(first.startedEvent, null);
      await connection.ready();
      assert.equal(outcome(await gateway.call('lookup_weather', { city: 'Lijiang' })), 'succeeded');
      assert.deepEqual(events.map((e) => e.type), ['disconnected', 'reconnected']);
      assert.equal(sessions.size, 1, 'a new session');
    } finally {
      await connection.close();
      await store.close();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    }
  });
  /**
   * A slow fixture server over Streamable HTTP (its `slow_charge` answers after SLOW_MS), a host paying through it on a
   * memory store, and `fault`: `'502'` answers the next reads as a proxy's bad gateway, `'forget'` forgets every
   * session (as a restarted server does, answering 404). Runs `body` once the charge has reached the server.
   */
  interface ChargeHost {
    fault(kind: '502' | 'forget'): void;
    read(): Promise<ToolExecution>;
    charge: Promise<ToolExecution>;
    events: string[];
    runs(): string[];
    /** The sessions the server opened, and those a DELETE from the client ended, in order. */
    opened: string[];
    ended: string[];
    close(): Promise<void>;
  }
  async function chargeUnderWay(body: (host: ChargeHost) => Promise<void>): Promise<void> {
    const log = join(tempDir('jingwei-mcp-http-'), 'server.jsonl');
    const sessions = new Map<string, StreamableHTTPServerTransport>();
    const opened: string[] = [];
    const ended: string[] = [];
    let chargeArrived = false;
    let badGateway = false;
    const http: Server = createServer(async (req, res) => {
      if (req.method === 'DELETE' && typeof req.headers['mcp-session-id'] === 'string') ended.push(req.headers['mcp-session-id']);
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const message = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) as { method?: string; params?: { name?: string } } : undefined;
      const tool = message?.method === 'tools/call' ? message.params?.name : undefined;
      if (tool === 'slow_lookup' && badGateway) {
        res.writeHead(502).end('bad gateway');
        return;
      }
      if (tool === 'slow_charge') chargeArrived = true;
      const id = req.headers['mcp-session-id'];
      if (typeof id === 'string') {
        const known = sessions.get(id);
        if (known === undefined) res.writeHead(404).end('{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}');
        else void known.handleRequest(req, res, message);
        return;
      }
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sessionId) => {
          sessions.set(sessionId, transport);
          opened.push(sessionId);
        },
      });
      await fixtureServer({ variant: 'slow', log }).connect(transport);
      void transport.handleRequest(req, res, message);
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const { port } = http.address() as AddressInfo;
    const store = createMemoryStore();
    const owner = await store.acquire('http', { owner: 'host' });
    await owner.startTask('t');
    const events: string[] = [];
    const connection = await connectMcpServer({ url: `http://127.0.0.1:${port}/mcp` }, {
      reconnect: { initialDelayMs: 50 },
      onConnectionEvent: (event) => events.push(event.type),
    });
    const gateway = createToolRuntime({ tools: connection.tools, grants: { agent: '*' }, defaultTimeoutMs: SLOW_MS * 10 })
      .bind({ owner, taskId: 't', caller: 'agent' });
    try {
      const charge = gateway.call('slow_charge', { amount: 5 });
      await until(() => chargeArrived, 'the charge at the server');
      await body({
        fault: (kind) => {
          if (kind === '502') badGateway = true;
          else sessions.clear();
        },
        read: () => gateway.call('slow_lookup', { account: 'a' }),
        charge,
        events,
        runs: () => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').map((line) => (JSON.parse(line) as { tool: string }).tool) : []),
        opened,
        ended,
        close: () => connection.close(),
      });
    } finally {
      await connection.close();
      await store.close();
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    }
  }

  // u133 H2: a read failing at the transport (a proxy's 502) made the bridge give up the session and close its
  // client, which ended a charge still under way on it as `threw`, "Connection closed", while the server went on to
  // make it: an operator who saw no charge yet could record not_executed, and the retry charged again.
  it('a write under way when another request fails at the transport ends with its server\'s answer, not the session', async () => {
    await chargeUnderWay(async (host) => {
      host.fault('502');
      const read = await host.read();
      assert.ok(read.result.outcome.status === 'failed' && read.result.outcome.category === 'body_failure', 'the read failed at the transport');
      await until(() => host.events.includes('disconnected'), 'the session given up');
      const charged = await host.charge;
      assert.deepEqual(charged.result.outcome.status === 'succeeded' && charged.result.outcome.output, 'charged 5', 'the server\'s answer ended the charge');
      assert.deepEqual(host.runs(), ['slow_charge']);
    });
  });

  // u140 #5: a server that restarted forgets its sessions; a write left running on the old one can never be answered,
  // and kept open for it, it ran until the host closed the connection.
  it('a write under way on a session the server forgot ends with that session, at once', async () => {
    await chargeUnderWay(async (host) => {
      host.fault('forget');
      const read = await host.read();
      assert.ok(read.result.outcome.status === 'failed' && read.result.outcome.category === 'body_failure', 'the read found the session forgotten');
      const charged = await host.charge;
      assert.ok(charged.result.outcome.status === 'failed' && charged.result.outcome.category === 'body_failure', 'no answer can come: in doubt, for a review');
      await until(() => host.events.includes('reconnected'), 'a new session');
      await host.close();
      assert.deepEqual(host.ended, host.opened.slice(1), 'the forgotten session is not asked to end; the new one is');
    });
  });

  // u140 #7: the bridge closed its clients without ending their HTTP sessions, so every reconnect and every host
  // shutdown left a session behind on the server, holding its state until the server's own expiry, if it has one.
  it('a session given up, once its writes have ended, and the last one at close are ended with a DELETE', async () => {
    await chargeUnderWay(async (host) => {
      const [first] = host.opened;
      host.fault('502');
      await host.read();
      await until(() => host.events.includes('reconnected'), 'a new session');
      assert.deepEqual(host.ended, [], 'the old session is kept while the charge runs on it');
      await host.charge;
      await until(() => host.ended.length === 1, 'the old session ended');
      assert.deepEqual(host.ended, [first]);
      await host.close();
      assert.deepEqual(host.ended, host.opened, 'every session the bridge opened was ended');
    });
  });
});
