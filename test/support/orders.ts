/** The seed's idempotent test tool: writes one business record through the idempotency helper. */
import Database from 'better-sqlite3';
import { SqliteIdempotencyStore } from '../../src/sqlite.js';
import { ToolBodyError } from '../../src/tool/errors.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import type { Tool, ToolApprover } from '../../src/tool/types.js';

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

/** `probe`: Idempotent v1, approval "current"; writes first, then fails with lost_receipt when `failReceipt`. */
export function probeTool(business: SqliteIdempotencyStore, options: { failReceipt: () => boolean; bodies?: { count: number } }): Tool {
  return {
    name: 'probe',
    metadata: new ToolMetadata('places one order', { type: 'object' }).withEffect('idempotent', 'v1').withApproval('current'),
    async execute(request) {
      if (options.bodies) options.bodies.count += 1;
      const { result } = business.run(request, (db) => {
        const info = db.prepare('INSERT INTO orders (task_id, key, item) VALUES (?, ?, ?)').run(
          request.operation.taskId, request.operation.key, JSON.stringify(request.arguments));
        return { orderId: Number(info.lastInsertRowid) };
      });
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
