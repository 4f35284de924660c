import assert from 'node:assert/strict';
import { existsSync, linkSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { JingweiError } from '../../src/errors.js';
import { openSqliteStore, SqliteIdempotencyStore } from '../../src/sqlite.js';
import { externalIdempotencyKey } from '../../src/tool/idempotency.js';
import { jsonDigest } from '../../src/json/canonical.js';
import type { TaskId, OperationKey } from '../../src/ids.js';
import { countOrders, openBusiness } from '../support/orders.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir();
const request = (taskId: string, key: string, args: Record<string, unknown>, sessionId = 's-1', operationOrigin = 'evt_first') => ({
  sessionId,
  operationOrigin,
  operation: { taskId: taskId as TaskId, key: key as OperationKey },
  arguments: args as never,
});

/** A write that orders a book and returns its receipt, numbered by how many times it ran (`writes()`). */
function bookOrders() {
  let count = 0;
  const write = (db: { prepare(sql: string): { run(...params: unknown[]): unknown } }) => {
    count += 1;
    db.prepare('INSERT INTO orders (task_id, key, item) VALUES (?, ?, ?)').run('t', 'k', 'book');
    return { receipt: count };
  };
  return { write, writes: () => count };
}

describe('SqliteIdempotencyStore', () => {
  it('runs a write once per (task, key), replays its stored result, rejects changed arguments', () => {
    const path = tempDbPath(dir, 'business');
    const business = openBusiness(path);
    const { write, writes } = bookOrders();
    assert.deepEqual(business.run(request('t', 'k', { a: 1, b: 2 }), write), { result: { receipt: 1 }, replayed: false });
    assert.deepEqual(business.run(request('t', 'k', { b: 2, a: 1 }), write), { result: { receipt: 1 }, replayed: true }, 'key order is not a different argument');
    assert.throws(() => business.run(request('t', 'k', { a: 1, b: 3 }), write), { code: 'idempotency_conflict' });
    assert.deepEqual(business.run(request('other-task', 'k', { a: 1, b: 2 }), write).replayed, false, 'keys are scoped by task');
    // A task id is unique within its session only: another session's task `t` is another operation, and its write
    // runs (before, it was skipped and handed this session's receipt).
    assert.deepEqual(business.run(request('t', 'k', { a: 1, b: 2 }, 's-2'), write), { result: { receipt: 3 }, replayed: false }, 'keys are scoped by session');
    assert.deepEqual(business.reconcile(request('t', 'k', { a: 1, b: 2 }, 's-3')).outcome, 'not_executed', 'a third session has no record');
    assert.equal(writes(), 3);
    assert.equal(countOrders(path), 3);
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

  it('a write that ends the helper\'s transaction itself is refused, its operation marked unknown until a person deletes the mark', () => {
    const path = tempDbPath(dir, 'business');
    const business = openBusiness(path);
    const order = (db: typeof business.db) => db.prepare('INSERT INTO orders (task_id, key, item) VALUES (?, ?, ?)').run('t', 'k', 'book');
    // COMMIT, then a throw: the order is in, with no record; the reconciler said not_executed and a retry ordered again.
    // What another process sees the moment the write has committed (before the helper gets control back, as if this
    // one died there): the mark committed with the order.
    const other = openBusiness(path);
    let seenMeanwhile: string | undefined;
    assert.throws(() => business.run(request('t', 'k', {}), (db) => {
      order(db);
      db.exec('COMMIT');
      seenMeanwhile = other.reconcile(request('t', 'k', {})).outcome;
      throw new Error('the provider timed out');
    }), (error: unknown) => error instanceof JingweiError && error.code === 'invalid_input' &&
      /ended the helper's transaction and then threw \(a COMMIT or ROLLBACK on the handle it was given, or SQLite rolling .*\): whether what it wrote committed is unknown/.test(error.message) &&
      (error.cause as Error).message === 'the provider timed out');
    assert.equal(countOrders(path), 1);
    assert.equal(seenMeanwhile, 'unknown', 'the mark is durable with the order, before the helper writes anything more');
    other.close();
    const answer = business.reconcile(request('t', 'k', {}));
    assert.equal(answer.outcome, 'unknown');
    assert.match(answer.evidence, /whether it committed is unknown/);
    let ran = 0;
    assert.throws(() => business.run(request('t', 'k', {}), (db) => { ran += 1; order(db); return 'ordered'; }), { code: 'invalid_input', message: /an earlier attempt's write ended the helper's transaction itself/ });
    assert.equal(ran, 0, 'a later attempt does not run');
    assert.equal(countOrders(path), 1);
    // ROLLBACK, then a normal return: before, the record committed on its own and answered completed for no order.
    assert.throws(() => business.run(request('t', 'k2', {}), (db) => {
      order(db);
      db.exec('ROLLBACK');
      return 'ordered';
    }), { code: 'invalid_input', message: /ended the helper's transaction itself \(a COMMIT or ROLLBACK on the handle it was given\): whether/ });
    assert.equal(business.reconcile(request('t', 'k2', {})).outcome, 'unknown');
    // ROLLBACK, then a transaction of its own: the mark went with the helper's transaction and the record matched
    // nothing, so the order committed with no record (before). Now that transaction is rolled back and the operation
    // marked.
    assert.throws(() => business.run(request('t', 'k3', {}), (db) => {
      db.exec('ROLLBACK; BEGIN');
      order(db);
      return 'ordered';
    }), { code: 'invalid_input', message: /ended the helper's transaction itself and began another/ });
    assert.equal(countOrders(path), 1, 'the order in its own transaction was rolled back');
    assert.equal(business.reconcile(request('t', 'k3', {})).outcome, 'unknown');
    // ROLLBACK, an order outside any transaction, a transaction of its own, then a throw: the order is in; before,
    // nothing marked it, the reconciler said not_executed and the next attempt ordered again.
    assert.throws(() => business.run(request('t', 'k4', {}), (db) => {
      db.exec('ROLLBACK');
      order(db);
      db.exec('BEGIN');
      throw new Error('the receipt could not be read');
    }), (error: unknown) => error instanceof JingweiError && error.code === 'invalid_input' && /and then threw/.test(error.message) &&
      (error.cause as Error).message === 'the receipt could not be read');
    assert.equal(countOrders(path), 2);
    assert.equal(business.reconcile(request('t', 'k4', {})).outcome, 'unknown');
    // ROLLBACK let another attempt of the key in (here a second helper on the file), which ordered and recorded it;
    // then a transaction of its own, an order, a return: before, its record went over the other's and both read as
    // one completed operation. Now its transaction is rolled back and the operation marked.
    const second = openBusiness(path);
    assert.throws(() => business.run(request('t', 'k5', {}), (db) => {
      db.exec('ROLLBACK');
      assert.equal(second.run(request('t', 'k5', {}), (other) => { order(other); return 'by the other'; }).replayed, false);
      db.exec('BEGIN');
      order(db);
      return 'ordered';
    }), { code: 'invalid_input', message: /ended the helper's transaction itself and began another/ });
    second.close();
    assert.equal(countOrders(path), 3, 'the other attempt ordered; this one was rolled back');
    assert.equal(business.reconcile(request('t', 'k5', {})).outcome, 'unknown');
    // A write that calls the helper again for its own operation is told so, and the inner call runs nothing.
    let inner = 0;
    assert.throws(() => business.run(request('t', 'k6', {}), () => business.run(request('t', 'k6', {}), () => { inner += 1; return 'inner'; }).result),
      { code: 'invalid_input', message: /calls the helper again for the operation it is writing/ });
    assert.equal(inner, 0);
    assert.equal(business.reconcile(request('t', 'k6', {})).outcome, 'not_executed', 'nothing recorded, nothing marked');
    // A person who checked deletes the mark; the operation is the helper's again.
    business.db.prepare('DELETE FROM jw_idempotency WHERE task_id = ? AND key = ?').run('t', 'k2');
    assert.deepEqual(business.run(request('t', 'k2', {}), (db) => { order(db); return 'ordered'; }), { result: 'ordered', replayed: false });
    assert.equal(countOrders(path), 4);
    business.close();
  });

  it('a transaction the host left open on the shared handle is refused before anything runs; the helper\'s own, for another operation, is not', () => {
    const path = tempDbPath(dir, 'business');
    const business = openBusiness(path);
    const { write, writes } = bookOrders();
    business.db.exec('BEGIN');
    // Run inside it, the order and its record would commit only with the host's transaction: after the call is
    // journaled as made, or never (rolled back, or the process killed first), with the journal saying it was made.
    assert.throws(() => business.run(request('t', 'k', { a: 1 }), write), (error: unknown) =>
      error instanceof JingweiError && error.code === 'invalid_input' && /has a transaction open that the helper did not begin/.test(error.message) && /session s-1, task t, key k/.test(error.message));
    assert.throws(() => business.reconcile(request('t', 'k', { a: 1 })), /would read what that transaction has not committed/);
    assert.equal(writes(), 0, 'the write never ran');
    assert.equal((business.db as unknown as { inTransaction: boolean }).inTransaction, true, 'the host\'s transaction is left as it was');
    business.db.exec('ROLLBACK');
    assert.equal(business.count(), 0);
    // With it ended, the same call runs; a write that calls the helper for another operation runs in the helper's own
    // transaction, and both commit together.
    assert.deepEqual(business.run(request('t', 'k', { a: 1 }), write), { result: { receipt: 1 }, replayed: false });
    const nested = business.run(request('t', 'outer', {}), (db) => {
      db.prepare('INSERT INTO orders (task_id, key, item) VALUES (?, ?, ?)').run('t', 'outer', 'pen');
      return business.run(request('t', 'inner', {}), write).result;
    });
    assert.deepEqual(nested, { result: { receipt: 2 }, replayed: false });
    assert.equal(countOrders(path), 3);
    assert.equal(business.reconcile(request('t', 'inner', {})).outcome, 'completed');
    // Two helpers on one handle (two tool modules that each made one): a write of one calling the other is inside a
    // helper's own transaction too (u119 F1).
    const other = new SqliteIdempotencyStore(business.db);
    const both = business.run(request('t', 'outer-2', {}), () => {
      assert.equal(other.reconcile(request('t', 'inner', {})).outcome, 'completed');
      return other.run(request('t', 'inner-2', {}), write).result;
    });
    assert.deepEqual(both, { result: { receipt: 3 }, replayed: false });
    assert.equal(other.reconcile(request('t', 'inner-2', {})).outcome, 'completed');
    business.db.exec('BEGIN');
    assert.throws(() => other.run(request('t', 'k2', {}), write), /has a transaction open that the helper did not begin/, 'and once no helper writes, the host\'s is refused by any helper');
    business.db.exec('ROLLBACK');
    other.close();
    business.close();
  });

  it('a write that commits the helper\'s transaction and begins another is refused, its operation marked unknown: the record would not commit with what it wrote before (u119 F2)', () => {
    const path = tempDbPath(dir, 'business');
    const business = openBusiness(path);
    const order = (db: typeof business.db, item: string) => db.prepare('INSERT INTO orders (task_id, key, item) VALUES (?, ?, ?)').run('t', 'k', item);
    assert.throws(() => business.run(request('t', 'k', {}), (db) => {
      order(db, 'before');
      db.exec('COMMIT');
      db.exec('BEGIN');
      order(db, 'after');
      return 'done';
    }), (error: unknown) => error instanceof JingweiError && error.code === 'invalid_input' && /committed the helper's transaction itself and began another: what it wrote before its COMMIT has committed, what it wrote after was rolled back/.test(error.message));
    assert.equal((business.db as unknown as { inTransaction: boolean }).inTransaction, false, 'the write\'s own transaction rolled back');
    const items = (business.db.prepare('SELECT item FROM orders').all() as { item: string }[]).map((r) => r.item);
    assert.deepEqual(items, ['before']);
    assert.equal(business.reconcile(request('t', 'k', {})).outcome, 'unknown', 'whether the write was made in full cannot be told');
    assert.throws(() => business.run(request('t', 'k', {}), () => 'again'), (error: unknown) => error instanceof JingweiError && (error as { field?: string }).field === 'request');
    business.close();
  });

  it('a write cannot name the helper\'s savepoint, a nested refusal stays the helper\'s, a closed handle is store_closed, and the journal\'s file is refused (u120)', async () => {
    const path = tempDbPath(dir, 'business');
    const business = openBusiness(path);
    const order = (db: typeof business.db, key: string, item: string) => db.prepare('INSERT INTO orders (task_id, key, item) VALUES (?, ?, ?)').run('t', key, item);
    // COMMIT, then a savepoint of the old fixed name: it began a new transaction, which the helper's release no longer
    // ended unseen (u120 #1).
    assert.throws(() => business.run(request('t', 'h', {}), (db) => {
      order(db, 'h', 'before');
      db.exec('COMMIT');
      db.exec('SAVEPOINT jw_idempotency_write');
      order(db, 'h', 'after');
      return 1;
    }), /committed the helper's transaction itself and began another/);
    assert.equal(business.reconcile(request('t', 'h', {})).outcome, 'unknown');
    // A nested helper's write that commits and begins: its refusal, not the driver's failure to roll back to a
    // savepoint the COMMIT ended (u120 #2).
    const other = new SqliteIdempotencyStore(business.db);
    assert.throws(() => business.run(request('t', 'outer', {}), () => other.run(request('t', 'inner', {}), (db) => {
      order(db, 'inner', 'before');
      db.exec('COMMIT');
      db.exec('BEGIN');
      return 1;
    }).result), (error: unknown) => error instanceof JingweiError && error.code === 'invalid_input' && (error as { field?: string }).field === 'write');
    assert.equal(business.reconcile(request('t', 'inner', {})).outcome, 'unknown');
    // The same operation through another helper on the handle is reentry, not "an earlier attempt ended" (u120 #4).
    assert.throws(() => business.run(request('t', 'same', {}), () => other.run(request('t', 'same', {}), () => 1).result),
      /calls the helper again for the operation it is writing/);
    assert.equal(business.reconcile(request('t', 'same', {})).outcome, 'not_executed');
    // What the first attempt returns is what it recorded, as every replay gives it (u120 #9).
    let reads = 0;
    const live = { get v() { reads += 1; return reads; } };
    const first = business.run(request('t', 'getter', {}), () => live as unknown as { v: number });
    assert.deepEqual(first.result, business.run(request('t', 'getter', {}), () => ({ v: 0 })).result);
    other.close();
    // A write that closes the handle: its transaction went with the connection (u120 #3).
    assert.throws(() => business.run(request('t', 'closed', {}), (db) => {
      order(db, 'closed', 'x');
      db.close();
      return 1;
    }), { name: 'StoreClosedError', code: 'store_closed' });
    assert.equal(countOrders(path), 2, 'the two orders written before a COMMIT');
    // The journal's own file is not a business database (u120 #7).
    const journal = tempDbPath(dir, 'journal');
    await openSqliteStore(journal).close();
    assert.throws(() => new SqliteIdempotencyStore(journal), { name: 'InvalidInputError', field: 'database', message: /is a Jingwei journal/ });
  });

  it('refuses an async write, a write that is no function and a result JSON cannot hold, with nothing recorded', () => {
    const path = tempDbPath(dir, 'business');
    const business = openBusiness(path);
    // Plain JavaScript can hand the helper an async write: its record would commit before its writes ran.
    const asyncWrite = (async (db: typeof business.db) => {
      db.prepare('INSERT INTO orders (task_id, key, item) VALUES (?, ?, ?)').run('t', 'k', 'x');
      return { ok: true };
    }) as unknown as (db: typeof business.db) => { ok: boolean };
    assert.throws(() => business.run(request('t', 'k', {}), asyncWrite), { code: 'invalid_input', field: 'write', message: /must be synchronous/ });
    assert.throws(() => business.run(request('t', 'k', {}), 'insert' as never), { code: 'invalid_input', field: 'write' });
    assert.throws(() => business.run(request('t', 'k', {}), () => ({ n: 1n }) as never), { code: 'invalid_input', field: 'result' });
    // What JSON.stringify would have changed: every replay returned something other than the first attempt.
    for (const value of [new Map([[1, 2]]), { n: Number.NaN }, { at: new Date(0) }, { a: undefined }, [undefined]]) {
      assert.throws(() => business.run(request('t', 'k', {}), () => value as never), { code: 'invalid_input', field: 'result' });
    }
    assert.equal(business.count(), 0, 'no dedup record');
    assert.equal(business.reconcile(request('t', 'k', {})).outcome, 'not_executed', 'the reconciler does not claim a write that never committed');
    business.close();
  });

  it('an async function is refused before it runs at all: what it wrote after an await would commit without a record', async () => {
    const path = tempDbPath(dir, 'business');
    const business = openBusiness(path);
    let ran = false;
    const asyncWrite = (async (db: typeof business.db) => {
      ran = true;
      await null;
      db.prepare('INSERT INTO orders (task_id, key, item) VALUES (?, ?, ?)').run('t', 'k', 'late');
      return { ok: true };
    }) as unknown as (db: typeof business.db) => { ok: boolean };
    assert.throws(() => business.run(request('t', 'k', {}), asyncWrite), { code: 'invalid_input', field: 'write', message: /not an async function/ });
    await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(ran, false);
    assert.equal(countOrders(path), 0);
    business.close();
    assert.throws(() => business.run(request('t', 'k', {}), () => ({ ok: true })), { name: 'StoreClosedError' });
    assert.throws(() => business.reconcile(request('t', 'k', {})), { name: 'StoreClosedError' });
    assert.throws(() => new SqliteIdempotencyStore(path, null as never), { code: 'invalid_input', field: 'options' });
  });

  it('refuses ids the dedup record cannot be keyed on on every engine, with nothing run', () => {
    const business = openBusiness(tempDbPath(dir, 'business'));
    const long = 'x'.repeat(1024);
    assert.throws(() => business.run(request(long, long, {}, long), () => ({ ok: true })), { code: 'invalid_input', field: 'request' });
    assert.throws(() => business.reconcile(request(long, long, {}, long)), { code: 'invalid_input', field: 'request' });
    // The largest operation the runtime makes (ids of 1,024 bytes, a key of 200) fits.
    assert.deepEqual(business.run(request(long, 'k'.repeat(200), {}, long), () => ({ ok: true })), { result: { ok: true }, replayed: false });
    business.close();
  });

  it('refuses a request without an operation or a session, and forms the external key from the whole operation', () => {
    const business = openBusiness(tempDbPath(dir, 'business'));
    assert.throws(() => business.run({ arguments: {} } as never, () => 1), { code: 'invalid_input' });
    assert.throws(() => business.run({ ...request('t', 'k', {}), sessionId: undefined } as never, () => 1), { code: 'invalid_input', message: /sessionId/ });
    const key = externalIdempotencyKey(request('task-1', 'operation_x', {}));
    assert.match(key, /^jw-[A-Za-z0-9_-]{43}$/, 'short and header-safe whatever the ids');
    assert.equal(externalIdempotencyKey(request('task-1', 'operation_x', { other: 'arguments' })), key, 'the same on every attempt');
    assert.notEqual(externalIdempotencyKey(request('task-1', 'operation_x', {}, 's-2')), key, 'another session, another key');
    assert.notEqual(externalIdempotencyKey(request('task-1', 'operation_x', {}, 's-1', 'evt_other')), key, 'a session of the same id in another journal, another key');
    assert.throws(() => externalIdempotencyKey({ ...request('task-1', 'operation_x', {}), operationOrigin: undefined } as never), { code: 'invalid_input', message: /operationOrigin/ });
    // Ids may hold ':', so a joined text would make these two operations one key.
    assert.notEqual(externalIdempotencyKey(request('a:b', 'c', {}, 's')), externalIdempotencyKey(request('a', 'b:c', {}, 's')));
    assert.match(externalIdempotencyKey(request('t'.repeat(1024), 'k'.repeat(200), {}, 's'.repeat(1024))), /^jw-[A-Za-z0-9_-]{43}$/);
    business.close();
  });

  it('upgrades a dedup table an older version keyed by (task, key): its records still replay, in every session', () => {
    const path = tempDbPath(dir, 'business');
    const old = new Database(path);
    old.exec(`CREATE TABLE jw_idempotency (
      task_id TEXT NOT NULL, key TEXT NOT NULL, arguments_digest TEXT NOT NULL, result TEXT NOT NULL,
      created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')), PRIMARY KEY (task_id, key)
    ) STRICT`);
    // A write the older version committed before the upgrade, with its record.
    old.prepare('INSERT INTO jw_idempotency (task_id, key, arguments_digest, result) VALUES (?, ?, ?, ?)').run('t', 'k', jsonDigest({ a: 1 }), '{"receipt":"old"}');
    old.close();
    const business = new SqliteIdempotencyStore(path);
    let writes = 0;
    const write = () => ({ receipt: ++writes });
    // Its session is not known, so it answers in every session, as it did then: never a second write.
    assert.deepEqual(business.run(request('t', 'k', { a: 1 }, 's-9'), write), { result: { receipt: 'old' }, replayed: true });
    const answer = business.reconcile(request('t', 'k', { a: 1 }, 's-8'));
    assert.equal(answer.outcome, 'completed');
    assert.match(answer.evidence, /written before records named their session/);
    assert.throws(() => business.run(request('t', 'k', { a: 2 }, 's-7'), write), { code: 'idempotency_conflict' });
    // New records are the session's own.
    assert.equal(business.run(request('t', 'k2', {}, 's-1'), write).replayed, false);
    assert.equal(business.run(request('t', 'k2', {}, 's-2'), write).replayed, false);
    assert.equal(business.run(request('t', 'k2', {}, 's-1'), write).replayed, true);
    assert.equal(writes, 2);
    business.close();
    // Opening again finds it upgraded and leaves every record as it is.
    const again = new SqliteIdempotencyStore(path);
    assert.equal(again.count(), 3);
    assert.deepEqual(
      again.db.prepare('SELECT session_id, task_id, key FROM jw_idempotency ORDER BY session_id, key').all(),
      [{ session_id: '', task_id: 't', key: 'k' }, { session_id: 's-1', task_id: 't', key: 'k2' }, { session_id: 's-2', task_id: 't', key: 'k2' }],
    );
    again.close();
  });

  it('refuses a business path it cannot open with StorePathError, and creates nothing', () => {
    const missing = join(dir, 'no-such-dir', 'business.db');
    assert.throws(() => new SqliteIdempotencyStore(missing), { name: 'StorePathError', code: 'store_directory_missing' });
    assert.equal(existsSync(join(dir, 'no-such-dir')), false);
    const folder = join(dir, 'a-folder');
    mkdirSync(folder);
    assert.throws(() => new SqliteIdempotencyStore(folder), { code: 'store_not_sqlite', message: /not a SQLite database file/ });
    const text = join(dir, 'notes.txt');
    writeFileSync(text, 'not a database at all');
    assert.throws(() => new SqliteIdempotencyStore(text), { code: 'store_not_sqlite' });
    const business = join(dir, 'linked-business.db');
    new SqliteIdempotencyStore(business).close();
    linkSync(business, join(dir, 'linked-business-2.db'));
    assert.throws(() => new SqliteIdempotencyStore(business), { name: 'StorePathError', code: 'store_hard_linked', path: business });
    // Not a path or a handle, a closed handle, a NUL byte, a bad busy timeout: invalid_input, nothing created.
    for (const bad of [undefined, null, 5, {}]) {
      assert.throws(() => new SqliteIdempotencyStore(bad as unknown as string), { name: 'InvalidInputError', field: 'database' });
    }
    const closed = new Database(join(dir, 'closed.db'));
    closed.close();
    assert.throws(() => new SqliteIdempotencyStore(closed), { name: 'InvalidInputError', field: 'database', message: /closed/ });
    assert.throws(() => new SqliteIdempotencyStore(join(dir, 'cut\u0000here.db')), { name: 'InvalidInputError', field: 'path' });
    assert.equal(existsSync(join(dir, 'cut')), false);
    assert.throws(() => new SqliteIdempotencyStore(join(dir, 'b.db'), { busyTimeoutMs: -1 }), { name: 'InvalidInputError', field: 'busyTimeoutMs' });
    assert.equal(existsSync(join(dir, 'b.db')), false);
  });

  it('another writer holding the business database past the busy timeout is StoreBusyError; the write never runs', () => {
    const path = tempDbPath(dir, 'business');
    const business = openBusiness(path);
    business.close();
    const busyBusiness = new SqliteIdempotencyStore(path, { busyTimeoutMs: 50 });
    const holder = new Database(path);
    holder.exec('BEGIN IMMEDIATE');
    let writes = 0;
    const write = () => { writes += 1; return { ok: true }; };
    assert.throws(() => busyBusiness.run(request('t', 'k', {}), write), { name: 'StoreBusyError', code: 'store_busy', message: /business database is locked/ });
    assert.throws(() => busyBusiness.reconcile(request('t', 'k', {})), { code: 'store_busy' });
    assert.equal(writes, 0);
    holder.exec('COMMIT');
    holder.close();
    assert.deepEqual(busyBusiness.run(request('t', 'k', {}), write), { result: { ok: true }, replayed: false }, 'once released, the attempt runs');
    assert.equal(writes, 1);
    busyBusiness.close();
  });

  it('a new business database whose write lock is held past the busy timeout fails to open with StoreBusyError', () => {
    const path = tempDbPath(dir, 'business');
    const holder = new Database(path);
    holder.exec('BEGIN IMMEDIATE');
    assert.throws(() => new SqliteIdempotencyStore(path, { busyTimeoutMs: 50 }), { code: 'store_busy' });
    holder.exec('COMMIT');
    holder.close();
    const business = new SqliteIdempotencyStore(path, { busyTimeoutMs: 50 });
    assert.equal(business.count(), 0, 'a later open creates the dedup table');
    business.close();
  });

  it("what the write throws, SQLite's errors included, passes through unchanged and records nothing", () => {
    const path = tempDbPath(dir, 'business');
    const business = openBusiness(path);
    let thrown: unknown;
    assert.throws(() => business.run(request('t', 'k', {}), (db) => {
      try {
        db.prepare('INSERT INTO no_such_table VALUES (1)').run();
      } catch (error) {
        thrown = error;
        throw error;
      }
      return 1;
    }), (error: unknown) => error === thrown && !(error instanceof JingweiError) && (error as { code?: string }).code === 'SQLITE_ERROR');
    assert.equal(business.count(), 0);
    business.close();
  });
});
