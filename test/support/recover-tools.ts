/**
 * The tools of the abandoned-session tests, shared by the host that dies and the host that recovers: `place_order`
 * (non-idempotent, written through the SQLite idempotency helper, whose reconciler answers for it), `lookup`
 * (read-only), `send_mail` (non-idempotent, no reconciler). With `die`, a body does what a crash would: the order's
 * first attempt loses its connection after the write, the lookup's first attempt fails, the mail's body SIGKILLs
 * the process after its start marker.
 */
import { ToolBodyError } from '../../src/errors.js';
import { SqliteIdempotencyStore } from '../../src/sqlite.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import type { Tool } from '../../src/tool/types.js';

export interface OutsideSystem {
  readonly helper: SqliteIdempotencyStore;
  orders(): number;
  close(): void;
}

export function outsideSystem(path: string): OutsideSystem {
  const helper = new SqliteIdempotencyStore(path);
  helper.db.exec('CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)');
  return {
    helper,
    orders: () => (helper.db.prepare('SELECT count(*) AS n FROM orders').get() as { n: number }).n,
    close: () => helper.close(),
  };
}

export function recoverTools(outside: OutsideSystem, mode: { die: boolean; lookups?: { count: number } }): Tool[] {
  const placeOrder: Tool = {
    name: 'place_order',
    metadata: new ToolMetadata('places an order', { type: 'object' }).withEffect('non_idempotent', 'orders-r1'),
    async execute(request) {
      const item = (request.arguments as { item: string }).item;
      const result = outside.helper.run(request, (db) => ({ order: Number(db.prepare('INSERT INTO orders (item) VALUES (?)').run(item).lastInsertRowid) })).result;
      if (mode.die) throw new ToolBodyError('connection_reset', 'lost after the write');
      return result;
    },
    reconcile: (request) => outside.helper.reconcile(request),
  };
  const lookup: Tool = {
    name: 'lookup',
    metadata: new ToolMetadata('reads stock', { type: 'object' }).withEffect('read_only', 'stock-r1'),
    async execute() {
      if (mode.lookups) mode.lookups.count += 1;
      if (mode.die) throw new ToolBodyError('connection_reset', 'lost the read');
      return { stock: 3 };
    },
  };
  const sendMail: Tool = {
    name: 'send_mail',
    metadata: new ToolMetadata('sends a confirmation', { type: 'object' }).withEffect('non_idempotent', 'mail-r1'),
    async execute() {
      if (mode.die) process.kill(process.pid, 'SIGKILL');
      return 'sent';
    },
  };
  return [placeOrder, lookup, sendMail];
}
