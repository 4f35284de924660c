import Database from 'better-sqlite3';
import { JingweiError, JournalCorruptError, StaleOwnerError, StoreBusyError, StoreUnavailableError } from '../errors.js';
import type { SessionId, TaskId } from '../ids.js';
import { STORE_DEFAULTS } from '../limits.js';
import { faultPoint } from '../fault.js';
import { JournalStore } from './journal-store.js';
import { parseReservations } from './reservations.js';
import type { EventRow, JournalBackend, SessionRow, TaskRow, TxReads, TxState, TxWrites } from './rows.js';
import type { SessionStore, TaskState } from './types.js';

export const SQLITE_SCHEMA_VERSION = 2;

const SCHEMA = `
CREATE TABLE jw_sessions (
  session_id TEXT PRIMARY KEY, owner TEXT, held INTEGER NOT NULL, epoch INTEGER NOT NULL,
  last_seq INTEGER NOT NULL, head_hash TEXT NOT NULL, body_bytes INTEGER NOT NULL
) STRICT;
CREATE TABLE jw_events (
  session_id TEXT NOT NULL, seq INTEGER NOT NULL, event_id TEXT NOT NULL, epoch INTEGER NOT NULL,
  body TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (session_id, seq)
) STRICT;
CREATE TABLE jw_tasks (
  task_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, state TEXT NOT NULL,
  limit_tool_calls INTEGER NOT NULL, limit_output_bytes INTEGER NOT NULL,
  charged_tool_calls INTEGER NOT NULL, charged_output_bytes INTEGER NOT NULL,
  reserved_output_bytes INTEGER NOT NULL, stop_reason TEXT, reservations TEXT NOT NULL DEFAULT '[]'
) STRICT;
CREATE TABLE jw_operations (
  task_id TEXT NOT NULL, key TEXT NOT NULL, session_id TEXT NOT NULL, call_id TEXT NOT NULL, event_id TEXT NOT NULL,
  PRIMARY KEY (task_id, key)
) STRICT;
`;

export interface SqliteStoreOptions {
  /** How long a writer waits for another connection's lock before StoreBusyError. Default 5,000 ms. */
  busyTimeoutMs?: number;
  /** Run `PRAGMA quick_check` on open (cost grows with the file). Default false. */
  verifyOnOpen?: boolean;
}

interface SessionRecord { session_id: string; owner: string | null; held: number; epoch: number; last_seq: number; head_hash: string; body_bytes: number }
interface TaskRecord {
  task_id: string; session_id: string; state: string; limit_tool_calls: number; limit_output_bytes: number;
  charged_tool_calls: number; charged_output_bytes: number; reserved_output_bytes: number; stop_reason: string | null;
  reservations: string;
}

const toSession = (r: SessionRecord): SessionRow => ({
  sessionId: r.session_id as SessionId, owner: r.owner, held: r.held === 1, epoch: r.epoch,
  lastSeq: r.last_seq, headHash: r.head_hash, bodyBytes: r.body_bytes,
});
const toTask = (r: TaskRecord): TaskRow => ({
  taskId: r.task_id as TaskId, sessionId: r.session_id as SessionId, state: r.state as TaskState,
  limitToolCalls: r.limit_tool_calls, limitOutputBytes: r.limit_output_bytes, chargedToolCalls: r.charged_tool_calls,
  chargedOutputBytes: r.charged_output_bytes, reservedOutputBytes: r.reserved_output_bytes, stopReason: r.stop_reason,
  reservations: parseReservations(r.reservations, r.session_id),
});

/** Maps the driver's errors onto the library's typed ones; our own errors pass through. */
function mapError(error: unknown, sessionId: string): unknown {
  if (error instanceof JingweiError) return error;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
      return new StoreBusyError(`the SQLite database is locked by another writer (${code})`, { cause: error });
    }
    if (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB') {
      return new JournalCorruptError(sessionId, -1, 'storage', `the database file is damaged (${code})`, { cause: error });
    }
    if (code.startsWith('SQLITE_')) return new StoreUnavailableError('store_failure', `SQLite failed: ${(error as Error).message}`, { cause: error });
  }
  return error;
}

class SqliteBackend implements JournalBackend {
  readonly kind = 'sqlite' as const;
  private readonly stmt;
  private readonly writeTx: Database.Transaction<(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<unknown>) => unknown>;
  private readonly readTx: Database.Transaction<(sessionId: SessionId) => { session: SessionRow | undefined; events: EventRow[] }>;

  constructor(private readonly db: Database.Database) {
    this.stmt = {
      session: db.prepare<[string], SessionRecord>('SELECT * FROM jw_sessions WHERE session_id = ?'),
      insertSession: db.prepare('INSERT INTO jw_sessions VALUES (@session_id, @owner, @held, @epoch, @last_seq, @head_hash, @body_bytes)'),
      updateSession: db.prepare(
        'UPDATE jw_sessions SET owner = @owner, held = @held, epoch = @epoch, last_seq = @last_seq, head_hash = @head_hash, ' +
          'body_bytes = @body_bytes WHERE session_id = @session_id AND epoch = @expect_epoch AND last_seq = @expect_seq',
      ),
      insertEvent: db.prepare('INSERT INTO jw_events VALUES (?, ?, ?, ?, ?, ?)'),
      events: db.prepare<[string], [string, number, string, number, string, string]>(
        'SELECT session_id, seq, event_id, epoch, body, hash FROM jw_events WHERE session_id = ? ORDER BY seq',
      ).raw(true),
      task: db.prepare<[string], TaskRecord>('SELECT * FROM jw_tasks WHERE task_id = ?'),
      upsertTask: db.prepare(
        'INSERT INTO jw_tasks VALUES (@task_id, @session_id, @state, @limit_tool_calls, @limit_output_bytes, ' +
          '@charged_tool_calls, @charged_output_bytes, @reserved_output_bytes, @stop_reason, @reservations) ON CONFLICT (task_id) DO UPDATE SET ' +
          'state = excluded.state, charged_tool_calls = excluded.charged_tool_calls, charged_output_bytes = excluded.charged_output_bytes, ' +
          'reserved_output_bytes = excluded.reserved_output_bytes, stop_reason = excluded.stop_reason, reservations = excluded.reservations',
      ),
      operation: db.prepare<[string, string], { session_id: string; call_id: string; event_id: string }>(
        'SELECT session_id, call_id, event_id FROM jw_operations WHERE task_id = ? AND key = ?',
      ),
      upsertOperation: db.prepare(
        'INSERT INTO jw_operations VALUES (?, ?, ?, ?, ?) ON CONFLICT (task_id, key) DO UPDATE SET ' +
          'session_id = excluded.session_id, call_id = excluded.call_id, event_id = excluded.event_id',
      ),
      list: db.prepare<[], SessionRecord & { events: number }>(
        'SELECT s.*, (SELECT count(*) FROM jw_events e WHERE e.session_id = s.session_id) AS events FROM jw_sessions s ORDER BY s.session_id',
      ),
    };
    // Built once, like the statements: better-sqlite3 makes four wrapper functions per db.transaction() call.
    this.writeTx = db.transaction((sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<unknown>) =>
      this.readDecideWrite(sessionId, reads, decide));
    this.readTx = db.transaction((sessionId: SessionId) => this.readSnapshot(sessionId));
  }

  private run<T>(sessionId: string, fn: () => T): T {
    try {
      return fn();
    } catch (error) {
      throw mapError(error, sessionId);
    }
  }

  async transact<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>): Promise<R> {
    // IMMEDIATE: take the write lock before reading, so WAL never fails the upgrade with SQLITE_BUSY_SNAPSHOT.
    return this.run(sessionId, () => this.writeTx.immediate(sessionId, reads, decide) as R);
  }

  /** Read → decide → write, inside the IMMEDIATE transaction `writeTx` opened around it. */
  private readDecideWrite<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>): R {
    const s = this.stmt;
    const session = s.session.get(sessionId);
    const task = reads.taskId !== undefined ? s.task.get(reads.taskId) : undefined;
    const op = reads.operation ? s.operation.get(reads.operation.taskId, reads.operation.key) : undefined;
    const writes = decide({
      session: session ? toSession(session) : undefined,
      task: task ? toTask(task) : undefined,
      operation: op && reads.operation
        ? { taskId: reads.operation.taskId as TaskId, key: reads.operation.key, sessionId: op.session_id as SessionId, callId: op.call_id, eventId: op.event_id }
        : undefined,
    });
    if (writes.session) this.writeSession(writes.session.row, writes.session.expect);
    for (const e of writes.events ?? []) s.insertEvent.run(e.sessionId, e.seq, e.eventId, e.epoch, e.body, e.hash);
    if (writes.task) this.writeTask(writes.task.row);
    for (const o of writes.operations ?? []) s.upsertOperation.run(o.taskId, o.key, o.sessionId, o.callId, o.eventId);
    faultPoint('commit:before');
    return writes.result;
  }

  private writeSession(row: SessionRow, expect: { epoch: number; lastSeq: number } | null): void {
    const values = {
      session_id: row.sessionId, owner: row.owner, held: row.held ? 1 : 0, epoch: row.epoch,
      last_seq: row.lastSeq, head_hash: row.headHash, body_bytes: row.bodyBytes,
    };
    if (expect === null) {
      this.stmt.insertSession.run(values);
      return;
    }
    const info = this.stmt.updateSession.run({ ...values, expect_epoch: expect.epoch, expect_seq: expect.lastSeq });
    if (info.changes !== 1) throw new StaleOwnerError(row.sessionId, expect.epoch, 'the owner row changed');
  }

  private writeTask(row: TaskRow): void {
    this.stmt.upsertTask.run({
      task_id: row.taskId, session_id: row.sessionId, state: row.state, limit_tool_calls: row.limitToolCalls,
      limit_output_bytes: row.limitOutputBytes, charged_tool_calls: row.chargedToolCalls,
      charged_output_bytes: row.chargedOutputBytes, reserved_output_bytes: row.reservedOutputBytes, stop_reason: row.stopReason,
      reservations: JSON.stringify(row.reservations),
    });
  }

  async snapshot(sessionId: SessionId) {
    return this.run(sessionId, () => this.readTx.deferred(sessionId));
  }

  private readSnapshot(sessionId: SessionId): { session: SessionRow | undefined; events: EventRow[] } {
    const session = this.stmt.session.get(sessionId);
    const events: EventRow[] = this.stmt.events.all(sessionId).map(([sid, seq, eventId, epoch, body, hash]) => ({
      sessionId: sid as SessionId, seq, eventId, epoch, body, hash,
    }));
    return { session: session ? toSession(session) : undefined, events };
  }

  async readTask(taskId: string) {
    const row = this.run('', () => this.stmt.task.get(taskId));
    return row ? toTask(row) : undefined;
  }

  async listSessions() {
    return this.run('', () => this.stmt.list.all()).map((r) => ({ session: toSession(r), events: r.events }));
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}

function prepareDatabase(db: Database.Database, path: string, options: SqliteStoreOptions): void {
  const mode = db.pragma('journal_mode = WAL', { simple: true });
  if (path !== ':memory:' && mode !== 'wal') {
    throw new StoreUnavailableError('store_failure', `SQLite refused WAL mode (got ${String(mode)}); is ${path} on a network filesystem?`);
  }
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  db.pragma('trusted_schema = OFF');
  if (options.verifyOnOpen) {
    const result = db.pragma('quick_check', { simple: true });
    if (result !== 'ok') throw new JournalCorruptError('*', -1, 'storage', `quick_check failed: ${String(result)}`);
  }
  db.transaction(() => {
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > SQLITE_SCHEMA_VERSION) {
      throw new StoreUnavailableError('schema_too_new', `${path} has schema version ${version}; this code understands up to ${SQLITE_SCHEMA_VERSION}`);
    }
    if (version === 0) {
      const tables = db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE type = 'table'").get() as { n: number };
      if (tables.n > 0) {
        throw new StoreUnavailableError('store_failure', `${path} already holds other tables and is not a jingwei journal; give the journal its own file`);
      }
      db.exec(SCHEMA);
    } else if (version === 1) {
      db.exec("ALTER TABLE jw_tasks ADD COLUMN reservations TEXT NOT NULL DEFAULT '[]'");
    }
    if (version !== SQLITE_SCHEMA_VERSION) db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION}`);
  }).immediate();
}

/**
 * Opens (creating if needed) a SQLite journal: WAL, synchronous=FULL, every write an IMMEDIATE transaction, and a
 * bounded busy timeout that surfaces as StoreBusyError.
 */
export function openSqliteStore(path: string, options: SqliteStoreOptions = {}): SessionStore {
  const timeout = options.busyTimeoutMs ?? STORE_DEFAULTS.busyTimeoutMs;
  let db: Database.Database;
  try {
    db = new Database(path, { timeout });
  } catch (error) {
    throw mapError(error, '*');
  }
  try {
    prepareDatabase(db, path, options);
  } catch (error) {
    db.close();
    throw mapError(error, '*');
  }
  return new JournalStore(new SqliteBackend(db));
}
