import { IdempotencyConflictError, InvalidInputError } from '../../errors.js';
import type { JsonValue } from '../../json/types.js';
import { idempotencyScope, reconcileAnswer, type IdempotencyRequest, type IdempotentOutcome } from '../../tool/idempotency.js';
import type { ToolReconcileAnswer } from '../../tool/types.js';
import { Pool } from './driver.js';
import type { PgClient, PgPool } from './driver-types.js';
import { mapPostgresError } from './errors.js';
import { IDENTIFIER } from './schema.js';

/**
 * Deduplication for tools that write to PostgreSQL: the business write and its dedup record commit in one
 * transaction keyed by (taskId, operation key). The dedup row is inserted first, so a concurrent attempt of the
 * same key waits on it and then sees the committed record: two attempts of one key never both write. The helper's
 * own failures are typed (StoreUnavailableError, or StoreBusyError for a lock or statement timeout); what `write`
 * throws passes through unchanged.
 */
export class PostgresIdempotencyStore {
  private constructor(readonly pool: PgPool, private readonly owned: boolean, private readonly table: string) {}

  /** Opens on a URL (a pool of its own) or your pool, creating the dedup table in `schema` (default public). */
  static async open(urlOrPool: string | PgPool, options: { schema?: string } = {}): Promise<PostgresIdempotencyStore> {
    const schema = options.schema ?? 'public';
    if (!IDENTIFIER.test(schema)) throw new InvalidInputError('schema', 'must be a plain SQL identifier');
    const owned = typeof urlOrPool === 'string';
    let pool: PgPool;
    if (typeof urlOrPool === 'string') {
      const own = new Pool({ connectionString: urlOrPool, max: 4 });
      own.on('error', () => {});
      pool = own;
    } else {
      pool = urlOrPool;
    }
    const table = `"${schema}".jw_idempotency`;
    try {
      await pool.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
      await pool.query(
        `CREATE TABLE IF NOT EXISTS ${table} (task_id TEXT NOT NULL, key TEXT NOT NULL, arguments_digest TEXT NOT NULL,
          result JSONB NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (task_id, key))`,
      );
    } catch (error) {
      if (owned) await pool.end();
      throw mapPostgresError(error, `could not prepare ${table}`);
    }
    return new PostgresIdempotencyStore(pool, owned, table);
  }

  /**
   * Runs `write` once per (taskId, key) inside the transaction it is given; everything it writes on that client
   * commits with the dedup record, or not at all if it throws. The same key with other arguments throws
   * IdempotencyConflictError.
   */
  async run<T extends JsonValue>(request: IdempotencyRequest, write: (client: PgClient) => Promise<T>): Promise<IdempotentOutcome<T>> {
    const scope = idempotencyScope(request);
    // What `write` throws is the tool's own failure and passes through unchanged; only the helper's statements are mapped.
    let thrownByWrite: { error: unknown } | undefined;
    const client = await this.connect();
    let done = false;
    try {
      await client.query('BEGIN');
      // Waits while another transaction holds an uncommitted row for this key; sees it once that commits.
      const claimed = await client.query(
        `INSERT INTO ${this.table} (task_id, key, arguments_digest, result) VALUES ($1, $2, $3, 'null'::jsonb)
         ON CONFLICT (task_id, key) DO NOTHING RETURNING 1`,
        [scope.taskId, scope.key, scope.argumentsDigest],
      );
      if (claimed.rowCount === 0) {
        const { rows } = await client.query<{ arguments_digest: string; result: T }>(
          `SELECT arguments_digest, result FROM ${this.table} WHERE task_id = $1 AND key = $2`,
          [scope.taskId, scope.key],
        );
        await client.query('ROLLBACK');
        done = true;
        if (rows[0]!.arguments_digest !== scope.argumentsDigest) throw new IdempotencyConflictError(scope.taskId, scope.key);
        return { result: rows[0]!.result, replayed: true };
      }
      let result: T;
      try {
        result = await write(client);
      } catch (error) {
        thrownByWrite = { error };
        throw error;
      }
      const text = JSON.stringify(result);
      if (typeof text !== 'string') throw new InvalidInputError('result', 'the write must return a JSON value');
      await client.query(`UPDATE ${this.table} SET result = $3::jsonb WHERE task_id = $1 AND key = $2`, [scope.taskId, scope.key, text]);
      await client.query('COMMIT');
      done = true;
      return { result, replayed: false };
    } catch (error) {
      if (thrownByWrite && thrownByWrite.error === error) throw error;
      throw mapPostgresError(error, this.table);
    } finally {
      if (!done) await client.query('ROLLBACK').catch(() => undefined);
      client.release();
    }
  }

  /**
   * A reconciler for tools written with `run` (docs/design.md#reconcilers): declare
   * `reconcile: (request) => store.reconcile(request)` on the tool. The dedup row commits in the same transaction
   * as the business write, so it answers exactly: `completed` with the stored result when the row for
   * (taskId, key) holds these arguments, `not_executed` when there is none, `unknown` when it holds other
   * arguments. It claims the key the way `run` does and rolls back, so it waits for an attempt in flight instead
   * of answering while one is half-way; a retry still goes through `run`, so an attempt that commits later is
   * replayed, never repeated.
   */
  async reconcile(request: IdempotencyRequest): Promise<ToolReconcileAnswer> {
    const scope = idempotencyScope(request);
    const client = await this.connect();
    try {
      await client.query('BEGIN');
      const claimed = await client.query(
        `INSERT INTO ${this.table} (task_id, key, arguments_digest, result) VALUES ($1, $2, $3, 'null'::jsonb)
         ON CONFLICT (task_id, key) DO NOTHING RETURNING 1`,
        [scope.taskId, scope.key, scope.argumentsDigest],
      );
      let record: { digest: string; result: JsonValue } | null = null;
      if (claimed.rowCount === 0) {
        const { rows } = await client.query<{ arguments_digest: string; result: JsonValue }>(
          `SELECT arguments_digest, result FROM ${this.table} WHERE task_id = $1 AND key = $2`,
          [scope.taskId, scope.key],
        );
        record = { digest: rows[0]!.arguments_digest, result: rows[0]!.result };
      }
      return reconcileAnswer(scope.taskId, scope.key, scope.argumentsDigest, record);
    } catch (error) {
      throw mapPostgresError(error, this.table);
    } finally {
      await client.query('ROLLBACK').catch(() => undefined);
      client.release();
    }
  }

  async count(): Promise<number> {
    try {
      const { rows } = await this.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${this.table}`);
      return Number(rows[0]!.n);
    } catch (error) {
      throw mapPostgresError(error, this.table);
    }
  }

  private async connect(): Promise<PgClient & { release(error?: Error | boolean): void }> {
    try {
      return await this.pool.connect();
    } catch (error) {
      throw mapPostgresError(error, this.table);
    }
  }

  async close(): Promise<void> {
    if (this.owned) await this.pool.end();
  }
}
