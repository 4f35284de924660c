/**
 * An MCP call stopped by its deadline or a cancellation while the server still works on it (u132 #1). The bridge
 * cancelled the request, the SDK's request rejected at once, and the journal said the body ended (`threw`) while the
 * server went on: an operator who saw no charge yet recorded `not_executed`, the inbox took it (the call no longer
 * ran), the retry was made, and the server charged twice. A server told a request is cancelled never answers it,
 * so the bridge now cancels only a read-only tool's request; any other call runs until its server answers.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { connectMcpServer, type McpConnection } from '../../src/mcp.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { decisionInbox } from '../../src/store/inbox.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { untilBodyEnded } from '../support/body-ended.js';
import { sleep } from '../support/runtime.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { fixtureAddress } from './fixtures/mcp-address.js';
import { SLOW_MS, type LoggedRun } from './fixtures/mcp-tools.js';

const dir = tempDir('jingwei-mcp-stopped-');
const opened: McpConnection[] = [];
after(async () => {
  for (const connection of opened) await connection.close();
});

const runs = (log: string): string[] =>
  existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').filter(Boolean).map((l) => (JSON.parse(l) as LoggedRun).tool) : [];

async function slowServer() {
  const log = join(dir, `server-${opened.length}.jsonl`);
  const connection = await connectMcpServer(fixtureAddress({ log, variant: 'slow' }), { trusted: true });
  opened.push(connection);
  const path = tempDbPath(dir, 'journal');
  const store = openSqliteStore(path);
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  // A deadline well inside the server's body, well beyond the call's two commits.
  const gateway = createToolRuntime({ tools: connection.tools, grants: { agent: '*' }, defaultTimeoutMs: SLOW_MS / 4 })
    .bind({ owner, taskId: 't', caller: 'agent' });
  return { log, connection, store, owner, gateway, operator: openSqliteStore(path) };
}

it('a write past its deadline runs until the server answers: a review is refused meanwhile, and its end is journaled as returned', async () => {
  const { log, store, owner, gateway, operator } = await slowServer();
  const charge = await gateway.call('slow_charge', { amount: 5 });
  assert.equal(charge.result.outcome.status === 'failed' && charge.result.outcome.code, 'tool_timeout');
  const review = () => decisionInbox(operator).recordReview({ sessionId: 's', callId: charge.call.id, outcome: 'not_executed', evidence: 'no charge in the ledger yet', actor: 'ops' });
  await sleep(SLOW_MS / 4);
  assert.deepEqual(runs(log), [], 'the server has not made the charge yet');
  await assert.rejects(review(), { name: 'DecisionError', code: 'call_in_flight' });

  const ended = await untilBodyEnded(store, 's', charge.call.id);
  assert.deepEqual(ended.kind.type === 'custom' && ended.kind.payload, { callId: charge.call.id, ended: 'returned' }, 'the server\'s answer ended it');
  assert.deepEqual(runs(log), ['slow_charge']);
  await owner.release();
  await Promise.all([store.close(), operator.close()]);
});

it('a read past its deadline is cancelled at the server: its body ends at once and the server stops', async () => {
  const { log, store, owner, gateway, operator } = await slowServer();
  const read = await gateway.call('slow_lookup', { account: 'a-1' });
  assert.equal(read.result.outcome.status === 'failed' && read.result.outcome.code, 'tool_timeout');
  const ended = await untilBodyEnded(store, 's', read.call.id);
  assert.deepEqual(ended.kind.type === 'custom' && ended.kind.payload, { callId: read.call.id, ended: 'threw' });
  await sleep(SLOW_MS * 1.5);
  assert.deepEqual(runs(log), [], 'the server stopped the cancelled read');
  await owner.release();
  await Promise.all([store.close(), operator.close()]);
});

it('a write the host closes the connection under ends with the connection: the store closes once it has', async () => {
  const { connection, store, owner, gateway, operator } = await slowServer();
  const charge = await gateway.call('slow_charge', { amount: 7 });
  assert.equal(charge.result.outcome.status === 'failed' && charge.result.outcome.code, 'tool_timeout');
  await connection.close();
  const ended = await untilBodyEnded(store, 's', charge.call.id);
  assert.deepEqual(ended.kind.type === 'custom' && ended.kind.payload, { callId: charge.call.id, ended: 'threw' });
  await owner.release();
  await Promise.all([store.close(), operator.close()]);
});
