/**
 * One process of the explicit-retry scenario (seed-scenario.test.ts). Phase 1 runs the idempotent probe, which writes its order and then fails.
 * Later phases reopen the store, take over, inspect and prepare a retry of the latest attempt, and call it with
 * the approver set to `approve` or `deny`. Prints one JSON line with what it saw.
 * argv: <sqlite path | postgres URL> <schema or '-'> <phase> <approve | deny>
 */
import { createToolRuntime } from '../../../src/tool/runtime.js';
import { inspectToolRecovery, prepareToolRetry } from '../../../src/tool/recovery.js';
import { countingApprover, openLedger, probeTool } from '../../support/orders.js';
import { openTarget } from '../../support/stores.js';

const [target, schemaArg, phase, decision] = process.argv.slice(2) as [string, string, string, 'approve' | 'deny'];
const schema = schemaArg === '-' ? undefined : schemaArg;
const store = await openTarget(target, schema);
const ledger = await openLedger(target, schema);
const approvals = { count: 0 };
const bodies = { count: 0 };
const runtime = createToolRuntime({
  tools: [probeTool(ledger, { failReceipt: () => phase === '1', bodies })],
  grants: { 'caller-owner': ['probe'] },
  approvers: { current: countingApprover(decision, approvals) },
});

let execution;
if (phase === '1') {
  const owner = await store.acquire('retry-session', { owner: `process-${phase}` });
  await owner.startTask('retry-task');
  const gateway = runtime.bind({ owner, taskId: 'retry-task', caller: 'caller-owner' });
  execution = await gateway.call('probe', { ok: true });
} else {
  const owner = await store.acquire('retry-session', { owner: `process-${phase}`, takeover: true });
  const history = await store.loadHistory('retry-session');
  const latest = [...history].reverse().find((e) => e.kind.type === 'tool_call')!;
  const callId = (latest.kind as { call: { id: string } }).call.id;
  const assessment = inspectToolRecovery(history, callId);
  const plan = prepareToolRetry(history, callId, null);
  const gateway = runtime.bind({ owner, taskId: 'retry-task', caller: 'caller-owner' });
  execution = await gateway.callWithOptions(assessment.call.name, assessment.call.arguments, { retry: plan });
}
const owner = await store.acquire('retry-session', { owner: 'reporter', takeover: true });
const task = await owner.task('retry-task');
process.stdout.write(JSON.stringify({ call: execution.call, result: execution.result, approvals: approvals.count, bodies: bodies.count, charged: task.charged }) + '\n');
await ledger.close();
await store.close();
