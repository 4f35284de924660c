import { randomBytes } from 'node:crypto';
import { IdempotencyConflictError, InvalidInputError, StoreBusyError, StoreClosedError } from '../../errors.js';
import { POSTGRES_DEFAULTS } from '../../limits.js';
import type { JsonValue } from '../../json/types.js';
import {
  checkWrite, endedByWrite, endedByWriteText, idempotencyScope, reconcileAnswer, recordedResultText, refuseEndedByWrite, unfinishedDigest,
  type IdempotencyRecord, type IdempotencyRequest, type IdempotencyScope, type IdempotentOutcome,
} from '../../tool/idempotency.js';
import type { ToolReconcileAnswer } from '../../tool/types.js';
import { Client, Pool } from './driver.js';
import type { PgClient, PgPool } from './driver-types.js';
import { Passthrough } from '../passthrough.js';
import { releasing, type CheckedOutClient } from './checked-out.js';
import { listenForDriverErrors, mapPostgresError } from './errors.js';
import { checkMs, connectionAndSchema } from './options.js';
import { ensureSchema, IDENTIFIER } from './schema.js';

/**
 * Creates the dedup table, or re-keys one an older version created on (task_id, key): its records become legacy
 * ones (session_id ''), which answer for their (task_id, key) in every session, as they did then. Under an advisory
 * lock, so two processes opening at once never both upgrade; the schema is created under the lock the store's
 * migration takes for it too (ensureSchema).
 */
async function prepareTable(pool: PgPool, schema: string, table: string): Promise<void> {
  const client = await pool.connect();
  // A pg.PoolClient is an EventEmitter; the structural PgPool type leaves that out of the public types.
  await releasing(client as unknown as CheckedOutClient, async () => {
    // READ COMMITTED whatever the pool's default: under REPEATABLE READ the snapshot would be taken by the lock's own
    // statement, before the lock is granted, and miss the column an opener that held it had just added.
    await client.query('BEGIN ISOLATION LEVEL READ COMMITTED');
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`jingwei.idempotency:${schema}`]);
    await ensureSchema(client, schema);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${table} (session_id TEXT NOT NULL DEFAULT '', task_id TEXT NOT NULL, key TEXT NOT NULL,
        arguments_digest TEXT NOT NULL, result JSONB NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        CONSTRAINT jw_idempotency_pkey PRIMARY KEY (session_id, task_id, key))`,
    );
    const { rows } = await client.query(
      `SELECT 1 FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'jw_idempotency' AND column_name = 'session_id'`,
      [schema],
    );
    if (rows.length === 0) {
      await client.query(`ALTER TABLE ${table} ADD COLUMN session_id TEXT NOT NULL DEFAULT '',
        DROP CONSTRAINT jw_idempotency_pkey, ADD CONSTRAINT jw_idempotency_pkey PRIMARY KEY (session_id, task_id, key)`);
    }
    await client.query('COMMIT');
  });
}

/** Connections of the pool the helper opens on a URL. */
const IDEMPOTENCY_POOL_SIZE = 4;

/**
 * Deduplication for tools that write to PostgreSQL: the business write and its dedup record commit in one
 * transaction keyed by the operation (sessionId, taskId, key). The dedup row is inserted first, so a concurrent attempt of the
 * same key waits on it and then sees the committed record: two attempts of one key never both write. The helper's
 * own failures are typed (StoreUnavailableError, or StoreBusyError for a lock or statement timeout); what `write`
 * throws passes through unchanged.
 */
export class PostgresIdempotencyStore {
  private closed = false;

  private constructor(
    readonly pool: PgPool,
    private readonly owned: boolean,
    private readonly table: string,
    /** BEGIN and the transaction's timeouts, sent as one round trip. */
    private readonly begin: string,
  ) {}

  /**
   * Opens on a URL (a pool of its own) or your pool, creating the dedup table in `schema` (default public). Each of
   * its transactions sets `lock_timeout` (`lockTimeoutMs`, default 5,000: an attempt waiting longer for another
   * attempt of the same key fails with StoreBusyError; a statement of your write waiting longer for a lock fails
   * with PostgreSQL's own error, which passes through) and
   * `idle_in_transaction_session_timeout` (`idleInTransactionTimeoutMs`, default 60,000; 0 leaves the server's
   * setting: a process that stalls half-way through a write loses its connection after this long, so its
   * transaction rolls back and releases the key instead of blocking every later attempt;
   * docs/design.md#the-idempotency-helpers-wait-a-bounded-time).
   */
  static async open(
    urlOrPool: string | PgPool,
    options: { schema?: string; lockTimeoutMs?: number; idleInTransactionTimeoutMs?: number } = {},
  ): Promise<PostgresIdempotencyStore> {
    if (typeof options !== 'object' || options === null) throw new InvalidInputError('options', 'must be an object');
    const target = typeof urlOrPool === 'string' ? connectionAndSchema(urlOrPool, options.schema) : null;
    const schema = target?.schema ?? options.schema ?? 'public';
    if (!IDENTIFIER.test(schema)) throw new InvalidInputError('schema', 'must be a plain SQL identifier');
    const lock = checkMs('lockTimeoutMs', options.lockTimeoutMs, POSTGRES_DEFAULTS.lockTimeoutMs, 1);
    const idle = checkMs('idleInTransactionTimeoutMs', options.idleInTransactionTimeoutMs, POSTGRES_DEFAULTS.idleInTransactionTimeoutMs, 0);
    const begin = `BEGIN; SET LOCAL lock_timeout = ${lock}${idle > 0 ? `; SET LOCAL idle_in_transaction_session_timeout = ${idle}` : ''}`;
    const owned = typeof urlOrPool === 'string';
    let pool: PgPool;
    if (target !== null) {
      // A wait for one of its connections is bounded too (StoreBusyError once all stay busy past connectTimeoutMs):
      // writes that stall, or that call the helper again inside themselves, would otherwise hold every later one.
      const own = new Pool({
        connectionString: target.url,
        max: IDEMPOTENCY_POOL_SIZE,
        connectionTimeoutMillis: POSTGRES_DEFAULTS.connectTimeoutMs,
        query_timeout: POSTGRES_DEFAULTS.statementTimeoutMs + POSTGRES_DEFAULTS.answerMarginMs,
        keepAlive: true,
      });
      listenForDriverErrors(own);
      pool = own;
    } else if (typeof urlOrPool === 'object' && urlOrPool !== null && typeof urlOrPool.connect === 'function' && !(urlOrPool instanceof Client)) {
      pool = urlOrPool;
    } else {
      throw new InvalidInputError('urlOrPool', 'must be a PostgreSQL connection URL or a pg.Pool (a pg.Client holds one connection, which concurrent attempts cannot share)');
    }
    const table = `"${schema}".jw_idempotency`;
    try {
      await prepareTable(pool, schema, table);
    } catch (error) {
      if (owned) await pool.end();
      throw mapPostgresError(error, `could not prepare ${table}`);
    }
    return new PostgresIdempotencyStore(pool, owned, table, begin);
  }

  /**
   * Runs `write` once per (taskId, key) inside the transaction it is given; everything it writes on that client
   * commits with the dedup record, or not at all if it throws. The same key with other arguments throws
   * IdempotencyConflictError.
   */
  async run<T extends JsonValue>(request: IdempotencyRequest, write: (client: PgClient) => Promise<T>): Promise<IdempotentOutcome<T>> {
    const scope = idempotencyScope(request);
    checkWrite(write);
    return this.inTransaction(async (client) => {
      const record = await this.claim(client, scope);
      if (record !== null) {
        await client.query('ROLLBACK');
        if (endedByWrite(record.digest)) refuseEndedByWrite(scope, this.table);
        if (record.digest !== scope.argumentsDigest) throw new IdempotencyConflictError(scope.taskId, scope.key, scope.sessionId);
        return { result: record.result as T, replayed: true };
      }
      // A savepoint of this attempt's own: whether the transaction open when the write ends is still the helper's.
      const savepoint = `jingwei_write_${randomBytes(8).toString('hex')}`;
      await client.query(`SAVEPOINT ${savepoint}`);
      let result: T;
      try {
        result = await write(client);
      } catch (error) {
        // Not the helper's transaction any more: the write rolled it back (or committed it) before throwing, and what
        // it wrote outside a transaction since has committed with nothing to say so.
        if (!(await this.stillOwn(client, savepoint))) {
          await this.markEnded(client, scope);
          throw new InvalidInputError(
            'write',
            'ended the helper\'s transaction itself (a COMMIT or ROLLBACK on the client it was given) and then threw: nothing was recorded, and what it wrote, ' +
              `unless in a transaction of its own that this refusal rolls back, may have committed; check before any retry. ${endedByWriteText(scope, this.table)}`,
            { cause: error },
          );
        }
        // The tool's own failure: it passes through unchanged, not mapped as the helper's.
        throw new Passthrough(error);
      }
      // JSON data only (a lone surrogate, which jsonb cannot store, is refused with the rest).
      const text = recordedResultText(result);
      // The record replaces the claim's mark (unfinishedDigest): a claim committed by the write itself keeps it.
      // Only over this attempt's own mark: another attempt let in by a write that rolled the claim back may have
      // recorded the key since, and its record is not this one's.
      const recorded = await client.query(
        `UPDATE ${this.table} SET result = $4::jsonb, arguments_digest = $5 WHERE session_id = $1 AND task_id = $2 AND key = $3 AND arguments_digest = $6`,
        [scope.sessionId, scope.taskId, scope.key, text, scope.argumentsDigest, unfinishedDigest(scope)],
      );
      // The claim is gone: the write rolled the helper's transaction back on its client. What it wrote in a transaction
      // it began again is rolled back with this refusal; what it wrote outside one has committed, without a record.
      if (recorded.rowCount !== 1) {
        await this.markEnded(client, scope);
        throw new InvalidInputError(
          'write',
          'ended the helper\'s transaction itself (a ROLLBACK on the client it was given): nothing was recorded, and what it wrote after that, unless in a transaction of its own that this refusal rolls back, may have committed; ' +
            `check before any retry. ${endedByWriteText(scope, this.table)}`,
        );
      }
      await client.query('COMMIT');
      // What was recorded, as every replay gives it back (a getter of the object the write returned could read otherwise).
      return { result: JSON.parse(text) as T, replayed: false };
    });
  }

  /**
   * Whether the transaction open on `client` is still the helper's, with its claim: rolled back to the attempt's own
   * savepoint (allowed in a transaction a failed statement aborted), everything the write did undone and the claim
   * kept. Refused when the write ended that transaction (no transaction, or one of its own without the savepoint).
   */
  private async stillOwn(client: PgClient, savepoint: string): Promise<boolean> {
    try {
      await client.query(`ROLLBACK TO SAVEPOINT ${savepoint}`);
      return true;
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (code === '3B001' || code === '25P01') return false;
      throw error;
    }
  }

  /**
   * Rolls back whatever transaction the write began, then marks the operation as one a write ended, outside any
   * transaction: what the write wrote outside one has committed, with no record.
   */
  private async markEnded(client: PgClient, scope: IdempotencyScope): Promise<void> {
    await client.query('ROLLBACK');
    await client.query(
      `INSERT INTO ${this.table} (session_id, task_id, key, arguments_digest, result) VALUES ($1, $2, $3, $4, 'null'::jsonb)
       ON CONFLICT (session_id, task_id, key) DO UPDATE SET arguments_digest = EXCLUDED.arguments_digest, result = EXCLUDED.result`,
      [scope.sessionId, scope.taskId, scope.key, unfinishedDigest(scope)],
    );
  }

  /**
   * A reconciler for tools written with `run` (docs/design.md#reconcilers): declare
   * `reconcile: (request) => store.reconcile(request)` on the tool. The dedup row commits in the same transaction
   * as the business write, so it answers exactly: `completed` with the stored result when the row for the
   * operation holds these arguments, `not_executed` when there is none, `unknown` when it holds other
   * arguments. It claims the key the way `run` does and rolls back, so it waits for an attempt in flight instead
   * of answering while one is half-way; a retry still goes through `run`, so an attempt that commits later is
   * replayed, never repeated.
   */
  async reconcile(request: IdempotencyRequest): Promise<ToolReconcileAnswer> {
    const scope = idempotencyScope(request);
    const record = await this.inTransaction(async (client) => {
      const found = await this.claim(client, scope);
      await client.query('ROLLBACK');
      return found;
    });
    return reconcileAnswer(scope, record, this.table);
  }

  /**
   * Claims the operation with a placeholder row marked unfinished (unfinishedDigest), unless a legacy record (session_id '') holds its (taskId, key); when
   * a record exists, returns it (the session's own first). Waits while another transaction holds an uncommitted row
   * for this operation, and sees it once that commits.
   */
  private async claim(client: PgClient, scope: IdempotencyScope): Promise<IdempotencyRecord | null> {
    const claimed = await client.query(
      `INSERT INTO ${this.table} (session_id, task_id, key, arguments_digest, result)
       SELECT $1, $2, $3, $4, 'null'::jsonb
       WHERE NOT EXISTS (SELECT 1 FROM ${this.table} WHERE session_id = '' AND task_id = $2 AND key = $3)
       ON CONFLICT (session_id, task_id, key) DO NOTHING RETURNING 1`,
      [scope.sessionId, scope.taskId, scope.key, unfinishedDigest(scope)],
    );
    if (claimed.rowCount !== 0) return null;
    const { rows } = await client.query<{ session_id: string; arguments_digest: string; result: JsonValue }>(
      `SELECT session_id, arguments_digest, result FROM ${this.table} WHERE session_id IN ($1, '') AND task_id = $2 AND key = $3
       ORDER BY session_id DESC LIMIT 1`,
      [scope.sessionId, scope.taskId, scope.key],
    );
    const row = rows[0]!;
    return { digest: row.arguments_digest, result: row.result, legacy: row.session_id === '' };
  }

  /**
   * Runs `body` on one pooled connection after BEGIN and the timeouts; `body` commits or rolls back itself, and a
   * throw rolls back. The helper's own failures are mapped to typed errors; a Passthrough's error comes back unchanged.
   */
  private async inTransaction<R>(body: (client: PgClient) => Promise<R>): Promise<R> {
    if (this.closed) throw new StoreClosedError('idempotency', this.table);
    try {
      let client: PgClient;
      try {
        client = await this.pool.connect();
      } catch (error) {
        if (error instanceof Error && /timeout exceeded when trying to connect/.test(error.message)) {
          throw new StoreBusyError(`${this.table}: every pooled connection stayed busy (attempts in flight, or a write that calls the helper again inside itself)`, { cause: error });
        }
        throw error;
      }
      // A pg.PoolClient is an EventEmitter; the structural PgPool type leaves that out of the public types.
      return await releasing(client as unknown as CheckedOutClient, async () => {
        await client.query(this.begin);
        return body(client);
      });
    } catch (error) {
      if (error instanceof Passthrough) throw error.error;
      throw mapPostgresError(error, this.table);
    }
  }

  async count(): Promise<number> {
    if (this.closed) throw new StoreClosedError('idempotency', this.table);
    try {
      const { rows } = await this.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${this.table}`);
      return Number(rows[0]!.n);
    } catch (error) {
      throw mapPostgresError(error, this.table);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.owned) await this.pool.end();
  }
}
