import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createToolRuntime, ToolBodyError, ToolMetadata, type Tool } from 'jingwei';
import { openSqliteStore, SqliteIdempotencyStore } from 'jingwei/sqlite';

const dir = mkdtempSync(join(tmpdir(), 'jingwei-example-'));
const store = openSqliteStore(join(dir, 'journal.db'));
const orders = new SqliteIdempotencyStore(join(dir, 'business.db'));
orders.db.exec('CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)');

// Read-only: may be retried freely after a crash.
const lookup: Tool = {
  name: 'lookup_price',
  metadata: new ToolMetadata('Price of an item', {
    type: 'object', properties: { item: { type: 'string' } }, required: ['item'],
  }).withEffect('read_only', 'prices-v1'),
  async execute(request) {
    return { item: (request.arguments as { item: string }).item, cents: 1299 };
  },
};

// Idempotent: deduplicates on its operation (session, task, key) in the same transaction as its write.
const placeOrder: Tool = {
  name: 'place_order',
  metadata: new ToolMetadata('Places an order', {
    type: 'object', properties: { item: { type: 'string' } }, required: ['item'],
  }).withEffect('idempotent', 'orders-v1').withApproval('human'),
  async execute(request) {
    const { result } = orders.run(request, (db) => {
      const row = db.prepare('INSERT INTO orders (item) VALUES (?)').run((request.arguments as { item: string }).item);
      return { orderId: Number(row.lastInsertRowid) };
    });
    return result;
  },
};

// Non-idempotent: after an uncertain crash, only a trusted human review can allow a retry.
const sendEmail: Tool = {
  name: 'send_email',
  metadata: new ToolMetadata('Sends an email', { type: 'object' }).withEffect('non_idempotent', 'email-v1'),
  async execute() {
    throw new ToolBodyError('smtp_unavailable', 'the mail server did not answer', { retryable: true });
  },
};

const runtime = createToolRuntime({
  tools: [lookup, placeOrder, sendEmail],
  grants: { 'shopping-agent': '*' },
  approvers: { human: async ({ call }) => (call.name === 'place_order' ? { decision: 'approved' } : { decision: 'denied', code: 'no', message: 'not approved' }) },
});

const owner = await store.acquire('session-1', { owner: 'host-a' });
await owner.startTask('task-1', { limits: { toolCalls: 10 } });
const gateway = runtime.bind({ owner, taskId: 'task-1', caller: 'shopping-agent' });

for (const [name, args] of [['lookup_price', { item: 'book' }], ['place_order', { item: 'book' }], ['send_email', {}]] as const) {
  const { result, call } = await gateway.call(name, args);
  console.log(name, call.operation?.contract.effect, result.outcome.status,
    result.outcome.status === 'succeeded' ? result.outcome.output : result.outcome.code);
}
console.log('charged:', (await owner.task('task-1')).charged);
console.log('journal:', (await store.loadHistory('session-1')).map((e) => e.kind.type).join(' → '));
await store.close();
orders.close();
