/**
 * What an MCP server lists is untrusted input: a `tools/list` that never ends (a repeated cursor, endless pages) is
 * refused typed within LIMITS.maxMcpToolListPages pages; a tool whose name the runtime would refuse, or a name
 * listed twice, is skipped with a reason instead of making createToolRuntime throw for every tool. And a call
 * through a client the host has closed is refused before its start marker, never sent.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { LIMITS } from '../../src/limits.js';
import { importMcpTools, listMcpTools } from '../../src/mcp.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { assessSession } from '../../src/tool/assess.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { tool } from '../support/runtime.js';

interface Page {
  readonly tools: ReadonlyArray<{ name: string; inputSchema: { type: 'object'; description?: string } }>;
  readonly nextCursor?: string;
}

const listed = (...names: string[]) => names.map((name) => ({ name, inputSchema: { type: 'object' as const } as { type: 'object'; description?: string } }));

/** A low-level SDK server answering `tools/list` with `page(cursor)`, connected in memory; counts pages and calls. */
async function serverListing(page: (cursor: string | undefined) => Page) {
  const served = { pages: 0, calls: [] as string[] };
  const server = new Server({ name: 'paged', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async (request) => {
    served.pages += 1;
    return page(request.params?.cursor) as { tools: Array<{ name: string; inputSchema: { type: 'object' } }>; nextCursor?: string };
  });
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    served.calls.push(request.params.name);
    return { content: [{ type: 'text', text: `ran ${request.params.name}` }] };
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'listing-test', version: '1.0.0' });
  await client.connect(clientSide);
  return { client, served };
}

describe('MCP tools/list is bounded', () => {
  it('a cursor the server sends a second time: McpUnavailableError, after two pages', async () => {
    const { client, served } = await serverListing((cursor) => (cursor === undefined ? { tools: listed('a'), nextCursor: 'c1' } : { tools: listed('b'), nextCursor: 'c1' }));
    await assert.rejects(listMcpTools(client), { code: 'mcp_unavailable', state: 'failed', message: /paged@1\.0\.0 .*sent a cursor a second time/ });
    assert.equal(served.pages, 2);
    await assert.rejects(importMcpTools(client), { code: 'mcp_unavailable' });
    await client.close();
  });

  it('pages without end: refused after LIMITS.maxMcpToolListPages; a listing of exactly that many passes', { timeout: 60_000 }, async () => {
    const endless = await serverListing((cursor) => ({ tools: [], nextCursor: `p${Number(cursor?.slice(1) ?? 0) + 1}` }));
    await assert.rejects(listMcpTools(endless.client), { code: 'mcp_unavailable', message: new RegExp(`after ${LIMITS.maxMcpToolListPages} pages`) });
    assert.equal(endless.served.pages, LIMITS.maxMcpToolListPages);
    await endless.client.close();

    const last = LIMITS.maxMcpToolListPages;
    const bounded = await serverListing((cursor) => {
      const n = Number(cursor?.slice(1) ?? 1);
      return n < last ? { tools: listed(`t${n}`), nextCursor: `p${n + 1}` } : { tools: listed(`t${n}`) };
    });
    assert.equal((await listMcpTools(bounded.client)).listed.length, last);
    await bounded.client.close();
  });
});

describe('MCP tools the runtime could not hold', () => {
  it('a name the runtime refuses, or one listed twice, is skipped with a reason; the other tools work', async () => {
    const odd = { name: 'odd_schema', inputSchema: { type: 'object' as const, description: 'half an emoji \ud83d' } };
    const tools = [...listed('lookup', 'report\u202etxt.exe', 'dup', 'dup', 'x'.repeat(300), 'look\ud800', '天气'), odd];
    const { client, served } = await serverListing(() => ({ tools }));
    const imported = await importMcpTools(client);
    assert.deepEqual(imported.manifest.map((m) => m.name), ['lookup', '天气']);
    assert.deepEqual(imported.skipped.map((s) => s.mcpName), ['report\u202etxt.exe', 'dup', 'x'.repeat(300), 'look\ud800', 'odd_schema']);
    const reasons = imported.skipped.map((s) => s.reason);
    assert.match(reasons[0]!, /contains the control or format character U\+202E: createToolRuntime would refuse it/);
    assert.match(reasons[1]!, /lists 2 tools with this name/);
    assert.match(reasons[2]!, /is 300 bytes, at most 256 allowed/);
    assert.match(reasons[3]!, /lone surrogate/);
    assert.match(reasons[4]!, /cannot be digested: .*lone surrogate/);

    const store = createMemoryStore();
    const owner = await store.acquire('s-listing', { owner: 'host' });
    await owner.startTask('t');
    const gateway = createToolRuntime({ tools: imported.tools, grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
    assert.deepEqual((await gateway.call('lookup', {})).result.outcome, { status: 'succeeded', output: 'ran lookup' });
    assert.deepEqual(served.calls, ['lookup']);

    // The name judged is the Jingwei name, prefix included.
    const prefixed = await importMcpTools(client, { prefix: 'x'.repeat(251) });
    assert.deepEqual(prefixed.manifest.map((m) => m.name), []);
    assert.match(prefixed.skipped.find((s) => s.mcpName === 'lookup')!.reason, /^its tool name \(with the prefix\) is 257 bytes, at most 256 allowed/);
    await client.close();
  });

  it("the import's name rule is createToolRuntime's", async () => {
    const names = ['plain', 'with space', 'dot.ted/slash:colon@at', '天气', 'café', 'emoji😀', 'tab\there', 'nul\u0000', 'del\u007f', 'c1\u0085',
      'shy\u00ad', 'alm\u061c', 'mvs\u180e', 'zw\u200b', 'lrm\u200e', 'ls\u2028', 'lre\u202a', 'wj\u2060', 'iso\u2066', 'bom\ufeff', 'ann\ufff9',
      'lone\udc00', 'é'.repeat(128), 'é'.repeat(129), 'a'.repeat(256), 'a'.repeat(257), ' '];
    const { client } = await serverListing(() => ({ tools: listed(...names) }));
    const imported = new Set((await importMcpTools(client)).manifest.map((m) => m.name));
    for (const name of names) {
      let accepted = true;
      try {
        createToolRuntime({ tools: [tool(name, async () => 'x')], grants: {} });
      } catch {
        accepted = false;
      }
      assert.equal(imported.has(name), accepted, `${JSON.stringify(name)}: runtime ${accepted ? 'accepts' : 'refuses'} it`);
    }
    await client.close();
  });
});

describe('a client the host closed', () => {
  it('a call through it is recorded unavailable before its start marker, never sent: not_executed', async () => {
    const { client, served } = await serverListing(() => ({ tools: listed('lookup') }));
    const { tools } = await importMcpTools(client);
    const store = createMemoryStore();
    const owner = await store.acquire('s-closed', { owner: 'host' });
    await owner.startTask('t');
    const gateway = createToolRuntime({ tools, grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
    assert.equal((await gateway.call('lookup', {})).result.outcome.status, 'succeeded');
    await client.close();

    const execution = await gateway.call('lookup', {});
    assert.equal(execution.startedEvent, null);
    const outcome = execution.result.outcome;
    assert.deepEqual(outcome.status === 'failed' && [outcome.category, outcome.code, outcome.retryable], ['unavailable', 'mcp_disconnected', false]);
    assert.deepEqual(served.calls, ['lookup'], 'the second call was never sent');
    const assessed = assessSession(await store.loadHistory('s-closed')).calls.find((c) => c.callId === execution.call.id);
    assert.equal(assessed?.status, 'not_executed');
  });
});
