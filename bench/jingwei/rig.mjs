/**
 * The tool the benchmarks call: a no-op, read-only tool with an empty-object schema, optionally requiring an
 * approver that approves at once. A rig is one fenced session with a running task and a gateway onto it.
 */
import { createToolRuntime, LIMITS, ToolMetadata } from '../../dist/index.js';
import { encodeEventText } from '../../dist/wire.js';

export const NOOP = 'noop';
export const NOOP_APPROVED = 'noop_approved';

const metadata = new ToolMetadata('does nothing and returns "ok"', { type: 'object' }).withEffect('read_only', 'bench-1');

export function benchRuntime() {
  return createToolRuntime({
    tools: [
      { name: NOOP, metadata, execute: async () => 'ok' },
      { name: NOOP_APPROVED, metadata: metadata.withApproval('host'), execute: async () => 'ok' },
    ],
    grants: { agent: '*' },
    approvers: { host: async () => ({ decision: 'approved' }) },
  });
}

/**
 * Acquires `sessionId` as `owner`, starts a task with room for every call the benchmark makes (in calls and in
 * journal bytes, up to what one session holds), binds a gateway.
 */
export async function openRig(store, runtime, { sessionId, owner = 'bench', taskId = `${sessionId}-task` }) {
  const held = await store.acquire(sessionId, { owner });
  await held.startTask(taskId, { limits: { toolCalls: 1_000_000, journalBytes: LIMITS.maxHistoryBytes } });
  const gateway = runtime.bind({ owner: held, taskId, caller: 'agent', turnId: `${sessionId}-turn` });
  return { owner: held, gateway };
}

/** Calls `name` once and checks it succeeded, so a benchmark never times a failing path. */
export async function checkedCall(gateway, name) {
  const execution = await gateway.call(name, {});
  if (execution.result.outcome.status !== 'succeeded') {
    throw new Error(`bench: ${name} did not succeed: ${JSON.stringify(execution.result.outcome)}`);
  }
  return execution;
}

/**
 * The wire bodies one call writes, grouped by transaction: without approval [[call, started], [result]], with
 * approval [[call], [started], [result]] (src/tool/runtime.ts, docs/design.md#writes-per-call).
 */
export function bodiesOf(execution, approval) {
  const call = encodeEventText(execution.callEvent);
  const started = encodeEventText(execution.startedEvent);
  const result = encodeEventText(execution.resultEvent);
  return approval ? [[call], [started], [result]] : [[call, started], [result]];
}
