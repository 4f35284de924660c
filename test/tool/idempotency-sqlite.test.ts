import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { externalIdempotencyKey } from '../../src/tool/idempotency.js';
import type { TaskId, OperationKey } from '../../src/ids.js';
import { countOrders, openBusiness } from '../support/orders.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir();
const request = (taskId: string, key: string, args: Record<string, unknown>) => ({
  operation: { taskId: taskId as TaskId, key: key as OperationKey },
  arguments: args as never,
});

describe('SqliteIdempotencyStore', () => {
  it('runs a write once per (task, key), replays its stored result, rejects changed arguments', () => {
    const path = tempDbPath(dir, 'business');
    const business = openBusiness(path);
    let writes = 0;
    const write = (db: typeof business.db) => {
      writes += 1;
      db.prepare('INSERT INTO orders (task_id, key, item) VALUES (?, ?, ?)').run('t', 'k', 'book');
      return { receipt: writes };
    };
    assert.deepEqual(business.run(request('t', 'k', { a: 1, b: 2 }), write), { result: { receipt: 1 }, replayed: false });
    assert.deepEqual(business.run(request('t', 'k', { b: 2, a: 1 }), write), { result: { receipt: 1 }, replayed: true }, 'key order is not a different argument');
    assert.throws(() => business.run(request('t', 'k', { a: 1, b: 3 }), write), { code: 'idempotency_conflict' });
    assert.deepEqual(business.run(request('other-task', 'k', { a: 1, b: 2 }), write).replayed, false, 'keys are scoped by task');
    assert.equal(writes, 2);
    assert.equal(countOrders(path), 2);
    business.close();
  });

  it('a write that throws leaves neither the business row nor the dedup record', () => {
    const path = tempDbPath(dir, 'business');
    const business = openBusiness(path);
    assert.throws(() => business.run(request('t', 'k', {}), (db) => {
      db.prepare('INSERT INTO orders (task_id, key, item) VALUES (?, ?, ?)').run('t', 'k', 'x');
      throw new Error('provider down');
    }), /provider down/);
    assert.equal(countOrders(path), 0);
    assert.equal(business.count(), 0);
    const again = business.run(request('t', 'k', {}), () => ({ ok: true }));
    assert.equal(again.replayed, false, 'the next attempt runs, since nothing was recorded');
    business.close();
  });

  it('refuses a request without an operation, and forms the external key from task and key', () => {
    const business = openBusiness(tempDbPath(dir, 'business'));
    assert.throws(() => business.run({ arguments: {} } as never, () => 1), { code: 'invalid_input' });
    assert.equal(externalIdempotencyKey(request('task-1', 'operation_x', {})), 'task-1:operation_x');
    business.close();
  });
});
