/**
 * Calls of a framework run's steps that a tool outside the run made (docs/design.md#a-step-call-made-outside-the-run):
 * a loop given the gateway's own bridge tools beside the run's model ran a step's call under a key of its own, so
 * the run finds no attempt under the call's run key. Read as not run, the model is told so and has the write made
 * again. The run refuses such a loop at its next step; a run opened afterwards reads the call back from the outside
 * attempt instead.
 */
import type { SessionEvent, ToolCall } from '../event/types.js';
import { jsonEquals } from '../json/canonical.js';
import type { ToolExecution } from '../tool/types.js';
import { RUN_PLUGIN } from './run-journal.js';

interface StepCall {
  readonly at: string;
  readonly name: string;
  readonly args: unknown;
}

const runPayload = (event: SessionEvent, runId: string): { readonly step: number; readonly calls: StepCall[] } | null => {
  const kind = event.kind;
  if (kind.type !== 'custom' || kind.plugin !== RUN_PLUGIN || kind.kind !== 'model_response') return null;
  const payload = kind.payload as { runId?: unknown; step?: unknown; toolCalls?: unknown } | null;
  if (payload?.runId !== runId || typeof payload.step !== 'number' || !Array.isArray(payload.toolCalls)) return null;
  const step = payload.step;
  const calls = (payload.toolCalls as { name?: unknown; arguments?: unknown }[]).flatMap((c, index) => {
    if (typeof c?.name !== 'string' || typeof c.arguments !== 'string') return [];
    try {
      return [{ at: `${step}/${index}`, name: c.name, args: JSON.parse(c.arguments) as unknown }];
    } catch {
      return [];
    }
  });
  return { step, calls };
};

const argumentsMatch = (a: unknown, b: unknown): boolean => {
  try {
    return jsonEquals(a, b);
  } catch {
    return false;
  }
};

/**
 * By `<step>/<index>`, the call of the run's task journaled after that step and before the run's next one, with the
 * same tool and arguments, under an operation key that is not one of the run's (`<runId>/…`), each such call taken
 * once, in journal order: the step's call made by a tool outside the run. Only an operation that succeeded (in that
 * call, or in a retry of it made since) is returned, as the attempt that succeeded, read back: one whose outcome is
 * open keeps the in-doubt guard shut for a repeat, and one that failed before its body did not run, as the run reads it.
 */
export function outsideExecutions(events: readonly SessionEvent[], runId: string, taskId: string): Map<string, ToolExecution> {
  // Each attempt of a matched operation, by call id, with the step call it stands for.
  const attempts = new Map<string, { readonly call: ToolCall; readonly callEvent: SessionEvent; readonly at: string }>();
  const operations = new Map<string, string>();
  let open: StepCall[] = [];
  for (const event of events) {
    const step = runPayload(event, runId);
    if (step !== null) {
      open = [...step.calls];
      continue;
    }
    const kind = event.kind;
    if (kind.type !== 'tool_call') continue;
    const op = kind.call.operation;
    if (op === undefined || op.taskId !== taskId || op.key.startsWith(`${runId}/`)) continue;
    const retried = op.retry !== null ? operations.get(op.key) : undefined;
    if (retried !== undefined) {
      attempts.set(kind.call.id, { call: kind.call, callEvent: event, at: retried });
      continue;
    }
    const i = op.retry === null ? open.findIndex((c) => c.name === kind.call.name && argumentsMatch(c.args, kind.call.arguments)) : -1;
    if (i < 0) continue;
    attempts.set(kind.call.id, { call: kind.call, callEvent: event, at: open[i]!.at });
    operations.set(op.key, open[i]!.at);
    open.splice(i, 1);
  }
  const executions = new Map<string, ToolExecution>();
  if (attempts.size === 0) return executions;
  const started = new Map<string, SessionEvent>();
  for (const event of events) {
    const kind = event.kind;
    if (kind.type === 'tool_started' && attempts.has(kind.callId)) started.set(kind.callId, event);
    if (kind.type !== 'tool_result' || kind.result.outcome.status !== 'succeeded') continue;
    const found = attempts.get(kind.result.callId);
    if (found === undefined || executions.has(found.at)) continue;
    executions.set(found.at, {
      call: found.call, result: kind.result, callEvent: found.callEvent, startedEvent: started.get(found.call.id) ?? null, resultEvent: event, replayed: true,
    });
  }
  return executions;
}
