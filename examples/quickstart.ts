import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assessSession, createToolRuntime, ToolMetadata, type Tool } from 'jingwei';
import { openSqliteStore } from 'jingwei/sqlite';

// A tool declares its side effect and a revision of that contract.
const sendInvoice: Tool = {
  name: 'send_invoice',
  metadata: new ToolMetadata('Emails an invoice', {
    type: 'object', properties: { to: { type: 'string' } }, required: ['to'],
  }).withEffect('non_idempotent', 'invoices-v1'),
  async execute(request) {
    return `invoice sent to ${(request.arguments as { to: string }).to}`;
  },
};

const store = openSqliteStore(join(mkdtempSync(join(tmpdir(), 'jingwei-')), 'journal.db'));
const owner = await store.acquire('session-1', { owner: 'host-a' }); // fenced: one writer per session
await owner.startTask('task-1');
const gateway = createToolRuntime({ tools: [sendInvoice], grants: { agent: '*' } })
  .bind({ owner, taskId: 'task-1', caller: 'agent' });

// The call is journaled before the body runs, the result after it.
const { result } = await gateway.call('send_invoice', { to: 'ana@example.com' });
console.log(result.outcome);

// After a crash, a host reads the confirmed journal and learns what is provable.
const history = await store.loadHistory('session-1');
console.log(history.map((event) => event.kind.type).join(' → '));
console.log(assessSession(history).calls.length, 'calls need attention');
await store.close();
