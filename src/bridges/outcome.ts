/**
 * What a model may read about one tool call, for every bridge and the reference agent: the recorded output, or
 * the failure's category, code and message with one sentence on whether the tool ran. Never the call id, the
 * operation key, a retry plan or a review: those stay with the host. Never an unexpected throw's text either: a
 * panic or a crashed guard or approver reads as a fixed sentence with its category; its detail stays in the journal.
 */
import type { ToolFailureCategory } from '../event/types.js';
import { LIMITS } from '../limits.js';
import { describeValue, truncateUtf8 } from '../text.js';
import { InvalidInputError, ToolPreflightError, ToolRuntimeHaltedError } from '../errors.js';
import type { ToolExecution } from '../tool/types.js';
import { retriedAttemptMayHaveRun } from '../tool/retry-source.js';
import { stoppedBeforeBody } from '../tool/retry-policy.js';

export type ModelFacingOutcome =
  | { readonly ok: true; readonly output: string }
  | {
      readonly ok: false;
      /** The whole model-facing sentence. */
      readonly text: string;
      /** A recorded failure's category, or `preflight` for a call refused before anything was recorded. */
      readonly category: ToolFailureCategory | 'preflight';
      readonly code: string;
      readonly message: string;
      /**
       * Whether the body started (its `tool_started` marker is journaled, and it was not stopped before the body was
       * called): its effects may then have happened.
       */
      readonly started: boolean;
      /**
       * Whether the action may have taken effect: its body started, this attempt (refused before its body) retried
       * an earlier one that may have run and that nothing has settled, or it was refused because an identical
       * action is in doubt (`tool_in_doubt`).
       */
      readonly mayHaveTakenEffect: boolean;
    };

/** The tool name as quoted to the model: cut to the name limit (a model can send any name). */
const quoted = (name: string) => JSON.stringify(truncateUtf8(name, LIMITS.maxToolNameBytes));
/** One sentence: no trailing period of its own before ours. */
const sentence = (message: string) => message.replace(/[.\s]+$/, '');

/**
 * Categories whose recorded message is an unexpected throw's text (a tool body, a guard or an approver crashed):
 * it may carry hosts, paths or secrets, so the model reads a fixed sentence instead. The journal keeps the detail.
 */
const INTERNAL_CATEGORIES: ReadonlySet<string> = new Set(['body_panic', 'guard_fault', 'approval_fault']);

/** The fixed sentence the model reads for an internal failure. */
export const INTERNAL_FAILURE_MESSAGE = 'it failed unexpectedly; the details are kept for the operator';

/**
 * A request to an MCP server that failed below the tool (bridges/mcp.ts: a JSON-RPC error, the SDK's own checks, a
 * dropped connection): its text is the server's or the SDK's internals (a stack, a connection string, a schema
 * dump), not the tool's words. A tool's own error result (`mcp_tool_error`) is.
 */
const isMcpRequestFailure = (failure: { category: string; code: string }): boolean =>
  failure.category === 'body_failure' && (failure.code === 'mcp_request_failed' || failure.code.startsWith('mcp_error_'));

/** The fixed sentence the model reads for a failed MCP request; its code says which kind. */
export const MCP_REQUEST_FAILURE_MESSAGE = 'the request to its MCP server failed; the details are kept for the operator';

/** The fixed sentence the model reads when a tool's availability check threw: its text is the host's internals. */
export const AVAILABILITY_FAULT_MESSAGE = 'it could not say whether it can run; the details are kept for the operator';

/** The message a model may read for a recorded failure: its own text, or a fixed sentence for internal ones. */
function modelFacingMessage(failure: { category: string; code: string; message: string }): string {
  if (INTERNAL_CATEGORIES.has(failure.category)) return INTERNAL_FAILURE_MESSAGE;
  // The in-doubt guard's refusal names the identical call for an operator ("an identical send_mail call (<call id>)");
  // the model reads it without the id.
  if (failure.category === 'in_doubt') return failure.message.replace(/( call) \([^()\s]+\)/g, '$1');
  if (failure.code === 'tool_availability_fault') return AVAILABILITY_FAULT_MESSAGE;
  return isMcpRequestFailure(failure) ? MCP_REQUEST_FAILURE_MESSAGE : failure.message;
}

/**
 * The model-facing text of a recorded failure. `earlierMayHaveRun`: the call retried an earlier attempt that no
 * `not_executed` review settled (a free retry), so "did not run" would hide that attempt, whose body may have run.
 */
export function describeToolFailure(name: string, failure: { category: string; code: string; message: string }, started: boolean, earlierMayHaveRun = false): string {
  if (typeof name !== 'string') throw new InvalidInputError('name', `must be a string, got ${describeValue(name)}`);
  const f = failure as Partial<typeof failure> | null;
  if (typeof f !== 'object' || f === null || typeof f.category !== 'string' || typeof f.code !== 'string' || typeof f.message !== 'string') {
    throw new InvalidInputError('failure', `must be a recorded failure ({ category, code, message }, each a string), got ${describeValue(failure)}`);
  }
  const ran = started
    ? 'The tool started, so it may have taken effect before failing; check before doing it again.'
    : earlierMayHaveRun
      ? 'This attempt did not run, but it retried an earlier attempt of the same call that may have taken effect; check before doing it again.'
      : 'The tool did not run.';
  return `Tool ${quoted(name)} failed: ${failure.category} (${failure.code}): ${sentence(modelFacingMessage(failure))}. ${ran}`;
}

/**
 * A call refused by preflight (an empty or over-long name, arguments too large or not JSON): nothing was recorded,
 * and the model may correct its call.
 */
export function preflightFailure(name: string, error: { code: string; message: string }): Extract<ModelFacingOutcome, { ok: false }> {
  return {
    ok: false,
    text: `Tool ${quoted(name)} was refused before it ran: preflight (${error.code}): ${sentence(error.message)}. The tool did not run.`,
    category: 'preflight',
    code: error.code,
    message: error.message,
    started: false,
    mayHaveTakenEffect: false,
  };
}

/** Reduces an execution to what the model may see. */
export function modelFacingOutcome(execution: ToolExecution): ModelFacingOutcome {
  const given = execution as { call?: unknown; result?: { outcome?: unknown } | null } | null;
  if (typeof given !== 'object' || given === null || typeof given.call !== 'object' || given.call === null
    || typeof given.result?.outcome !== 'object' || given.result.outcome === null) {
    throw new InvalidInputError('execution', `must be a ToolExecution (what a gateway call returns), got ${describeValue(execution)}`);
  }
  const outcome = execution.result.outcome;
  if (outcome.status === 'succeeded') return { ok: true, output: outcome.output };
  // A start marker followed by a stop before the body was called: the body never started.
  const started = execution.startedEvent !== null && !stoppedBeforeBody(outcome);
  const retried = execution.call.operation?.retry;
  const earlierMayHaveRun = !started && retried !== undefined && retried !== null && retried.review?.outcome !== 'not_executed'
    && retriedAttemptMayHaveRun(execution);
  const failure = { ...outcome, message: operatorDecisionMessage(execution) ?? outcome.message };
  return {
    ok: false,
    text: describeToolFailure(execution.call.name, failure, started, earlierMayHaveRun),
    category: outcome.category,
    code: outcome.code,
    message: modelFacingMessage(failure),
    started,
    // Refused as in doubt: an identical action, made earlier, may have taken effect; or an operator's review of this
    // operation, waiting to be journaled, may say an earlier attempt made it.
    mayHaveTakenEffect: started || earlierMayHaveRun || outcome.code === 'tool_in_doubt' || outcome.code === 'tool_review_waiting',
  };
}

/**
 * An operator's decision as the model may read it: that a person denied it, or that it waits for one, with their
 * reason; never the operator's name or the request's id, which the recorded message carries for operators.
 */
function operatorDecisionMessage(execution: ToolExecution): string | null {
  const approval = execution.result.approval;
  if (approval === undefined) return null;
  const why = approval.reason === undefined ? '' : `: ${approval.reason}`;
  if (approval.decision === 'denied') return `an operator denied it${why}`;
  if (approval.decision === 'pending') return `it waits for an operator's decision${why}`;
  return null;
}

/**
 * Runs one gateway call for a framework tool: the model-facing outcome, or a ToolRuntimeHaltedError (model-safe,
 * the original as `cause`) when the runtime refused to admit or record it, or when `onExecution` threw after it
 * was recorded.
 */
export async function runForModel(tool: string, call: () => Promise<ToolExecution>, onExecution?: (execution: ToolExecution) => void): Promise<ModelFacingOutcome> {
  let execution: ToolExecution;
  try {
    execution = await call();
  } catch (error) {
    if (error instanceof ToolPreflightError) return preflightFailure(tool, error);
    throw new ToolRuntimeHaltedError(tool, error);
  }
  try {
    onExecution?.(execution);
  } catch (error) {
    // The call is recorded; a failure of the host's own hook must not read as one of the call ("did not run").
    throw new ToolRuntimeHaltedError(tool, error, execution.result.outcome.status);
  }
  return modelFacingOutcome(execution);
}
