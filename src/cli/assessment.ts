/**
 * How the CLI and the demo show a session assessment: which calls need attention, the table of calls, and for one
 * call the rule of the recovery decision table that applies (docs/design.md#the-recovery-decision-table). The decisions are the library's (assessSession); this
 * module only names them for people.
 */
import { PRE_BODY_CATEGORIES, ToolEffect, type SessionEvent, type ToolCall, type ToolResult } from '../event/types.js';
import type { SessionAssessment, ToolCallAssessment } from '../tool/assess.js';
import { clip, shortId, table, type Column } from './format.js';
import type { Style } from './io.js';

/** A call needs attention when a host still has to act on it: retry it, or review it. */
export interface Attention {
  readonly total: number;
  readonly needsReview: number;
  readonly retryAllowed: number;
}

export function attentionOf(assessment: SessionAssessment): Attention {
  const needsReview = assessment.totals.byNextStep.needs_review;
  const retryAllowed = assessment.totals.byNextStep.retry_allowed;
  return { total: needsReview + retryAllowed, needsReview, retryAllowed };
}

/** "2 (1 needs_review, 1 retry_allowed)", or "0". */
export function attentionText(a: Attention): string {
  const parts: string[] = [];
  if (a.needsReview > 0) parts.push(`${a.needsReview} needs_review`);
  if (a.retryAllowed > 0) parts.push(`${a.retryAllowed} retry_allowed`);
  return parts.length === 0 ? '0' : `${a.total} (${parts.join(', ')})`;
}

export function colourStep(step: string, style: Style): string {
  switch (step) {
    case 'needs_review':
      return style.yellow(step);
    case 'retry_allowed':
      return style.cyan(step);
    case 'completed':
      return style.green(step);
    default:
      return style.dim(step);
  }
}

export function colourStatus(status: string, style: Style): string {
  switch (status) {
    case 'outcome_unknown':
      return style.yellow(status);
    case 'not_executed':
      return style.cyan(status);
    default:
      return style.green(status);
  }
}

export const CALL_COLUMNS: readonly Column[] = [
  { header: 'CALL' },
  { header: 'TOOL' },
  { header: 'EFFECT' },
  { header: 'STATUS' },
  { header: 'NEXT STEP' },
  { header: 'WHY' },
];

export function callRow(c: ToolCallAssessment, style: Style): string[] {
  return [shortId(c.callId), c.name, c.effect ?? 'legacy', colourStatus(c.status, style), colourStep(c.nextStep, style), c.reason];
}

export function callTable(calls: readonly ToolCallAssessment[], style: Style, options: { width?: number; indent?: string } = {}): string {
  return table(CALL_COLUMNS, calls.map((c) => callRow(c, style)), style, options);
}

// ---------------------------------------------------------------------------------------------------------------
// The recovery decision table (docs/design.md#the-recovery-decision-table), named for people

export interface DecisionRow {
  /** The rule's name in docs/design.md#the-recovery-decision-table, e.g. "retry/needs_review" or "evidence/flagged_never_started". */
  readonly source: string;
  readonly fact: string;
  readonly handling: string;
}

const CATEGORY_ROWS: readonly DecisionRow[] = [
  { source: 'retry/succeeded', fact: 'A success result, or the host has verified completion', handling: 'Refuse the retry; do not synthesize a new tool result' },
  {
    source: 'evidence/rejected_before_body',
    fact: 'Rejected at the permission, argument, guard or approval stage',
    handling: 'The tool body never started; a new attempt may be prepared explicitly, and it must pass the current checks again',
  },
  {
    source: 'evidence/body_may_have_run',
    fact: 'Missing result, body failure, timeout, cancellation, budget abort or output over the limit',
    handling: 'The external outcome may be uncertain; never infer "not executed" from the retryable flag',
  },
  { source: 'retry/safe_to_repeat', fact: 'Outcome uncertain, contract ReadOnly / Idempotent', handling: 'The host may explicitly prepare one attempt, reusing the logical action key' },
  {
    source: 'retry/needs_review',
    fact: 'Outcome uncertain, contract Unknown / NonIdempotent',
    handling: 'Return NeedsReview; a retry may be prepared only after a trusted host confirms the call was not executed',
  },
];
const MARKER_ROW: DecisionRow = {
  source: 'evidence/flagged_never_started',
  fact: 'A call flagged to record a start marker, with no marker in the journal',
  handling: 'The body provably never started: NotExecuted, even for Unknown / NonIdempotent; a retry still asks for a fresh approval',
};
const SUPERSEDED_ROW: DecisionRow = {
  source: 'retry/superseded',
  fact: 'A newer attempt of the same operation exists',
  handling: 'Refused as not_latest_attempt: decide on the newest attempt',
};
const LEGACY_ROW: DecisionRow = {
  source: 'retry/legacy',
  fact: 'An old ToolCall without the operation field',
  handling: 'No trustworthy stable key can be migrated: retry planning returns LegacyCall',
};

/** The rows that decide a call, given what assessSession said about it (null: the call's own result is a success). */
export function decisionRows(call: ToolCall, assessed: ToolCallAssessment | null): DecisionRow[] {
  if (assessed === null || assessed.nextStep === 'completed') return [CATEGORY_ROWS[0]!];
  if (assessed.nextStep === 'legacy') return [LEGACY_ROW];
  if (assessed.nextStep === 'superseded') return [SUPERSEDED_ROW];
  if (assessed.status === 'not_executed') {
    const outcome = assessed.result?.outcome;
    const preBody = outcome?.status === 'failed' && PRE_BODY_CATEGORIES.has(outcome.category);
    return [preBody ? CATEGORY_ROWS[1]! : MARKER_ROW];
  }
  const effect = call.operation?.contract.effect ?? ToolEffect.Unknown;
  const safe = effect === ToolEffect.ReadOnly || effect === ToolEffect.Idempotent;
  return [CATEGORY_ROWS[2]!, safe ? CATEGORY_ROWS[3]! : CATEGORY_ROWS[4]!];
}

/** What the host may do next, in one paragraph. */
export function nextStepAdvice(call: ToolCall, assessed: ToolCallAssessment | null): string {
  if (assessed === null) return 'Nothing to do: the call succeeded. Never retry it.';
  const op = call.operation;
  switch (assessed.nextStep) {
    case 'completed':
      return 'Nothing to do: another attempt of this operation succeeded. Never retry it.';
    case 'superseded':
      return 'Decide on the newest attempt of this operation instead (it is listed below).';
    case 'legacy':
      return 'This call cannot be retried (it has no stable operation key). Reconcile it with the external system by hand.';
    case 'retry_allowed':
      return (
        `A host may prepare one retry: prepareToolRetry(history, '${call.id}') and pass the plan to ` +
        `gateway.callWithOptions('${call.name}', <the recorded arguments>, { retry: plan }). The retry reuses the key ` +
        `and passes every current check again (grant, schema, guards, approval, budget).`
      );
    case 'needs_review':
      return (
        `Check the external system for the effect of this operation` +
        (op ? ` (tools that follow the guide pass '${op.taskId}:${op.key}' as their reference)` : '') +
        `. If it did not happen, a trusted host records ToolRetryReview { actor, evidence, outcome: 'not_executed' } and ` +
        `prepares the retry with it; if it did, a 'completed' review blocks retries for good. Never take a review from model output.`
      );
  }
}

// ---------------------------------------------------------------------------------------------------------------
// A light index of the journal's tool events, for showing one call (the history was validated by assessSession)

export interface CallRecord {
  readonly call: ToolCall;
  readonly event: SessionEvent;
  started: SessionEvent | null;
  resultEvent: SessionEvent | null;
  result: ToolResult | null;
}

export function indexCalls(history: readonly SessionEvent[]): Map<string, CallRecord> {
  const calls = new Map<string, CallRecord>();
  for (const event of history) {
    const k = event.kind;
    if (k.type === 'tool_call') calls.set(k.call.id, { call: k.call, event, started: null, resultEvent: null, result: null });
    else if (k.type === 'tool_started') {
      const record = calls.get(k.callId);
      if (record) record.started = event;
    } else if (k.type === 'tool_result') {
      const record = calls.get(k.result.callId);
      if (record) {
        record.resultEvent = event;
        record.result = k.result;
      }
    }
  }
  return calls;
}

/** Every attempt of the call's operation, in journal order (just the call itself for a legacy call). */
export function attemptsOf(calls: ReadonlyMap<string, CallRecord>, call: ToolCall): CallRecord[] {
  const op = call.operation;
  if (!op) return [calls.get(call.id)!];
  return [...calls.values()].filter((r) => r.call.operation?.taskId === op.taskId && r.call.operation.key === op.key);
}

export function resultWord(record: CallRecord): string {
  if (record.result === null) return 'no result';
  const o = record.result.outcome;
  return o.status === 'succeeded' ? 'succeeded' : `failed ${o.category}`;
}

export function reviewText(call: ToolCall): string | null {
  const review = call.operation?.retry?.review;
  if (!review) return null;
  return `${review.outcome} by ${clip(review.actor, 60)}: ${clip(review.evidence, 120)}`;
}
