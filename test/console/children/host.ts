/**
 * A real host process for the console tests, on a SQLite journal, with one non-idempotent tool `send_invoice` whose
 * body appends a line to an effects file (the outside system; each line is one side effect).
 *   crash <db> <effects> <session>: runs the tool; after the body's side effect it prints {"effect":..., "callId"}
 *     and waits, holding the session with a short lease, for the parent to SIGKILL it.
 *   recover <db> <effects>: the startup routine of a recovering host (recoverAbandoned, policy retry_safe): it
 *     journals the operators' inbox reviews, then retries what they allow; prints the report.
 * Uses the package's public entry points only.
 */
import { appendFileSync } from 'node:fs';
import { createToolRuntime, ToolMetadata, type Tool } from '../../../src/index.js';
import { recoverAbandoned } from '../../../src/review.js';
import { openSqliteStore } from '../../../src/sqlite.js';

const [mode, db, effects, session] = process.argv.slice(2) as [string, string, string, string | undefined];
/**
 * Short, so the recovering host finds the session soon after the SIGKILL, yet long enough that this host, alive and
 * heartbeating on a loaded machine (a browser beside it), keeps it while it waits: a host whose lease ran out stops
 * its running call (docs/design.md#a-lost-session-stops-its-calls), and the body would return before the kill.
 */
const LEASE_MS = 2_000;

function tools(onEffect: (callId: string) => Promise<void>): Tool[] {
  return [{
    name: 'send_invoice',
    metadata: new ToolMetadata('sends an invoice to a customer', { type: 'object' }).withEffect('non_idempotent', 'invoice-r1'),
    async execute(request) {
      appendFileSync(effects, `${JSON.stringify({ callId: request.callId, key: request.operation.key })}\n`);
      await onEffect(request.callId);
      return { sent: true };
    },
  }];
}

const store = openSqliteStore(db);
if (mode === 'crash') {
  const owner = await store.acquire(session!, { owner: 'host-a', leaseMs: LEASE_MS });
  await owner.startTask('invoices');
  const list = tools(async (callId) => {
    process.stdout.write(`${JSON.stringify({ effect: true, callId })}\n`);
    await new Promise(() => { /* the parent SIGKILLs this process here, after the side effect */ });
  });
  const runtime = createToolRuntime({ tools: list, grants: { agent: '*' } });
  await runtime.bind({ owner, taskId: 'invoices', caller: 'agent' }).call('send_invoice', { customer: 'ACME <b>&</b> Co', amount: 1200 });
  process.stdout.write(`${JSON.stringify({ error: 'the body returned: the parent should have killed this process' })}\n`);
  process.exit(1);
} else if (mode === 'recover') {
  const list = tools(async () => {});
  const runtime = createToolRuntime({ tools: list, grants: { agent: '*' } });
  const deadline = Date.now() + 30_000;
  while ((await store.listExpiredSessions()).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const report = await recoverAbandoned(store, { runtime, tools: list, caller: 'agent' }, { policy: 'retry_safe', owner: 'host-b' });
  process.stdout.write(`${JSON.stringify(report)}\n`);
  await store.close();
} else {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}
