/**
 * The demo's business: a small shop whose own SQLite database sits next to the journal, and the five tools an
 * agent uses to fulfil one order. Each tool declares its real side effect, and writes exactly as declared:
 * create_order through SqliteIdempotencyStore (the business write and its dedup record in one transaction), the
 * others with plain inserts.
 */
import type { JsonObject } from '../../json/types.js';
import { externalIdempotencyKey } from '../../tool/idempotency.js';
import type { Database } from '../../store/sqlite/driver.js';
import type { SqliteIdempotencyStore } from '../../store/sqlite/idempotency.js';
import { ToolMetadata } from '../../tool/metadata.js';
import type { FaultPoint } from '../../fault.js';
import type { Tool } from '../../tool/types.js';

export const ORDER = 'A-1042';
export const SKU = 'lamp-oak';
export const CUSTOMER = 'ana@example.com';
export const CALLER = 'shop-agent';

export interface Shop {
  readonly db: Database;
  readonly idempotency: SqliteIdempotencyStore;
  close(): void;
}

/** Loads the SQLite driver on demand, so the CLI starts (for its other commands) without better-sqlite3. */
export async function openShop(path: string): Promise<Shop> {
  const { SqliteIdempotencyStore } = await import('../../store/sqlite/idempotency.js');
  // The helper opens the business database it is given by path (WAL, synchronous=FULL, the busy timeout) and owns it.
  const idempotency = new SqliteIdempotencyStore(path);
  // Its handle is a better-sqlite3 Database; the helper's public type only keeps the driver's types out of ours.
  const db = idempotency.db as unknown as Database;
  db.exec(`
    CREATE TABLE IF NOT EXISTS inventory (sku TEXT PRIMARY KEY, on_hand INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, task_id TEXT NOT NULL, key TEXT NOT NULL, order_ref TEXT NOT NULL, sku TEXT NOT NULL, qty INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS payments (id INTEGER PRIMARY KEY, task_id TEXT NOT NULL, reference TEXT NOT NULL, order_ref TEXT NOT NULL, amount_cents INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS shipments (id INTEGER PRIMARY KEY, task_id TEXT NOT NULL, reference TEXT NOT NULL, order_ref TEXT NOT NULL, address TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY, task_id TEXT NOT NULL, recipient TEXT NOT NULL, template TEXT NOT NULL);
    INSERT OR IGNORE INTO inventory VALUES ('${SKU}', 12);
  `);
  return { db, idempotency, close: () => idempotency.close() };
}

export interface ShopCounts {
  readonly orders: number;
  readonly dedupRecords: number;
  readonly payments: number;
  readonly shipments: number;
  readonly emails: number;
}

/** What the shop's database holds for one task (the demo's run). */
export function shopCounts(shop: Shop, taskId: string): ShopCounts {
  const count = (sql: string) => (shop.db.prepare(sql).get(taskId) as { n: number }).n;
  return {
    orders: count('SELECT count(*) AS n FROM orders WHERE task_id = ?'),
    dedupRecords: count('SELECT count(*) AS n FROM jw_idempotency WHERE task_id = ?'),
    payments: count('SELECT count(*) AS n FROM payments WHERE task_id = ?'),
    shipments: count('SELECT count(*) AS n FROM shipments WHERE task_id = ?'),
    emails: count('SELECT count(*) AS n FROM outbox WHERE task_id = ?'),
  };
}

/** What an operator does before a review: look the charge up in the payments ledger by the reference it was sent with. */
export function paymentsWithReference(shop: Shop, reference: string): number {
  return (shop.db.prepare('SELECT count(*) AS n FROM payments WHERE reference = ?').get(reference) as { n: number }).n;
}

/** Tool bodies say what they did through this, so the story can show it (the worker prints it before it dies). */
export type BodyReport = (tool: string, did: string) => void;

const object = (properties: Record<string, JsonObject>, required: string[]): JsonObject => ({
  type: 'object',
  properties,
  required,
  additionalProperties: false,
});

export function shopTools(shop: Shop, report: BodyReport): Tool[] {
  const checkStock: Tool = {
    name: 'check_stock',
    metadata: new ToolMetadata('How many units of a product are on hand', object({ sku: { type: 'string' } }, ['sku'])).withEffect('read_only', 'inventory-v1'),
    async execute(request) {
      const { sku } = request.arguments as { sku: string };
      const row = shop.db.prepare('SELECT on_hand FROM inventory WHERE sku = ?').get(sku) as { on_hand: number } | undefined;
      report('check_stock', `read the inventory: ${row?.on_hand ?? 0} on hand`);
      return { sku, on_hand: row?.on_hand ?? 0 };
    },
  };
  const createOrder: Tool = {
    name: 'create_order',
    metadata: new ToolMetadata(
      'Creates the order record',
      object({ order: { type: 'string' }, sku: { type: 'string' }, qty: { type: 'integer', minimum: 1 } }, ['order', 'sku', 'qty']),
    ).withEffect('idempotent', 'orders-v1'),
    async execute(request) {
      const { order, sku, qty } = request.arguments as { order: string; sku: string; qty: number };
      const { result, replayed } = shop.idempotency.run(request, (db) => {
        const info = db
          .prepare('INSERT INTO orders (task_id, key, order_ref, sku, qty) VALUES (?, ?, ?, ?, ?)')
          .run(request.operation.taskId, request.operation.key, order, sku, qty);
        return { order_id: Number(info.lastInsertRowid) };
      });
      report(
        'create_order',
        replayed
          ? `found this operation's dedup record and replayed its stored result; wrote nothing`
          : `wrote order row ${result.order_id} and its dedup record in one transaction`,
      );
      return result;
    },
  };
  const chargeCard: Tool = {
    name: 'charge_card',
    metadata: new ToolMetadata(
      "Charges the customer's card",
      object({ order: { type: 'string' }, amount_cents: { type: 'integer', minimum: 1 } }, ['order', 'amount_cents']),
    ).withEffect('non_idempotent', 'payments-v1'),
    async execute(request) {
      const { order, amount_cents } = request.arguments as { order: string; amount_cents: number };
      const info = shop.db
        .prepare('INSERT INTO payments (task_id, reference, order_ref, amount_cents) VALUES (?, ?, ?, ?)')
        .run(request.operation.taskId, externalIdempotencyKey(request), order, amount_cents);
      report('charge_card', `charged the card: payments ledger row ${info.lastInsertRowid}`);
      return { charge_id: Number(info.lastInsertRowid) };
    },
  };
  const shipOrder: Tool = {
    name: 'ship_order',
    metadata: new ToolMetadata(
      'Books a courier for the order',
      object({ order: { type: 'string' }, address: { type: 'string' } }, ['order', 'address']),
    )
      .withEffect('non_idempotent', 'shipping-v1')
      .withApproval('warehouse'),
    async execute(request) {
      const { order, address } = request.arguments as { order: string; address: string };
      const info = shop.db
        .prepare('INSERT INTO shipments (task_id, reference, order_ref, address) VALUES (?, ?, ?, ?)')
        .run(request.operation.taskId, externalIdempotencyKey(request), order, address);
      report('ship_order', `booked the courier: shipment row ${info.lastInsertRowid}`);
      return { shipment_id: Number(info.lastInsertRowid) };
    },
  };
  const notifyCustomer: Tool = {
    name: 'notify_customer',
    // A third-party plug-in that declares nothing: its contract stays { unknown, 'unspecified' }.
    metadata: new ToolMetadata('Sends the customer an e-mail', object({ to: { type: 'string' }, template: { type: 'string' } }, ['to', 'template'])),
    async execute(request) {
      const { to, template } = request.arguments as { to: string; template: string };
      const info = shop.db.prepare('INSERT INTO outbox (task_id, recipient, template) VALUES (?, ?, ?)').run(request.operation.taskId, to, template);
      report('notify_customer', `sent the e-mail: outbox row ${info.lastInsertRowid}`);
      return { message_id: Number(info.lastInsertRowid) };
    },
  };
  return [checkStock, createOrder, chargeCard, shipOrder, notifyCustomer];
}

export interface Step {
  readonly tool: string;
  readonly args: JsonObject;
  /** Where the worker running this step is killed. */
  readonly crashAt: FaultPoint;
  /** The crash point in words. */
  readonly when: string;
}

/** The agent's plan for the order, one worker process per step, and where each worker dies. */
export const STEPS: readonly Step[] = [
  { tool: 'check_stock', args: { sku: SKU }, crashAt: 'started:after', when: 'right after the start marker was written, before the read ran' },
  { tool: 'create_order', args: { order: ORDER, sku: SKU, qty: 1 }, crashAt: 'body:after', when: "after the order was written, before the tool's result was journaled" },
  { tool: 'charge_card', args: { order: ORDER, amount_cents: 4900 }, crashAt: 'started:after', when: 'right after the start marker was written, before the charge was made' },
  { tool: 'ship_order', args: { order: ORDER, address: '12 Rue des Lilas, Lyon' }, crashAt: 'call:after', when: "while waiting for the warehouse manager's approval" },
  { tool: 'notify_customer', args: { to: CUSTOMER, template: 'order-confirmed' }, crashAt: 'body:after', when: "after the e-mail was sent, before the tool's result was journaled" },
];
