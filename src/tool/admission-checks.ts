/**
 * The checks that run before a tool body, each turning a rejection into the failure the journal records:
 * grant (unavailable), JSON Schema (invalid_arguments), guards (denied / guard_fault) and approval (approval_*).
 */
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { RecordedFailureCode } from '../errors.js';
import { ToolEffect, type ToolCall, type ToolRecordedOutcome } from '../event/types.js';
import { argumentsDigest } from '../store/attention.js';
import type { SessionOwner } from '../store/types.js';
import { LIMITS } from '../limits.js';
import { thrownMessage, toWellFormed, truncateUtf8 } from '../text.js';
import type { CallControl, Interrupt } from './control.js';
import type { Tool, ToolApprover, ToolDenial, ToolGuard, ToolHookContext } from './types.js';

export type Failure = Extract<ToolRecordedOutcome, { status: 'failed' }>;

/** A failure the runtime itself records: its code is one of RECORDED_FAILURE_CODES. */
export function failure(category: Failure['category'], code: RecordedFailureCode, message: string, retryable = false): Failure {
  return hostFailure(category, code, message, retryable);
}

/**
 * A failure with code and message cut to the diagnostic limit on a character boundary (never rejected); the code
 * may be the host's own (a denial's, or a tool body's ToolBodyError). A lone surrogate in either (a message cut in
 * the middle of an emoji) becomes U+FFFD: the journal holds well-formed text only, and a result that could not be
 * journaled would leave a call that finished in doubt.
 */
export function hostFailure(category: Failure['category'], code: string, message: string, retryable = false): Failure {
  return {
    status: 'failed',
    category,
    code: truncateUtf8(toWellFormed(code), LIMITS.maxDiagnosticBytes),
    message: truncateUtf8(toWellFormed(message), LIMITS.maxDiagnosticBytes),
    retryable,
  };
}


/**
 * A hook's answer read once into plain data (a Proxy or getters are read here and only here); undefined when
 * reading it threw, which the caller records as a malformed answer.
 */
function snapshot(value: unknown): Readonly<Record<string, unknown>> | null | undefined {
  try {
    if (typeof value !== 'object' || value === null) return value === null || value === undefined ? null : {};
    const v = value as Record<string, unknown>;
    return { decision: v.decision, code: v.code, message: v.message, retryable: v.retryable, note: v.note };
  } catch {
    return undefined;
  }
}

/** A well-formed denial read from a snapshot. */
function asDenial(v: Readonly<Record<string, unknown>> | null | undefined): ToolDenial | null {
  if (!v || typeof v.code !== 'string' || typeof v.message !== 'string') return null;
  if (v.retryable !== undefined && typeof v.retryable !== 'boolean') return null;
  return { code: v.code, message: v.message, ...(v.retryable !== undefined ? { retryable: v.retryable } : {}) };
}

export interface RegisteredTool {
  readonly tool: Tool;
  readonly validate: ValidateFunction;
}

export function checkGrantAndSchema(registered: RegisteredTool | undefined, granted: boolean, call: ToolCall): Failure | null {
  if (!registered || !granted) {
    return failure('unavailable', 'tool_unavailable', `tool ${call.name} is not available to this caller`);
  }
  let valid: boolean;
  try {
    valid = registered.validate(call.arguments) as boolean;
  } catch (error) {
    return failure('invalid_arguments', 'tool_arguments_validation_fault', thrownMessage(error));
  }
  if (!valid) {
    const errors = (registered.validate.errors ?? []) as ErrorObject[];
    const text = errors.map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`).join('; ');
    return failure('invalid_arguments', 'tool_arguments_invalid', text || 'the arguments do not match the schema');
  }
  return null;
}

/**
 * What an unexpected throw from a host's hook (an availability check, a guard, an approver) is recorded as: the
 * host's `describePanic` text, as for a tool body's panic, so a secret in it can be redacted before the journal.
 */
export type ThrownDescriber = (error: unknown) => string;

/** The tool's own availability (a known-down connection, say): a denial is recorded as `unavailable`, before any marker. */
export function checkAvailability(registered: RegisteredTool, describe: ThrownDescriber): Failure | null {
  const ask = registered.tool.availability;
  if (ask === undefined) return null;
  let answer: unknown;
  try {
    answer = ask.call(registered.tool);
  } catch (error) {
    return failure('unavailable', 'tool_availability_fault', `the tool could not say whether it can run: ${describe(error)}`);
  }
  if (answer === null || answer === undefined) return null;
  const denial = asDenial(snapshot(answer));
  if (denial === null) return failure('unavailable', 'tool_availability_fault', 'the availability check returned something other than a denial or null');
  return hostFailure('unavailable', denial.code, denial.message, denial.retryable ?? false);
}

/** Guards in order under the call's control; the first denial or fault wins. */
export async function runGuards(guards: readonly ToolGuard[], ctx: ToolHookContext, control: CallControl, describe: ThrownDescriber): Promise<Failure | Interrupt | null> {
  for (const guard of guards) {
    let outcome: { value: unknown } | { interrupt: Interrupt };
    try {
      outcome = await control.race(async () => guard(ctx));
    } catch (error) {
      return failure('guard_fault', 'tool_guard_panicked', describe(error));
    }
    if ('interrupt' in outcome) return outcome.interrupt;
    if (outcome.value === null || outcome.value === undefined) continue;
    const denial = asDenial(snapshot(outcome.value));
    if (denial === null) return failure('guard_fault', 'tool_guard_malformed', 'a guard returned something other than a denial or nothing');
    return hostFailure('denied', denial.code, denial.message, denial.retryable ?? false);
  }
  return null;
}

/** The approver answered `pending`: a person decides later, through the decision inbox. */
export interface PendingApproval {
  readonly pending: true;
  readonly note: string | null;
}

/** Asks the keyed approver, afresh on every attempt. Null means approved. */
export async function askApproval(approver: ToolApprover, ctx: ToolHookContext, control: CallControl, describe: ThrownDescriber): Promise<Failure | Interrupt | PendingApproval | null> {
  let outcome;
  try {
    outcome = await control.race(() => approver(ctx, control.signal));
  } catch (error) {
    return failure('approval_fault', 'tool_authorizer_panicked', describe(error));
  }
  if ('interrupt' in outcome) return outcome.interrupt;
  const answer = snapshot(outcome.value);
  if (answer === undefined) return failure('approval_fault', 'tool_approval_malformed', 'the approver\'s answer could not be read');
  switch (answer?.decision) {
    case 'approved':
      return null;
    case 'denied': {
      const denial = asDenial(answer);
      if (denial === null) return failure('approval_fault', 'tool_approval_malformed', 'a denial must carry a code and a message');
      return hostFailure('approval_denied', denial.code, denial.message, denial.retryable ?? false);
    }
    case 'unavailable': {
      const a = answer;
      return hostFailure(
        'approval_unavailable',
        typeof a.code === 'string' ? a.code : ('tool_approval_unavailable' satisfies RecordedFailureCode),
        typeof a.message === 'string' ? a.message : 'the approver could not decide',
        a.retryable === true,
      );
    }
    case 'pending': {
      const note = answer.note;
      if (note !== undefined && typeof note !== 'string') return failure('approval_fault', 'tool_approval_malformed', 'a pending answer\'s note must be text');
      return { pending: true, note: note === undefined ? null : truncateUtf8(toWellFormed(note), LIMITS.maxDiagnosticBytes) };
    }
    default:
      return failure('approval_fault', 'tool_approval_malformed', 'the approver answered neither approved, denied, unavailable nor pending');
  }
}

/**
 * The in-doubt guard (docs/design.md#the-in-doubt-guard): a new operation of a tool that may write (any effect but
 * read-only) is refused when the store's index holds an identical operation of the same task, under any revision,
 * whose recorded effect may have written and whose outcome is in doubt, or whose retry a `not_executed` review left
 * due. A call this process is still running
 * (`running`: the owner's calls in flight) is not in doubt: an identical call beside it, as a model's parallel calls
 * are, runs as it would after the first had finished.
 */
export async function checkInDoubt(
  owner: SessionOwner,
  call: ToolCall,
  running: ReadonlySet<string>,
  retry?: { readonly related: ReadonlySet<string> },
  retriesUnderWay?: () => Promise<ReadonlySet<string>>,
): Promise<Failure | null> {
  const op = call.operation;
  if (!op || !owner.findInDoubt) return null;
  if (op.contract.effect === ToolEffect.ReadOnly) return null;
  const retrying = await retriesUnderWay?.();
  // A retry passes over its own operation's attempts only: a retry of a repeat this guard refused is that repeat
  // made after all, while the identical operation before it is still in doubt (docs/design.md#the-in-doubt-guard).
  const earlier = await owner.findInDoubt({ taskId: op.taskId, tool: call.name, argsDigest: argumentsDigest(call.arguments), running, exceptKey: op.key, ...(retry ? { ownWrite: true, related: retry.related } : {}), ...(retrying?.size ? { retrying } : {}) });
  if (earlier === null) return null;
  const identical = `an identical ${call.name} call (${earlier.callId})`;
  if (retrying?.has(earlier.callId) === true && earlier.status === 'no_result') {
    return failure('in_doubt', 'tool_in_doubt', `${identical} is being made now, a retry by the host, and a repeat would make it twice. ` +
      'Do not call it again: tell the user it is under way.');
  }
  return failure('in_doubt', 'tool_in_doubt', earlier.status === 'reviewed_not_executed'
    ? `${identical} was reviewed as not made, and its retry is still due: a host makes it from the review, and a repeat ` +
      'now would make it twice. Do not call it again: tell the user it is pending.'
    : `${identical} may already have taken effect and its outcome is unknown; it needs review by the host, not a repeat. ` +
      'Do not call it again: tell the user it is being checked.');
}
