/**
 * The retry policy as data: two ordered tables, read by the evidence pass, prepareToolRetry, assessSession and the
 * CLI alike, so what the code decides and what an operator is told come from the same rows.
 *
 * - EVIDENCE_RULES: what the journal proves about one attempt (flag, start marker, recorded result) -> a recovery
 *   status, or `invalid` for evidence our runtime can never write (contradictions fail closed).
 * - RETRY_RULES: what may be done about an attempt (its status, effect, a host review, its place among the attempts
 *   of its operation) -> a decision, the refusal prepareToolRetry throws, and the reason shown to people.
 *
 * In both tables the first row whose condition matches wins. Pure data and pure functions: no IO.
 * docs/design.md explains each row.
 */
import {
  PRE_BODY_CATEGORIES,
  ToolEffect,
  type ToolCall,
  type ToolFailureCategory,
  type ToolRecordedOutcome,
  type ToolResult,
  type ToolReviewOutcome,
} from '../event/types.js';
import { ToolRetryError, type RecordedFailureCode, type ToolRetryErrorCode } from '../errors.js';

/**
 * The pre-body categories that decide against a call (a guard's or an approver's denial), rather than fail to make
 * it: they settle a write a `not_executed` review left due (docs/design.md#the-attention-index).
 */
export const DENIAL_CATEGORIES: ReadonlySet<ToolFailureCategory> = new Set<ToolFailureCategory>(['denied', 'approval_denied']);

export const ToolRecoveryStatus = {
  Completed: 'completed',
  NotExecuted: 'not_executed',
  OutcomeUnknown: 'outcome_unknown',
} as const;
export type ToolRecoveryStatus = (typeof ToolRecoveryStatus)[keyof typeof ToolRecoveryStatus];

// ---------------------------------------------------------------------------------------------------------------
// What the journal proves

/**
 * The recorded result of an attempt, in the classes the policy distinguishes:
 * `pre_body`: a category the runtime records only before a body starts (grant, schema, guards, approval);
 * `interrupted`: timeout, cancellation or a stopped task, which the runtime records before or after the body;
 * `body`: a body failure, a panic or output over the limit, which exist only once the body ran.
 */
export type ResultClass = 'none' | 'succeeded' | 'pre_body' | 'interrupted' | 'not_called' | 'body';

/**
 * The code the runtime records for an interrupt that came after the start marker was written and before the body
 * was called (a deadline or a cancellation during the marker's commit): the body never ran. Only the runtime writes
 * a tool result, so the journal can be taken at its word.
 */
export const STOPPED_BEFORE_BODY = 'tool_stopped_before_body' satisfies RecordedFailureCode;

const INTERRUPT_CATEGORIES: ReadonlySet<ToolFailureCategory> = new Set<ToolFailureCategory>(['timeout', 'cancelled', 'budget']);

/**
 * Whether a result says an interrupt stopped its attempt between the start marker and the body, the body never
 * called: the code under an interrupt's category. A body's own failure that carries the same code (passed on from a
 * nested call, say) is the body's failure: its body ran.
 */
export function stoppedBeforeBody(outcome: ToolRecordedOutcome | null | undefined): boolean {
  return outcome?.status === 'failed' && INTERRUPT_CATEGORIES.has(outcome.category) && outcome.code === STOPPED_BEFORE_BODY;
}

function resultClassOf(outcome: ToolRecordedOutcome | null | undefined): ResultClass {
  if (outcome === null || outcome === undefined) return 'none';
  if (outcome.status === 'succeeded') return 'succeeded';
  if (PRE_BODY_CATEGORIES.has(outcome.category)) return 'pre_body';
  if (INTERRUPT_CATEGORIES.has(outcome.category)) return stoppedBeforeBody(outcome) ? 'not_called' : 'interrupted';
  return 'body';
}

export interface EvidenceFacts {
  /** The call is flagged to record a start marker right before its body (the canonical runtime sets it). */
  readonly flagged: boolean;
  /** A `tool_started` marker is in the journal. */
  readonly marker: boolean;
  readonly result: ToolRecordedOutcome | null;
}

/** What the evidence table reads of one journaled attempt: its call, its start marker (if any) and its result. */
export interface JournaledAttempt {
  readonly call: ToolCall;
  readonly startedEvent: object | null;
  readonly result: ToolResult | null;
}

/** The evidence table's facts of one journaled attempt. */
export const evidenceFactsOf = (attempt: JournaledAttempt): EvidenceFacts => ({
  flagged: attempt.call.operation?.startMarker === true,
  marker: attempt.startedEvent !== null,
  result: attempt.result?.outcome ?? null,
});

export type EvidenceRuleId =
  | 'marker_contradicts_pre_body'
  | 'no_marker_but_body_ran'
  | 'succeeded'
  | 'flagged_never_started'
  | 'stopped_before_call'
  | 'flagged_started'
  | 'rejected_before_body'
  | 'body_may_have_run';

export interface EvidenceRule {
  readonly id: EvidenceRuleId;
  readonly when: {
    readonly flagged?: boolean;
    readonly marker?: boolean;
    readonly result?: readonly ResultClass[];
  };
  /** `invalid`: the journal contradicts itself; every reader refuses it as invalid_evidence. */
  readonly status: ToolRecoveryStatus | 'invalid';
  /** The condition, for people. */
  readonly condition: string;
  /** What it means, for people. */
  readonly explanation: string;
  /** The confirmed fact behind the status for one attempt, e.g. "body started, no result". */
  readonly fact: (outcome: ToolRecordedOutcome | null) => string;
}

const categoryOf = (o: ToolRecordedOutcome | null): string => (o === null ? 'no result' : o.status === 'succeeded' ? 'succeeded' : o.category);

export const EVIDENCE_RULES: readonly EvidenceRule[] = [
  {
    id: 'marker_contradicts_pre_body',
    when: { flagged: true, marker: true, result: ['pre_body'] },
    status: 'invalid',
    condition: 'A flagged call with a start marker and a failure recorded only before a body starts',
    explanation: 'The journal contradicts itself: refused as invalid_evidence, nothing is decided from it',
    fact: (o) => `start marker recorded, yet ${categoryOf(o)} is recorded only before the body`,
  },
  {
    id: 'no_marker_but_body_ran',
    when: { flagged: true, marker: false, result: ['succeeded', 'body'] },
    status: 'invalid',
    condition: 'A flagged call without a start marker whose result says the body ran (success, body failure, panic, output over the limit)',
    explanation: 'The journal contradicts itself: refused as invalid_evidence, nothing is decided from it',
    fact: (o) => `no start marker, yet ${categoryOf(o)} says the body ran`,
  },
  {
    id: 'succeeded',
    when: { result: ['succeeded'] },
    status: ToolRecoveryStatus.Completed,
    condition: 'A success result',
    explanation: 'Completed: refuse any retry; never synthesize a new tool result',
    fact: () => 'succeeded',
  },
  {
    id: 'flagged_never_started',
    when: { flagged: true, marker: false, result: ['none', 'pre_body', 'interrupted', 'not_called'] },
    status: ToolRecoveryStatus.NotExecuted,
    condition: 'A call flagged to record a start marker, with no marker, and no result or a failure recorded before the body',
    explanation: 'The body provably never started: not executed, even for an unknown or non-idempotent tool; a retry still passes every current check',
    fact: (o) => (o === null ? 'body never started: no start marker, no result' : `body never started: no start marker, ${categoryOf(o)} recorded before the body`),
  },
  {
    id: 'stopped_before_call',
    when: { flagged: true, marker: true, result: ['not_called'] },
    status: ToolRecoveryStatus.NotExecuted,
    condition: 'A flagged call whose start marker is recorded and whose result says an interrupt stopped it before its body was called',
    explanation: 'The body was never called (the deadline or cancellation came while the marker was written): not executed; a retry still passes every current check',
    fact: (o) => `start marker recorded, then ${categoryOf(o)} before the body was called`,
  },
  {
    id: 'flagged_started',
    when: { flagged: true, marker: true },
    status: ToolRecoveryStatus.OutcomeUnknown,
    condition: 'A flagged call whose start marker is recorded, without a success',
    explanation: 'The body started: its external outcome is uncertain',
    fact: (o) => (o === null ? 'body started, no result' : `body started, then ${categoryOf(o)}`),
  },
  {
    id: 'rejected_before_body',
    when: { flagged: false, result: ['pre_body'] },
    status: ToolRecoveryStatus.NotExecuted,
    condition: 'Rejected at the grant, argument, guard or approval stage',
    explanation: 'The tool body never started; a new attempt may be prepared explicitly, and it must pass the current checks again',
    fact: (o) => `rejected before the body: ${categoryOf(o)}`,
  },
  {
    id: 'body_may_have_run',
    when: { flagged: false },
    status: ToolRecoveryStatus.OutcomeUnknown,
    condition: 'Missing result, body failure, timeout, cancellation, budget stop or output over the limit',
    explanation: 'The external outcome may be uncertain; never infer "not executed" from the retryable flag',
    fact: (o) => (o === null ? 'no result' : `${categoryOf(o)} recorded; the body may have run`),
  },
];

const matchesEvidence = (rule: EvidenceRule, facts: EvidenceFacts, result: ResultClass): boolean =>
  (rule.when.flagged === undefined || rule.when.flagged === facts.flagged) &&
  (rule.when.marker === undefined || rule.when.marker === facts.marker) &&
  (rule.when.result === undefined || rule.when.result.includes(result));

/** The evidence row that applies; the table covers every combination, so there always is one. */
export function evidenceRuleFor(facts: EvidenceFacts): EvidenceRule {
  const result = resultClassOf(facts.result);
  const rule = EVIDENCE_RULES.find((r) => matchesEvidence(r, facts, result));
  if (rule === undefined) throw new ToolRetryError('invalid_evidence', `the evidence table has no row for ${JSON.stringify(facts)}`);
  return rule;
}

// ---------------------------------------------------------------------------------------------------------------
// What may be done

/** The same words as ToolNextStep: what a host does next about one attempt. */
export type RetryDecision = 'retry_allowed' | 'needs_review' | 'completed' | 'superseded' | 'legacy';

/** Another attempt of the same operation, named in reasons. */
export interface AttemptRef {
  readonly attempt: number;
  readonly callId: string;
}

export interface RetryFacts {
  readonly callId: string;
  /** 1-based position among the operation's attempts. */
  readonly attempt: number;
  /** The status and fact the evidence table gave this attempt (never an `invalid` row). */
  readonly status: ToolRecoveryStatus;
  readonly fact: string;
  /** Null for a legacy call (no operation). */
  readonly effect: ToolEffect | null;
  /**
   * The review the decision reads: one handed to prepareToolRetry, else the call's latest journaled review (a
   * journaled `completed` one always wins; docs/design.md#reviews-are-journaled-evidence).
   */
  readonly review: ToolReviewOutcome | null;
  /** The newest attempt of the operation when it is not this one. */
  readonly newer: AttemptRef | null;
  /** Another attempt of the operation that succeeded. */
  readonly succeededSibling: AttemptRef | null;
  /**
   * For a call the in-doubt guard refused: the attempt that settled, as made, an identical operation it may have
   * repeated (its success, or a `completed` review of it; repeats.ts says which count); null otherwise.
   */
  readonly repeatedCompleted: AttemptRef | null;
  /** For a write not made: the attempt by which an identical repeat of it, retried after all, has made it since. */
  readonly madeByRepeat: AttemptRef | null;
  /**
   * For a write not made that repeats, or is repeated by, an identical one: the latest attempt of an identical
   * operation in doubt, maybe still running, or due, for which the in-doubt guard refuses a retry of this one.
   */
  readonly waitsOn: AttemptRef | null;
}

export type RetryRuleId =
  | 'earlier_attempt_of_completed_operation'
  | 'superseded'
  | 'operation_completed'
  | 'succeeded'
  | 'reviewed_completed'
  | 'repeat_of_completed'
  | 'made_by_repeat'
  | 'identical_in_doubt'
  | 'legacy'
  | 'not_executed'
  | 'safe_to_repeat'
  | 'reviewed_not_executed'
  | 'needs_review';

export interface RetryRule {
  readonly id: RetryRuleId;
  readonly when: {
    readonly status?: readonly ToolRecoveryStatus[];
    /** 'legacy' matches a call without an operation. */
    readonly effect?: readonly (ToolEffect | 'legacy')[];
    readonly review?: readonly ToolReviewOutcome[];
    /** true: a newer attempt of the operation exists. */
    readonly superseded?: boolean;
    /** true: another attempt of the operation succeeded. */
    readonly siblingSucceeded?: boolean;
    /** true: the in-doubt guard refused the call, and an identical operation it may have repeated is settled as made. */
    readonly repeatedCompleted?: boolean;
    /** true: an identical repeat of the call, retried after all, has made its write since. */
    readonly madeByRepeat?: boolean;
    /** true: the in-doubt guard would refuse a retry, for an identical operation in doubt or due (RetryFacts.waitsOn). */
    readonly waitsOnIdentical?: boolean;
  };
  readonly decision: RetryDecision;
  /** What prepareToolRetry throws (and inspectToolRecovery, for the position rows); null: a plan is given. */
  readonly refusal: ToolRetryErrorCode | null;
  /** True for the rows about the attempt's place in its operation, checked before the attempt itself. */
  readonly position: boolean;
  /** The condition, for people. */
  readonly condition: string;
  /** What it means, for people. */
  readonly explanation: string;
  /** The one-line reason for one attempt. */
  readonly reason: (facts: RetryFacts) => string;
}

const SAFE_TO_REPEAT: readonly ToolEffect[] = [ToolEffect.ReadOnly, ToolEffect.Idempotent];
const UNSAFE_TO_REPEAT: readonly ToolEffect[] = [ToolEffect.Unknown, ToolEffect.NonIdempotent];
const ref = (r: AttemptRef | null): string => (r === null ? 'another attempt' : `attempt ${r.attempt} (${r.callId})`);

export const RETRY_RULES: readonly RetryRule[] = [
  {
    id: 'earlier_attempt_of_completed_operation',
    when: { superseded: true, siblingSucceeded: true },
    decision: 'completed',
    refusal: 'not_latest_attempt',
    position: true,
    condition: 'An earlier attempt of an operation that another attempt completed',
    explanation: 'Completed elsewhere: never retry it; a retry is refused as not_latest_attempt',
    reason: (f) => `call ${f.callId} is attempt ${f.attempt}; ${ref(f.succeededSibling)} of this operation succeeded: never retry it`,
  },
  {
    id: 'superseded',
    when: { superseded: true },
    decision: 'superseded',
    refusal: 'not_latest_attempt',
    position: true,
    condition: 'A newer attempt of the same operation exists',
    explanation: 'Refused as not_latest_attempt: decide on the newest attempt',
    reason: (f) => `call ${f.callId} is attempt ${f.attempt}; ${ref(f.newer)} is newer: decide on that attempt instead`,
  },
  {
    id: 'operation_completed',
    when: { siblingSucceeded: true },
    decision: 'completed',
    refusal: 'completed',
    position: true,
    condition: 'Another attempt of the same operation succeeded',
    explanation: 'Completed: refuse any retry',
    reason: (f) => `${ref(f.succeededSibling)} of this operation succeeded: never retry it`,
  },
  {
    id: 'succeeded',
    when: { status: [ToolRecoveryStatus.Completed] },
    decision: 'completed',
    refusal: 'completed',
    position: false,
    condition: 'A success result, or the host has verified completion',
    explanation: 'Refuse the retry; do not synthesize a new tool result',
    reason: (f) => `completed (${f.fact}): a retry would run it twice`,
  },
  {
    id: 'reviewed_completed',
    when: { review: ['completed'] },
    decision: 'completed',
    refusal: 'completed',
    position: false,
    condition: 'A trusted review (journaled, or passed by the host) says the call completed',
    explanation: 'Resolved for good: refuse any retry; it needs no one\'s attention',
    reason: (f) => `${f.fact}; a trusted review says completed: resolved, never retry it`,
  },
  {
    id: 'repeat_of_completed',
    when: { repeatedCompleted: true },
    decision: 'completed',
    refusal: 'completed',
    position: false,
    condition: 'A repeat the in-doubt guard refused, when an identical earlier operation it may have repeated is settled as made (after the refusal, or by a review or a retry)',
    explanation: 'Its write is the one the earlier operation made: refuse any retry, which would make it twice',
    reason: (f) => `${f.fact}, a repeat of an identical call in doubt; ${f.repeatedCompleted?.callId ?? 'another call'} has made that write: a retry would make it twice`,
  },
  {
    id: 'made_by_repeat',
    when: { madeByRepeat: true },
    decision: 'completed',
    refusal: 'completed',
    position: false,
    condition: 'A write not made, whose identical repeat (refused by the in-doubt guard, retried since) has made it',
    explanation: 'The write is made, by its repeat: refuse any retry, which would make it twice',
    reason: (f) => `${f.fact}; ${f.madeByRepeat?.callId ?? 'another call'}, a retry of an identical repeat of it, has made that write: a retry would make it twice`,
  },
  {
    id: 'identical_in_doubt',
    when: { status: [ToolRecoveryStatus.NotExecuted], waitsOnIdentical: true },
    decision: 'superseded',
    refusal: 'identical_in_doubt',
    position: false,
    condition: 'A write not made that repeats an identical operation, or whose identical repeat was retried, when that operation is in doubt, may still be running, or its retry is due',
    explanation: 'Decide on the identical call first: a retry of this one would only be refused by the in-doubt guard until it is settled',
    reason: (f) => `${f.fact}; ${f.waitsOn?.callId ?? 'another call'}, an identical call, is in doubt, may still be running, or its retry is due: ` +
      'decide on that call first (the in-doubt guard refuses a retry of this one meanwhile)',
  },
  {
    id: 'legacy',
    when: { effect: ['legacy'] },
    decision: 'legacy',
    refusal: 'legacy_call',
    position: false,
    condition: 'An old ToolCall without the operation field',
    explanation: 'No trustworthy stable key can be migrated: retry planning refuses it as legacy_call',
    reason: (f) => `legacy call without an operation (${f.fact}): no stable key, it cannot be retried`,
  },
  {
    id: 'not_executed',
    when: { status: [ToolRecoveryStatus.NotExecuted] },
    decision: 'retry_allowed',
    refusal: null,
    position: false,
    condition: 'The body provably never started',
    explanation: 'A new attempt may be prepared explicitly; it passes every current check again (grant, schema, guards, approval, budget)',
    reason: (f) => `not executed (${f.fact}): a new attempt may be prepared; it passes every current check again`,
  },
  {
    id: 'safe_to_repeat',
    when: { status: [ToolRecoveryStatus.OutcomeUnknown], effect: SAFE_TO_REPEAT },
    decision: 'retry_allowed',
    refusal: null,
    position: false,
    condition: 'Outcome uncertain, contract ReadOnly / Idempotent',
    explanation: 'The host may explicitly prepare one attempt, reusing the logical action key',
    reason: (f) => `outcome unknown (${f.fact}) and effect ${f.effect}: one attempt may be prepared, reusing the operation key`,
  },
  {
    id: 'reviewed_not_executed',
    when: { status: [ToolRecoveryStatus.OutcomeUnknown], effect: UNSAFE_TO_REPEAT, review: ['not_executed'] },
    decision: 'retry_allowed',
    refusal: null,
    position: false,
    condition: 'Outcome uncertain, contract Unknown / NonIdempotent, a trusted review says not_executed',
    explanation: 'One attempt may be prepared with the review recorded in its retry audit',
    reason: (f) => `outcome unknown (${f.fact}) and effect ${f.effect}, reviewed not_executed: one attempt may be prepared`,
  },
  {
    id: 'needs_review',
    when: { status: [ToolRecoveryStatus.OutcomeUnknown], effect: UNSAFE_TO_REPEAT },
    decision: 'needs_review',
    refusal: 'needs_review',
    position: false,
    condition: 'Outcome uncertain, contract Unknown / NonIdempotent',
    explanation: 'Return NeedsReview; a retry may be prepared only after a trusted host confirms the call was not executed',
    reason: (f) => `outcome unknown (${f.fact}) and effect ${f.effect}: a trusted review saying not_executed is required`,
  },
];

function matchesRetry(rule: RetryRule, facts: RetryFacts): boolean {
  const w = rule.when;
  return (
    (w.status === undefined || w.status.includes(facts.status)) &&
    (w.effect === undefined || w.effect.includes(facts.effect ?? 'legacy')) &&
    (w.review === undefined || (facts.review !== null && w.review.includes(facts.review))) &&
    (w.superseded === undefined || w.superseded === (facts.newer !== null)) &&
    (w.siblingSucceeded === undefined || w.siblingSucceeded === (facts.succeededSibling !== null)) &&
    (w.repeatedCompleted === undefined || w.repeatedCompleted === (facts.repeatedCompleted !== null)) &&
    (w.madeByRepeat === undefined || w.madeByRepeat === (facts.madeByRepeat !== null)) &&
    (w.waitsOnIdentical === undefined || w.waitsOnIdentical === (facts.waitsOn !== null))
  );
}

/** The retry row that applies; the table covers every combination, so there always is one. */
export function retryRuleFor(facts: RetryFacts): RetryRule {
  const rule = RETRY_RULES.find((r) => matchesRetry(r, facts));
  if (rule === undefined) throw new ToolRetryError('invalid_evidence', `the retry table has no row for ${JSON.stringify(facts)}`);
  return rule;
}

export function evidenceRuleById(id: EvidenceRuleId): EvidenceRule {
  return EVIDENCE_RULES.find((r) => r.id === id)!;
}

export function retryRuleById(id: RetryRuleId): RetryRule {
  return RETRY_RULES.find((r) => r.id === id)!;
}
