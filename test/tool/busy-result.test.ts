/**
 * A busy store does not lose a result. A non-idempotent call's body made its write, and the store answered
 * `store_busy` to the result's commit: another connection held the write lock past the store's busy timeout. Before,
 * the call threw `recording_failed` at once, its journal ended at the start marker, and a person had to review a
 * call whose outcome the process knew. A busy store wrote nothing, so the result is written again, a bounded number
 * of times (RUNTIME_DEFAULTS.resultWriteAttempts); past that the call fails as before, the result in the error.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import Database from 'better-sqlite3';
import { RUNTIME_DEFAULTS } from '../../src/limits.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { assessSession } from '../../src/tool/assess.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool } from '../../src/tool/types.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir('jingwei-busy-result-');
const BUSY_MS = 150;

/** A transfer whose body, once it made its write, has another connection hold the file's write lock for `holdMs`. */
function setup(holdMs: number) {
  const path = tempDbPath(dir);
  const store = openSqliteStore(path, { busyTimeoutMs: BUSY_MS });
  let writes = 0;
  const transfer: Tool = {
    name: 'transfer',
    metadata: new ToolMetadata('moves money', { type: 'object' }).withEffect('non_idempotent', 'v1'),
    execute: async () => {
      writes += 1;
      const other = new Database(path, { timeout: 0 });
      other.exec('BEGIN IMMEDIATE');
      setTimeout(() => {
        other.exec('COMMIT');
        other.close();
      }, holdMs);
      return 'sent';
    },
  };
  return { store, transfer, writes: () => writes };
}

it('a result the store was too busy to take is written again once the lock is free: the call succeeds, nothing to review', async () => {
  const { store, transfer, writes } = setup(BUSY_MS * 1.5);
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  const gateway = createToolRuntime({ tools: [transfer], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  const execution = await gateway.call('transfer', {});
  assert.equal(execution.result.outcome.status, 'succeeded');
  assert.equal(writes(), 1);
  const history = await store.loadHistory('s');
  assert.deepEqual(history.map((e) => e.kind.type).filter((t) => t.startsWith('tool_')), ['tool_call', 'tool_started', 'tool_result']);
  assert.equal(assessSession(history).totals.byNextStep.needs_review, 0);
  await owner.release();
  await store.close();
});

it(`a lock held past ${RUNTIME_DEFAULTS.resultWriteAttempts} busy waits: recording_failed as before, the result in the error, the call in doubt`, async () => {
  const { store, transfer } = setup(BUSY_MS * (RUNTIME_DEFAULTS.resultWriteAttempts + 3));
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  const gateway = createToolRuntime({ tools: [transfer], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  await assert.rejects(gateway.call('transfer', {}), (error: Error & { code?: string; stage?: string; result?: { outcome: { status: string } } }) => {
    assert.equal(error.code, 'recording_failed');
    assert.equal(error.stage, 'result');
    assert.equal(error.result?.outcome.status, 'succeeded');
    return true;
  });
  const history = await store.loadHistory('s');
  assert.deepEqual(history.map((e) => e.kind.type).filter((t) => t.startsWith('tool_')), ['tool_call', 'tool_started']);
  await store.close();
});
