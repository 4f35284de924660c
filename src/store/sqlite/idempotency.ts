import { randomUUID } from 'node:crypto';
import { IdempotencyConflictError, InvalidInputError, StoreClosedError } from '../../errors.js';
import type { JsonValue } from '../../json/types.js';
import { STORE_DEFAULTS } from '../../limits.js';
import { describeValue } from '../../text.js';
import {
  checkSynchronousWrite, endedByWrite, endedByWriteText, idempotencyScope, reconcileAnswer, recordedResultText, refuseEndedByWrite, refuseReentry, unfinishedDigest,
  type IdempotencyRequest, type IdempotencyScope, type IdempotentOutcome,
} from '../../tool/idempotency.js';
import type { ToolReconcileAnswer } from '../../tool/types.js';
import { Passthrough } from '../passthrough.js';
import { Database, type Statement } from './driver.js';
import { mapSqliteFailure } from './errors.js';
import { checkBusyTimeout, type SqliteDatabase } from './options.js';
import { checkSqlitePath } from './path-check.js';
import { switchToWal } from './wal.js';

/** How the helper's errors name the database it writes to. */
const BUSINESS = 'business';

/**
 * Keyed by the operation's session, task and key. `session_id` '' marks a record written before records named their
 * session (by an older version, which may still be running during an upgrade and inserts without the column): it
 * answers for its (task_id, key) in every session, as it did then.
 */
const COLUMNS = `session_id TEXT NOT NULL DEFAULT '', task_id TEXT NOT NULL, key TEXT NOT NULL, arguments_digest TEXT NOT NULL,
  result TEXT NOT NULL, created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')), PRIMARY KEY (session_id, task_id, key)`;
const TABLE_NAME = 'jw_idempotency';
const TABLE = `CREATE TABLE IF NOT EXISTS ${TABLE_NAME} (${COLUMNS}) STRICT`;

/** Re-keys a table an older version created on (task_id, key): its records become legacy ones (session_id ''). */
function upgradeTable(db: Database): void {
  const keyed = () => db.prepare<[], { name: string }>('PRAGMA table_info(jw_idempotency)').all().some((c) => c.name === 'session_id');
  if (keyed()) return;
  db.transaction(() => {
    // Under the write lock again: another process may have upgraded it since the look above.
    if (keyed()) return;
    db.exec(`CREATE TABLE jw_idempotency_keyed (${COLUMNS}) STRICT`);
    db.exec(`INSERT INTO jw_idempotency_keyed (session_id, task_id, key, arguments_digest, result, created_at)
      SELECT '', task_id, key, arguments_digest, result, created_at FROM jw_idempotency`);
    db.exec('DROP TABLE jw_idempotency');
    db.exec('ALTER TABLE jw_idempotency_keyed RENAME TO jw_idempotency');
  }).immediate();
}

const INSERT = 'INSERT INTO jw_idempotency (session_id, task_id, key, arguments_digest, result) VALUES (?, ?, ?, ?, ?)';

/** Thrown inside the helper's transaction when the attempt's mark is gone, so the transaction rolls back first. */
const MARK_GONE: unique symbol = Symbol('the attempt\'s mark is gone');

/**
 * Per handle, the operations whose write runs now, through any helper on it: a transaction open on the handle while
 * one does is a helper's own (a write calling a helper, this one or another on the same handle, for another
 * operation), and a write calling a helper again for its own operation is told so whichever helper it calls.
 */
const helperWrites = new WeakMap<object, Set<string>>();

/**
 * The savepoint begun in the helper's transaction around a write, named afresh for each so that no write can name
 * it: a write that commits that transaction and begins another ends it too, and its release then fails, where the
 * mark (committed) and the open transaction say nothing.
 */
const writeSavepoint = (): string => `jw_idempotency_${randomUUID().replaceAll('-', '')}`;

/** Thrown inside the helper's transaction when the write committed it and began another (the savepoint is gone). */
const COMMITTED_AND_BEGUN: unique symbol = Symbol('the write committed the helper\'s transaction and began another');

/** Only over the attempt's own mark: another attempt a write let in by rolling the mark back may have recorded the key. */
const RECORD = 'UPDATE jw_idempotency SET arguments_digest = ?, result = ? WHERE session_id = ? AND task_id = ? AND key = ? AND arguments_digest = ?';

/**
 * Deduplication for tools that write to a SQLite database: the business write and its dedup record commit in one
 * IMMEDIATE transaction, keyed by the operation (sessionId, taskId, key). The same key with the same canonical arguments returns
 * the stored result without running the write again; with different arguments it throws IdempotencyConflictError.
 * The write lock means two attempts of one key never run at once, in this process or any other. The helper's own
 * failures are typed: StoreBusyError when another writer holds the database past the busy timeout, StoreUnavailableError
 * for any other SQLite failure; what `write` throws passes through unchanged.
 */
export class SqliteIdempotencyStore {
  /** The business database handle (a better-sqlite3 `Database`). */
  readonly db: SqliteDatabase;
  private readonly raw: Database;
  private readonly owned: boolean;
  private closed = false;
  /** The session's record, else a legacy one for the same (task, key). */
  private readonly find: Statement<[string, string, string], { session_id: string; arguments_digest: string; result: string }>;
  private readonly insert: Statement<[string, string, string, string, string]>;
  private readonly record: Statement<[string, string, string, string, string, string]>;
  /** The attempt's own mark, as this connection sees it. */
  private readonly mark: Statement<[string, string, string, string], { one: number }>;

  /**
   * Give it the business database (a path, or an open better-sqlite3 handle that you keep owning). A path in a
   * missing directory or a file that is not SQLite is refused with StorePathError; a database another writer holds
   * past the busy timeout with StoreBusyError, any other SQLite failure with StoreUnavailableError.
   */
  constructor(database: string | SqliteDatabase, options: { busyTimeoutMs?: number } = {}) {
    if (typeof options !== 'object' || options === null) throw new InvalidInputError('options', `must be an object, got ${describeValue(options)}`);
    const timeout = checkBusyTimeout(options.busyTimeoutMs ?? STORE_DEFAULTS.busyTimeoutMs);
    this.owned = typeof database === 'string';
    if (typeof database === 'string') {
      checkSqlitePath(database, false, 'database');
      try {
        this.raw = new Database(database, { timeout });
      } catch (error) {
        throw mapSqliteFailure(error, BUSINESS);
      }
    } else {
      const handle = database as Partial<SqliteDatabase> | null | undefined;
      if (typeof handle !== 'object' || handle === null || typeof handle.prepare !== 'function') {
        throw new InvalidInputError('database', `must be a path or an open better-sqlite3 handle, got ${describeValue(database)}`);
      }
      if (handle.open !== true) throw new InvalidInputError('database', 'is a better-sqlite3 handle that is closed');
      // A handle passed in is a better-sqlite3 Database; its structural type only keeps the driver's types out of ours.
      this.raw = database as unknown as Database;
    }
    this.db = this.raw;
    try {
      if (this.owned) {
        switchToWal(this.raw, timeout);
        this.raw.pragma('synchronous = FULL');
      }
      // A journal's file: the journal refuses a file with other tables, so the business data gets a file of its own.
      if (this.raw.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name IN ('jw_sessions', 'jw_events')").get() !== undefined) {
        throw new InvalidInputError('database', 'is a Jingwei journal (it holds jw_sessions and jw_events): give the business data and its dedup records a database of their own');
      }
      this.raw.exec(TABLE);
      upgradeTable(this.raw);
      this.find = this.raw.prepare<[string, string, string], { session_id: string; arguments_digest: string; result: string }>(
        `SELECT session_id, arguments_digest, result FROM jw_idempotency WHERE session_id IN (?, '') AND task_id = ? AND key = ?
         ORDER BY session_id DESC LIMIT 1`,
      );
      this.insert = this.raw.prepare(INSERT);
      this.record = this.raw.prepare(RECORD);
      this.mark = this.raw.prepare<[string, string, string, string], { one: number }>(
        'SELECT 1 AS one FROM jw_idempotency WHERE session_id = ? AND task_id = ? AND key = ? AND arguments_digest = ?',
      );
    } catch (error) {
      if (this.owned) this.raw.close();
      throw mapSqliteFailure(error, BUSINESS);
    }
  }

  /**
   * Runs `write` once per operation (sessionId, taskId, key). `write` is synchronous and uses the handle it is given; everything it
   * writes commits together with the dedup record, or not at all if it throws.
   */
  run<T extends JsonValue>(request: IdempotencyRequest, write: (db: SqliteDatabase) => T): IdempotentOutcome<T> {
    const scope = idempotencyScope(request);
    checkSynchronousWrite(write);
    this.checkOpen();
    const operation = JSON.stringify([scope.sessionId, scope.taskId, scope.key]);
    const writing = helperWrites.get(this.raw) ?? new Set<string>();
    helperWrites.set(this.raw, writing);
    if (writing.has(operation)) refuseReentry(scope);
    this.refuseOuterTransaction(scope, 'run');
    /** What the write threw when its mark was found gone afterwards (MARK_GONE). */
    let thrown: { readonly error: unknown } | undefined;
    /**
     * Which refusal the transaction was left with: a nested helper's transaction (a savepoint of better-sqlite3's)
     * cannot roll back to a savepoint the write's COMMIT ended, and the driver's error then replaces the refusal.
     */
    let refused: typeof MARK_GONE | typeof COMMITTED_AND_BEGUN | null = null;
    const transaction = this.raw.transaction((): IdempotentOutcome<T> => {
      const existing = this.find.get(scope.sessionId, scope.taskId, scope.key);
      if (existing) {
        if (endedByWrite(existing.arguments_digest)) refuseEndedByWrite(scope, TABLE_NAME);
        if (existing.arguments_digest !== scope.argumentsDigest) throw new IdempotencyConflictError(scope.taskId, scope.key, scope.sessionId);
        return { result: JSON.parse(existing.result) as T, replayed: true };
      }
      // Marked unfinished until the record replaces the mark: a write that commits on its own commits the mark too.
      this.insert.run(scope.sessionId, scope.taskId, scope.key, unfinishedDigest(scope), 'null');
      const savepoint = writeSavepoint();
      this.raw.exec(`SAVEPOINT ${savepoint}`);
      let result: T;
      writing.add(operation);
      try {
        result = write(this.db);
      } catch (error) {
        this.refuseEndedTransaction(scope, error);
        // Its mark gone although a transaction is open: it rolled the helper's back and began its own before throwing;
        // what it wrote outside a transaction in between has committed with nothing to say so.
        if (this.mark.get(scope.sessionId, scope.taskId, scope.key, unfinishedDigest(scope)) === undefined) {
          thrown = { error };
          refused = MARK_GONE;
          throw new Passthrough(MARK_GONE);
        }
        // The tool's own failure: it passes through unchanged, not mapped as the helper's.
        throw new Passthrough(error);
      } finally {
        writing.delete(operation);
      }
      this.refuseEndedTransaction(scope);
      // What it wrote before returning rolls back with this refusal; what it writes once its promise goes on runs
      // outside the transaction, with no record: say so, since no helper can stop it.
      if (typeof (result as { then?: unknown } | null)?.then === 'function') {
        throw new InvalidInputError(
          'write',
          'must be synchronous: it returned a promise; what it wrote before returning was rolled back and nothing was recorded, but anything it writes after an await runs outside the transaction, without a dedup record',
        );
      }
      const text = recordedResultText(result);
      // The mark is gone when the write rolled the helper's transaction back and began one of its own (or deleted
      // it): what it wrote since commits with no record unless this refusal rolls it back.
      if (this.record.run(scope.argumentsDigest, text, scope.sessionId, scope.taskId, scope.key, unfinishedDigest(scope)).changes !== 1) {
        refused = MARK_GONE;
        throw new Passthrough(MARK_GONE);
      }
      try {
        this.raw.exec(`RELEASE ${savepoint}`);
      } catch {
        // The mark survived (committed by the write's COMMIT), the record replaced it in the write's own transaction.
        refused = COMMITTED_AND_BEGUN;
        throw new Passthrough(COMMITTED_AND_BEGUN);
      }
      // What was recorded, not the object the write returned (a getter, say, could read otherwise later): the first
      // attempt gives back what every replay will.
      return { result: JSON.parse(text) as T, replayed: false };
    });
    try {
      return this.mapped(() => transaction.immediate());
    } catch (error) {
      if (refused === COMMITTED_AND_BEGUN) {
        // What it wrote before its COMMIT has committed, with the mark; what it wrote after (and the record) rolled back.
        this.mapped(() => this.markEnded(scope));
        throw new InvalidInputError(
          'write',
          'committed the helper\'s transaction itself and began another: what it wrote before its COMMIT has committed, what it wrote after was rolled back, and nothing was recorded. ' +
            endedByWriteText(scope, TABLE_NAME),
        );
      }
      if (refused !== MARK_GONE) throw error;
      // Rolled back now, with whatever the write wrote in its own transaction; what it wrote outside one between may
      // have committed, so the operation is marked as one a write ended.
      this.mapped(() => this.markEnded(scope));
      throw new InvalidInputError(
        'write',
        `ended the helper's transaction itself and began another (or removed the helper's mark)${thrown === undefined ? '' : ' and then threw'}: ` +
          'what it wrote in that one was rolled back, and nothing was recorded; what it wrote outside any transaction may have committed. ' +
          endedByWriteText(scope, TABLE_NAME),
        thrown === undefined ? undefined : { cause: thrown.error },
      );
    }
  }

  /**
   * A reconciler for tools written with `run` (docs/design.md#reconcilers): declare
   * `reconcile: (request) => store.reconcile(request)` on the tool. The dedup record commits in the same
   * transaction as the business write, so it answers exactly: `completed` with the stored result when the record
   * for the operation holds these arguments, `not_executed` when there is none (read under the write lock, so no
   * attempt is half-way; a retry still goes through `run`, so an attempt that commits later is replayed, never
   * repeated), `unknown` when the record holds other arguments.
   */
  reconcile(request: IdempotencyRequest): ToolReconcileAnswer {
    const scope = idempotencyScope(request);
    this.checkOpen();
    this.refuseOuterTransaction(scope, 'reconcile');
    const read = this.raw.transaction(() => this.find.get(scope.sessionId, scope.taskId, scope.key));
    const existing = this.mapped(() => read.immediate());
    return reconcileAnswer(
      scope,
      existing ? { digest: existing.arguments_digest, result: JSON.parse(existing.result) as JsonValue, legacy: existing.session_id === '' } : null,
      TABLE_NAME,
    );
  }

  /**
   * A transaction the host left open on a handle it shares with the helper (a `BEGIN` not yet committed): the helper's
   * own would be a savepoint in it, so the business write and its record would commit only when the host's does,
   * after the tool's result is journaled as a success, or never (a rollback, a crash first): a write recorded made
   * that is not. Refused before anything runs. The helper's own transaction (a write calling the helper for another
   * operation) is not the host's: that one commits with the write's record.
   */
  private refuseOuterTransaction(scope: IdempotencyScope, method: 'run' | 'reconcile'): void {
    if (!this.raw.inTransaction || (helperWrites.get(this.raw)?.size ?? 0) > 0) return;
    throw new InvalidInputError(
      'database',
      `has a transaction open that the helper did not begin (a BEGIN on the handle not yet committed or rolled back), so ${method}() ` +
        `for session ${scope.sessionId}, task ${scope.taskId}, key ${scope.key} did nothing: ` +
        (method === 'run'
          ? 'its write and dedup record would commit only with that transaction, after the call is journaled as made. '
          : 'it would read what that transaction has not committed. ') +
        'End that transaction first, or give the helper a handle of its own',
    );
  }

  /**
   * A write that ended the helper's transaction itself (a `COMMIT` or `ROLLBACK` on the handle) broke the one thing the
   * record stands for: what it wrote may have committed without it (or the record would commit without what it wrote).
   * That cannot be told apart afterwards, so the operation is marked ended-by-write, outside any transaction, and
   * refused: its reconciler answers `unknown` and every later attempt is refused until a person has checked the
   * business data and deleted the record.
   */
  private refuseEndedTransaction(scope: IdempotencyScope, thrown?: unknown): void {
    // Closed by the write: its transaction rolled back with the connection, and nothing can be marked.
    if (!this.raw.open) throw new Passthrough(new StoreClosedError('idempotency', this.raw.name));
    if (this.raw.inTransaction) return;
    // A COMMIT committed the mark already; a ROLLBACK took it back with the rest, so it is written again.
    this.markEnded(scope);
    throw new Passthrough(new InvalidInputError(
      'write',
      (thrown === undefined
        ? 'ended the helper\'s transaction itself (a COMMIT or ROLLBACK on the handle it was given): '
        : 'ended the helper\'s transaction and then threw (a COMMIT or ROLLBACK on the handle it was given, or SQLite rolling the ' +
          'transaction back on the error it threw, an ON CONFLICT ROLLBACK or a RAISE(ROLLBACK)): ') +
        `whether what it wrote committed is unknown. ${endedByWriteText(scope, TABLE_NAME)}`,
      thrown === undefined ? undefined : { cause: thrown },
    ));
  }

  /**
   * Marks the operation as one whose write ended the helper's transaction, outside any transaction (over a record
   * another process wrote once the lock was free, which is as unsure).
   */
  private markEnded(scope: IdempotencyScope): void {
    this.raw.prepare(`${INSERT} ON CONFLICT (session_id, task_id, key) DO UPDATE SET arguments_digest = excluded.arguments_digest, result = excluded.result`)
      .run(scope.sessionId, scope.taskId, scope.key, unfinishedDigest(scope), 'null');
  }

  /** How many dedup records exist (for tests and operators). */
  count(): number {
    return this.mapped(() => (this.raw.prepare('SELECT count(*) AS n FROM jw_idempotency').get() as { n: number }).n);
  }

  /** Runs one of the helper's own operations: SQLite's failures come out typed, a Passthrough's error unchanged. */
  private mapped<R>(operation: () => R): R {
    this.checkOpen();
    try {
      return operation();
    } catch (error) {
      if (error instanceof Passthrough) throw error.error;
      throw mapSqliteFailure(error, BUSINESS);
    }
  }

  /** After close(), whether or not it owned the handle, the helper is done: StoreClosedError, not the driver's TypeError. */
  private checkOpen(): void {
    if (this.closed || !this.raw.open) throw new StoreClosedError('idempotency', this.raw.name);
  }

  close(): void {
    this.closed = true;
    if (this.owned && this.raw.open) this.raw.close();
  }
}
