/**
 * A whole-session view for hosts and the CLI: every tool call without its own success, and what may be done about
 * it. Same evidence rules as inspectToolRecovery, validated once for the whole history.
 */
import type { SessionEvent, ToolEffect, ToolResult, ToolReviewRecord } from '../event/types.js';
import type { CallId, EventId, OperationKey, SessionId, TaskId, TurnId } from '../ids.js';
import { ToolRecoveryStatus, classifyAttempt, collectEvidence, decideRetry, earlierDueAttempt, earlierOpenAttempt, effectiveReview, latestReview, openBeforeOwnReview, type AttemptRecord } from './evidence.js';
import type { EvidenceRuleId, RetryRuleId } from './retry-policy.js';
import { withLateEnd } from './late-bodies.js';

export const ToolNextStep = {
  /** prepareToolRetry without a review would give a plan. */
  RetryAllowed: 'retry_allowed',
  /** Outcome unknown for an Unknown/NonIdempotent tool: a trusted review saying not_executed is required. */
  NeedsReview: 'needs_review',
  /** Another attempt of the same operation succeeded: never retry. */
  Completed: 'completed',
  /**
   * A newer attempt of the operation exists, or an identical call in doubt or due keeps the in-doubt guard shut for a
   * retry of it (a repeat the guard refused, say): look at that one.
   */
  Superseded: 'superseded',
  /** No operation (an old record): no stable key, it cannot be retried. */
  Legacy: 'legacy',
} as const;
export type ToolNextStep = (typeof ToolNextStep)[keyof typeof ToolNextStep];

/**
 * Whether a call needs a person or a host to act (docs/design.md#attention-means-attention):
 * `in_doubt`: its outcome is unknown (the body started, or may have) and nothing settled it;
 * `interrupted`: it never started and no result was recorded, so its caller never had an answer; or its write is
 *   due: a `not_executed` review said it was not made, or it is a retry that never ran its body and was not denied,
 *   of a write such a review left due;
 * `none`: nothing to do: it succeeded, another attempt settled it, or its failure was recorded before the body and
 * delivered to its caller, who has already seen it (shown, but not pending work).
 */
export const ToolAttention = {
  InDoubt: 'in_doubt',
  Interrupted: 'interrupted',
  None: 'none',
} as const;
export type ToolAttention = (typeof ToolAttention)[keyof typeof ToolAttention];

export interface ToolCallAssessment {
  readonly callId: CallId;
  readonly name: string;
  /** Null for a legacy call (no operation). */
  readonly effect: ToolEffect | null;
  readonly revision: string | null;
  readonly taskId: TaskId | null;
  readonly key: OperationKey | null;
  readonly status: ToolRecoveryStatus;
  readonly nextStep: ToolNextStep;
  /** Whether the call needs attention, and why (ToolAttention). */
  readonly attention: ToolAttention;
  /** One line naming the decision-table row that applies. */
  readonly reason: string;
  /** The evidence-table row that gave `status` (retry-policy.ts). */
  readonly evidenceRule: EvidenceRuleId;
  /** The retry-table row that gave `nextStep` and `reason` (retry-policy.ts). */
  readonly rule: RetryRuleId;
  /** 1-based position among the attempts of its operation (1 for a legacy call). */
  readonly attempt: number;
  /** How many attempts the operation has in the history (1 for a legacy call). */
  readonly attempts: number;
  readonly result: ToolResult | null;
  /** The latest journaled review of the call (docs/design.md#reviews-are-journaled-evidence), or null. */
  readonly review: ToolReviewRecord | null;
  /** How its body went on after its result, as journaled (ToolRecoveryAssessment.bodyEnded), or null. */
  readonly bodyEnded: { readonly ended: 'returned' | 'threw'; readonly event: SessionEvent } | null;
  readonly eventId: EventId;
  readonly turnId: TurnId;
  readonly seq: number;
}

export interface SessionAssessmentTotals {
  /** Every tool call in the history. */
  readonly calls: number;
  /** Calls whose own result is a success (not listed). */
  readonly succeeded: number;
  /** Calls listed in `calls` of the assessment. */
  readonly listed: number;
  readonly byNextStep: Readonly<Record<ToolNextStep, number>>;
  readonly byStatus: Readonly<Record<ToolRecoveryStatus, number>>;
  /** Listed calls by attention; `in_doubt` + `interrupted` is what needs attention. */
  readonly byAttention: Readonly<Record<ToolAttention, number>>;
}

export interface SessionAssessment {
  readonly sessionId: SessionId;
  readonly events: number;
  /** Every call whose own result is not a success, in physical order. */
  readonly calls: readonly ToolCallAssessment[];
  readonly totals: SessionAssessmentTotals;
}

/**
 * Validates the whole history (throws ToolRetryError: `invalid_evidence` for corrupt or over-limit evidence,
 * `binding_changed` for an operation whose attempts disagree) and lists every call without its own success.
 */
export function assessSession(history: readonly SessionEvent[]): SessionAssessment {
  const evidence = collectEvidence(history);
  const byNextStep: Record<ToolNextStep, number> = {
    retry_allowed: 0,
    needs_review: 0,
    completed: 0,
    superseded: 0,
    legacy: 0,
  };
  const byStatus: Record<ToolRecoveryStatus, number> = { completed: 0, not_executed: 0, outcome_unknown: 0 };
  const byAttention: Record<ToolAttention, number> = { in_doubt: 0, interrupted: 0, none: 0 };
  const calls: ToolCallAssessment[] = [];
  let succeeded = 0;
  for (const record of evidence.attempts) {
    const { status, rule: evidenceRule } = classifyAttempt(record);
    byStatus[status] += 1;
    if (status === ToolRecoveryStatus.Completed) {
      succeeded += 1;
      continue;
    }
    const reviewed = effectiveReview(record, null)?.outcome ?? null;
    const decided = decideRetry(record, reviewed);
    const nextStep = decided.rule.decision;
    const rule = decided.rule;
    byNextStep[nextStep] += 1;
    const operation = record.call.operation;
    const open = status === ToolRecoveryStatus.OutcomeUnknown ? null : earlierOpenAttempt(record);
    const due = open === null && status === ToolRecoveryStatus.NotExecuted ? earlierDueAttempt(record) : null;
    const why = open !== null ? `; attempt ${open.attempt} (${open.call.id}) before it may have taken effect, and nothing has settled that`
      : due !== null ? `; a review said attempt ${due.attempt} (${due.call.id}) before it was not made, and its write is still due`
        : nextStep === ToolNextStep.RetryAllowed ? identicalWritesNote(record) : '';
    const reason = withLateEnd(`${decided.reason}${why}`, record);
    // A `not_executed` review settles the doubt, not the write: the call needs a host's retry, as the index's
    // `reviewed_not_executed` says, and is no longer in doubt. So does one of a retry that never ran its body, about
    // the earlier attempt that may have (the latest attempt is where a person decides the operation's doubt).
    const reviewedDue = reviewed === 'not_executed' &&
      (status === ToolRecoveryStatus.OutcomeUnknown || (status === ToolRecoveryStatus.NotExecuted && openBeforeOwnReview(record) !== null));
    const attention = attentionOf((status === ToolRecoveryStatus.OutcomeUnknown && !reviewedDue) || open !== null, nextStep,
      record.result !== null && due === null && !reviewedDue);
    byAttention[attention] += 1;
    calls.push({
      callId: record.call.id,
      name: record.call.name,
      effect: operation?.contract.effect ?? null,
      revision: operation?.contract.revision ?? null,
      taskId: operation?.taskId ?? null,
      key: operation?.key ?? null,
      status,
      nextStep,
      attention,
      reason,
      evidenceRule,
      rule: rule.id,
      attempt: record.attempt,
      attempts: record.operation?.attempts.length ?? 1,
      result: record.result,
      review: latestReview(record),
      bodyEnded: record.bodyRanOn ?? null,
      eventId: record.event.eventId,
      turnId: record.event.turnId,
      seq: record.event.seq,
    });
  }
  return {
    sessionId: evidence.sessionId,
    events: evidence.eventCount,
    calls,
    totals: { calls: evidence.attempts.length, succeeded, listed: calls.length, byNextStep, byStatus, byAttention },
  };
}

/**
 * What the identical writes say about a retry the table allows (repeats.ts), when no identical call in doubt or due
 * holds it back (that is the `identical_in_doubt` row): the write a refused repeat stands for, decided against since,
 * which its retry makes; a repeat's retry that ran and did not make this write; or a call asked anew that made a
 * write of its own.
 */
function identicalWritesNote(record: AttemptRecord): string {
  const awaited = record.repeatedOpen;
  if (awaited !== undefined) {
    // That write decided against, the model asked for the same call anew and it made a write of its own (a redeploy's
    // denial invites that call): a retry of this repeat makes the first write after all, a second one.
    const anew = awaited.askedAnew === undefined ? ''
      : `; ${awaited.askedAnew.call.id}, the same call asked anew after that one was denied, has made a write of its own: a retry of this one makes a second`;
    return `; it repeats ${awaited.call.id}, an identical call whose write was decided against and is not made: ` +
      `a retry of this one makes that write${anew}`;
  }
  if (record.openRepeat !== undefined) {
    return `; ${record.openRepeat.call.id}, a retry of an identical repeat of it, ran and was not settled as made: a retry of ` +
      'this one makes this write';
  }
  if (record.askedAnew !== undefined) {
    return `; ${record.askedAnew.call.id}, the same call asked anew after this one was denied, has made a write of its own: a retry of this one makes a second`;
  }
  return '';
}

/**
 * Only a call a host could still act on (retry or review) can need attention; then the evidence says why. `answered`:
 * its caller had a result it could act on (a retry of a write a review left due, refused before its body, had none).
 */
function attentionOf(outcomeOpen: boolean, nextStep: ToolNextStep, answered: boolean): ToolAttention {
  if (nextStep !== ToolNextStep.RetryAllowed && nextStep !== ToolNextStep.NeedsReview) return ToolAttention.None;
  if (outcomeOpen) return ToolAttention.InDoubt;
  return answered ? ToolAttention.None : ToolAttention.Interrupted;
}
