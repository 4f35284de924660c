/**
 * Over Streamable HTTP, a lost session (the server restarted and forgot it) marks the connection down: the request
 * that found out stays as it was (started, failed), the next call is `unavailable` and unsent, and the bridge opens
 * a new session.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { connectMcpServer, type McpConnectionEvent } from '../../src/mcp.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { ToolExecution } from '../../src/tool/types.js';
import { fixtureServer } from './fixtures/mcp-tools.js';
import { until } from './fixtures/processes.js';

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
});
