/**
 * The key a provider deduplicates on names the session apart from any other of the same id
 * (docs/bridges-in-production.md#idempotency-keys-end-to-end). Two journals that both hold session `chat-1`, task
 * `task-1` and operation `op-1` (one per tenant against one billing API) gave the same key, and a server honouring it
 * answered the second tenant's upgrade from the first's record: never made, recorded as done with the first tenant's
 * output (pass r63 #2). The key now also digests the event id minted for the operation's first attempt, which each
 * journal minted for itself; it stays the same on every attempt of the operation, under a new owner of the session,
 * and for its reconciler.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolBodyError } from '../../src/errors.js';
import { reconcileUncertainCalls } from '../../src/review.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { externalIdempotencyKey } from '../../src/tool/idempotency.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool } from '../../src/tool/types.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

it('two journals holding the same session, task and operation ids give different keys; one operation keeps its key across attempts, owners and its reconciler', async () => {
  const dir = tempDir();
  const keys: Record<string, string[]> = {};
  const seen = (journal: string, key: string) => {
    keys[journal] = [...(keys[journal] ?? []), key];
  };
  const tools = (journal: string, fail: { first: boolean }): Tool[] => [
    {
      name: 'upgrade',
      metadata: new ToolMetadata('upgrades a plan', { type: 'object' }).withEffect('idempotent', 'v1'),
      async execute(request) {
        seen(journal, externalIdempotencyKey(request));
        if (fail.first) {
          fail.first = false;
          throw new ToolBodyError('connection_reset', 'the billing API dropped the connection');
        }
        return 'upgraded';
      },
    },
    {
      name: 'charge',
      metadata: new ToolMetadata('charges', { type: 'object' }).withEffect('non_idempotent', 'v1'),
      async execute(request) {
        seen(journal, externalIdempotencyKey(request));
        throw new Error('ECONNRESET');
      },
      reconcile(request) {
        seen(`${journal}:reconciler`, externalIdempotencyKey(request));
        return { outcome: 'unknown', evidence: 'the billing API cannot say' };
      },
    },
  ];
  for (const journal of ['acme', 'globex']) {
    const path = tempDbPath(dir, journal);
    const store = openSqliteStore(path);
    const fail = { first: true };
    const runtime = createToolRuntime({ tools: tools(journal, fail), grants: { agent: '*' } });
    const owner = await store.acquire('chat-1', { owner: 'host' });
    await owner.startTask('task-1');
    const gateway = runtime.bind({ owner, taskId: 'task-1', caller: 'agent' });
    const failed = await gateway.callWithOptions('upgrade', { plan: 'pro' }, { operationKey: 'op-1' });
    assert.equal(failed.result.outcome.status, 'failed');
    await owner.release();
    // A new handle and a new owner retry it: the session's origin is read, not remembered.
    const other = openSqliteStore(path);
    const next = await other.acquire('chat-1', { owner: 'host-2' });
    const retried = await runtime.bind({ owner: next, taskId: 'task-1', caller: 'agent' })
      .callWithOptions('upgrade', { plan: 'pro' }, { retry: prepareToolRetry(await other.loadHistory('chat-1'), failed.call.id) });
    assert.equal(retried.result.outcome.status, 'succeeded');
    const charge = await runtime.bind({ owner: next, taskId: 'task-1', caller: 'agent' }).callWithOptions('charge', {}, { operationKey: 'op-2' });
    assert.equal(charge.result.outcome.status, 'failed');
    await reconcileUncertainCalls(next, tools(journal, fail), await other.loadHistory('chat-1'));
    assert.equal(keys[journal]!.length, 3);
    assert.equal(keys[journal]![0], keys[journal]![1], `${journal}: the retry sends the first attempt's key`);
    assert.deepEqual(keys[`${journal}:reconciler`], [keys[journal]![2]], `${journal}: the reconciler looks the charge up by the key its body sent`);
    await next.release();
    await other.close();
    await store.close();
  }
  assert.notEqual(keys.acme![0], keys.globex![0], 'the same ids in two journals: two keys');
  assert.notEqual(keys.acme![2], keys.globex![2]);
});
