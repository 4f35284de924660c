import assert from 'node:assert/strict';
import { it } from 'node:test';
import pg from 'pg';
import { JingweiError } from '../../src/errors.js';
import type { PgClient } from '../../src/postgres.js';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import type { OperationKey, TaskId } from '../../src/ids.js';
import { jsonDigest } from '../../src/json/canonical.js';
import { adminPool, describePostgres, freshSchema } from '../support/postgres.js';

const request = (taskId: string, key: string, args: Record<string, unknown>, sessionId = 's-1') => ({
  sessionId,
  operation: { taskId: taskId as TaskId, key: key as OperationKey },
  arguments: args as never,
});

describePostgres('PostgresIdempotencyStore', (url) => {
  async function open() {
    const schema = freshSchema();
    const store = await PostgresIdempotencyStore.open(url, { schema });
    await adminPool(url).query(`CREATE TABLE "${schema}".orders (id SERIAL PRIMARY KEY, item TEXT NOT NULL)`);
    const orders = async () => Number((await adminPool(url).query(`SELECT count(*) AS n FROM "${schema}".orders`)).rows[0].n);
    const insert = (item: string) => async (client: PgClient) => {
      const { rows } = await client.query<{ id: number }>(`INSERT INTO "${schema}".orders (item) VALUES ($1) RETURNING id`, [item]);
      return { orderId: rows[0]!.id };
    };
    return { store, orders, insert, schema };
  }

  it('runs a write once per (task, key), replays the stored result, rejects changed arguments', async () => {
    const { store, orders, insert } = await open();
    assert.deepEqual(await store.run(request('t', 'k', { a: 1, b: 2 }), insert('book')), { result: { orderId: 1 }, replayed: false });
    assert.deepEqual(await store.run(request('t', 'k', { b: 2, a: 1 }), insert('book')), { result: { orderId: 1 }, replayed: true });
    await assert.rejects(store.run(request('t', 'k', { a: 1, b: 3 }), insert('book')), { code: 'idempotency_conflict' });
    assert.equal((await store.run(request('other-task', 'k', { a: 1, b: 2 }), insert('pen'))).replayed, false, 'keys are scoped by task');
    // A task id is unique within its session only: another session's (t, k) is another operation, and it writes.
    assert.deepEqual(await store.run(request('t', 'k', { a: 1, b: 2 }, 's-2'), insert('book')), { result: { orderId: 3 }, replayed: false }, 'keys are scoped by session');
    assert.equal((await store.reconcile(request('t', 'k', { a: 1, b: 2 }, 's-3'))).outcome, 'not_executed');
    assert.equal(await orders(), 3);
    assert.equal(await store.count(), 3);
    // The first attempt gives back what it recorded, as every replay does (u120 #9: a getter read again differed).
    let reads = 0;
    const live = { get v() { reads += 1; return reads; } };
    const first = await store.run(request('t', 'getter', {}), async () => live as unknown as { v: number });
    assert.deepEqual(first.result, (await store.run(request('t', 'getter', {}), async () => ({ v: 0 }))).result);
    await store.close();
  });

  it('opened by several processes at once on a schema nobody created yet, beside the journal store: every open succeeds', async () => {
    // A host's startup opens its journal and its dedup helper together, and several hosts start at once. A bare
    // CREATE SCHEMA IF NOT EXISTS fails one of two sessions running it at the same moment (a unique violation).
    const { openPostgresStore } = await import('../../src/postgres.js');
    for (let round = 0; round < 5; round++) {
      const schema = freshSchema();
      const opened = await Promise.allSettled([
        ...Array.from({ length: 6 }, () => PostgresIdempotencyStore.open(url, { schema })),
        ...Array.from({ length: 2 }, () => openPostgresStore(url, { schema })),
      ]);
      const failed = opened.flatMap((o) => (o.status === 'rejected' ? [String((o.reason as Error).message)] : []));
      for (const o of opened) if (o.status === 'fulfilled') await o.value.close();
      assert.deepEqual(failed, [], `round ${round}`);
    }
  });

  it('upgrades a dedup table an older version keyed by (task, key): its records still replay, in every session', async () => {
    const schema = freshSchema();
    const admin = adminPool(url);
    await admin.query(`CREATE SCHEMA "${schema}"`);
    await admin.query(`CREATE TABLE "${schema}".jw_idempotency (task_id TEXT NOT NULL, key TEXT NOT NULL, arguments_digest TEXT NOT NULL,
      result JSONB NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (task_id, key))`);
    await admin.query(`INSERT INTO "${schema}".jw_idempotency (task_id, key, arguments_digest, result) VALUES ('t', 'k', $1, '{"orderId":"old"}')`, [jsonDigest({ a: 1 })]);
    // Two processes open it at once: one upgrades, the other finds it upgraded.
    const [store, other] = await Promise.all([PostgresIdempotencyStore.open(url, { schema }), PostgresIdempotencyStore.open(url, { schema })]);
    await other.close();
    let writes = 0;
    const write = async () => ({ orderId: ++writes });
    assert.deepEqual(await store.run(request('t', 'k', { a: 1 }, 's-9'), write), { result: { orderId: 'old' }, replayed: true });
    const answer = await store.reconcile(request('t', 'k', { a: 1 }, 's-8'));
    assert.equal(answer.outcome, 'completed');
    assert.match(answer.evidence, /written before records named their session/);
    await assert.rejects(store.run(request('t', 'k', { a: 2 }, 's-7'), write), { code: 'idempotency_conflict' });
    assert.equal((await store.run(request('t', 'k2', {}, 's-1'), write)).replayed, false);
    assert.equal((await store.run(request('t', 'k2', {}, 's-2'), write)).replayed, false);
    assert.equal((await store.run(request('t', 'k2', {}, 's-1'), write)).replayed, true);
    assert.equal(writes, 2);
    await store.close();
    const again = await PostgresIdempotencyStore.open(url, { schema });
    assert.equal(await again.count(), 3);
    const { rows } = await admin.query(`SELECT session_id, task_id, key FROM "${schema}".jw_idempotency ORDER BY session_id, key`);
    assert.deepEqual(rows, [{ session_id: '', task_id: 't', key: 'k' }, { session_id: 's-1', task_id: 't', key: 'k2' }, { session_id: 's-2', task_id: 't', key: 'k2' }]);
    await again.close();
  });

  it('a write that throws leaves neither the business row nor the dedup record', async () => {
    const { store, orders, insert } = await open();
    await assert.rejects(store.run(request('t', 'k', {}), async (client) => {
      await insert('x')(client);
      throw new Error('provider down');
    }), /provider down/);
    assert.equal(await orders(), 0);
    assert.equal(await store.count(), 0);
    await store.close();
  });

  it('a result JSON or PostgreSQL cannot hold (a BigInt, a lone surrogate) and a write that is no function are bad input, with nothing recorded', async () => {
    const { store, orders, insert } = await open();
    const returning = (value: unknown) => async (client: PgClient) => {
      await insert('x')(client);
      return value as never;
    };
    await assert.rejects(store.run(request('t', 'k', {}), returning({ n: 1n })), { code: 'invalid_input', field: 'result' });
    await assert.rejects(store.run(request('t', 'k', {}), returning({ note: 'half \ud800 pair' })), { code: 'invalid_input', field: 'result', message: /lone surrogate/ });
    await assert.rejects(store.run(request('t', 'k', {}), 'insert' as never), { code: 'invalid_input', field: 'write' });
    assert.equal(await orders(), 0, 'the business writes rolled back');
    assert.equal(await store.count(), 0);
    await store.close();
  });

  it('concurrent attempts of one key: exactly one writes, the others replay its result', async () => {
    const { store, orders, insert } = await open();
    const outcomes = await Promise.all(Array.from({ length: 8 }, () => store.run(request('t', 'same', { x: 1 }), async (client) => {
      const written = await insert('race')(client);
      await new Promise((resolve) => setTimeout(resolve, 20));
      return written;
    })));
    assert.equal(outcomes.filter((o) => !o.replayed).length, 1);
    assert.equal(new Set(outcomes.map((o) => JSON.stringify(o.result))).size, 1);
    assert.equal(await orders(), 1);
    await store.close();
  });

  it("the helper's own failures are typed; what the write throws, PostgreSQL's errors included, passes through unchanged", async () => {
    const { store, insert } = await open();
    let thrown: unknown;
    await assert.rejects(store.run(request('t', 'k', {}), async (client) => {
      try {
        await client.query('SELECT * FROM no_such_table_here');
      } catch (error) {
        thrown = error;
        throw error;
      }
      return 1;
    }), (error: unknown) => error === thrown && !(error instanceof JingweiError) && (error as { code?: string }).code === '42P01');
    assert.equal(await store.count(), 0, 'nothing recorded');
    // The same kind of failure in the helper's own statement is the library's: its table dropped under it.
    const table = (store as unknown as { table: string }).table;
    await adminPool(url).query(`DROP TABLE ${table}`);
    let writes = 0;
    const counted = async (client: PgClient) => { writes += 1; return insert('x')(client); };
    await assert.rejects(store.run(request('t', 'k', {}), counted), { name: 'StoreUnavailableError', code: 'store_failure', message: /missing/ });
    await assert.rejects(store.reconcile(request('t', 'k', {})), { code: 'store_failure' });
    await assert.rejects(store.count(), { code: 'store_failure' });
    assert.equal(writes, 0);
    await store.close();
  });

  it('a pool that can no longer connect is StoreUnavailableError, not the driver\'s error', async () => {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const store = await PostgresIdempotencyStore.open(pool, { schema: freshSchema() });
    await pool.end();
    await assert.rejects(store.run(request('t', 'k', {}), async () => 1), { code: 'store_failure' });
    await assert.rejects(store.reconcile(request('t', 'k', {})), { code: 'store_failure' });
    await store.close();
  });

  it('an attempt stalled half-way through its write blocks its key only until the server ends it, and never writes', { timeout: 30_000 }, async () => {
    const schema = freshSchema();
    const stalling = await PostgresIdempotencyStore.open(url, { schema, idleInTransactionTimeoutMs: 400 });
    const retrying = await PostgresIdempotencyStore.open(url, { schema, lockTimeoutMs: 100 });
    await adminPool(url).query(`CREATE TABLE "${schema}".orders (id SERIAL PRIMARY KEY, item TEXT NOT NULL)`);
    const insert = (item: string) => async (client: PgClient) => {
      const { rows } = await client.query<{ id: number }>(`INSERT INTO "${schema}".orders (item) VALUES ($1) RETURNING id`, [item]);
      return { orderId: rows[0]!.id };
    };
    let resume = () => {};
    const paused = new Promise<void>((resolve) => { resume = resolve; });
    let inWrite = () => {};
    const writing = new Promise<void>((resolve) => { inWrite = resolve; });
    // The first attempt inserts its order, then stalls with its transaction open (a paused or hung process).
    const first = stalling.run(request('t', 'k', {}), async (client) => {
      const order = await insert('first')(client);
      inWrite();
      await paused;
      return order;
    }).then(() => null, (error: unknown) => error);
    try {
      await writing;
      let writes = 0;
      const retry = async (client: PgClient) => { writes += 1; return insert('retry')(client); };
      await assert.rejects(retrying.run(request('t', 'k', {}), retry), { name: 'StoreBusyError', code: 'store_busy' }, 'waits lockTimeoutMs, not for ever');
      assert.equal(writes, 0);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const retried = await retrying.run(request('t', 'k', {}), retry);
      assert.equal(retried.replayed, false, 'once the server ended the stalled transaction, the key is free');
      assert.equal(writes, 1);
      resume();
      assert.equal(await first.then((error) => (error as { code?: unknown } | null)?.code), 'store_failure', 'the stalled attempt cannot commit');
      const items = (await adminPool(url).query(`SELECT item FROM "${schema}".orders`)).rows.map((r: { item: string }) => r.item);
      assert.deepEqual(items, ['retry'], 'exactly one order: the stalled one rolled back');
      assert.deepEqual(await retrying.run(request('t', 'k', {}), retry), { result: retried.result, replayed: true });
    } finally {
      // Whatever failed above, the stalled attempt ends and both pools close, so the file's process can exit.
      resume();
      await first;
      await stalling.close();
      await retrying.close();
    }
  });

  it('refuses timeouts that are not integers in range', async () => {
    await assert.rejects(PostgresIdempotencyStore.open(url, { lockTimeoutMs: 0 }), { code: 'invalid_input' });
    await assert.rejects(PostgresIdempotencyStore.open(url, { idleInTransactionTimeoutMs: -1 }), { code: 'invalid_input' });
    await assert.rejects(PostgresIdempotencyStore.open(url, { lockTimeoutMs: 1.5 }), { code: 'invalid_input' });
    // PostgreSQL takes at most 2^31 - 1 ms: a larger one opened, then failed every run and every reconcile.
    await assert.rejects(PostgresIdempotencyStore.open(url, { lockTimeoutMs: 2 ** 31 }), { code: 'invalid_input', field: 'lockTimeoutMs' });
    await assert.rejects(PostgresIdempotencyStore.open(url, { idleInTransactionTimeoutMs: 3e9 }), { code: 'invalid_input', field: 'idleInTransactionTimeoutMs' });
    await assert.rejects(PostgresIdempotencyStore.open(url, null as never), { code: 'invalid_input', field: 'options' });
    await assert.rejects(PostgresIdempotencyStore.open('http://example.invalid/db'), { code: 'invalid_input', field: 'url' });
    const client = new pg.Client({ connectionString: url });
    await assert.rejects(PostgresIdempotencyStore.open(client as never), { code: 'invalid_input', field: 'urlOrPool' });
  });

  it('a result is recorded as the JSON data it is: text holding backslashes is stored and replayed as it was, anything JSON would change is refused', async () => {
    const { store, orders, insert } = await open();
    // What Python's json.dumps makes of an emoji: plain backslashes, no surrogate. It was refused as a lone surrogate.
    const body = { body: '{"msg": "hi \\ud83d\\ude00"}', path: 'C:\\ud800data' };
    const wrote = async (client: PgClient) => {
      await insert('x')(client);
      return body;
    };
    assert.deepEqual(await store.run(request('t', 'py', {}), wrote), { result: body, replayed: false });
    assert.deepEqual(await store.run(request('t', 'py', {}), wrote), { result: body, replayed: true });
    assert.deepEqual((await store.reconcile(request('t', 'py', {}))).output, body);
    const returning = (value: unknown) => async (client: PgClient) => {
      await insert('y')(client);
      return value as never;
    };
    for (const value of [new Map([[1, 2]]), { n: Number.NaN }, { at: new Date(0) }, { a: undefined }]) {
      await assert.rejects(store.run(request('t', 'odd', {}), returning(value)), { code: 'invalid_input', field: 'result' });
    }
    assert.equal(await orders(), 1, 'only the first write committed');
    await store.close();
  });

  it("a write that ends the helper's transaction itself is refused and rolled back: no business row without its record", async () => {
    const { store, orders, insert, schema } = await open();
    const sneaky = async (client: PgClient) => {
      await client.query('ROLLBACK');
      await client.query('BEGIN');
      return insert('x')(client);
    };
    // Autocommit after its ROLLBACK: the order commits at once, and nothing but the mark can say so.
    const autocommit = async (client: PgClient) => {
      await client.query('ROLLBACK');
      return insert('y')(client);
    };
    await assert.rejects(store.run(request('t', 'auto', {}), autocommit), { code: 'invalid_input', field: 'write' });
    assert.equal(await orders(), 1);
    assert.equal((await store.reconcile(request('t', 'auto', {}))).outcome, 'unknown');
    // The same, then a throw: before, the throw passed through with nothing marked, and the next attempt paid again.
    const autocommitThenThrow = async (client: PgClient) => {
      await autocommit(client);
      throw new Error('the receipt could not be read');
    };
    await assert.rejects(store.run(request('t', 'auto-throw', {}), autocommitThenThrow), { code: 'invalid_input', field: 'write', message: /and then threw/ });
    assert.equal(await orders(), 2);
    assert.equal((await store.reconcile(request('t', 'auto-throw', {}))).outcome, 'unknown');
    // The same, then a transaction of its own that a failed statement aborts: before, the helper took the aborted
    // transaction for its own, and nothing was marked.
    const abortedOwn = async (client: PgClient) => {
      await autocommit(client);
      await client.query('BEGIN');
      await client.query('SELECT 1 / 0');
      return 'never';
    };
    await assert.rejects(store.run(request('t', 'aborted', {}), abortedOwn), { code: 'invalid_input', field: 'write', message: /and then threw/ });
    assert.equal((await store.reconcile(request('t', 'aborted', {}))).outcome, 'unknown');
    // A ROLLBACK lets another attempt of the key in, which pays and records; this one's record must not go over it.
    const other = await PostgresIdempotencyStore.open(url, { schema });
    const letsAnotherIn = async (client: PgClient) => {
      await client.query('ROLLBACK');
      assert.equal((await other.run(request('t', 'raced', {}), insert('other'))).replayed, false);
      await client.query('BEGIN');
      return insert('this')(client);
    };
    await assert.rejects(store.run(request('t', 'raced', {}), letsAnotherIn), { code: 'invalid_input', field: 'write' });
    assert.equal((await store.reconcile(request('t', 'raced', {}))).outcome, 'unknown', 'not completed: two attempts wrote');
    await other.close();
    // A write whose own statement failed aborted the helper's transaction: its failure passes through, nothing marked.
    await assert.rejects(store.run(request('t', 'bad-sql', {}), async (client) => { await client.query('SELECT no_such_column FROM pg_class'); return 'never'; }), { code: '42703' });
    assert.equal((await store.reconcile(request('t', 'bad-sql', {}))).outcome, 'not_executed');
    await adminPool(url).query(`DELETE FROM "${schema}".orders`);
    await assert.rejects(store.run(request('t', 'k', {}), sneaky), { code: 'invalid_input', field: 'write' });
    assert.equal(await orders(), 0);
    // What it wrote outside a transaction after its ROLLBACK would have committed: the operation is marked unknown,
    // and refused, until a person has checked (before, the reconciler said not_executed and a retry wrote again).
    assert.equal((await store.reconcile(request('t', 'k', {}))).outcome, 'unknown');
    await assert.rejects(store.run(request('t', 'k', {}), insert('x')), { code: 'invalid_input', field: 'request' });
    await adminPool(url).query(`DELETE FROM "${schema}".jw_idempotency WHERE key = 'k'`);
    assert.equal((await store.run(request('t', 'k', {}), insert('x'))).replayed, false);
    assert.equal(await orders(), 1, 'written once');
    await store.close();
    await assert.rejects(store.run(request('t', 'k2', {}), insert('x')), { name: 'StoreClosedError' });
  });

  it("a write that commits the helper's transaction itself commits the claim's mark with it: unknown, refused, until a person deletes it", async () => {
    const { store, orders, insert, schema } = await open();
    const other = await PostgresIdempotencyStore.open(url, { schema });
    let seenMeanwhile: string | undefined;
    // Before, the claim committed holding the arguments' digest and a null result: a host that died here left a
    // record answering completed with a null output for whatever the write had not got to.
    const dies = async (client: PgClient) => {
      await insert('x')(client);
      await client.query('COMMIT');
      seenMeanwhile = (await other.reconcile(request('t', 'k', {}))).outcome;
      throw new Error('the host died here');
    };
    await assert.rejects(store.run(request('t', 'k', {}), dies), (error: unknown) => error instanceof JingweiError && error.code === 'invalid_input' &&
      /ended the helper's transaction itself \(a COMMIT or ROLLBACK on the client it was given\) and then threw/.test(error.message) && (error.cause as Error).message === 'the host died here');
    assert.equal(seenMeanwhile, 'unknown');
    assert.equal(await orders(), 1);
    const answer = await store.reconcile(request('t', 'k', {}));
    assert.equal(answer.outcome, 'unknown');
    assert.match(answer.evidence, /ended the helper's transaction itself: whether it committed is unknown/);
    let ran = 0;
    await assert.rejects(store.run(request('t', 'k', {}), async (client) => { ran += 1; return insert('x')(client); }), { code: 'invalid_input', field: 'request' });
    assert.equal(ran, 0);
    await adminPool(url).query(`DELETE FROM "${schema}".jw_idempotency WHERE key = 'k'`);
    assert.equal((await store.run(request('t', 'k', {}), insert('x'))).replayed, false);
    await other.close();
    await store.close();
  });

  it('opened at once by pools whose transactions default to REPEATABLE READ: every open succeeds', async () => {
    for (const level of ['repeatable read', 'serializable']) {
      const schema = freshSchema();
      const pools = Array.from({ length: 4 }, () => new pg.Pool({ connectionString: url, max: 2, options: `-c default_transaction_isolation=${level.replace(' ', '\\ ')}` }));
      const opened = await Promise.allSettled(pools.map((pool) => PostgresIdempotencyStore.open(pool as never, { schema })));
      const failed = opened.flatMap((o) => (o.status === 'rejected' ? [String((o.reason as Error).message)] : []));
      for (const pool of pools) await pool.end();
      assert.deepEqual(failed, [], level);
    }
  });
});
