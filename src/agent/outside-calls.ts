/**
 * Calls of a framework run's steps that a tool outside the run made (docs/design.md#a-step-call-made-outside-the-run):
 * a loop given the gateway's own bridge tools beside the run's model ran a step's call under a key of its own, so
 * the run finds no attempt under the call's run key. Read as not run, the model is told so and has the write made
 * again. The plain bridge tools record the framework's call id as the call's provider call id (frameworkAction),
 * which is the id the run journaled the step's call under: a run opened again reads the call back from that attempt.
 */
import type { SessionEvent, ToolCall } from '../event/types.js';
import type { ToolExecution } from '../tool/types.js';
import { modelFacingOutcome } from '../bridges/outcome.js';
import type { ChatToolCall } from './model.js';
import { CONFIRMED_OUTSIDE, type AgentToolCall } from './run-calls.js';
import { RUN_PLUGIN } from './run-journal.js';

/** What a step's call made outside the run came to, as the run reads it back. */
export type OutsideCall =
  /** An attempt of its operation that succeeded, read back. */
  | { readonly kind: 'ran'; readonly execution: ToolExecution }
  /** A `completed` review settled its operation: made, its output not recorded. */
  | { readonly kind: 'confirmed' }
  /** Its latest attempt's recorded failure, read back (in doubt or not, as that result says). */
  | { readonly kind: 'failed'; readonly execution: ToolExecution };

interface Attempt {
  readonly call: ToolCall;
  readonly callEvent: SessionEvent;
  startedEvent: SessionEvent | null;
  result: { readonly event: SessionEvent; readonly result: ToolExecution['result'] } | null;
}

const modelResponse = (event: SessionEvent, runId: string): { readonly step: number; readonly ids: readonly (readonly [string, string])[] } | null => {
  const kind = event.kind;
  if (kind.type !== 'custom' || kind.plugin !== RUN_PLUGIN || kind.kind !== 'model_response') return null;
  const payload = kind.payload as { runId?: unknown; step?: unknown; toolCalls?: unknown } | null;
  if (payload?.runId !== runId || typeof payload.step !== 'number' || !Array.isArray(payload.toolCalls)) return null;
  const step = payload.step;
  const ids = (payload.toolCalls as { id?: unknown; name?: unknown }[]).flatMap((c, index) =>
    typeof c?.id === 'string' && typeof c.name === 'string' ? [[c.id, `${step}/${index}:${c.name}`] as const] : []);
  return { step, ids };
};

/**
 * By `<step>/<index>`, what the step's call made by a tool outside the run came to: the first call of the run's task
 * journaled after that step and before the run's next one whose provider call id is the step's call id and whose
 * tool is the step's, under a key that is no run's (`<runId>/…` of any run of the session). Its operation's attempts
 * since count (a host that retried it on a review): one that succeeded, else a `completed` review, else the latest
 * recorded result. One with none of these (its host died in it) is left out: the in-doubt guard keeps a repeat shut.
 */
export function outsideCalls(events: readonly SessionEvent[], runId: string, taskId: string): Map<string, OutsideCall> {
  const runs = new Set<string>();
  for (const event of events) {
    const kind = event.kind;
    if (kind.type === 'custom' && kind.plugin === RUN_PLUGIN && kind.kind === 'run_started') {
      const id = (kind.payload as { runId?: unknown } | null)?.runId;
      if (typeof id === 'string') runs.add(id);
    }
  }
  runs.add(runId);
  const ofRun = (key: string) => [...runs].some((r) => key.startsWith(`${r}/`));
  // The step's calls not yet matched, by the id the run journaled each under, as `<step>/<index>:<tool>`.
  let waiting = new Map<string, string>();
  const attempts = new Map<string, Attempt>();
  const operations = new Map<string, { readonly at: string; readonly calls: string[] }>();
  const reviewed = new Set<string>();
  for (const event of events) {
    const step = modelResponse(event, runId);
    if (step !== null) {
      waiting = new Map(step.ids);
      continue;
    }
    const kind = event.kind;
    if (kind.type === 'tool_call') {
      const op = kind.call.operation;
      if (op === undefined || op.taskId !== taskId || ofRun(op.key)) continue;
      const known = operations.get(op.key);
      if (known !== undefined && op.retry !== null) {
        known.calls.push(kind.call.id);
        attempts.set(kind.call.id, { call: kind.call, callEvent: event, startedEvent: null, result: null });
        continue;
      }
      const provider = kind.call.action?.providerCallId;
      const at = provider === undefined ? undefined : waiting.get(provider);
      if (op.retry !== null || at === undefined || !at.endsWith(`:${kind.call.name}`)) continue;
      waiting.delete(provider!);
      operations.set(op.key, { at: at.slice(0, at.lastIndexOf(':')), calls: [kind.call.id] });
      attempts.set(kind.call.id, { call: kind.call, callEvent: event, startedEvent: null, result: null });
    } else if (kind.type === 'tool_started') {
      const attempt = attempts.get(kind.callId);
      if (attempt !== undefined) attempt.startedEvent = event;
    } else if (kind.type === 'tool_result') {
      const attempt = attempts.get(kind.result.callId);
      if (attempt !== undefined && attempt.result === null) attempt.result = { event, result: kind.result };
    } else if (kind.type === 'tool_review' && kind.review.outcome === 'completed' && attempts.has(kind.review.callId)) {
      reviewed.add(kind.review.callId);
    }
  }
  const found = new Map<string, OutsideCall>();
  for (const { at, calls } of operations.values()) {
    const tried = calls.map((id) => attempts.get(id)!);
    const execution = (a: Attempt): ToolExecution => ({
      call: a.call, result: a.result!.result, callEvent: a.callEvent, startedEvent: a.startedEvent, resultEvent: a.result!.event, replayed: true,
    });
    const ran = tried.find((a) => a.result?.result.outcome.status === 'succeeded');
    const last = [...tried].reverse().find((a) => a.result !== null);
    if (ran !== undefined) found.set(at, { kind: 'ran', execution: execution(ran) });
    else if (calls.some((id) => reviewed.has(id))) found.set(at, { kind: 'confirmed' });
    else if (last !== undefined) found.set(at, { kind: 'failed', execution: execution(last) });
  }
  return found;
}

/** The step's call `requested` as the run reads it back from what the tool outside the run made of it. */
export function readOutsideCall(requested: ChatToolCall, found: OutsideCall): AgentToolCall {
  return found.kind === 'confirmed'
    ? { providerCallId: requested.id, name: requested.name, outcome: { ok: true, output: CONFIRMED_OUTSIDE }, execution: null }
    : { providerCallId: requested.id, name: requested.name, outcome: modelFacingOutcome(found.execution), execution: found.execution };
}
