import { createHash } from 'node:crypto';
import pg from 'pg';
import { faultPoint } from '../fault.js';
import { InvalidInputError, JingweiError, JournalCorruptError, StaleOwnerError, StoreBusyError, StoreUnavailableError } from '../errors.js';
import type { SessionId, TaskId } from '../ids.js';
import { POSTGRES_DEFAULTS } from '../limits.js';
import { JournalStore } from './journal-store.js';
import { parseReservations } from './reservations.js';
import type { EventRow, JournalBackend, OperationRow, SessionRow, TaskRow, TxReads, TxState, TxWrites } from './rows.js';
import type { SessionStore, TaskState } from './types.js';

/** The schema version this code writes and understands. A database at a higher version is refused on open. */
export const POSTGRES_SCHEMA_VERSION = 2;

/** Defaults of the PostgreSQL store's bounded waits (the lock wait is the store-wide busy timeout). */

export { POSTGRES_DEFAULTS };

export interface PostgresStoreOptions {
  /**
   * The PostgreSQL schema (namespace) that holds the store's tables, created on open if missing. A plain
   * identifier: letters, digits and underscores, at most 63 bytes. Default `public`.
   */
  schema?: string;
  /**
   * How long a transaction waits for a row lock held by another writer (`SET LOCAL lock_timeout`) before it fails
   * with StoreBusyError. Default 5,000 ms.
   */
  lockTimeoutMs?: number;
  /** Upper bound for any one statement (`SET LOCAL statement_timeout`); exceeding it is StoreBusyError. Default 30,000 ms. */
  statementTimeoutMs?: number;
  /**
   * `SET LOCAL idle_in_transaction_session_timeout` for the store's own transactions: if this process stalls (GC
   * pause, SIGSTOP) while holding an owner row lock, the server ends its connection after this long, releasing the
   * lock and rolling the transaction back. 0 leaves the server's setting. Default 60,000 ms.
   */
  idleInTransactionTimeoutMs?: number;
  /** Connections in the pool the store creates from a URL (ignored for a pool you pass in). Default 10. */
  poolSize?: number;
  /** How long to wait for a connection from the pool the store creates (ignored for a pool you pass in). Default 10,000 ms. */
  connectTimeoutMs?: number;
  /**
   * Use named (server-side prepared) statements for the write path, parsed once per connection. Set false behind
   * a transaction-mode pooler that cannot carry prepared statements. Default true.
   */
  prepare?: boolean;
  /**
   * TESTING HOOK, not for production use: awaited inside every write transaction after all writes and just before
   * COMMIT, while the owner row lock is held. `backendPid` is the server process of that transaction, so a test can
   * kill it (`pg_terminate_backend`) or hold the lock. When unset, it costs nothing.
   */
  beforeCommit?: (context: { readonly sessionId: string; readonly backendPid: number }) => Promise<void> | void;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** The DDL of each schema version; index n migrates version n-1 to n. `S` is the quoted schema name. */
const MIGRATIONS: ReadonlyArray<(S: string) => string> = [
  () => '',
  (S) => `
CREATE TABLE ${S}.jw_sessions (
  session_id TEXT NOT NULL, owner TEXT, held BOOLEAN NOT NULL, epoch BIGINT NOT NULL,
  last_seq BIGINT NOT NULL, head_hash TEXT NOT NULL, body_bytes BIGINT NOT NULL,
  CONSTRAINT jw_sessions_pkey PRIMARY KEY (session_id)
);
CREATE TABLE ${S}.jw_events (
  session_id TEXT NOT NULL, seq BIGINT NOT NULL, event_id TEXT NOT NULL, epoch BIGINT NOT NULL,
  body TEXT NOT NULL, hash TEXT NOT NULL,
  CONSTRAINT jw_events_pkey PRIMARY KEY (session_id, seq)
);
CREATE TABLE ${S}.jw_tasks (
  task_id TEXT NOT NULL, session_id TEXT NOT NULL, state TEXT NOT NULL,
  limit_tool_calls BIGINT NOT NULL, limit_output_bytes BIGINT NOT NULL,
  charged_tool_calls BIGINT NOT NULL, charged_output_bytes BIGINT NOT NULL,
  reserved_output_bytes BIGINT NOT NULL, stop_reason TEXT,
  CONSTRAINT jw_tasks_pkey PRIMARY KEY (task_id)
);
CREATE TABLE ${S}.jw_operations (
  task_id TEXT NOT NULL, key TEXT NOT NULL, session_id TEXT NOT NULL, call_id TEXT NOT NULL, event_id TEXT NOT NULL,
  CONSTRAINT jw_operations_pkey PRIMARY KEY (task_id, key)
);`,
  // Version 2: each outstanding output reservation, so one left by a fenced owner can be settled.
  (S) => `ALTER TABLE ${S}.jw_tasks ADD COLUMN reservations TEXT NOT NULL DEFAULT '[]';`,
];

interface SessionRecord {
  session_id: string; owner: string | null; held: boolean; epoch: string; last_seq: string; head_hash: string; body_bytes: string;
}
interface TaskRecord {
  task_id: string; session_id: string; state: string; limit_tool_calls: string; limit_output_bytes: string;
  charged_tool_calls: string; charged_output_bytes: string; reserved_output_bytes: string; stop_reason: string | null;
  reservations: string;
}

/** BIGINT columns arrive as decimal strings; anything beyond a safe JS integer is storage we cannot trust. */
function int(value: unknown, column: string, sessionId: string): number {
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isSafeInteger(n)) {
    throw new JournalCorruptError(sessionId, -1, 'storage', `${column} holds ${String(value)}, which is not a safe integer`);
  }
  return n;
}

const toSession = (r: SessionRecord): SessionRow => ({
  sessionId: r.session_id as SessionId, owner: r.owner, held: r.held, epoch: int(r.epoch, 'epoch', r.session_id),
  lastSeq: int(r.last_seq, 'last_seq', r.session_id), headHash: r.head_hash, bodyBytes: int(r.body_bytes, 'body_bytes', r.session_id),
});
const toTask = (r: TaskRecord): TaskRow => ({
  taskId: r.task_id as TaskId, sessionId: r.session_id as SessionId, state: r.state as TaskState,
  limitToolCalls: int(r.limit_tool_calls, 'limit_tool_calls', r.session_id),
  limitOutputBytes: int(r.limit_output_bytes, 'limit_output_bytes', r.session_id),
  chargedToolCalls: int(r.charged_tool_calls, 'charged_tool_calls', r.session_id),
  chargedOutputBytes: int(r.charged_output_bytes, 'charged_output_bytes', r.session_id),
  reservedOutputBytes: int(r.reserved_output_bytes, 'reserved_output_bytes', r.session_id),
  stopReason: r.stop_reason,
  reservations: parseReservations(r.reservations, r.session_id),
});

/** Node's socket errors: the server is gone or unreachable. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

/** Maps the driver's errors onto the library's typed ones; our own errors pass through. */
function mapError(error: unknown, context: string): unknown {
  if (error instanceof JingweiError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  if (code === '55P03') return new StoreBusyError(`${context}: another writer holds the lock (lock_timeout)`, { cause: error });
  if (code === '57014') return new StoreBusyError(`${context}: the statement was cancelled (statement_timeout): ${message}`, { cause: error });
  if (code === '40001' || code === '40P01') return new StoreBusyError(`${context}: ${message} (${code})`, { cause: error });
  if (code === '22021' || code === '22P05') {
    return new InvalidInputError('text', `PostgreSQL cannot store this text (U+0000 or an invalid character): ${message}`, { cause: error });
  }
  if (code === '42P01' || code === '3F000') {
    return new StoreUnavailableError('store_failure', `${context}: the store's tables are missing (${message})`, { cause: error });
  }
  if (typeof code === 'string' && NETWORK_CODES.has(code)) {
    return new StoreUnavailableError('store_failure', `${context}: PostgreSQL is unreachable (${code})`, { cause: error });
  }
  return new StoreUnavailableError('store_failure', `${context}: PostgreSQL failed: ${message}${typeof code === 'string' ? ` (${code})` : ''}`, { cause: error });
}

/** An error thrown by the pure decision (or our own checks): rolled back, then rethrown unchanged. */
class Passthrough {
  constructor(readonly error: unknown) {}
}

/** A concurrent transaction created the same session or task first: the whole transaction runs once more. */
class LostCreationRace {
  constructor(readonly error: unknown) {}
}

function checkMs(name: string, value: number | undefined, fallback: number, min: number): number {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v < min) throw new InvalidInputError(name, `must be an integer >= ${min}, got ${String(v)}`);
  return v;
}

/** Keeps the last write per (task, key), as sequential upserts would. */
function lastPerOperation(ops: readonly OperationRow[]): OperationRow[] {
  const byKey = new Map<string, OperationRow>();
  for (const o of ops) {
    const k = `${o.taskId}\u0000${o.key}`;
    byKey.delete(k);
    byKey.set(k, o);
  }
  return [...byKey.values()];
}

class PostgresBackend implements JournalBackend {
  readonly kind = 'postgres' as const;
  private closed = false;
  private readonly sql;
  private readonly beginWrite: string;
  private readonly beginRead: string;
  /** Prefix of this schema's statement names (the SQL differs per schema; names are at most 63 bytes). */
  private readonly statementPrefix: string | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly ownsPool: boolean,
    schema: string,
    timeouts: { lock: number; statement: number; idle: number },
    prepare: boolean,
    private readonly beforeCommit: PostgresStoreOptions['beforeCommit'],
  ) {
    const S = `"${schema}"`;
    this.statementPrefix = prepare
      ? `jw${POSTGRES_SCHEMA_VERSION}_${createHash('sha256').update(schema).digest('hex').slice(0, 16)}_`
      : undefined;
    const idle = timeouts.idle > 0 ? `; SET LOCAL idle_in_transaction_session_timeout = ${timeouts.idle}` : '';
    this.beginWrite =
      `BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE; SET LOCAL lock_timeout = ${timeouts.lock}; ` +
      `SET LOCAL statement_timeout = ${timeouts.statement}${idle}`;
    this.beginRead =
      `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL lock_timeout = ${timeouts.lock}; ` +
      `SET LOCAL statement_timeout = ${timeouts.statement}${idle}`;
    const sessionCols = 'session_id, owner, held, epoch, last_seq, head_hash, body_bytes';
    const taskCols =
      'task_id, session_id, state, limit_tool_calls, limit_output_bytes, charged_tool_calls, charged_output_bytes, reserved_output_bytes, stop_reason, reservations';
    this.sql = {
      session: `SELECT ${sessionCols} FROM ${S}.jw_sessions WHERE session_id = $1`,
      lockSession: `SELECT ${sessionCols} FROM ${S}.jw_sessions WHERE session_id = $1 FOR UPDATE`,
      insertSession: `INSERT INTO ${S}.jw_sessions (${sessionCols}) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      updateSession:
        `UPDATE ${S}.jw_sessions SET owner = $2, held = $3, epoch = $4, last_seq = $5, head_hash = $6, body_bytes = $7 ` +
        'WHERE session_id = $1 AND epoch = $8 AND last_seq = $9',
      insertEvents:
        `INSERT INTO ${S}.jw_events (session_id, seq, event_id, epoch, body, hash) ` +
        'SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[])',
      events: `SELECT seq, event_id, epoch, body, hash FROM ${S}.jw_events WHERE session_id = $1 ORDER BY seq`,
      task: `SELECT ${taskCols} FROM ${S}.jw_tasks WHERE task_id = $1`,
      lockTask: `SELECT ${taskCols} FROM ${S}.jw_tasks WHERE task_id = $1 FOR UPDATE`,
      insertTask: `INSERT INTO ${S}.jw_tasks (${taskCols}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      updateTask:
        `UPDATE ${S}.jw_tasks SET state = $3, charged_tool_calls = $4, charged_output_bytes = $5, reserved_output_bytes = $6, ` +
        'stop_reason = $7, reservations = $8 WHERE task_id = $1 AND session_id = $2',
      lockOperation: `SELECT session_id, call_id, event_id FROM ${S}.jw_operations WHERE task_id = $1 AND key = $2 FOR UPDATE`,
      upsertOperations:
        `INSERT INTO ${S}.jw_operations (task_id, key, session_id, call_id, event_id) ` +
        'SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) ' +
        'ON CONFLICT (task_id, key) DO UPDATE SET session_id = EXCLUDED.session_id, call_id = EXCLUDED.call_id, event_id = EXCLUDED.event_id',
      list:
        `SELECT ${sessionCols.split(', ').map((c) => `s.${c}`).join(', ')}, ` +
        `(SELECT count(*) FROM ${S}.jw_events e WHERE e.session_id = s.session_id) AS events ` +
        `FROM ${S}.jw_sessions s ORDER BY s.session_id COLLATE "C"`,
    };
  }

  /** Runs one of the store's statements, as a named prepared statement unless `prepare: false`. */
  private run<T extends pg.QueryResultRow>(client: pg.PoolClient, key: keyof PostgresBackend['sql'], values: unknown[]): Promise<pg.QueryResult<T>> {
    const text = this.sql[key];
    return this.statementPrefix === undefined
      ? client.query<T>(text, values)
      : client.query<T>({ name: this.statementPrefix + key, text, values });
  }

  private async connect(context: string): Promise<pg.PoolClient> {
    if (this.closed) throw new StoreUnavailableError('store_closed', 'the PostgreSQL store is closed');
    try {
      return await this.pool.connect();
    } catch (error) {
      const max = this.pool.options.max;
      if (error instanceof Error && /timeout exceeded when trying to connect/.test(error.message) && typeof max === 'number' && this.pool.totalCount >= max) {
        throw new StoreBusyError(`${context}: all ${max} pool connections stayed busy`, { cause: error });
      }
      throw mapError(error, context);
    }
  }

  /**
   * Runs `body` in one transaction on one pooled connection. Driver errors roll back and map to typed errors;
   * a connection that failed is destroyed rather than returned to the pool.
   */
  private async inTransaction<T>(begin: string, context: string, body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.connect(context);
    let broken: unknown;
    const onError = (error: unknown) => {
      broken = error;
    };
    client.on('error', onError);
    try {
      await client.query(begin);
      const result = await body(client);
      await client.query('COMMIT');
      client.off('error', onError);
      client.release();
      return result;
    } catch (error) {
      if (broken === undefined) {
        try {
          await client.query('ROLLBACK');
        } catch (rollbackError) {
          broken = rollbackError;
        }
      }
      client.off('error', onError);
      client.release(broken === undefined ? undefined : broken instanceof Error ? broken : new Error(String(broken)));
      if (error instanceof Passthrough || error instanceof LostCreationRace) throw error;
      if ((error as { code?: unknown }).code === '23505') throw new LostCreationRace(error);
      throw mapError(error, context);
    }
  }

  async transact<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>): Promise<R> {
    const context = `session ${sessionId}`;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.inTransaction(this.beginWrite, context, (client) => this.readDecideWrite(client, sessionId, reads, decide));
      } catch (error) {
        if (error instanceof Passthrough) throw error.error;
        if (error instanceof LostCreationRace) {
          // A concurrent creator committed the same session or task row first. Run read → decide → write again:
          // this time the decision sees that row (and says SessionBusy, takes over, or reuses the task).
          if (attempt < 2) continue;
          throw new StoreBusyError(`${context}: a concurrent transaction kept creating the same rows`, { cause: error.error });
        }
        throw error;
      }
    }
  }

  private async readDecideWrite<R>(
    client: pg.PoolClient,
    sessionId: SessionId,
    reads: TxReads,
    decide: (state: TxState) => TxWrites<R>,
  ): Promise<R> {
    // The owner row lock serialises every writer of this session; a missing row is created by the decision's
    // INSERT, and a concurrent creator surfaces as a unique violation (retried once by transact).
    const sessionRes = await this.run<SessionRecord>(client, 'lockSession', [sessionId]);
    const taskRes = reads.taskId !== undefined ? await this.run<TaskRecord>(client, 'lockTask', [reads.taskId]) : undefined;
    const opRes = reads.operation
      ? await this.run<{ session_id: string; call_id: string; event_id: string }>(client, 'lockOperation', [reads.operation.taskId, reads.operation.key])
      : undefined;
    const s = sessionRes.rows[0];
    const t = taskRes?.rows[0];
    const o = opRes?.rows[0];
    let writes: TxWrites<R>;
    try {
      writes = decide({
        session: s ? toSession(s) : undefined,
        task: t ? toTask(t) : undefined,
        operation: o && reads.operation
          ? { taskId: reads.operation.taskId as TaskId, key: reads.operation.key, sessionId: o.session_id as SessionId, callId: o.call_id, eventId: o.event_id }
          : undefined,
      });
    } catch (error) {
      throw new Passthrough(error);
    }
    if (writes.session) await this.writeSession(client, writes.session.row, writes.session.expect);
    const events = writes.events ?? [];
    if (events.length > 0) await this.insertEvents(client, events);
    if (writes.task) await this.writeTask(client, writes.task.row, writes.task.insert);
    const ops = lastPerOperation(writes.operations ?? []);
    if (ops.length > 0) {
      await this.run(client, 'upsertOperations', [
        ops.map((x) => x.taskId), ops.map((x) => x.key), ops.map((x) => x.sessionId), ops.map((x) => x.callId), ops.map((x) => x.eventId),
      ]);
    }
    faultPoint('commit:before');
    if (this.beforeCommit) {
      const pid = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      try {
        await this.beforeCommit({ sessionId, backendPid: pid.rows[0]!.pid });
      } catch (error) {
        throw new Passthrough(error);
      }
    }
    return writes.result;
  }

  private async writeSession(client: pg.PoolClient, row: SessionRow, expect: { epoch: number; lastSeq: number } | null): Promise<void> {
    const values = [row.sessionId, row.owner, row.held, row.epoch, row.lastSeq, row.headHash, row.bodyBytes];
    if (expect === null) {
      await this.run(client, 'insertSession', values);
      return;
    }
    // The fencing check: the owner row changes only where epoch and head are still what this decision read.
    const res = await this.run(client, 'updateSession', [...values, expect.epoch, expect.lastSeq]);
    if (res.rowCount !== 1) throw new Passthrough(new StaleOwnerError(row.sessionId, expect.epoch, 'the owner row changed'));
  }

  private async insertEvents(client: pg.PoolClient, events: readonly EventRow[]): Promise<void> {
    try {
      await this.run(client, 'insertEvents', [
        events.map((e) => e.sessionId), events.map((e) => e.seq), events.map((e) => e.eventId),
        events.map((e) => e.epoch), events.map((e) => e.body), events.map((e) => e.hash),
      ]);
    } catch (error) {
      if ((error as { code?: unknown }).code === '23505') {
        // Rows beyond the head on the owner row: the journal was tampered with. Never overwrite or retry.
        throw new Passthrough(new JournalCorruptError(events[0]!.sessionId, events[0]!.seq, 'head_mismatch',
          'event rows already exist beyond the head recorded on the owner row', { cause: error }));
      }
      throw error;
    }
  }

  private async writeTask(client: pg.PoolClient, row: TaskRow, insert: boolean): Promise<void> {
    if (insert) {
      await this.run(client, 'insertTask', [
        row.taskId, row.sessionId, row.state, row.limitToolCalls, row.limitOutputBytes,
        row.chargedToolCalls, row.chargedOutputBytes, row.reservedOutputBytes, row.stopReason, JSON.stringify(row.reservations),
      ]);
      return;
    }
    const res = await this.run(client, 'updateTask', [
      row.taskId, row.sessionId, row.state, row.chargedToolCalls, row.chargedOutputBytes, row.reservedOutputBytes, row.stopReason,
      JSON.stringify(row.reservations),
    ]);
    // The row was read FOR UPDATE in this transaction, so only an outside actor can make this miss.
    if (res.rowCount !== 1) throw new Passthrough(new StoreBusyError(`task ${row.taskId} changed outside the store; try again`));
  }

  async snapshot(sessionId: SessionId) {
    return this.inTransaction(this.beginRead, `session ${sessionId}`, async (client) => {
      const sessionRes = await this.run<SessionRecord>(client, 'session', [sessionId]);
      const eventsRes = await client.query<[string, string, string, string, string]>({ text: this.sql.events, values: [sessionId], rowMode: 'array' });
      const s = sessionRes.rows[0];
      const events: EventRow[] = new Array<EventRow>(eventsRes.rows.length);
      eventsRes.rows.forEach(([seq, eventId, epoch, body, hash], i) => {
        events[i] = { sessionId, seq: int(seq, 'seq', sessionId), eventId, epoch: int(epoch, 'epoch', sessionId), body, hash };
      });
      return { session: s ? toSession(s) : undefined, events };
    });
  }

  async readTask(taskId: string) {
    return this.inTransaction(this.beginRead, `task ${taskId}`, async (client) => {
      const row = (await this.run<TaskRecord>(client, 'task', [taskId])).rows[0];
      return row ? toTask(row) : undefined;
    });
  }

  async listSessions() {
    return this.inTransaction(this.beginRead, 'list sessions', async (client) => {
      const res = await client.query<SessionRecord & { events: string }>(this.sql.list);
      return res.rows.map((r) => ({ session: toSession(r), events: int(r.events, 'count', r.session_id) }));
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsPool) await this.pool.end();
  }
}

/**
 * Creates or upgrades the store's tables. Fast path: the version is current, no lock and no DDL. Otherwise one
 * transaction under an advisory transaction lock (so concurrent openers never race), re-reading the version
 * inside it.
 */
async function migrate(pool: pg.Pool, schema: string, lockTimeoutMs: number, statementTimeoutMs: number): Promise<void> {
  const S = `"${schema}"`;
  const client = await pool.connect();
  let broken: unknown;
  const onError = (error: unknown) => {
    broken = error;
  };
  client.on('error', onError);
  const readVersion = async (): Promise<number> => {
    const table = await client.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [`${S}.jw_schema_version`]);
    if (table.rows[0]?.t == null) return 0;
    const res = await client.query<{ version: number }>(`SELECT version FROM ${S}.jw_schema_version`);
    return res.rows[0]?.version ?? 0;
  };
  const tooNew = (version: number) =>
    new StoreUnavailableError('schema_too_new', `schema ${schema} is at version ${version}; this code understands up to ${POSTGRES_SCHEMA_VERSION}`);
  try {
    const seen = await readVersion();
    if (seen > POSTGRES_SCHEMA_VERSION) throw tooNew(seen);
    if (seen === POSTGRES_SCHEMA_VERSION) return;
    await client.query(
      `BEGIN; SET LOCAL lock_timeout = ${lockTimeoutMs}; SET LOCAL statement_timeout = ${statementTimeoutMs}`,
    );
    try {
      await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`jingwei.migrate:${schema}`]);
      const ns = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
      if (ns.rowCount === 0) await client.query(`CREATE SCHEMA ${S}`);
      const table = await client.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [`${S}.jw_schema_version`]);
      if (table.rows[0]?.t == null) {
        await client.query(
          `CREATE TABLE ${S}.jw_schema_version (singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton), version INTEGER NOT NULL)`,
        );
      }
      await client.query(`INSERT INTO ${S}.jw_schema_version (version) VALUES (0) ON CONFLICT (singleton) DO NOTHING`);
      const version = await readVersion();
      if (version > POSTGRES_SCHEMA_VERSION) throw tooNew(version);
      for (let v = version + 1; v <= POSTGRES_SCHEMA_VERSION; v++) await client.query(MIGRATIONS[v]!(S));
      await client.query(`UPDATE ${S}.jw_schema_version SET version = $1`, [POSTGRES_SCHEMA_VERSION]);
      await client.query('COMMIT');
    } catch (error) {
      if (broken === undefined) await client.query('ROLLBACK').catch((e: unknown) => { broken = e; });
      throw error;
    }
  } finally {
    client.off('error', onError);
    client.release(broken === undefined ? undefined : broken instanceof Error ? broken : new Error(String(broken)));
  }
}

/**
 * Opens (creating or upgrading its tables if needed) a PostgreSQL journal. Asynchronous because the schema
 * migrations run on open. Pass a connection URL (the store creates, and on close() ends, its own pool) or a
 * `pg.Pool` you own (close() leaves it open; give it an 'error' listener, as pg requires, for idle connections the
 * server ends).
 *
 * Every write is one READ COMMITTED transaction that locks the session's owner row (`SELECT ... FOR UPDATE`), runs
 * the store's pure decision, and updates the owner row only `WHERE epoch = <read epoch> AND last_seq = <read head>`
 * in the same transaction as the event inserts: a fenced owner's write changes 0 rows and fails with
 * StaleOwnerError, writing nothing. Lock waits and statements are bounded (`lockTimeoutMs`, `statementTimeoutMs`)
 * and fail with StoreBusyError; lost connections fail with StoreUnavailableError('store_failure'); a schema newer
 * than this code fails with StoreUnavailableError('schema_too_new').
 */
export async function openPostgresStore(urlOrPool: string | pg.Pool, options: PostgresStoreOptions = {}): Promise<SessionStore> {
  const schema = options.schema ?? 'public';
  if (typeof schema !== 'string' || !IDENTIFIER.test(schema)) {
    throw new InvalidInputError('schema', 'must be a plain identifier (letters, digits, underscores; at most 63 bytes)');
  }
  const lock = checkMs('lockTimeoutMs', options.lockTimeoutMs, POSTGRES_DEFAULTS.lockTimeoutMs, 1);
  const statement = checkMs('statementTimeoutMs', options.statementTimeoutMs, POSTGRES_DEFAULTS.statementTimeoutMs, 1);
  const idle = checkMs('idleInTransactionTimeoutMs', options.idleInTransactionTimeoutMs, POSTGRES_DEFAULTS.idleInTransactionTimeoutMs, 0);
  let pool: pg.Pool;
  let ownsPool: boolean;
  if (typeof urlOrPool === 'string') {
    if (urlOrPool.trim() === '') throw new InvalidInputError('url', 'must be a PostgreSQL connection URL');
    pool = new pg.Pool({
      connectionString: urlOrPool,
      max: checkMs('poolSize', options.poolSize, POSTGRES_DEFAULTS.poolSize, 1),
      connectionTimeoutMillis: checkMs('connectTimeoutMs', options.connectTimeoutMs, POSTGRES_DEFAULTS.connectTimeoutMs, 1),
      application_name: 'jingwei',
    });
    // An idle pooled connection that the server ends is dropped by the pool; without a listener Node would crash.
    pool.on('error', () => {});
    ownsPool = true;
  } else if (urlOrPool && typeof urlOrPool === 'object' && typeof (urlOrPool as pg.Pool).connect === 'function') {
    pool = urlOrPool;
    ownsPool = false;
  } else {
    throw new InvalidInputError('urlOrPool', 'must be a PostgreSQL connection URL or a pg.Pool');
  }
  try {
    await migrate(pool, schema, lock, statement);
  } catch (error) {
    if (ownsPool) await pool.end().catch(() => {});
    throw mapError(error, `open schema ${schema}`);
  }
  const backend = new PostgresBackend(pool, ownsPool, schema, { lock, statement, idle }, options.prepare !== false, options.beforeCommit);
  return new JournalStore(backend);
}
