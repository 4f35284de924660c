import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { PgClient } from '../../src/postgres.js';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import type { OperationKey, TaskId } from '../../src/ids.js';
import { adminPool, describePostgres, freshSchema } from '../support/postgres.js';

const request = (taskId: string, key: string, args: Record<string, unknown>) => ({
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
    return { store, orders, insert };
  }

  it('runs a write once per (task, key), replays the stored result, rejects changed arguments', async () => {
    const { store, orders, insert } = await open();
    assert.deepEqual(await store.run(request('t', 'k', { a: 1, b: 2 }), insert('book')), { result: { orderId: 1 }, replayed: false });
    assert.deepEqual(await store.run(request('t', 'k', { b: 2, a: 1 }), insert('book')), { result: { orderId: 1 }, replayed: true });
    await assert.rejects(store.run(request('t', 'k', { a: 1, b: 3 }), insert('book')), { code: 'idempotency_conflict' });
    assert.equal((await store.run(request('other-task', 'k', { a: 1, b: 2 }), insert('pen'))).replayed, false, 'keys are scoped by task');
    assert.equal(await orders(), 2);
    assert.equal(await store.count(), 2);
    await store.close();
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
});
