/**
 * One explicit, single-use retry of a tool call (docs/design.md#retry-plans).
 * A plan is host evidence, not a permission and not a lock: the runtime still runs every current check.
 */
import { callProgressIn, callsProgressIn } from '../store/attention.js';
import type { AttentionStatus } from '../store/rows.js';
import type { RepeatedRow } from '../store/types.js';
import { deepFreeze } from '../json/freeze.js';
import { ToolRetryError, ToolRetryPlanNotSerializableError } from '../errors.js';
import type {
  SessionEvent,
  ToolEffectContract,
  ToolOperation,
  ToolRetryReview,
  ToolReviewOutcome,
} from '../event/types.js';
import type { CallId, EventId, OperationKey, SessionId, TaskId } from '../ids.js';
import { jsonEquals } from '../json/canonical.js';
import type { JsonValue } from '../json/types.js';
import { classifyAttempt, collectEvidence, decideRetry, effectiveReview, locateAttempt, operationOriginOf, validatePassedReview, type AttemptRecord } from './evidence.js';
import { isRefusedRepeat, repeatedOpenAttempts } from './repeats.js';
import { ToolRecoveryStatus } from './retry-policy.js';
import { bodyEnded, bodyMayStillRun } from './late-bodies.js';

/** What the runtime is about to execute; all of it must match the plan's source call. */
export interface ToolRetryBinding {
  readonly sessionId: string;
  readonly taskId: string;
  readonly name: string;
  readonly arguments: JsonValue;
  /** The tool's CURRENT contract, from its metadata now, not from the journal. */
  readonly contract: ToolEffectContract;
}

interface PlanState {
  readonly sessionId: SessionId;
  readonly sourceCallId: CallId;
  readonly sourceEventId: EventId;
  /** The source call's 1-based position among its operation's attempts. */
  readonly sourceAttempt: number;
  readonly name: string;
  /** Deep-frozen copies, so mutating the history after preparation cannot change what the plan binds. */
  readonly arguments: JsonValue;
  readonly operation: Omit<ToolOperation, 'retry' | 'startMarker'>;
  readonly review: ToolRetryReview | null;
  /** The source's row of the attention index as the plan's history made it; the commit checks the store still holds it. */
  readonly sourceRow: { readonly started: boolean; readonly status: AttentionStatus } | null;
  /**
   * The source is a repeat the in-doubt guard refused, or has repeats not made (repeats.ts): an identical call
   * running in this process may make the write this retry would, so the guard does not pass the retry beside it.
   */
  readonly touchesRepeats: boolean;
  /** The rows of the identical writes or repeats the retry could make twice with (repeatedOpenAttempts), which the commit checks. */
  readonly repeated: readonly RepeatedRow[];
  /** The seq of the plan's history's last event: the commit checks no earlier owner of the session wrote after it. */
  readonly historySeq: number;
  /** How the journal shows the source attempt's body never ran; null when it may have. */
  readonly sourceNotRun: SourceNotRun | null;
  /**
   * A `not_executed` review decided while the plan's history left the source's body possibly running (an interrupt
   * recorded, no end of the body yet): the review stands only if that body did not return or throw since.
   */
  readonly reviewedWhileBodyOpen: boolean;
  /** How many reviews of the source the plan's history holds. */
  readonly sourceReviews: number;
  /** Every attempt of the source's operation in the plan's history, the source among them. */
  readonly operationCalls: readonly CallId[];
  /** The event id of the operation's first attempt's call (ToolBodyRequest.operationOrigin). */
  readonly operationOrigin: EventId;
  /** Shared by every clone: the single use. */
  readonly latch: { consumed: boolean };
}

const MINT = Symbol('ToolRetryPlan.mint');
let mint: (state: PlanState) => ToolRetryPlan;
let sourceRowOf: (plan: ToolRetryPlan) => PlanState['sourceRow'];
let repeatedOf: (plan: ToolRetryPlan) => readonly RepeatedRow[];
let touchesRepeatsOf: (plan: ToolRetryPlan) => boolean;
let notRunOf: (plan: ToolRetryPlan) => SourceNotRun | null;
let sourceReviewsOf: (plan: ToolRetryPlan) => number;
let operationCallsOf: (plan: ToolRetryPlan) => readonly CallId[];
let reviewedWhileOpenOf: (plan: ToolRetryPlan) => boolean;
let historySeqOf: (plan: ToolRetryPlan) => number;
let planOriginOf: (plan: ToolRetryPlan) => EventId;

/**
 * How the journal shows a plan's source attempt never ran its body: it ended waiting for an operator's approval,
 * it stopped before its body (a failure recorded before it, or no start marker where one was due), or a
 * `not_executed` review settled it.
 */
export type SourceNotRun = 'awaited_approval' | 'stopped_before_body' | 'reviewed_not_executed';

/** For the runtime: what the plan's history said of its source, for the commit to check (internal, never exported publicly). */
export function planSourceRow(plan: ToolRetryPlan): PlanState['sourceRow'] {
  return sourceRowOf(plan);
}

/** For the runtime: the rows of the identical writes or repeats the plan's retry could make twice with (internal). */
export function planRepeatedRows(plan: ToolRetryPlan): readonly RepeatedRow[] {
  return repeatedOf(plan);
}

/**
 * For the runtime: whether the plan retries a repeat the in-doubt guard refused, or a write with repeats not made
 * (internal). Such a retry is not a model's parallel call: an identical call running in this process does not pass
 * it (docs/design.md#the-in-doubt-guard).
 */
export function planTouchesRepeats(plan: ToolRetryPlan): boolean {
  return touchesRepeatsOf(plan);
}

/** For the runtime: the seq of the last event of the history the plan was made from (internal). */
export function planHistorySeq(plan: ToolRetryPlan): number {
  return historySeqOf(plan);
}

/** For the runtime: whether the plan's `not_executed` review was decided while the source's body may have run on (internal). */
export function planReviewedWhileBodyOpen(plan: ToolRetryPlan): boolean {
  return reviewedWhileOpenOf(plan);
}

/** For the runtime: how many reviews of its source the plan's history holds (internal). */
export function planSourceReviews(plan: ToolRetryPlan): number {
  return sourceReviewsOf(plan);
}

/** For the runtime: every attempt of the plan's operation in its history (internal). */
export function planOperationCalls(plan: ToolRetryPlan): readonly CallId[] {
  return operationCallsOf(plan);
}

/** For the runtime: the event id of the plan's operation's first attempt's call, its external key's origin (internal). */
export function planOperationOrigin(plan: ToolRetryPlan): EventId {
  return planOriginOf(plan);
}

/** For the runtime: how the plan's history shows its source attempt never ran, or null (internal). */
export function planSourceNotRun(plan: ToolRetryPlan): SourceNotRun | null {
  return notRunOf(plan);
}

/**
 * For a retry read back from the journal (internal): its source attempt's row as the plan that made the retry read
 * it, from the events before the retry's call; null when `retryCallId` is not a retry in `history`.
 */
export function sourceRowBefore(history: readonly SessionEvent[], retryCallId: string): PlanState['sourceRow'] {
  const at = history.findIndex((e) => e.kind.type === 'tool_call' && e.kind.call.id === retryCallId);
  const kind = at >= 0 ? history[at]!.kind : null;
  const retry = kind?.type === 'tool_call' ? kind.call.operation?.retry : null;
  return retry ? callProgressIn(history.slice(0, at), retry.callId) : null;
}

function sourceNotRun(record: AttemptRecord, review: ToolReviewOutcome | null): SourceNotRun | null {
  const outcome = record.result?.outcome;
  if (record.startedEvent === null && outcome?.status === 'failed' && outcome.category === 'approval_pending') return 'awaited_approval';
  if (classifyAttempt(record).status === ToolRecoveryStatus.NotExecuted) return 'stopped_before_body';
  return review === 'not_executed' ? 'reviewed_not_executed' : null;
}

/** `change` is a whole clause, its verb agreeing with its noun ("the arguments differ"). */
function bindingChanged(change: string): never {
  throw new ToolRetryError('binding_changed', `${change} from the plan's source call; the plan was not consumed`);
}

export class ToolRetryPlan {
  readonly #state: PlanState;

  private constructor(token: symbol, state: PlanState) {
    if (token !== MINT) throw new ToolRetryError('invalid_evidence', 'a ToolRetryPlan is made only by prepareToolRetry');
    this.#state = state;
    Object.freeze(this);
  }

  static {
    mint = (state) => new ToolRetryPlan(MINT, state);
    sourceRowOf = (plan) => ToolRetryPlan.#stateOf(plan).sourceRow;
    repeatedOf = (plan) => ToolRetryPlan.#stateOf(plan).repeated;
    touchesRepeatsOf = (plan) => ToolRetryPlan.#stateOf(plan).touchesRepeats;
    historySeqOf = (plan) => ToolRetryPlan.#stateOf(plan).historySeq;
    notRunOf = (plan) => ToolRetryPlan.#stateOf(plan).sourceNotRun;
    sourceReviewsOf = (plan) => ToolRetryPlan.#stateOf(plan).sourceReviews;
    operationCallsOf = (plan) => ToolRetryPlan.#stateOf(plan).operationCalls;
    reviewedWhileOpenOf = (plan) => ToolRetryPlan.#stateOf(plan).reviewedWhileBodyOpen;
    planOriginOf = (plan) => ToolRetryPlan.#stateOf(plan).operationOrigin;
  }

  /** Copies (structuredClone, spread, JSON round trip, a swapped prototype) carry no state and are refused. */
  static #stateOf(plan: unknown): PlanState {
    if (typeof plan === 'object' && plan !== null && #state in plan) return (plan as ToolRetryPlan).#state;
    throw new ToolRetryError('invalid_evidence', 'not a ToolRetryPlan made by prepareToolRetry (copies are never usable)');
  }

  get sourceCallId(): CallId {
    return ToolRetryPlan.#stateOf(this).sourceCallId;
  }
  /** The id of the event holding the source ToolCall. */
  get sourceEventId(): EventId {
    return ToolRetryPlan.#stateOf(this).sourceEventId;
  }
  /** The source call's 1-based position among its operation's attempts; the retry is attempt `sourceAttempt + 1`. */
  get sourceAttempt(): number {
    return ToolRetryPlan.#stateOf(this).sourceAttempt;
  }
  get sessionId(): SessionId {
    return ToolRetryPlan.#stateOf(this).sessionId;
  }
  get taskId(): TaskId {
    return ToolRetryPlan.#stateOf(this).operation.taskId;
  }
  get operationKey(): OperationKey {
    return ToolRetryPlan.#stateOf(this).operation.key;
  }
  get toolName(): string {
    return ToolRetryPlan.#stateOf(this).name;
  }
  /** The source call's arguments (frozen). */
  get arguments(): JsonValue {
    return ToolRetryPlan.#stateOf(this).arguments;
  }
  /** The contract recorded with the source call (frozen). */
  get contract(): ToolEffectContract {
    return ToolRetryPlan.#stateOf(this).operation.contract;
  }
  get review(): ToolRetryReview | null {
    return ToolRetryPlan.#stateOf(this).review;
  }
  /** True once this plan or any clone has been taken. */
  get consumed(): boolean {
    return ToolRetryPlan.#stateOf(this).latch.consumed;
  }

  /** A handle sharing this plan's single use. */
  clone(): ToolRetryPlan {
    return mint(ToolRetryPlan.#stateOf(this));
  }

  /** True exactly when both share one latch (one is a clone of the other). */
  equals(other: unknown): boolean {
    const mine = ToolRetryPlan.#stateOf(this);
    return typeof other === 'object' && other !== null && #state in other && ToolRetryPlan.#stateOf(other).latch === mine.latch;
  }

  /**
   * The runtime-side check, before anything is recorded (docs/design.md#retry-plans). Any mismatch of session, task, tool name,
   * arguments (canonical JSON equality, key order ignored) or the current contract throws `binding_changed` and
   * leaves the plan unused. Otherwise the plan is consumed for good, for every clone, even if admission later
   * fails, and the returned operation reuses the source key with a retry audit pointing at the source call.
   */
  takeOperation(binding: ToolRetryBinding): ToolOperation {
    const state = ToolRetryPlan.#stateOf(this);
    if (typeof binding !== 'object' || binding === null) bindingChanged('the binding differs');
    if (binding.sessionId !== state.sessionId) bindingChanged('the session differs');
    if (binding.taskId !== state.operation.taskId) bindingChanged('the task differs');
    if (binding.name !== state.name) bindingChanged('the tool name differs');
    let sameArguments = false;
    try {
      sameArguments = jsonEquals(binding.arguments, state.arguments);
    } catch {
      sameArguments = false;
    }
    if (!sameArguments) bindingChanged('the arguments differ');
    const contract = binding.contract;
    if (
      typeof contract !== 'object' ||
      contract === null ||
      contract.effect !== state.operation.contract.effect ||
      contract.revision !== state.operation.contract.revision
    ) {
      bindingChanged("the tool's current contract differs");
    }
    // Test-and-set with no await in between: JavaScript runs this to completion, so exactly one caller wins.
    if (state.latch.consumed) {
      throw new ToolRetryError('consumed', `the plan for ${state.sourceCallId} was already used; inspect the history again`);
    }
    state.latch.consumed = true;
    const review = state.review;
    return {
      taskId: state.operation.taskId,
      key: state.operation.key,
      contract: { effect: state.operation.contract.effect, revision: state.operation.contract.revision },
      retry: {
        callId: state.sourceCallId,
        eventId: state.sourceEventId,
        review: review === null ? null : { actor: review.actor, evidence: review.evidence, outcome: review.outcome },
      },
    };
  }

  toJSON(): never {
    throw new ToolRetryPlanNotSerializableError();
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    const state = ToolRetryPlan.#stateOf(this);
    return `ToolRetryPlan { source: ${state.sourceCallId}, tool: ${state.name}, consumed: ${state.latch.consumed} }`;
  }
}

/**
 * Plans one explicit attempt of `callId` from the confirmed history (docs/design.md#the-recovery-decision-table): the review is checked first, then
 * the history (as inspectToolRecovery, whose errors propagate); a completed status or a `completed` review gives
 * `completed`; a call without an operation gives `legacy_call`; an uncertain outcome of an Unknown or NonIdempotent
 * tool gives `needs_review` unless the review says `not_executed` (an `uncertain` review never unblocks).
 * Without a passed review, the call's latest journaled review (recordToolReview) is used; a journaled `completed`
 * review refuses the plan whatever is passed (docs/design.md#reviews-are-journaled-evidence). The review used is
 * carried in the retry audit. It must come from host verification, never from model output.
 */
export function prepareToolRetry(
  history: readonly SessionEvent[],
  callId: string,
  review?: (ToolRetryReview & { readonly despiteLateReturn?: boolean }) | null,
): ToolRetryPlan {
  const passedReview = review === undefined || review === null ? null : review;
  if (passedReview !== null) validatePassedReview(passedReview);
  const evidence = collectEvidence(history, callId);
  const record = locateAttempt(evidence, callId);
  // A person's not_executed for a body the journal saw return after its result: only if they say they checked, as
  // the decision inbox and recordToolReview ask (docs/design.md#a-body-that-outlives-its-attempt).
  if (passedReview?.outcome === 'not_executed' && record.bodyRanOn?.ended === 'returned' && passedReview.despiteLateReturn !== true) {
    throw new ToolRetryError(
      'needs_review',
      `the body of call ${callId} went on after its result and returned (seq ${record.bodyRanOn.event.seq}), so it most likely made its write: ` +
        'a not_executed review passed for it must say the outside system was checked (despiteLateReturn: true)',
    );
  }
  const checkedReview = effectiveReview(record, passedReview);
  const operation = record.call.operation ?? null;
  // The retry table decides; its refusal is the error code, its reason the detail.
  const { rule, reason } = decideRetry(record, checkedReview?.outcome ?? null);
  if (rule.refusal !== null) {
    // An operator's answer from the CLI or a console waits in the decision inbox until the host journals it: the plan
    // reads only the journal, so say where a review given there has to go first.
    const inbox = rule.refusal === 'needs_review' && passedReview === null
      ? 'a review recorded in the decision inbox (jingwei review, a console) counts once the host journals it (journalInboxReviews)'
      : undefined;
    throw new ToolRetryError(rule.refusal, reason, inbox);
  }
  if (operation === null) throw new ToolRetryError('legacy_call', reason);
  // The identical writes or repeats this retry could make twice with (repeats.ts), for its commit and its guard.
  const related = repeatedOpenAttempts(evidence, record);
  let args: JsonValue;
  try {
    args = structuredClone(record.call.arguments);
  } catch {
    throw new ToolRetryError('invalid_evidence', `the arguments of ${callId} are not plain JSON`);
  }
  return mint(
    Object.freeze({
      sessionId: record.event.sessionId,
      sourceCallId: record.call.id,
      sourceEventId: record.event.eventId,
      sourceAttempt: record.attempt,
      name: record.call.name,
      arguments: deepFreeze(args),
      operation: deepFreeze({
        taskId: operation.taskId,
        key: operation.key,
        contract: { effect: operation.contract.effect, revision: operation.contract.revision },
      }),
      review:
        checkedReview === null
          ? null
          : deepFreeze({ actor: checkedReview.actor, evidence: checkedReview.evidence, outcome: checkedReview.outcome }),
      sourceRow: Object.freeze(callProgressIn(history, record.call.id)),
      touchesRepeats: isRefusedRepeat(record) || related.length > 0,
      repeated: Object.freeze(relatedRows(history, related)),
      historySeq: history[history.length - 1]?.seq ?? -1,
      sourceNotRun: sourceNotRun(record, checkedReview?.outcome ?? null),
      // A source with no result yet may be running still (in this process, under an owner since fenced): a review
      // decided on a history that shows no end of its body is as blind to that end as one decided after an interrupt.
      reviewedWhileBodyOpen: checkedReview?.outcome === 'not_executed' &&
        (record.result === null ? bodyEnded(history, record.call.id) === null : bodyMayStillRun(history, record.call.id)),
      sourceReviews: record.reviews.length,
      operationCalls: Object.freeze((record.operation?.attempts ?? [record]).map((a) => a.call.id)),
      operationOrigin: operationOriginOf(record),
      latch: { consumed: false },
    }),
  );
}

/** The index rows of the related identical operations' latest attempts, as `history` makes them. */
function relatedRows(history: readonly SessionEvent[], related: readonly AttemptRecord[]): RepeatedRow[] {
  const rows = callsProgressIn(history, related.map((open) => open.call.id));
  return related.flatMap((open) => {
    const row = rows.get(open.call.id);
    return row === undefined ? [] : [Object.freeze({ callId: open.call.id, ...row })];
  });
}
