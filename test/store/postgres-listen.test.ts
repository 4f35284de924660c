/**
 * One listening connection per channel. Each `awaitDecision` used to hold a pool connection of its own for its whole
 * wait: twenty hosts' waits on a pool of ten starved the store (waits failed with store_busy or store_failure, and
 * heartbeats could not renew leases, so another host took over live sessions). And a LISTEN connection the server
 * ended went unnoticed: no notification arrived again. Waiters and live views now share one connection per channel,
 * opened again when the server ends it.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { watchQueue } from '../../src/decisions.js';
import { awaitDecision, decisionInbox } from '../../src/store/inbox.js';
import { openPostgresStore } from '../../src/postgres.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { sleep, tool } from '../support/runtime.js';
import { adminPool, describePostgres, freshSchema } from '../support/postgres.js';
import pg from 'pg';

describePostgres('waiting for decisions on PostgreSQL', (url) => {
  async function pendingRequests(schema: string, n: number): Promise<string[]> {
    const store = await openPostgresStore(url, { schema, poolSize: 2 });
    const mail = tool('send_mail', async () => 'sent', new ToolMetadata('mails', { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('boss'));
    const runtime = createToolRuntime({ tools: [mail], grants: { agent: '*' }, approvers: { boss: async () => ({ decision: 'pending' }) } });
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const owner = await store.acquire(`s-${i}`, { owner: 'host' });
      await owner.startTask('t');
      ids.push((await runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('send_mail', { n: i })).result.approval!.requestId);
      await owner.release();
    }
    await store.close();
    return ids;
  }

  it('twenty waits on a pool of four share one connection: every wait ends, and the store keeps writing meanwhile', { timeout: 60_000 }, async () => {
    const schema = freshSchema();
    const ids = await pendingRequests(schema, 20);
    const store = await openPostgresStore(url, { schema, poolSize: 4, connectTimeoutMs: 2_000 });
    const waits = ids.map((id) => awaitDecision(store, id, { timeoutMs: 30_000 }).then((row) => row.state, (error: { code?: string }) => error.code));
    await sleep(300);
    // A writer on the same store is not starved: it acquires a session and appends while twenty waits are open.
    const owner = await store.acquire('busy-writer', { owner: 'writer', leaseMs: 1_000 });
    await owner.startTask('t');
    const operator = await openPostgresStore(url, { schema, poolSize: 2 });
    for (const id of ids) await decisionInbox(operator).approve(id, { actor: 'alice' });
    assert.deepEqual(await Promise.all(waits), ids.map(() => 'decided'));
    await owner.startTask('t2');
    await owner.release();
    await operator.close();
    await store.close();
  });

  it('a listening connection the server ends is opened again, and a later decision still wakes its waiter', { timeout: 60_000 }, async () => {
    const schema = freshSchema();
    const [first, second] = await pendingRequests(schema, 2);
    const store = await openPostgresStore(url, { schema, poolSize: 3 });
    const operator = await openPostgresStore(url, { schema, poolSize: 2 });
    // pollMs far above the test: only a notification can wake the waiter in time.
    const waiting = awaitDecision(store, second!, { timeoutMs: 20_000, pollMs: 60_000 });
    await sleep(300);
    const { rows } = await adminPool(url).query(`SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE query LIKE 'LISTEN jw_inbox_%' AND pid <> pg_backend_pid()`);
    assert.ok(rows.length >= 1, 'the listening connection was found and ended');
    await sleep(1_500);
    await decisionInbox(operator).approve(first!, { actor: 'alice' });
    await decisionInbox(operator).approve(second!, { actor: 'alice' });
    // Its safety poll comes only after a minute, past its deadline: only a notification can end this wait decided.
    assert.equal((await waiting).state, 'decided');
    await operator.close();
    await store.close();
  });

  it('a pool the listening connections fill: a write fails store_busy saying what holds the connections', { timeout: 30_000 }, async () => {
    const schema = freshSchema();
    const [id] = await pendingRequests(schema, 1);
    const store = await openPostgresStore(url, { schema, poolSize: 2, connectTimeoutMs: 300 });
    const watching = await watchQueue(store, () => {});
    const waiting = awaitDecision(store, id!, { timeoutMs: 20_000 }).then(() => 'decided', (error: { code?: string }) => error.code);
    try {
      await sleep(200);
      await assert.rejects(store.acquire('starved', { owner: 'host' }), (error: { code?: string; message?: string }) =>
        error.code === 'store_busy' && /all 2 pool connections stayed busy \(2 of them held to listen: a wait for a decision and a live view; give the pool room/.test(error.message ?? ''));
    } finally {
      await watching?.();
      await store.close();
    }
    assert.ok(['store_busy', 'store_closed'].includes(String(await waiting)), 'the wait ends too: its own reads find the pool as full');
  });

  it('close() with a queue watcher still subscribed returns, and gives its listening connection back, on its own pool and on the host\'s', { timeout: 30_000 }, async () => {
    const outcome = (closing: Promise<void>) => Promise.race([closing.then(() => 'closed'), sleep(10_000).then(() => 'still closing after 10 s')]);
    const own = await openPostgresStore(url, { schema: freshSchema(), poolSize: 2 });
    assert.notEqual(await watchQueue(own, () => {}), null);
    assert.equal(await outcome(own.close()), 'closed');

    const pool = new pg.Pool({ connectionString: url, max: 2 });
    const hosted = await openPostgresStore(pool, { schema: freshSchema() });
    assert.notEqual(await watchQueue(hosted, () => {}), null);
    assert.equal(await outcome(hosted.close()), 'closed');
    assert.equal(pool.totalCount - pool.idleCount, 0, 'no connection of the host\'s pool is still checked out');
    assert.equal(await outcome(pool.end()), 'closed');
  });
});
