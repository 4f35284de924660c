/**
 * Calls of a framework run's steps that a tool outside the run made (docs/design.md#a-step-call-made-outside-the-run):
 * a loop given the gateway's own bridge tools beside the run's model ran a step's call under a key of its own, so
 * the run finds no attempt under the call's run key. Read as not run, the model is told so and has the write made
 * again. The plain bridge tools record the framework's call id as the call's provider call id (frameworkAction),
 * which is the id the run journaled the step's call under: a run opened again reads the call back from that attempt.
 */
import type { SessionEvent, ToolCall } from '../event/types.js';
import { jsonEquals } from '../json/canonical.js';
import type { ToolExecution } from '../tool/types.js';
import { modelFacingOutcome } from '../bridges/outcome.js';
import type { ChatToolCall } from './model.js';
import { CONFIRMED_OUTSIDE, type AgentToolCall } from './run-calls.js';
import { RUN_PLUGIN } from './run-journal.js';
import { readOwnJournal } from '../store/owner-journal.js';
import type { SessionOwner, SessionStore } from '../store/types.js';

/** What a step's call made outside the run came to, as the run reads it back. */
export type OutsideCall =
  /** An attempt that succeeded, read back. */
  | { readonly kind: 'ran'; readonly execution: ToolExecution }
  /** A `completed` review settled it: made, its output not recorded. */
  | { readonly kind: 'confirmed' }
  /** Its body started, or may have, and nothing says what happened: the run stops for a person's review of it. */
  | { readonly kind: 'open'; readonly callId: string }
  /** Its latest attempt's recorded failure, read back (in doubt or not, as that result says). */
  | { readonly kind: 'failed'; readonly execution: ToolExecution };

interface Attempt {
  readonly call: ToolCall;
  readonly callEvent: SessionEvent;
  startedEvent: SessionEvent | null;
  result: { readonly event: SessionEvent; readonly result: ToolExecution['result'] } | null;
  review: 'completed' | 'not_executed' | 'uncertain' | null;
}

interface StepCall {
  readonly at: string;
  readonly name: string;
  readonly args: unknown;
}

/** The arguments the model wrote, as a framework reads them: no text at all is an empty object (the AI SDK's reading). */
function parsedArguments(text: string): { readonly ok: true; readonly value: unknown } | { readonly ok: false } {
  try {
    return { ok: true, value: text.trim() === '' ? {} : (JSON.parse(text) as unknown) };
  } catch {
    return { ok: false };
  }
}

const sameArguments = (a: unknown, b: unknown): boolean => {
  try {
    return jsonEquals(a, b);
  } catch {
    return false;
  }
};

function modelResponse(event: SessionEvent, runId: string): Map<string, StepCall> | null {
  const kind = event.kind;
  if (kind.type !== 'custom' || kind.plugin !== RUN_PLUGIN || kind.kind !== 'model_response') return null;
  const payload = kind.payload as { runId?: unknown; step?: unknown; toolCalls?: unknown } | null;
  if (payload?.runId !== runId || typeof payload.step !== 'number' || !Array.isArray(payload.toolCalls)) return null;
  const step = payload.step;
  const calls = new Map<string, StepCall>();
  (payload.toolCalls as { id?: unknown; name?: unknown; arguments?: unknown }[]).forEach((c, index) => {
    if (typeof c?.id !== 'string' || typeof c.name !== 'string' || typeof c.arguments !== 'string') return;
    const args = parsedArguments(c.arguments);
    if (args.ok) calls.set(c.id, { at: `${step}/${index}`, name: c.name, args: args.value });
  });
  return calls;
}

/**
 * By `<step>/<index>`, what the step's call made by a tool outside the run came to. Its candidates are the calls of
 * the run's task journaled after that step and before the run's next one with the step's call id as their provider
 * call id, the step's tool and arguments, under a key that is no run's (`<runId>/…` of any run of the session), with
 * their operations' attempts since (a host that retried one on a review). One that succeeded is read back; else a
 * `completed` review reads as made; else one whose body started, or may have, with no result and no review saying
 * it did not happen, stops the run for a review; else the latest recorded failure is read back. None of these (a
 * `not_executed` review, nothing matching): left out, read as not run.
 */
export function outsideCalls(events: readonly SessionEvent[], runId: string, taskId: string): Map<string, OutsideCall> {
  const runs = new Set<string>([runId]);
  for (const event of events) {
    const kind = event.kind;
    if (kind.type === 'custom' && kind.plugin === RUN_PLUGIN && kind.kind === 'run_started') {
      const id = (kind.payload as { runId?: unknown } | null)?.runId;
      if (typeof id === 'string') runs.add(id);
    }
  }
  const ofRun = (key: string) => [...runs].some((r) => key.startsWith(`${r}/`));
  let waiting = new Map<string, StepCall>();
  const attempts = new Map<string, Attempt>();
  // Each matched operation's attempts, by operation key, and the step call it may stand for.
  const operations = new Map<string, { readonly at: string; readonly calls: Attempt[] }>();
  for (const event of events) {
    const step = modelResponse(event, runId);
    if (step !== null) {
      waiting = step;
      continue;
    }
    const kind = event.kind;
    if (kind.type === 'tool_call') {
      const op = kind.call.operation;
      if (op === undefined || op.taskId !== taskId || ofRun(op.key)) continue;
      const attempt: Attempt = { call: kind.call, callEvent: event, startedEvent: null, result: null, review: null };
      const known = operations.get(op.key);
      if (known !== undefined && op.retry !== null) {
        known.calls.push(attempt);
        attempts.set(kind.call.id, attempt);
        continue;
      }
      const provider = kind.call.action?.providerCallId;
      const wanted = provider === undefined ? undefined : waiting.get(provider);
      if (op.retry !== null || wanted === undefined || wanted.name !== kind.call.name || !sameArguments(wanted.args, kind.call.arguments)) continue;
      operations.set(op.key, { at: wanted.at, calls: [attempt] });
      attempts.set(kind.call.id, attempt);
    } else if (kind.type === 'tool_started') {
      const attempt = attempts.get(kind.callId);
      if (attempt !== undefined) attempt.startedEvent = event;
    } else if (kind.type === 'tool_result') {
      const attempt = attempts.get(kind.result.callId);
      if (attempt !== undefined && attempt.result === null) attempt.result = { event, result: kind.result };
    } else if (kind.type === 'tool_review') {
      const attempt = attempts.get(kind.review.callId);
      if (attempt !== undefined && attempt.review !== 'completed') attempt.review = kind.review.outcome;
    }
  }
  const byStep = new Map<string, Attempt[][]>();
  for (const { at, calls } of operations.values()) byStep.set(at, [...(byStep.get(at) ?? []), calls]);
  const found = new Map<string, OutsideCall>();
  for (const [at, candidates] of byStep) {
    const read = readBack(candidates);
    if (read !== null) found.set(at, read);
  }
  return found;
}

/** The best reading of a step call's candidate operations (outsideCalls): made, confirmed, open, failed, in that order. */
function readBack(candidates: readonly (readonly Attempt[])[]): OutsideCall | null {
  const all = candidates.flat();
  const execution = (a: Attempt): ToolExecution => ({
    call: a.call, result: a.result!.result, callEvent: a.callEvent, startedEvent: a.startedEvent, resultEvent: a.result!.event, replayed: true,
  });
  const ran = all.find((a) => a.result?.result.outcome.status === 'succeeded');
  if (ran !== undefined) return { kind: 'ran', execution: execution(ran) };
  if (all.some((a) => a.review === 'completed')) return { kind: 'confirmed' };
  // An operation whose latest attempt has no result, whose body started or may have (its start marker, or a call
  // recorded without the marker flag), and no review said did not happen.
  for (const calls of candidates) {
    const latest = calls[calls.length - 1]!;
    const mayHaveRun = latest.startedEvent !== null || latest.call.operation?.startMarker !== true;
    if (latest.result === null && mayHaveRun && latest.review !== 'not_executed') return { kind: 'open', callId: latest.call.id };
  }
  const failed = [...all].reverse().find((a) => a.result !== null && a.review !== 'not_executed');
  return failed === undefined ? null : { kind: 'failed', execution: execution(failed) };
}

/**
 * outsideCalls of the session's journal, read once when first asked (only a step's call with no attempt under its run
 * key asks), and after the open has journaled the inbox's reviews: a review of such a call given while no host ran
 * settles it.
 */
export function outsideCallReader(owner: SessionOwner, store: Pick<SessionStore, 'loadHistory'>, runId: string, taskId: string): (at: string) => Promise<OutsideCall | undefined> {
  let found: Map<string, OutsideCall> | null = null;
  return async (at) => {
    found ??= outsideCalls(await readOwnJournal(owner, store), runId, taskId);
    return found.get(at);
  };
}

/** The step's call `requested` as the run reads it back from what the tool outside the run made of it ('open' aside). */
export function readOutsideCall(requested: ChatToolCall, found: Exclude<OutsideCall, { kind: 'open' }>): AgentToolCall {
  return found.kind === 'confirmed'
    ? { providerCallId: requested.id, name: requested.name, outcome: { ok: true, output: CONFIRMED_OUTSIDE }, execution: null }
    : { providerCallId: requested.id, name: requested.name, outcome: modelFacingOutcome(found.execution), execution: found.execution };
}
