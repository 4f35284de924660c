/** The idempotent test tool of the explicit-retry scenario: writes one business order through the idempotency helper of either store. */
import Database from 'better-sqlite3';
import pg from 'pg';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { SqliteIdempotencyStore } from '../../src/sqlite.js';
import type { IdempotencyRequest } from '../../src/tool/idempotency.js';
import { ToolBodyError } from '../../src/errors.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import type { Tool, ToolApprover } from '../../src/tool/types.js';

/** The "external system": a business database whose order rows are the ledger of side effects. */
export interface OrderLedger {
  /** Places the order of `request` once per (taskId, key), through the idempotency helper. */
  place(request: IdempotencyRequest): Promise<{ orderId: number }>;
  count(): Promise<number>;
  dedupRecords(): Promise<number>;
  close(): Promise<void>;
}

/** The SQLite business database with its `orders` table, and the idempotency helper over it. */
export function openBusiness(path: string): SqliteIdempotencyStore {
  const db = new Database(path, { timeout: 5000 });
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, task_id TEXT NOT NULL, key TEXT NOT NULL, item TEXT NOT NULL)');
  return new SqliteIdempotencyStore(db);
}

export function countOrders(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM orders').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

export function sqliteLedger(path: string): OrderLedger & { readonly path: string } {
  const idem = openBusiness(path);
  const db = idem.db;
  return {
    path,
    async place(request) {
      return idem.run(request, (handle) => {
        const info = handle.prepare('INSERT INTO orders (task_id, key, item) VALUES (?, ?, ?)').run(
          request.operation.taskId, request.operation.key, JSON.stringify(request.arguments));
        return { orderId: Number(info.lastInsertRowid) };
      }).result;
    },
    async count() {
      return (db.prepare('SELECT count(*) AS n FROM orders').get() as { n: number }).n;
    },
    async dedupRecords() {
      return idem.count();
    },
    async close() {
      db.close();
    },
  };
}

export async function postgresLedger(url: string, schema: string): Promise<OrderLedger> {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  pool.on('error', () => {});
  const idem = await PostgresIdempotencyStore.open(pool, { schema });
  await pool.query(`CREATE TABLE IF NOT EXISTS "${schema}".orders (id SERIAL PRIMARY KEY, task_id TEXT NOT NULL, key TEXT NOT NULL, item TEXT NOT NULL)`);
  return {
    async place(request) {
      return (await idem.run(request, async (client) => {
        const { rows } = await client.query<{ id: number }>(`INSERT INTO "${schema}".orders (task_id, key, item) VALUES ($1, $2, $3) RETURNING id`,
          [request.operation.taskId, request.operation.key, JSON.stringify(request.arguments)]);
        return { orderId: rows[0]!.id };
      })).result;
    },
    async count() {
      return Number((await pool.query(`SELECT count(*) AS n FROM "${schema}".orders`)).rows[0].n);
    },
    async dedupRecords() {
      return idem.count();
    },
    async close() {
      await pool.end();
    },
  };
}

/** Opens the ledger beside a journal location: a sibling SQLite file, or a schema on the same PostgreSQL. */
export function openLedger(journalTarget: string, schema: string | undefined): Promise<OrderLedger> {
  if (/^postgres(ql)?:\/\//.test(journalTarget)) return postgresLedger(journalTarget, `${schema}_business`);
  return Promise.resolve(sqliteLedger(`${journalTarget}.business.db`));
}

/** `probe`: Idempotent v1, approval "current"; writes first, then fails with lost_receipt when `failReceipt`. */
export function probeTool(ledger: OrderLedger, options: { failReceipt: () => boolean; bodies?: { count: number } }): Tool {
  return {
    name: 'probe',
    metadata: new ToolMetadata('places one order', { type: 'object' }).withEffect('idempotent', 'v1').withApproval('current'),
    async execute(request) {
      if (options.bodies) options.bodies.count += 1;
      const result = await ledger.place(request);
      if (options.failReceipt()) throw new ToolBodyError('lost_receipt', 'the order was placed but its receipt was lost', { retryable: true });
      return result;
    },
  };
}

export function countingApprover(decision: 'approve' | 'deny', counter: { count: number }): ToolApprover {
  return async () => {
    counter.count += 1;
    return decision === 'approve' ? { decision: 'approved' } : { decision: 'denied', code: 'denied_by_operator', message: 'not now', retryable: false };
  };
}
