/**
 * The one evidence pass shared by inspectToolRecovery, prepareToolRetry and assessSession
 * (docs/design.md#evidence-validation). It validates a whole confirmed history once and returns it indexed; every later decision reads the index.
 * Internal to the tool layer: hosts use the functions in recovery.ts, retry-plan.ts and assess.ts.
 */
import { encodeEvent } from '../event/codec.js';
import { knownWireBytes, type WireBytesOf } from '../event/decoded-history.js';
import { validatePhysicalLog } from '../event/physical-log.js';
import {
  TOOL_EFFECTS,
  TOOL_REVIEW_OUTCOMES,
  type ToolReviewOutcome,
  type SessionEvent,
  type ToolCall,
  type ToolEffectContract,
  type ToolOperation,
  type ToolResult,
  type ToolRetryReview,
  type ToolReviewRecord,
} from '../event/types.js';
import { hasLoneSurrogate, isValidText, type EventId, type SessionId } from '../ids.js';
import { jsonEquals } from '../json/canonical.js';
import { LIMITS } from '../limits.js';
import { describeValue, hasVisibleText, utf8Length } from '../text.js';
import { ToolRetryError } from '../errors.js';
import { bodyCouldOutlive, bodyEndOf } from './late-bodies.js';
import { linkSettledRepeats } from './repeats.js';
import {
  DENIAL_CATEGORIES,
  ToolRecoveryStatus,
  evidenceFactsOf,
  evidenceRuleFor,
  retryRuleFor,
  type EvidenceRuleId,
  type RetryFacts,
  type RetryRule,
} from './retry-policy.js';

export { ToolRecoveryStatus };

/** One attempt (one ToolCall) as the evidence pass found it. Mutable only while the pass runs. */
export interface AttemptRecord {
  readonly call: ToolCall;
  readonly event: SessionEvent;
  result: ToolResult | null;
  resultEvent: SessionEvent | null;
  startedEvent: SessionEvent | null;
  /** The logical operation this call is an attempt of; null for a legacy call. */
  readonly operation: OperationRecord | null;
  /** 1-based position among the operation's attempts; 1 for a legacy call. */
  readonly attempt: number;
  /**
   * Journaled reviews of this call, in physical order; the last one is the one recovery reads. A review a retry plan
   * carried into this call's retry (carriedReviewOf) is among them, at the retry's call event.
   */
  readonly reviews: ReviewEntry[];
  /** The first journaled end of a body that outlived its result and returned or threw (late-bodies.ts), if any. */
  bodyRanOn?: { readonly ended: 'returned' | 'threw'; readonly event: SessionEvent };
  /**
   * For a call the in-doubt guard refused: the attempt whose success or `completed` review settled an identical
   * earlier operation it may have repeated (linkSettledRepeats, repeats.ts).
   */
  repeatedCompleted?: AttemptRecord;
  /**
   * For a call the in-doubt guard refused and no settled write links: the latest attempt of an identical earlier
   * operation not settled as made, the write it may repeat (linkSettledRepeats).
   */
  repeatedOpen?: AttemptRecord;
  /**
   * For the latest attempt of a write not made: the attempt of an identical repeat, begun after it and refused by the
   * in-doubt guard, whose retry has made the write since (linkSettledRepeats).
   */
  madeByRepeat?: AttemptRecord;
  /**
   * For the latest attempt of a write decided against (denied) and not made: the attempt of an identical call asked
   * anew after that denial that has made a write of its own, which a retry of this one would make a second time
   * (linkSettledRepeats; guidance only).
   */
  askedAnew?: AttemptRecord;
  /**
   * For the latest attempt of a write not made, when it never ran its body: the latest attempt of an identical repeat
   * that stood for it, whose retry ran or may have and is not settled, so it may have made this write (linkSettledRepeats;
   * guidance only: the in-doubt guard refuses a retry of this one meanwhile).
   */
  openRepeat?: AttemptRecord;
  /**
   * For the latest attempt of a write not made that waits on an identical one (a refused repeat, or a write whose
   * repeat's retry ran): the latest attempt of an identical operation in doubt, maybe still running, or due, which
   * makes the in-doubt guard refuse a retry of this one (linkSettledRepeats).
   */
  waitsOn?: AttemptRecord;
}

/** One journaled review and the event holding it: a `tool_review`, or the retry's call that carried it. */
export interface ReviewEntry {
  readonly review: ToolReviewRecord;
  readonly event: SessionEvent;
}

export interface OperationRecord {
  readonly taskId: string;
  readonly key: string;
  /** In physical order; the last one is the latest attempt. */
  readonly attempts: AttemptRecord[];
}

export interface SessionEvidence {
  readonly sessionId: SessionId;
  readonly eventCount: number;
  readonly calls: ReadonlyMap<string, AttemptRecord>;
  /** Every call in physical order. */
  readonly attempts: readonly AttemptRecord[];
}

function invalid(detail: string): never {
  throw new ToolRetryError('invalid_evidence', detail);
}

/** The operations map key: a pair, not a concatenation, so no (task, key) split can collide with another. */
export const operationId = (taskId: string, key: string): string => JSON.stringify([taskId, key]);

/** The event id of the call of `record`'s operation's first attempt: the operation's origin (ToolBodyRequest.operationOrigin). */
export const operationOriginOf = (record: AttemptRecord): EventId => (record.operation?.attempts ?? [record])[0]!.event.eventId;

/** Two contracts are one: the same effect and revision. */
export const sameContract = (a: ToolEffectContract, b: ToolEffectContract): boolean =>
  a.effect === b.effect && a.revision === b.revision;

/** A contract is usable as evidence: effect one of the four, revision valid text. Throws invalid_evidence. */
export function validateToolContract(contract: ToolEffectContract): void {
  if (typeof contract !== 'object' || contract === null) invalid('the tool contract is missing');
  if (!TOOL_EFFECTS.includes(contract.effect)) invalid(`unknown tool effect ${JSON.stringify(contract.effect)}`);
  if (!isValidText(contract.revision)) invalid('the contract revision must be 1..1024 bytes of non-blank text');
}

/** A host review: actor and evidence valid text, outcome one of the three. Throws invalid_evidence. */
export function validateReview(review: ToolRetryReview, where = 'the review'): void {
  if (typeof review !== 'object' || review === null) invalid(`${where} is not an object`);
  if (!isValidText(review.actor)) invalid(`${where} actor must be 1..1024 bytes of non-blank text`);
  if (!isValidText(review.evidence)) invalid(`${where} evidence must be 1..1024 bytes of non-blank text`);
  if (!TOOL_REVIEW_OUTCOMES.includes(review.outcome)) {
    invalid(`${where} outcome ${JSON.stringify(review.outcome)} is not one of ${TOOL_REVIEW_OUTCOMES.join(', ')}`);
  }
}

/**
 * A review a host passes in (prepareToolRetry): the journal's rules, and the rule recordToolReview applies to the same
 * text, so the two ways a review reaches the journal accept the same text (U+0000 is refused, as in every id).
 */
export function validatePassedReview(review: ToolRetryReview): void {
  validateReview(review);
  if (review.actor.includes('\u0000') || review.evidence.includes('\u0000')) invalid('the review actor and evidence must not contain U+0000');
  if (!hasVisibleText(review.actor) || !hasVisibleText(review.evidence)) {
    invalid('the review actor and evidence must hold a character a reader sees, not white space or invisible characters alone');
  }
}

function validateOperation(op: ToolOperation, at: string): void {
  if (!isValidText(op.taskId)) invalid(`${at}: operation task id must be 1..1024 bytes of non-blank text`);
  if (!isValidText(op.key)) invalid(`${at}: operation key must be 1..1024 bytes of non-blank text`);
  try {
    validateToolContract(op.contract);
  } catch (error) {
    invalid(`${at}: ${error instanceof ToolRetryError ? error.detail : 'malformed contract'}`);
  }
  const retry = op.retry;
  if (retry === undefined || retry === null) return;
  if (!isValidText(retry.callId)) invalid(`${at}: retry audit call id must be 1..1024 bytes of non-blank text`);
  if (!isValidText(retry.eventId)) invalid(`${at}: retry audit event id must be 1..1024 bytes of non-blank text`);
  if (retry.review !== undefined && retry.review !== null) validateReview(retry.review, `${at}: retry audit review`);
}

function argumentsEqual(a: ToolCall['arguments'], b: ToolCall['arguments']): boolean {
  try {
    return jsonEquals(a, b);
  } catch {
    return false;
  }
}

/** docs/design.md#evidence-validation step 1, history part (the call id part is checked by the caller in the same step). */
function checkEventCount(history: readonly SessionEvent[]): void {
  if (!Array.isArray(history)) invalid(`the history must be an array of session events (loadHistory's), got ${describeValue(history)}`);
  if (history.length === 0) invalid('the history is empty');
  if (history.length > LIMITS.maxHistoryEvents) {
    invalid(`the history holds ${history.length} events, at most ${LIMITS.maxHistoryEvents} allowed`);
  }
}

/**
 * docs/design.md#evidence-validation step 2: compact JSON of the wire form of the whole array. Serialized in chunks (a chunk's text is
 * its events joined by commas inside brackets, so the sum is exact) to refuse an oversized history early without
 * building one huge string, while staying close to the speed of a single JSON.stringify.
 */
const SIZE_CHUNK = 256;
function checkSerializedSize(history: readonly SessionEvent[]): void {
  const sizeOf = knownWireBytes(history);
  const chunks = Math.ceil(history.length / SIZE_CHUNK);
  let bytes = 2 + (chunks - 1);
  for (let start = 0; start < history.length; start += SIZE_CHUNK) {
    // A chunk of events read back from a store: the sizes of their stored texts, which are their compact wire JSON.
    const known = storedChunkBytes(sizeOf, start, Math.min(start + SIZE_CHUNK, history.length));
    if (known !== undefined) {
      bytes += known;
      if (bytes > LIMITS.maxHistoryBytes) {
        invalid(`the serialized history exceeds ${LIMITS.maxHistoryBytes} bytes (by event ${Math.min(start + SIZE_CHUNK, history.length) - 1})`);
      }
      continue;
    }
    let text: string | undefined;
    try {
      text = JSON.stringify(history.slice(start, start + SIZE_CHUNK).map((e) => encodeEvent(e)));
    } catch (error) {
      invalid(`events from ${start} cannot be serialized: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (typeof text !== 'string') invalid(`events from ${start} cannot be serialized`);
    bytes += utf8Length(text) - 2;
    if (bytes > LIMITS.maxHistoryBytes) {
      invalid(`the serialized history exceeds ${LIMITS.maxHistoryBytes} bytes (by event ${Math.min(start + SIZE_CHUNK, history.length) - 1})`);
    }
  }
}

/** The text size of events [start, end) joined by commas, when every one has a recorded stored size; else undefined. */
function storedChunkBytes(sizeOf: WireBytesOf, start: number, end: number): number | undefined {
  let sum = end - start - 1;
  for (let i = start; i < end; i++) {
    const size = sizeOf(i);
    if (size === undefined) return undefined;
    sum += size;
  }
  return sum;
}

function checkPhysicalLog(history: readonly SessionEvent[]): SessionId {
  const sessionId = history[0]!.sessionId;
  try {
    validatePhysicalLog(sessionId, history);
  } catch (error) {
    invalid(`physical log: ${error instanceof Error ? error.message : String(error)}`);
  }
  return sessionId;
}

/**
 * The evidence checks, in order (docs/design.md#evidence-validation), the start markers included. When `callId` is
 * given its text is checked right after the event count. The first violation in physical order wins, even one unrelated to the call asked about.
 */
export function collectEvidence(history: readonly SessionEvent[], callId?: string): SessionEvidence {
  checkEventCount(history);
  if (callId !== undefined && !isValidText(callId)) invalid('the call id must be 1..1024 bytes of non-blank text');
  checkSerializedSize(history);
  const sessionId = checkPhysicalLog(history);
  // Stricter than Jingwei for Rust (which leaves envelope ids unchecked): they follow the same text rule as every other id.
  if (!isValidText(sessionId)) invalid('the session id must be 1..1024 bytes of non-blank text');

  const calls = new Map<string, AttemptRecord>();
  const operations = new Map<string, OperationRecord>();
  const attempts: AttemptRecord[] = [];
  for (const event of history) {
    const at = `event ${event.seq}`;
    if (!isValidText(event.eventId)) invalid(`${at}: event id must be 1..1024 bytes of non-blank text`);
    if (!isValidText(event.turnId)) invalid(`${at}: turn id must be 1..1024 bytes of non-blank text`);
    const kind = event.kind;
    if (kind.type === 'tool_call') {
      const call = kind.call;
      if (!isValidText(call.id)) invalid(`${at}: call id must be 1..1024 bytes of non-blank text`);
      if (typeof call.name !== 'string' || call.name.length === 0 || hasLoneSurrogate(call.name)) {
        invalid(`${at}: call ${call.id} has an empty or malformed tool name`);
      }
      if (utf8Length(call.name) > LIMITS.maxToolNameBytes) {
        invalid(`${at}: tool name is over ${LIMITS.maxToolNameBytes} bytes`);
      }
      if (calls.has(call.id)) invalid(`${at}: call id ${call.id} is recorded twice`);
      let operation: OperationRecord | null = null;
      let attempt = 1;
      const op = call.operation;
      if (op !== undefined && op !== null) {
        validateOperation(op, at);
        const id = operationId(op.taskId, op.key);
        const existing = operations.get(id);
        const previous = existing?.attempts[existing.attempts.length - 1];
        if (existing !== undefined && previous !== undefined) {
          const prevCall = previous.call;
          const prevOp = prevCall.operation!;
          if (prevCall.name !== call.name) {
            throw new ToolRetryError('binding_changed', `${at}: attempt ${call.id} renames the tool of operation ${op.key}`);
          }
          if (!argumentsEqual(prevCall.arguments, call.arguments)) {
            throw new ToolRetryError('binding_changed', `${at}: attempt ${call.id} changes the arguments of operation ${op.key}`);
          }
          if (!sameContract(prevOp.contract, op.contract)) {
            throw new ToolRetryError('binding_changed', `${at}: attempt ${call.id} changes the contract of operation ${op.key}`);
          }
          const retry = op.retry;
          if (retry === undefined || retry === null) {
            invalid(`${at}: attempt ${call.id} reuses operation ${op.key} without a retry audit`);
          }
          if (retry.callId !== prevCall.id || retry.eventId !== previous.event.eventId) {
            invalid(`${at}: the retry audit of ${call.id} does not point at the previous attempt ${prevCall.id}`);
          }
          const carried = carriedReviewOf(previous, retry.review ?? null, event);
          if (carried !== null) previous.reviews.push(carried);
          operation = existing;
          attempt = existing.attempts.length + 1;
        } else {
          if (op.retry !== undefined && op.retry !== null) {
            invalid(`${at}: the retry audit of ${call.id} points at no earlier attempt of operation ${op.key}`);
          }
          operation = { taskId: op.taskId, key: op.key, attempts: [] };
          operations.set(id, operation);
        }
      }
      const record: AttemptRecord = {
        call,
        event,
        result: null,
        resultEvent: null,
        startedEvent: null,
        operation,
        attempt,
        reviews: [],
      };
      operation?.attempts.push(record);
      calls.set(call.id, record);
      attempts.push(record);
    } else if (kind.type === 'tool_started') {
      const record = calls.get(kind.callId);
      if (record === undefined) invalid(`${at}: tool_started for ${kind.callId}, which has no earlier call`);
      if (record.call.operation?.startMarker !== true) {
        invalid(`${at}: tool_started for ${kind.callId}, whose call is not flagged to record a start marker`);
      }
      if (record.event.turnId !== event.turnId) invalid(`${at}: tool_started for ${kind.callId} is in another turn`);
      if (record.result !== null) invalid(`${at}: tool_started for ${kind.callId} comes after its result`);
      if (record.startedEvent !== null) invalid(`${at}: a second tool_started for ${kind.callId}`);
      // A stale attempt cannot start: the runtime writes a marker only while its call is the latest attempt.
      const newer = newerAttempt(record);
      if (newer !== null) {
        invalid(`${at}: tool_started for ${kind.callId} comes after a newer attempt ${newer.call.id} of its operation; a stale attempt cannot start`);
      }
      record.startedEvent = event;
    } else if (kind.type === 'tool_result') {
      const result = kind.result;
      const record = calls.get(result.callId);
      if (record === undefined) invalid(`${at}: result for ${result.callId}, which has no earlier call`);
      if (record.event.turnId !== event.turnId) invalid(`${at}: result for ${result.callId} is in another turn`);
      if (record.result !== null) invalid(`${at}: a second result for ${result.callId}`);
      const newer = newerAttempt(record);
      if (newer !== null && !settlesStaleAttempt(record, result)) {
        invalid(
          `${at}: result for ${result.callId} comes after a newer attempt ${newer.call.id} of its operation, ` +
            'yet its body neither started before that attempt nor failed before starting',
        );
      }
      record.result = result;
      record.resultEvent = event;
      // Contradictions fail closed: a result that disagrees with the start marker is evidence no runtime wrote.
      const rule = evidenceRuleFor(evidenceFactsOf(record));
      if (rule.status === 'invalid') invalid(`${at}: call ${result.callId}: ${rule.fact(result.outcome)}`);
    } else if (kind.type === 'tool_review') {
      checkReviewEvent(calls, kind.review, at).reviews.push({ review: kind.review, event });
    } else if (kind.type === 'custom') {
      // Read only to withhold trust (an overtaken review, below): a journal of an earlier version may hold one a host
      // appended itself.
      const end = bodyEndOf(kind);
      const ended = end?.ended === 'returned' || end?.ended === 'threw' ? end.ended : null;
      const record = ended !== null ? calls.get(end!.callId) : undefined;
      if (record !== undefined && ended !== null && bodyCouldOutlive(record.result)) record.bodyRanOn ??= { ended, event };
    }
  }
  linkSettledRepeats(history, attempts, operations.values());
  return { sessionId, eventCount: history.length, calls, attempts };
}

/** The latest attempt of the record's operation so far in the pass, if it is not the record itself. */
function newerAttempt(record: AttemptRecord): AttemptRecord | null {
  const attempts = record.operation?.attempts;
  const latest = attempts?.[attempts.length - 1];
  return latest === undefined || latest === record ? null : latest;
}

/**
 * Whether a result may be written after a newer attempt of its operation exists. For a call flagged to record a
 * start marker, only when the journal shows the body started while its call was the latest (a start marker, which
 * the pass already refused after a newer attempt) or never started (a failure recorded before the body, such as a
 * superseded or denied call, with no marker). Anything else means a body ran beside a newer attempt
 * (docs/design.md#a-stale-attempt-cannot-start). An unflagged call (a journal of the original) records no start,
 * so its late result cannot be placed and is read as before.
 */
function settlesStaleAttempt(record: AttemptRecord, result: ToolResult): boolean {
  if (record.call.operation?.startMarker !== true || record.startedEvent !== null) return true;
  return evidenceRuleFor({ flagged: true, marker: false, result: result.outcome }).status === ToolRecoveryStatus.NotExecuted;
}

/**
 * A journaled review is evidence only when recordToolReview could have written it
 * (docs/design.md#reviews-are-journaled-evidence): its texts are valid, its call exists earlier and has an
 * operation, and at that point the call was the latest attempt of its operation, no attempt of it had succeeded,
 * its own records left its outcome uncertain, and no earlier review had resolved it as completed.
 */
function checkReviewEvent(calls: ReadonlyMap<string, AttemptRecord>, review: ToolReviewRecord, at: string): AttemptRecord {
  if (!isValidText(review.callId)) invalid(`${at}: review call id must be 1..1024 bytes of non-blank text`);
  validateReview(review, `${at}: the review`);
  if (review.source !== 'human' && review.source !== 'reconciler') invalid(`${at}: review source ${JSON.stringify(review.source)} is not human or reconciler`);
  if (review.decisionId !== undefined && !isValidText(review.decisionId)) invalid(`${at}: review decision id must be 1..1024 bytes of non-blank text`);
  const record = calls.get(review.callId);
  if (record === undefined) invalid(`${at}: review of ${review.callId}, which has no earlier call`);
  const operation = record.operation;
  if (operation === null) invalid(`${at}: review of ${review.callId}, a legacy call without an operation`);
  const latest = operation.attempts[operation.attempts.length - 1]!;
  if (latest !== record) invalid(`${at}: review of ${review.callId}, which attempt ${latest.call.id} had already superseded`);
  if (succeededSibling(record) !== null) invalid(`${at}: review of ${review.callId}, whose operation had already succeeded`);
  const rule = evidenceRuleFor(evidenceFactsOf(record));
  if (rule.status === 'invalid' || !inDoubtForReview(record, rule.status, review.outcome)) {
    invalid(`${at}: review of ${review.callId}, whose outcome was not in doubt (${rule.status === 'invalid' ? 'invalid' : rule.status})`);
  }
  if (latestReview(record)?.outcome === 'completed') invalid(`${at}: review of ${review.callId}, which a completed review had already resolved`);
  return record;
}

/**
 * The review a retry plan carried (its audit's review), as a review of the attempt it retries
 * (docs/design.md#a-plans-review-is-journaled-with-its-retry): a `not_executed` review the host passed to
 * prepareToolRetry is the same decision as one journaled before the retry, so every reader counts it as that attempt's
 * review, at the retry's call event. Only where recordToolReview could have journaled it there, and only when it adds
 * something: a plan built from the attempt's own journaled `not_executed` review carries that review again.
 */
function carriedReviewOf(previous: AttemptRecord, review: ToolRetryReview | null, event: SessionEvent): ReviewEntry | null {
  if (review === null || review.outcome !== 'not_executed') return null;
  if (effectiveReview(previous, null)?.outcome === 'not_executed' || latestReview(previous)?.outcome === 'completed') return null;
  if (succeededSibling(previous) !== null) return null;
  const rule = evidenceRuleFor(evidenceFactsOf(previous));
  if (rule.status === 'invalid' || !inDoubtForReview(previous, rule.status, review.outcome)) return null;
  const record: ToolReviewRecord = { callId: previous.call.id, actor: review.actor, outcome: review.outcome, evidence: review.evidence, source: 'human' };
  return { review: record, event };
}

/** The latest journaled review of an attempt, or null. */
export function latestReview(record: AttemptRecord): ToolReviewRecord | null {
  return record.reviews[record.reviews.length - 1]?.review ?? null;
}

/**
 * The review a retry decision reads (docs/design.md#reviews-are-journaled-evidence): a journaled `completed` review
 * resolves the call for good, whatever the host passes; otherwise the host's review when it passes one, else the
 * latest journaled review (a `not_executed` one unblocks as a passed one would; `uncertain` unblocks nothing).
 */
export function effectiveReview(record: AttemptRecord, hostReview: ToolRetryReview | null): ToolRetryReview | null {
  const journaled = latestReview(record);
  if (journaled?.outcome === 'completed') return journaled;
  if (hostReview !== null) return hostReview;
  return journaled?.outcome === 'not_executed' && overtaken(record) ? null : journaled;
}

/**
 * Whether the call's own evidence came after its latest journaled review: its start marker, its result, or the end
 * of a body that outlived its result. A `not_executed` review made without that evidence is not used (the decision
 * inbox marks such reviews stale the same way); the call needs a review again.
 */
function overtaken(record: AttemptRecord): boolean {
  const seen = record.reviews[record.reviews.length - 1]?.event.seq;
  if (seen === undefined) return false;
  return (record.startedEvent?.seq ?? -1) > seen || (record.resultEvent?.seq ?? -1) > seen || (record.bodyRanOn?.event.seq ?? -1) > seen;
}

/**
 * The call exists and the retry table's position rows do not refuse it: it is the latest attempt and no other
 * attempt of its operation succeeded (`not_latest_attempt` / `completed` otherwise).
 */
export function locateAttempt(evidence: SessionEvidence, callId: string): AttemptRecord {
  const record = evidence.calls.get(callId);
  if (record === undefined) invalid(`call ${callId} is not in the history`);
  if (record.operation === null) return record;
  const { rule, reason } = decideRetry(record, null);
  if (rule.position && rule.refusal !== null) throw new ToolRetryError(rule.refusal, reason);
  return record;
}

/** Another attempt of the same operation with a success result, or null. */
export function succeededSibling(record: AttemptRecord): AttemptRecord | null {
  for (const other of record.operation?.attempts ?? []) {
    if (other !== record && other.result?.outcome.status === 'succeeded') return other;
  }
  return null;
}

export interface Classification {
  readonly status: ToolRecoveryStatus;
  /** The confirmed fact behind the status, e.g. "body started, no result". */
  readonly fact: string;
  /** The evidence-table row that decided it. */
  readonly rule: EvidenceRuleId;
}

/**
 * The evidence table (retry-policy.ts): for a flagged call the start marker, not the failure category, decides
 * whether the body may have run; unflagged calls follow the category. `retryable` is never read. A contradiction
 * was refused by collectEvidence, so it is never seen here.
 */
export function classifyAttempt(record: AttemptRecord): Classification {
  const rule = evidenceRuleFor(evidenceFactsOf(record));
  if (rule.status === 'invalid') invalid(`call ${record.call.id}: ${rule.fact(record.result?.outcome ?? null)}`);
  return { status: rule.status, fact: rule.fact(record.result?.outcome ?? null), rule: rule.id };
}

/** The retry table's facts for one attempt: its classification, effect, place in its operation, and a review. */
function retryFactsOf(record: AttemptRecord, review: ToolReviewOutcome | null): RetryFacts {
  const { status, fact } = classifyAttempt(record);
  const operation = record.operation;
  const latest = operation === null ? record : operation.attempts[operation.attempts.length - 1]!;
  const sibling = succeededSibling(record);
  return {
    callId: record.call.id,
    attempt: record.attempt,
    status,
    fact,
    effect: operation === null ? null : record.call.operation!.contract.effect,
    review,
    newer: latest === record ? null : { attempt: latest.attempt, callId: latest.call.id },
    succeededSibling: sibling === null ? null : { attempt: sibling.attempt, callId: sibling.call.id },
    repeatedCompleted: record.repeatedCompleted === undefined ? null : { attempt: record.repeatedCompleted.attempt, callId: record.repeatedCompleted.call.id },
    madeByRepeat: record.madeByRepeat === undefined ? null : { attempt: record.madeByRepeat.attempt, callId: record.madeByRepeat.call.id },
    waitsOn: record.waitsOn === undefined ? null : { attempt: record.waitsOn.attempt, callId: record.waitsOn.call.id },
  };
}

/** The retry-table row for one attempt. */
export function decideRetry(record: AttemptRecord, review: ToolReviewOutcome | null): { rule: RetryRule; reason: string } {
  const facts = retryFactsOf(record, review);
  const rule = retryRuleFor(facts);
  return { rule, reason: rule.reason(facts) };
}

/**
 * The earlier attempt whose outcome is still open for the operation of `record`, its latest attempt
 * (docs/design.md#attention-means-attention): an attempt whose body may have run, with no success since and no review
 * settling it, stays open through later attempts refused before their bodies, as the attention index keeps it. Null
 * when nothing before `record` is open, when `record` is not its operation's latest attempt, or when a review of
 * `record` itself settled the operation.
 */
export function earlierOpenAttempt(record: AttemptRecord): AttemptRecord | null {
  const own = latestReview(record)?.outcome;
  return own === 'completed' || own === 'not_executed' ? null : openBeforeOwnReview(record);
}

/** earlierOpenAttempt as it was before any review of `record` itself: what such a review is about. */
export function openBeforeOwnReview(record: AttemptRecord): AttemptRecord | null {
  const attempts = record.operation?.attempts;
  if (attempts === undefined || attempts[attempts.length - 1] !== record) return null;
  let open: AttemptRecord | null = null;
  for (const earlier of attempts) {
    if (earlier === record) break;
    const review = latestReview(earlier)?.outcome;
    if (review === 'completed' || review === 'not_executed') open = null;
    else if (classifyAttempt(earlier).status === ToolRecoveryStatus.OutcomeUnknown) open = earlier;
  }
  return open;
}

/**
 * The earlier attempt of `record`'s operation whose write a `not_executed` review left due, when `record`, its
 * operation's latest attempt, and every attempt since the review never ran their bodies and were not denied (a grant
 * withdrawn, an approver down, a cancel after the start marker before the body was called): nothing has made the
 * write, and nobody decided against it (docs/design.md#the-attention-index, as the index's `reviewed_not_executed`
 * keeps it). Null otherwise.
 */
export function earlierDueAttempt(record: AttemptRecord): AttemptRecord | null {
  const attempts = record.operation?.attempts;
  if (attempts === undefined || attempts[attempts.length - 1] !== record || record.reviews.length > 0) return null;
  let due: AttemptRecord | null = null;
  for (const attempt of attempts) {
    const review = latestReview(attempt)?.outcome;
    if (review === 'not_executed') due = attempt;
    else if (review !== undefined || !refusedWithoutDenial(attempt)) due = null;
  }
  return due === record ? null : due;
}

/**
 * An attempt whose result says its body never ran, for a reason other than a denial: refused before its start marker,
 * or stopped after it before its body was called (a cancel, a deadline, a close while the marker was written).
 */
function refusedWithoutDenial(attempt: AttemptRecord): boolean {
  const outcome = attempt.result?.outcome;
  return outcome?.status === 'failed' && !DENIAL_CATEGORIES.has(outcome.category) && classifyAttempt(attempt).status === ToolRecoveryStatus.NotExecuted;
}

/**
 * Whether a review can be about `record`, the latest attempt of its operation, of evidence status `status`: its own
 * outcome is unknown, or it never ran after an earlier attempt that may have, which is where the operation's doubt is
 * decided (docs/design.md#attention-means-attention). A `completed` review also when a `not_executed` review had
 * settled that earlier attempt: a colleague who finds the write was made after all (a retry refused before its body
 * since) must be able to say so, and the earlier attempt, no longer the latest, cannot be reviewed. Only `completed`:
 * any other review there would be read as about an attempt that never ran, and retry the operation.
 */
function inDoubtForReview(record: AttemptRecord, status: ToolRecoveryStatus, outcome: ToolReviewOutcome): boolean {
  if (status === ToolRecoveryStatus.OutcomeUnknown) return true;
  if (status !== ToolRecoveryStatus.NotExecuted) return false;
  return earlierOpenAttempt(record) !== null || (outcome === 'completed' && earlierMayHaveRun(record));
}

/**
 * Whether an attempt of `record`'s operation before it may have made the write by its own records, and no review
 * said it completed (the operation resolved for good then).
 */
function earlierMayHaveRun(record: AttemptRecord): boolean {
  const attempts = record.operation?.attempts ?? [];
  const earlier = attempts.slice(0, Math.max(attempts.indexOf(record), 0));
  if (earlier.some((a) => a.reviews.some(({ review }) => review.outcome === 'completed'))) return false;
  return earlier.some((a) => classifyAttempt(a).status === ToolRecoveryStatus.OutcomeUnknown);
}

/**
 * The call's place and state allow a review: the latest attempt, its outcome in doubt (or its operation's, through an
 * earlier attempt nothing settled), not already resolved; otherwise ToolRetryError (`completed`, `not_in_doubt`,
 * `not_latest_attempt`, `legacy_call`). The owner journals a review only then, and the inbox records one only then.
 */
export function reviewableAttempt(history: readonly SessionEvent[], callId: string, outcome: ToolReviewOutcome): AttemptRecord {
  const record = locateAttempt(collectEvidence(history, callId), callId);
  const operation = record.call.operation;
  if (operation === undefined) throw new ToolRetryError('legacy_call', `call ${callId} has no operation: a review cannot be bound to it`);
  const { status, fact } = classifyAttempt(record);
  if (status === ToolRecoveryStatus.Completed) throw new ToolRetryError('completed', `call ${callId} succeeded (${fact}): there is nothing to review`);
  if (!inDoubtForReview(record, status, outcome)) {
    throw new ToolRetryError('not_in_doubt', `call ${callId} is ${status} (${fact}): its outcome is not in doubt, so there is nothing to review`);
  }
  const latest = latestReview(record);
  if (latest?.outcome === 'completed') {
    throw new ToolRetryError('completed', `call ${callId} was resolved for good by a completed review from ${latest.actor}`);
  }
  return record;
}
