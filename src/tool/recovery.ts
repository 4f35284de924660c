/**
 * Host-side recovery: what a confirmed history proves about one tool call (docs/design.md#recovery).
 * Pure and synchronous: no IO, no clock, no randomness. Every refusal is a ToolRetryError.
 */
import type { SessionEvent, ToolCall, ToolResult, ToolReviewRecord } from '../event/types.js';
import {
  classifyAttempt,
  collectEvidence,
  latestReview,
  locateAttempt,
  type AttemptRecord,
  type ToolRecoveryStatus,
} from './evidence.js';

import { withLateEnd } from './late-bodies.js';

export { ToolRecoveryStatus, validateToolContract } from './evidence.js';
export { prepareToolRetry } from './retry-plan.js';

export interface ToolRecoveryAssessment {
  readonly call: ToolCall;
  readonly result: ToolResult | null;
  readonly status: ToolRecoveryStatus;
  /** The event holding the call; a retry's audit points at its id. */
  readonly callEvent: SessionEvent;
  /** The body-start marker of a flagged call (docs/design.md#the-body-start-marker), if recorded. */
  readonly startedEvent: SessionEvent | null;
  readonly resultEvent: SessionEvent | null;
  /** 1-based position among the attempts of the call's operation; 1 for a legacy call. */
  readonly attempt: number;
  /** The confirmed fact behind the status, for people: e.g. "body started, no result". */
  readonly fact: string;
  /** The latest journaled review of the call, or null (docs/design.md#reviews-are-journaled-evidence). */
  readonly review: ToolReviewRecord | null;
  /** The event holding `review`. */
  readonly reviewEvent: SessionEvent | null;
  /**
   * True when a journaled `completed` review resolved the call for good: whatever its own records say, no retry
   * will ever be planned for it and it needs no one's attention.
   */
  readonly resolved: boolean;
  /**
   * How the body went on after the call's result was recorded (a deadline, a cancellation or a task stop), as the
   * journal records it: `returned` (its output was not recorded: it most likely made its write) or `threw`, and the
   * `body_ended` event; null when no such end is journaled (docs/design.md#a-body-that-outlives-its-attempt).
   */
  readonly bodyEnded: { readonly ended: 'returned' | 'threw'; readonly event: SessionEvent } | null;
}

function assessmentOf(record: AttemptRecord): ToolRecoveryAssessment {
  const { status, fact } = classifyAttempt(record);
  return {
    call: record.call,
    result: record.result,
    status,
    callEvent: record.event,
    startedEvent: record.startedEvent,
    resultEvent: record.resultEvent,
    attempt: record.attempt,
    fact: withLateEnd(fact, record),
    review: latestReview(record),
    reviewEvent: record.reviews[record.reviews.length - 1]?.event ?? null,
    resolved: latestReview(record)?.outcome === 'completed',
    bodyEnded: record.bodyRanOn ?? null,
  };
}

/**
 * The evidence pass alone, for a whole history (import runs it before writing): the physical log, every id and
 * limit, each operation's attempts and audits, and every contradiction between a start marker and a result.
 * Throws ToolRetryError `invalid_evidence` or `binding_changed`; returns nothing when the history is sound.
 */
export function checkToolEvidence(history: readonly SessionEvent[]): void {
  collectEvidence(history);
}

/**
 * Validates the whole confirmed history of one session (the first violation in physical order wins, even one
 * unrelated to `callId`), then classifies `callId`. Throws ToolRetryError: `invalid_evidence` for missing,
 * over-limit or corrupt evidence or an unknown call; `binding_changed` when a later attempt of an operation changed
 * its tool, arguments or contract; `not_latest_attempt` when a newer attempt exists; `completed` when another
 * attempt of the operation succeeded.
 */
export function inspectToolRecovery(history: readonly SessionEvent[], callId: string): ToolRecoveryAssessment {
  return assessmentOf(locateAttempt(collectEvidence(history, callId), callId));
}
