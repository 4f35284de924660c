/**
 * Reconcilers (docs/design.md#reconcilers): the routine that asks each uncertain call's tool before any person is
 * asked, and journals the answers as reviews through recordToolReview.
 */
import { InvalidInputError, JournalFullError, StaleOwnerError, StoreConflictError, ToolRetryError } from '../errors.js';
import type { SessionEvent, ToolOperation, ToolReviewOutcome, ToolReviewRecord } from '../event/types.js';
import type { CallId } from '../ids.js';
import { isValidText } from '../ids.js';
import type { JsonValue } from '../json/types.js';
import { isTimeoutMs, LIMITS, RUNTIME_DEFAULTS } from '../limits.js';
import type { SessionOwner } from '../store/types.js';
import { currentOwner, onOwnerLost } from '../store/owner-commit.js';
import { describeSetting, describeValue, hasVisibleText, thrownMessage, toWellFormed, truncateUtf8 } from '../text.js';
import { checkCanonicalJson } from '../json/canonical.js';
import { classifyAttempt, collectEvidence, latestReview, operationOriginOf, sameContract, type AttemptRecord } from './evidence.js';
import { ToolRecoveryStatus } from './retry-policy.js';
import { assessSession } from './assess.js';
import { askAbout, keepUnjournaledCompleted, keptCompletedAnswer, runningHere } from './attempt-rules.js';
import { NO_LONGER_REVIEWABLE, recordToolReview, type ToolReviewInput } from './review.js';
import type { PanicDescriber, Tool, ToolReconcileAnswer, ToolReconcileRequest } from './types.js';
import { panicDetail } from './body-outcome.js';

/** What reconcileUncertainCalls did about one uncertain call. */
export interface ReconciledCall {
  readonly callId: CallId;
  readonly name: string;
  /**
   * `recorded`: the answer is journaled as a review; `unchanged`: `unknown` again, after an uncertain review by the
   * same reconciler, `unknown` in a journal that keeps its last room for the review that settles the call, or
   * anything but `completed` about a call a `not_executed` review left to retry (nothing written); `no_reconciler`: the tool is not given or declares none; `revision_changed`:
   * the tool's current contract is not the one the call was recorded with (its reconciler may not know the old
   * operation); `failed`: the reconciler threw or answered something invalid, or answered `completed` about an
   * attempt a retry superseded before the answer could be journaled (nothing written; `error` says what);
   * `body_running`: the call is still running in this process (no result yet, or its body went on after its result
   * was recorded), or a retry of it is under way here, so no answer about it can hold yet (not asked, nothing
   * written; docs/design.md#a-body-that-outlives-its-attempt).
   */
  readonly action: 'recorded' | 'unchanged' | 'no_reconciler' | 'revision_changed' | 'failed' | 'body_running';
  readonly answer: ToolReconcileAnswer['outcome'] | null;
  /** The review journaled for it, when `recorded`. */
  readonly review: ToolReviewRecord | null;
  /** With a `completed` answer: the output the outside system kept, if the reconciler returned it. */
  readonly output?: JsonValue;
  readonly error?: string;
}

export interface ReconcileReport {
  /** Every call asked or skipped, in journal order. */
  readonly calls: readonly ReconciledCall[];
  /** The confirmed history with the reviews written by this pass appended: decide on it next. */
  readonly history: readonly SessionEvent[];
  /** The calls that still need a person's review (next step `needs_review` after this pass). */
  readonly needsReview: readonly CallId[];
}

/**
 * What `ask` answers, unless `timeoutMs` passes or `outer` aborts first: then the reason, whether or not the
 * reconciler heeds the signal it is handed (which aborts with it).
 */
async function askWithin<T>(timeoutMs: number, outer: AbortSignal | undefined, ask: (signal: AbortSignal) => T | Promise<T>): Promise<T> {
  // Cancelled (or the pass ended) before its turn came: the reconciler is not called at all.
  outer?.throwIfAborted();
  const control = new AbortController();
  const timer = setTimeout(() => control.abort(new Error(`the reconciler did not answer within ${timeoutMs} ms`)), timeoutMs);
  const onOuter = () => control.abort(outer!.reason);
  if (outer?.aborted) onOuter();
  else outer?.addEventListener('abort', onOuter, { once: true });
  let stop!: (reason: unknown) => void;
  const stopped = new Promise<never>((_resolve, reject) => { stop = reject; });
  const onStop = () => stop(control.signal.reason);
  if (control.signal.aborted) onStop();
  else control.signal.addEventListener('abort', onStop, { once: true });
  try {
    return await Promise.race([Promise.resolve().then(() => ask(control.signal)), stopped]);
  } finally {
    clearTimeout(timer);
    outer?.removeEventListener('abort', onOuter);
    control.signal.removeEventListener('abort', onStop);
  }
}

/** The actor of a reconciler's reviews: the tool and the contract revision it answers for. */
export function reconcilerActor(tool: string, revision: string): string {
  return truncateUtf8(`reconciler:${tool}@${revision}`, LIMITS.maxTextBytes);
}

function answerOf(value: unknown): ToolReconcileAnswer {
  if (typeof value !== 'object' || value === null) throw new Error(`the reconciler answered ${describeValue(value)}, not an object`);
  // Each field read once, as it arrives, and checked as read: the pass journals the answer later, in journal order,
  // and a reconciler that hands back an answer it keeps changing (one object for every call, a getter) must not
  // change it after its check, nor an answer given about another call.
  const { outcome, evidence, output } = value as { readonly outcome?: unknown; readonly evidence?: unknown; readonly output?: unknown };
  if (outcome !== 'completed' && outcome !== 'not_executed' && outcome !== 'unknown') {
    const named = typeof outcome === 'string' ? JSON.stringify(truncateUtf8(outcome, 64)) : describeValue(outcome);
    throw new Error(`the reconciler answered outcome ${named}, not completed, not_executed or unknown`);
  }
  // The rules a person's review text follows: the answer is journaled as a review.
  const text = typeof evidence === 'string' ? truncateUtf8(evidence, LIMITS.maxTextBytes) : null;
  if (text === null || !isValidText(text) || text.includes('\u0000') || !hasVisibleText(text)) {
    throw new Error('the reconciler answered no evidence text (a character a reader sees, not white space or invisible characters alone)');
  }
  if (output === undefined) return { outcome, evidence: text };
  // Copied first, then the copy checked: a getter in the output is read once, by the copy.
  let copy: unknown;
  try {
    copy = structuredClone(output);
    checkCanonicalJson(copy);
  } catch (error) {
    throw new Error(`the reconciler answered an output that is not JSON data: ${thrownMessage(error)}`);
  }
  return { outcome, evidence: text, output: copy as JsonValue };
}

/** A reconciler's failure as the report and the journal take it: well-formed text without U+0000, within the limit. */
function failureText(text: string): string {
  return truncateUtf8(toWellFormed(text).replaceAll('\u0000', '\ufffd'), LIMITS.maxDiagnosticBytes);
}

/**
 * Asks the reconciler of every call whose outcome is in doubt (docs/design.md#reconcilers) and journals each answer
 * through recordToolReview with source `reconciler` and actor `reconciler:<tool>@<revision>`: `completed` and
 * `not_executed` as they are, `unknown` as an `uncertain` review (which unblocks nothing). The reconcilers are asked
 * at once (at most LIMITS.maxConcurrentReconcilerAsks at a time, each within its own deadline), and their answers
 * are journaled in journal order. A call a `not_executed` review left to retry is asked too, and only a `completed`
 * answer is journaled for it: the write the review says did not happen did. Run it before any person is asked; what
 * is left in `needsReview` is what a person must look at. `tools` are the tools as registered now (a call whose
 * tool's contract changed since is not asked). Errors of the journal write propagate (a fenced owner, a changed
 * history); a reconciler's own failure is reported and writes nothing.
 */
export async function reconcileUncertainCalls(
  owner: SessionOwner,
  tools: readonly Tool[],
  history: readonly SessionEvent[],
  options: { readonly signal?: AbortSignal; readonly timeoutMs?: number; readonly describePanic?: PanicDescriber } = {},
): Promise<ReconcileReport> {
  const { calls, history: current, needsReview } = await reconcileCalls(owner, tools, history, options);
  return { calls, history: current, needsReview };
}

/**
 * A pass as a run reads it: with, for each call in doubt it looked at, how many reviews the call had then. A review
 * journaled since (by another run of the session, from the inbox) was not checked by this pass.
 */
export interface PassReport extends ReconcileReport {
  readonly seen: ReadonlyMap<string, number>;
}

/** Times a run's pass writes one answer on a journal the session's other runs keep moving. */
const REVIEW_WRITE_ATTEMPTS = 5;

/** A reconciler's answer, or why there is none. Never rejects, so answers that arrive after a failed write are dropped quietly. */
type Asked = { readonly answer: ToolReconcileAnswer } | { readonly failure: string };

/**
 * reconcileUncertainCalls, restricted `forRun`: a run asks about its own calls (its task's, keyed `<runId>/…`), and
 * about any call of the session whose latest review is a person's `not_executed` (the run journals every review
 * waiting in the inbox, and none may be left usable unchecked), not about every call of its session.
 */
export async function reconcileCalls(
  owner: SessionOwner,
  tools: readonly Tool[],
  history: readonly SessionEvent[],
  options: {
    readonly signal?: AbortSignal;
    readonly timeoutMs?: number;
    readonly forRun?: { readonly runId: string; readonly taskId: string };
    /** The session's journal read again, when other writers of the owner (a session's other runs) may move it. */
    readonly reload?: () => Promise<readonly SessionEvent[]>;
    /** How a reconciler's throw is described for the journal and the report (the runtime's describePanic). */
    readonly describePanic?: PanicDescriber;
  },
): Promise<PassReport> {
  if (!Array.isArray(tools)) throw new InvalidInputError('tools', 'must be an array of tools');
  if (options.timeoutMs !== undefined && !isTimeoutMs(options.timeoutMs)) {
    throw new InvalidInputError('timeoutMs', `must be a positive integer of at most ${LIMITS.maxTimeoutMs}, got ${describeSetting(options.timeoutMs)}`);
  }
  // Each tool's own deadline, checked before anything is asked or written.
  tools.forEach((t, i) => {
    if (t?.reconcileTimeoutMs !== undefined && !isTimeoutMs(t.reconcileTimeoutMs)) {
      throw new InvalidInputError(`tools[${i}].reconcileTimeoutMs`, `must be a positive integer of at most ${LIMITS.maxTimeoutMs}, got ${describeSetting(t.reconcileTimeoutMs)}`);
    }
  });
  if (!Array.isArray(history)) throw new InvalidInputError('history', 'must be the session\'s confirmed journal (an array of events)');
  const byName = new Map(tools.map((t) => [t.name, t]));
  let current: SessionEvent[] = [...history];
  const calls: ReconciledCall[] = [];
  const seen = new Map<string, number>();
  if (current.length === 0) return { calls, history: current, needsReview: [], seen };
  const turn = takingTurns(LIMITS.maxConcurrentReconcilerAsks);
  // Ended when the pass does: a journal write that fails (a fenced owner) leaves no lookups queued or running.
  const passEnded = new AbortController();
  const releases: (() => void)[] = [];
  /** Who writes the answers: `owner`, or the owner of the session this process made since, should one fence it. */
  let writer = owner;
  const signal = passEnded.signal;
  const cancelled = () => passEnded.abort(options.signal!.reason);
  if (options.signal?.aborted === true) cancelled();
  else options.signal?.addEventListener('abort', cancelled, { once: true });
  // The owner letting the session go (released, or its store closing on a shutdown) cancels the pass as the signal
  // does, so the shutdown does not wait out every reconciler's timeout; it waits for what the pass journals on its way out.
  const stopListening = onOwnerLost(owner, (why, lettingGo) => {
    if (lettingGo) passEnded.abort(new Error(`the reconcile pass was stopped: ${why}`));
  });
  try {
    // Every call to ask, in journal order, each with its answer already on its way; skipped calls keep their place.
    const planned: ({ readonly skipped: ReconciledCall } | { readonly record: AttemptRecord; readonly latest: ToolReviewRecord | null; readonly actor: string; readonly asked: Promise<Asked>; readonly release: () => void })[] = [];
    // Journals one answer about `record`. With `reload`, a journal another writer moved meanwhile is read again and
    // the answer written on it, unless the call is no longer in doubt or, for any answer but `completed` (the write
    // happened, whatever a review says), its reviews changed: the answer was about a review that is no longer latest.
    const journal = async (record: AttemptRecord, review: ToolReviewInput, always: boolean): Promise<ToolReviewRecord | 'superseded' | null> => {
      for (let attempt = 1; ; attempt += 1) {
        try {
          const event = await recordToolReview(writer, current, record.call.id, review);
          current = [...current, event];
          return event.kind.type === 'tool_review' ? event.kind.review : null;
        } catch (error) {
          // Settled or retried meanwhile by another writer of the owner, whose journal a reload brought in: nothing to add.
          if (options.reload !== undefined && error instanceof ToolRetryError && NO_LONGER_REVIEWABLE.has(error.code)) {
            return always && error.code === 'not_latest_attempt' ? 'superseded' : null;
          }
          // Fenced by an owner of the session made here since (a takeover in this process): the answer outlives the owner
          // that asked, as a late body's end does, and is written through the owner that holds the session now. Lost,
          // the retry a host here then makes (refused while the lookup ran) would write a second time.
          const newer = error instanceof StaleOwnerError ? currentOwner(writer) : writer;
          // Fenced, and no owner here to write it through (one took the session over and let it go, or the caller gave no
          // way to read the journal again): the answer cannot be journaled, but this process keeps it, and refuses a
          // retry of the call (the write happened).
          if (error instanceof StaleOwnerError && (newer === writer || options.reload === undefined) && review.outcome === 'completed') {
            keepUnjournaledCompleted(owner, record.call.id, review.actor, review.evidence);
          }
          const moved = error instanceof StoreConflictError && error.code === 'history_changed';
          if (options.reload === undefined || attempt >= REVIEW_WRITE_ATTEMPTS || !(moved || newer !== writer)) throw error;
          writer = newer;
          current = [...(await options.reload())];
          // A call settled or retried meanwhile is refused by the next write (NO_LONGER_REVIEWABLE, above).
          if (!always && collectEvidence(current).calls.get(record.call.id)?.reviews.length !== record.reviews.length) return null;
        }
      }
    };
    const forRun = options.forRun;
    const ofRun = forRun === undefined ? null : (op: ToolOperation) => op.taskId === forRun.taskId && op.key.startsWith(`${forRun.runId}/`);
    // The array as given: a history a store returned keeps its recorded size (docs/design.md#a-loaded-history-keeps-its-size).
    const evidence = collectEvidence(history);
    for (const record of evidence.attempts) {
      const op = record.call.operation;
      const attempts = record.operation?.attempts;
      if (op === undefined || attempts === undefined || attempts[attempts.length - 1] !== record) continue;
      if (classifyAttempt(record).status !== ToolRecoveryStatus.OutcomeUnknown) continue;
      if (attempts.some((a) => a.result?.outcome.status === 'succeeded')) continue;
      const latest = latestReview(record);
      if (ofRun !== null && !ofRun(op) && !(latest?.outcome === 'not_executed' && latest.source !== 'reconciler')) continue;
      // A completed review settles the call. A not_executed one, not yet acted on, is checked against the outside
      // system once more: an answer that the write happened overrides it, any other leaves it as it is.
      if (latest?.outcome === 'completed') continue;
      seen.set(record.call.id, record.reviews.length);
      const base = { callId: record.call.id, name: record.call.name };
      if (runningHere(owner, record.call.id) !== null) {
        planned.push({ skipped: { ...base, action: 'body_running', answer: null, review: null } });
        continue;
      }
      const tool = byName.get(record.call.name);
      if (tool?.reconcile === undefined) {
        planned.push({ skipped: { ...base, action: 'no_reconciler', answer: null, review: null } });
        continue;
      }
      if (!sameContract(tool.metadata.effect, op.contract)) {
        planned.push({ skipped: { ...base, action: 'revision_changed', answer: null, review: null } });
        continue;
      }
      // Held until its answer is journaled (or the pass ends): a retry of the call here is refused meanwhile. A retry
      // already under way here supersedes the call, and an answer about it could no longer be journaled.
      const release = askAbout(owner, record.call.id);
      if (release === null) {
        planned.push({ skipped: { ...base, action: 'body_running', answer: null, review: null } });
        continue;
      }
      releases.push(release);
      const request: ToolReconcileRequest = {
        sessionId: record.event.sessionId,
        operationOrigin: operationOriginOf(record),
        callId: record.call.id,
        toolName: record.call.name,
        arguments: structuredClone(record.call.arguments),
        operation: structuredClone(op),
      };
      const timeoutMs = options.timeoutMs ?? tool.reconcileTimeoutMs ?? RUNTIME_DEFAULTS.reconcileTimeoutMs;
      // The reconciler's `completed` answer this process kept when the owner that asked was fenced before it could
      // journal it: the write happened, and this owner journals that instead of asking again (an `unknown` answer now
      // would leave the call open while every retry of it here is refused).
      const kept = keptCompletedAnswer(owner, record.call.id);
      const asked = kept !== undefined
        ? Promise.resolve<Asked>({ answer: { outcome: 'completed', evidence: kept.evidence } })
        : turn(() => askWithin(timeoutMs, signal, (within) => tool.reconcile!(request, within)))
          .then((value): Asked => ({ answer: answerOf(value) }))
          .catch((error: unknown): Asked => ({
            failure: failureText(options.describePanic === undefined
              ? thrownMessage(error)
              : panicDetail(error, options.describePanic, { tool: record.call.name, callId: record.call.id })),
          }));
      planned.push({ record, latest, actor: reconcilerActor(tool.name, op.contract.revision), asked, release });
    }
    for (const entry of planned) {
      if ('skipped' in entry) {
        calls.push(entry.skipped);
        continue;
      }
      const { record, latest, actor, release } = entry;
      try {
        const base = { callId: record.call.id, name: record.call.name };
        const asked = await entry.asked;
        if ('failure' in asked) {
          const failure = asked.failure;
          if (latest?.outcome !== 'not_executed' || latest.source === 'reconciler' || decidedOverReconciler(record)) {
            calls.push({ ...base, action: 'failed', answer: null, review: null, error: failure });
            continue;
          }
          // A person's not_executed review the exact reconciler could not check (it failed, or the pass was cancelled
          // while it was asked) is not used until it answers: said in the journal (an uncertain review over it), so the
          // call is back in the queue for everyone who reads it, and no host that reads the journal without asking this
          // reconciler retries on that review.
          const evidenceText = truncateUtf8(`could not check the not_executed review by ${latest.actor}: ${failure}; it is not used until this reconciler answers`, LIMITS.maxTextBytes);
          let review: Awaited<ReturnType<typeof journal>>;
          try {
            review = await journal(record, { actor, outcome: 'uncertain', evidence: evidenceText, source: 'reconciler' }, false);
          } catch (error) {
            // No room to say so: reported, nothing written. A retry on the review stays impossible here all the same:
            // its admission needs more room (a call's evidence room) than this review would have taken.
            if (!(error instanceof JournalFullError)) throw error;
            calls.push({ ...base, action: 'failed', answer: null, review: null, error: truncateUtf8(`${failure}; and the journal has no room to say so (${error.message})`, LIMITS.maxDiagnosticBytes) });
            continue;
          }
          calls.push({ ...base, action: 'failed', answer: null, review: review === 'superseded' ? null : review, error: failure });
          continue;
        }
        const answer = asked.answer;
        if (latest?.outcome === 'not_executed' && answer.outcome !== 'completed') {
          calls.push({ ...base, action: 'unchanged', answer: answer.outcome, review: null });
          continue;
        }
        const outcome: ToolReviewOutcome = answer.outcome === 'unknown' ? 'uncertain' : answer.outcome;
        // Its own earlier answer, not a person's review that happens to carry the reconciler's actor name.
        if (outcome === 'uncertain' && latest?.actor === actor && latest.source === 'reconciler') {
          calls.push({ ...base, action: 'unchanged', answer: answer.outcome, review: null });
          continue;
        }
        const evidenceText = truncateUtf8(answer.evidence, LIMITS.maxTextBytes);
        let review: Awaited<ReturnType<typeof journal>>;
        try {
          // The reconciler asked the outside system itself: its not_executed stands whatever the body did after its result.
          review = await journal(record, { actor, outcome, evidence: evidenceText, source: 'reconciler', despiteLateReturn: true }, answer.outcome === 'completed');
        } catch (error) {
          // `unknown` settles nothing, so it may not take the room the journal keeps for the review that will
          // (docs/design.md#a-result-always-has-room): left unjournaled, the call waits for a person as it would anyway.
          if (!(error instanceof JournalFullError)) throw error;
          if (outcome === 'uncertain') {
            calls.push({ ...base, action: 'unchanged', answer: answer.outcome, review: null });
            continue;
          }
          // `not_executed`, which leaves the write due, with no room beside the room kept for the review that closes it;
          // or `completed` in a journal filled before it kept that room: reported for this call alone, the pass goes on.
          // A `completed` one is kept in this process, which refuses a retry of the call: the write was made.
          if (outcome === 'completed') keepUnjournaledCompleted(owner, record.call.id, actor, evidenceText);
          const said = `the reconciler answered ${answer.outcome} (${evidenceText}), but the journal has no room for it: nothing was journaled (${error.message})`;
          calls.push({ ...base, action: 'failed', answer: answer.outcome, review: null, error: truncateUtf8(said, LIMITS.maxDiagnosticBytes) });
          continue;
        }
        if (review === 'superseded') {
          // A retry recorded a newer attempt before the answer came (before this pass asked): a review binds the latest
          // attempt, so the answer cannot be journaled, and the retry may have made the write again.
          const error = `the reconciler answered completed (${evidenceText}), but a newer attempt of operation ${record.call.operation!.key} was recorded meanwhile: nothing was journaled about this attempt, and the operation may have been made twice; check the outside system`;
          calls.push({ ...base, action: 'failed', answer: answer.outcome, review: null, error: truncateUtf8(error, LIMITS.maxDiagnosticBytes) });
          continue;
        }
        if (review === null) {
          calls.push({ ...base, action: 'unchanged', answer: answer.outcome, review: null });
          continue;
        }
        const output = answer.outcome === 'completed' && answer.output !== undefined ? { output: answer.output } : {};
        calls.push({ ...base, action: 'recorded', answer: answer.outcome, review, ...output });
      } finally {
        release();
      }
    }
  } finally {
    options.signal?.removeEventListener('abort', cancelled);
    stopListening();
    passEnded.abort(new Error('the reconcile pass ended'));
    for (const release of releases) release();
  }
  const needsReview = assessSession(current).calls.filter((c) => c.nextStep === 'needs_review').map((c) => c.callId);
  return { calls, history: current, needsReview, seen };
}

/**
 * Whether the call's latest review, a person's `not_executed`, was recorded after the reconciler had answered
 * `unknown` or could not check an earlier review (an `uncertain` review of its own): the person decided knowing that
 * the outside system could not say, so a reconciler that fails again does not set the decision aside. Only its
 * `completed` answer still does.
 */
function decidedOverReconciler(record: AttemptRecord): boolean {
  return record.reviews.slice(0, -1).some(({ review }) => review.source === 'reconciler' && review.outcome === 'uncertain');
}

/** Whether the latest review of `callId` in `history` is a person's `not_executed` decided over its reconciler (decidedOverReconciler). */
export function personDecided(history: readonly SessionEvent[], callId: string): boolean {
  const record = collectEvidence(history).calls.get(callId);
  const latest = record === undefined ? null : latestReview(record);
  return record !== undefined && latest?.outcome === 'not_executed' && latest.source !== 'reconciler' && decidedOverReconciler(record);
}

/** Runs the work handed to it with at most `max` pieces under way at once, in the order it was handed over. */
function takingTurns(max: number): <T>(work: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (work) => {
    if (running >= max) await new Promise<void>((resolve) => waiting.push(resolve));
    else running += 1;
    try {
      return await work();
    } finally {
      const next = waiting.shift();
      if (next === undefined) running -= 1;
      else next();
    }
  };
}
