/**
 * Reviews as journaled evidence (docs/design.md#reviews-are-journaled-evidence): the one way a review enters a
 * journal. Reconcilers, which journal their answers through it, are in reconcile.ts.
 */
import { DecisionError, InvalidInputError } from '../errors.js';
import {
  TOOL_REVIEW_OUTCOMES,
  TOOL_REVIEW_SOURCES,
  type SessionEvent,
  type ToolReviewOutcome,
  type ToolReviewRecord,
  type ToolReviewSource,
} from '../event/types.js';
import { checkId, isValidText, newTurnId, type CallId } from '../ids.js';
import { LIMITS } from '../limits.js';
import { hasVisibleText } from '../text.js';
import type { SessionOwner } from '../store/types.js';
import { journalingReview, runningHere } from './attempt-rules.js';
import { reviewableAttempt } from './evidence.js';
import { journalPendingBodyEnds, refuseAfterLateReturn } from './late-bodies.js';
import { commitAs } from '../store/owner-commit.js';

/**
 * recordToolReview's refusals (ToolRetryError codes) that say the review no longer applies to the call: it was
 * resolved, is not in doubt, or is no longer its operation's latest attempt (as opposed to a damaged journal or a
 * fenced owner).
 */
export const NO_LONGER_REVIEWABLE: ReadonlySet<string> = new Set(['completed', 'not_in_doubt', 'not_latest_attempt', 'legacy_call']);

/** What a host hands recordToolReview. It must come from a trusted person or process, never from model output. */
export interface ToolReviewInput {
  readonly actor: string;
  readonly outcome: ToolReviewOutcome;
  readonly evidence: string;
  /** Default 'human'. reconcileUncertainCalls records 'reconciler'. */
  readonly source?: ToolReviewSource;
  /** The decision this review carries out (for example an inbox entry), kept in the journal with it. */
  readonly decisionId?: string;
  /** The turn the review event is journaled in. Default: a fresh turn id. */
  readonly turnId?: string;
  /**
   * `not_executed` although the journal records that the call's body went on after its result and returned: the
   * person (or the reconciler) checked the outside system. Without it such a review is refused (`decision_stale`), as
   * the decision inbox refuses it; journalInboxReviews and the reconcile pass set it for what they journal.
   */
  readonly despiteLateReturn?: boolean;
}

function text(field: string, value: unknown): string {
  if (typeof value !== 'string' || !isValidText(value)) {
    throw new InvalidInputError(field, `must be 1..${LIMITS.maxTextBytes} bytes of non-blank text`);
  }
  return checkId<string>(field, value);
}

function checkInput(review: ToolReviewInput): Omit<ToolReviewRecord, 'callId'> & { turnId: string } {
  if (typeof review !== 'object' || review === null) throw new InvalidInputError('review', 'must be an object { actor, outcome, evidence }');
  const actor = text('review.actor', review.actor);
  const evidence = text('review.evidence', review.evidence);
  if (!TOOL_REVIEW_OUTCOMES.includes(review.outcome)) {
    throw new InvalidInputError('review.outcome', `must be one of ${TOOL_REVIEW_OUTCOMES.join(', ')}`);
  }
  const source = review.source ?? 'human';
  if (!TOOL_REVIEW_SOURCES.includes(source)) throw new InvalidInputError('review.source', `must be one of ${TOOL_REVIEW_SOURCES.join(', ')}`);
  // A person's review made here: a name and evidence a reader can see. One from the inbox was checked when it was
  // decided, and is journaled as it was decided.
  if (source === 'human' && review.decisionId === undefined) {
    for (const [field, value] of [['review.actor', actor], ['review.evidence', evidence]] as const) {
      if (!hasVisibleText(value)) throw new InvalidInputError(field, 'must hold a character a reader sees, not white space or invisible characters alone');
    }
  }
  const turnId = review.turnId === undefined ? newTurnId() : text('review.turnId', review.turnId);
  const base = { actor, outcome: review.outcome, evidence, source, turnId };
  return review.decisionId === undefined ? base : { ...base, decisionId: text('review.decisionId', review.decisionId) };
}

/**
 * Journals a review of `callId` (docs/design.md#reviews-are-journaled-evidence), decided on `history`, the
 * session's confirmed journal as `store.loadHistory` returned it. The call must be the latest attempt of its
 * operation and its outcome in doubt; otherwise ToolRetryError (`completed`, `not_in_doubt`, `not_latest_attempt`,
 * `legacy_call`, `invalid_evidence`). The review is written in one transaction that checks the call is still the
 * latest attempt and that the journal still ends where `history` ends (StoreConflictError `history_changed`:
 * load it again). Returns the review's event.
 *
 * A `completed` review resolves the call for good; a `not_executed` one is used by prepareToolRetry when the host
 * passes none; an `uncertain` one is recorded and unblocks nothing.
 */
export async function recordToolReview(
  owner: SessionOwner,
  history: readonly SessionEvent[],
  callId: string,
  review: ToolReviewInput,
): Promise<SessionEvent> {
  const input = checkInput(review);
  const id = checkId<CallId>('callId', callId);
  if (!Array.isArray(history) || history.length === 0) throw new InvalidInputError('history', 'must be the session\'s confirmed journal (it is empty)');
  if (history[0]!.sessionId !== owner.sessionId) {
    throw new InvalidInputError('history', `is the journal of session ${history[0]!.sessionId}, not of ${owner.sessionId}`);
  }
  // A body end this process knows of and no journal has taken yet goes in first: the review's commit then finds the
  // journal past `history` (history_changed), and the review is decided again on a history that shows it. One of
  // this call that cannot go in yet fails the review with the reason: it would be decided blind to it.
  const left = await journalPendingBodyEnds(owner);
  if (left.has(id)) throw left.get(id);
  if (review.despiteLateReturn !== undefined && typeof review.despiteLateReturn !== 'boolean') {
    throw new InvalidInputError('review.despiteLateReturn', 'must be a boolean');
  }
  if (input.outcome === 'not_executed' && review.despiteLateReturn !== true) refuseAfterLateReturn(history, id);
  const record = reviewableAttempt(history, id, input.outcome);
  const running = runningHere(owner, id);
  if (running !== null) {
    throw new DecisionError(
      'call_in_flight',
      id,
      running === 'late_body'
        ? `call ${id} is still running in this process: its result was recorded when it was interrupted, and its body has not ended; review it once it has (the journal records it)`
        : `call ${id} is still running in this process: no result is recorded yet; review it once it has one`,
    );
  }
  const op = record.call.operation!;
  const { turnId, ...fields } = input;
  const kind = { type: 'tool_review', review: { callId: id, ...fields } } as const;
  const receipt = await journalingReview(owner, id, record.reviews.length + 1, input.outcome === 'completed', () => commitAs(owner, {
    events: [{ turnId, kind }],
    expectLatestAttempt: { taskId: op.taskId, key: op.key, callId: id },
    expectLastSeq: history[history.length - 1]!.seq,
    // Settled for good: the operation's approval requests can never be used, and are superseded with the review.
    ...(input.outcome === 'completed' ? { approval: { resolve: { taskId: op.taskId, key: op.key, at: new Date().toISOString() } } } : {}),
  }));
  return receipt.events[0]!;
}
