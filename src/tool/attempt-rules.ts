/** What an attempt must respect about the other attempts of its operation: in flight, running late, superseded, decided meanwhile. */
import { OperationInDoubtError, StoreConflictError, ToolRetryError } from '../errors.js';
import type { ActionContext, ToolCall, ToolOperation } from '../event/types.js';
import { isDecidedMeanwhile } from '../store/approvals.js';
import type { ApprovalBinding } from '../store/inbox-rows.js';
import type { Failure } from './admission-checks.js';
import { bodyStillRuns, lateBodyEnd, lateBodyOf } from './late-bodies.js';
import type { ApprovalChange, CommitRequest, RecordedAttempt, SessionOwner } from '../store/types.js';
import { PRE_BODY_CATEGORIES } from '../event/types.js';
import { SessionTable } from '../store/owner-commit.js';
import { planHistorySeq, planOperationCalls, planRepeatedRows, planReviewedWhileBodyOpen, planSourceReviews, planSourceRow, type ToolRetryPlan } from './retry-plan.js';
import { setNewest } from '../bounded-map.js';
import { keptJournalOf } from '../store/owner-journal.js';
import { collectEvidence, earlierDueAttempt, earlierOpenAttempt, type AttemptRecord } from './evidence.js';

/**
 * A retry or a caller key's replay of a tool this runtime does not have (a deploy removed or renamed it). Its default
 * contract never matches the recorded one, so this is `binding_changed`, as before, said plainly; not a preflight
 * refusal, which a run would hand the model as "the tool did not run" for a call that may have run.
 */
export const notRegistered = (name: string, consequence: string): ToolRetryError =>
  new ToolRetryError('binding_changed', `tool ${JSON.stringify(name)} is not registered with this runtime (removed or renamed since it was called?); ${consequence}`);

/**
 * What this process knows and a retry plan's history may not, checked before the plan is taken (nothing is taken or
 * written when it refuses): an earlier attempt's body still running here (its deadline or a cancellation was
 * recorded, the body went on; docs/design.md#a-body-that-outlives-its-attempt), which would make the write a second
 * time once it gets through; a review of the source journaled here since the plan's history was read; a reconciler
 * asked about the source here right now (docs/design.md#reconcilers). Checked before the plan is taken, and again
 * (`taken`) inside the transaction of the retry's call commit (attemptCondition): a review the owner journaled here
 * while the retry's guards ran, or while its commit waited for a connection, is seen.
 */
export function refuseUnsafeRetryHere(owner: SessionOwner, plan: ToolRetryPlan, taken = false): void {
  const planState = taken ? 'the plan is spent' : 'the plan was not taken';
  // A source still in flight here whose body started (as the plan read it) is running too. One that had not started
  // is superseded by the retry instead: its start marker is then refused (docs/design.md#a-stale-attempt-cannot-start),
  // and if it started since, the commit finds its row changed.
  const inFlight = planSourceRow(plan)?.started === true && runningCalls(owner).has(plan.sourceCallId);
  const running = lateBodyOf(owner, plan.taskId, plan.operationKey) ?? (inFlight ? plan.sourceCallId : undefined);
  if (running !== undefined) {
    throw new ToolRetryError(
      'body_running',
      `the body of call ${running} (operation ${plan.operationKey}) is still running in this process; retry once it has ended (the journal records it)`,
    );
  }
  // A review journaled here since the plan's history was read (a reconciler's completed answer over the not_executed
  // review the plan rests on): the store's check of the source's row cannot tell one settled review from another.
  // One being journaled counts already: the store holds it before its commit returns (an anchor sink still writing).
  const reviews = reviewsHere.get(owner)?.get(plan.sourceCallId);
  const journaling = reviewingHere.get(owner)?.has(plan.sourceCallId) === true;
  if (journaling || (reviews !== undefined && reviews > planSourceReviews(plan))) {
    throw new StoreConflictError(
      'history_changed',
      `a review of call ${plan.sourceCallId} ${journaling ? 'is being journaled' : 'was journaled'} in this process that the history the plan was made from does not hold: load the history again and prepare a new plan; ${planState}, nothing was written`,
    );
  }
  // Any attempt of the operation: a later one refused before its body (another host's) leaves an earlier one's
  // answer, or lookup, about the same write.
  const attempts = planOperationCalls(plan);
  const kept = answersHere.get(owner);
  const answered = attempts.find((id) => kept?.has(id));
  if (answered !== undefined) {
    const unjournaled = kept!.get(answered)!;
    throw new ToolRetryError(
      'completed',
      `${unjournaled.actor} answered in this process that call ${answered} (operation ${plan.operationKey}) completed (${unjournaled.evidence}), and the owner that asked was taken over before it could journal that: the write happened; record that review instead of retrying (${planState}, nothing was written)`,
    );
  }
  const asked = attempts.find((id) => askedHere.get(owner)?.has(id) === true);
  if (asked !== undefined) {
    throw new ToolRetryError(
      'being_reconciled',
      `a reconcile pass in this process is asking the reconciler of call ${asked} (operation ${plan.operationKey}) whether it took effect; ${planState}: prepare a retry on the journal once its answer is journaled`,
    );
  }
  // A not_executed review decided while the source's body could still run, which has since returned or thrown here:
  // the review was made without that evidence, as the inbox's overtaken reviews are (docs/design.md#a-body-that-outlives-its-attempt).
  const ended = planReviewedWhileBodyOpen(plan) ? lateBodyEnd(owner, plan.sourceCallId) : undefined;
  if (ended === 'returned' || ended === 'threw') {
    throw new ToolRetryError(
      'needs_review',
      `the not_executed review of call ${plan.sourceCallId} was decided while its body could still run, and the body has since ${ended} in this process (the journal records it): review the call again with that evidence; ${planState}`,
    );
  }
}

/**
 * A retry of a call a review decision waits for in the decision inbox (recorded by an operator, not journaled yet):
 * the plan rests on the journal's latest review, which that decision may contradict (a colleague's `completed` after
 * a wrong `not_executed`). Refused before the plan is taken; the owner journals the decision first
 * (journalInboxReviews), and a plan is made on the journal then. Stores without an inbox have none waiting.
 */
export async function refuseWhileReviewWaits(owner: SessionOwner, plan: ToolRetryPlan): Promise<void> {
  // Any attempt of the operation: an earlier one whose outcome is open (a later one refused before its body) is
  // what an operator reviews, and what a retry may write again.
  const waiting = await owner.waitingReview?.(planOperationCalls(plan));
  if (waiting === undefined) return;
  throw new ToolRetryError(
    'needs_review',
    `review decision ${waiting.id} of call ${waiting.callId} (${String(waiting.decision)} by ${waiting.actor ?? 'an operator'}), an attempt of operation ${plan.operationKey}, waits in the decision inbox: journal it (journalInboxReviews) and decide on the journal; the plan was not taken, nothing was written`,
  );
}

export type AttemptCondition = Pick<CommitRequest, 'expectLatestAttempt' | 'expectNewOperation' | 'expectNoWaitingReview' | 'recheck'>;

/**
 * What the commit of an attempt's call requires: a retry must still be the latest attempt (and its source as its
 * plan read it, with no earlier owner writing since), no review decision about its operation may wait in the inbox,
 * and this process's checks (refuseUnsafeRetryHere) must still pass when the commit's state is read, whether the call
 * is recorded to run or refused; a caller-keyed first attempt must still be the first (two callers racing on one new
 * key: the second gets OperationInDoubtError naming the first).
 */
export function attemptCondition(owner: SessionOwner, op: ToolOperation, plan: ToolRetryPlan | undefined, callerKeyed: boolean): AttemptCondition {
  const row = plan ? planSourceRow(plan) : null;
  const repeated = plan ? planRepeatedRows(plan) : [];
  const source = row && plan ? { ...row, seenSeq: planHistorySeq(plan) } : null;
  if (op.retry) {
    return {
      expectLatestAttempt: { taskId: op.taskId, key: op.key, callId: op.retry.callId, ...(source ? { source } : {}), ...(repeated.length > 0 ? { repeated } : {}) },
      ...(plan ? { expectNoWaitingReview: planOperationCalls(plan), recheck: () => refuseUnsafeRetryHere(owner, plan, true) } : {}),
    };
  }
  return callerKeyed ? { expectNewOperation: { taskId: op.taskId, key: op.key } } : {};
}

/**
 * The calls in flight in this process, by store (storeOf) and session, whichever runtime and whichever owner of the
 * session its store made runs them (a session released and acquired again here still sees the calls its earlier
 * owner started): the in-doubt guard passes them over, and a review or a retry of one waits for it.
 */
const inFlight = new SessionTable<Map<string, InFlight>>();
const NONE: ReadonlyMap<string, InFlight> = new Map();

/** A call in flight here: the owner that entered it, and for a retry made from a plan, what the guard needs of it. */
interface InFlight {
  readonly by: SessionOwner;
  readonly retry: RetryInFlight | null;
}

/** A retry in flight: its decision step, and the ask that says whether its call is journaled yet. */
interface RetryInFlight {
  readonly step: string | null;
  readonly asked: RetryAsked;
}

/**
 * A retry made from a plan, from the moment it is asked for until its call is journaled or it ends without being
 * (`done`): an identical new call at the in-doubt guard meanwhile waits for it (whenWritten), so that it reads the
 * retry's row, and the journal holds the retry's call before that call's refusal.
 */
export interface RetryAsked {
  readonly owner: SessionOwner;
  readonly whenWritten: Promise<void>;
  readonly done: () => void;
}

const retriesAsked = new SessionTable<Set<RetryAsked>>();

/** Notes a retry asked for through `owner`, until its `done()` (called once its call is journaled, or it ended). */
export function askRetry(owner: SessionOwner): RetryAsked {
  let resolve = () => {};
  const whenWritten = new Promise<void>((r) => { resolve = r; });
  const asked: RetryAsked = {
    owner,
    whenWritten,
    // Asked until done: the set holds the retries whose call is not journaled yet, and only those.
    done: () => {
      const set = retriesAsked.get(owner);
      if (set?.delete(asked) !== true) return;
      if (set.size === 0) retriesAsked.delete(owner);
      resolve();
    },
  };
  retriesAsked.take(owner, () => new Set()).add(asked);
  return asked;
}

/** The model response (decision step) an action belongs to, as one string; null for a call with no action. */
const stepOf = (action: ActionContext | undefined): string | null => (action === undefined ? null : JSON.stringify([action.decision.taskId, action.decision.stepId]));

/** The calls of `owner`'s session in flight in this process, whichever owner of it entered them. */
export function runningCalls(owner: SessionOwner): Pick<ReadonlySet<string>, 'has'> {
  return inFlight.get(owner) ?? NONE;
}

/**
 * The calls `owner` itself has in flight: what the in-doubt guard passes over. A call an earlier owner of the session
 * left running here when another took the session over is in doubt for the new owner, as it would be for a host in
 * another process: its body may make the write while the new owner's identical call makes it again.
 */
export function callsRunningAs(owner: SessionOwner): ReadonlySet<string> {
  return callsEnteredBy(owner, () => true);
}

/**
 * The retries made from a plan that `owner` itself has in flight: what the in-doubt guard reads as the write of their
 * operation, whether or not their body has started (docs/design.md#the-in-doubt-guard). Not those of the decision
 * step of `besides`: calls one model response asked for side by side are that many intents, whichever is a retry.
 * A retry asked for whose own call is not journaled yet is waited for first, so the index shows its row, and the
 * journal holds its call before the refusal of the call asking.
 */
export async function retriesUnderWay(owner: SessionOwner, besides: ActionContext | undefined): Promise<ReadonlySet<string>> {
  for (;;) {
    const unwritten = [...(retriesAsked.get(owner) ?? [])].filter((asked) => asked.owner === owner).map((asked) => asked.whenWritten);
    if (unwritten.length === 0) break;
    await Promise.all(unwritten);
  }
  const step = stepOf(besides);
  return callsEnteredBy(owner, ({ retry }) => retry !== null && (step === null || retry.step !== step));
}

function callsEnteredBy(owner: SessionOwner, keep: (call: InFlight) => boolean): ReadonlySet<string> {
  const calls = inFlight.get(owner);
  const mine = new Set<string>();
  if (calls !== undefined) for (const [callId, call] of calls) if (call.by === owner && keep(call)) mine.add(callId);
  return mine;
}

/** Notes that the call of a retry in flight here is journaled, or will never be: the guard beside it reads it now. */
export function retryCallWritten(owner: SessionOwner, callId: string): void {
  inFlight.get(owner)?.get(callId)?.retry?.asked.done();
}

/**
 * The calls whose reconciler a pass in this process is asking (askAbout), and the source calls of the retries under
 * way here (enterRetry), by store and session, each with how many hold it. Neither waits for the other: a retry of a
 * call being asked is refused before its plan is taken (refuseUnsafeRetryHere), and a pass does not ask about a call a
 * retry here has begun to supersede. Otherwise the answer, about an attempt a retry then superseded, could not be
 * journaled (a review binds the latest attempt) and the retry would make a write the reconciler was saying happened.
 */
const askedHere = new SessionTable<Map<string, number>>();
const retriesHere = new SessionTable<Map<string, number>>();

function hold(table: SessionTable<Map<string, number>>, owner: SessionOwner, callId: string): () => void {
  const held = table.take(owner, () => new Map());
  held.set(callId, (held.get(callId) ?? 0) + 1);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const now = table.get(owner);
    const count = (now?.get(callId) ?? 1) - 1;
    if (count > 0) now!.set(callId, count);
    else now?.delete(callId);
    if (now?.size === 0) table.delete(owner);
  };
}

/** How many reviews each call of a session has, as of the last one journaled in this process (the newest REVIEWS_KEPT calls). */
const reviewsHere = new SessionTable<Map<string, number>>();
const REVIEWS_KEPT = 100_000;

/**
 * Reconcilers' `completed` answers this process got and could not journal (the owner that asked was fenced, and no
 * owner of the session here took over to write them), by call: a retry of the call here is refused, since the write
 * happened. Forgotten once a `completed` review of the call is journaled here, after which the journal refuses the
 * retry itself; a person's `not_executed` does not override the reconciler's answer (the newest REVIEWS_KEPT calls).
 */
const answersHere = new SessionTable<Map<string, { readonly actor: string; readonly evidence: string }>>();

/** A reconciler's `completed` answer about `callId` this process keeps because it could not journal it (keepUnjournaledCompleted). */
export function keptCompletedAnswer(owner: SessionOwner, callId: string): { readonly actor: string; readonly evidence: string } | undefined {
  return answersHere.get(owner)?.get(callId);
}

/** Notes a reconciler's `completed` answer about `callId` that could not be journaled. */
export function keepUnjournaledCompleted(owner: SessionOwner, callId: string, actor: string, evidence: string): void {
  setNewest(answersHere.take(owner, () => new Map()), callId, { actor, evidence }, REVIEWS_KEPT);
}

/** The calls a review of which is being journaled here, each with how many are. */
const reviewingHere = new SessionTable<Map<string, number>>();

/**
 * Journals a review of `callId` through `commit`, which makes `count` reviews of it: a retry plan of the call made on
 * fewer is refused from the start of the commit on, and after it once it succeeded.
 */
export async function journalingReview<T>(owner: SessionOwner, callId: string, count: number, completed: boolean, commit: () => Promise<T>): Promise<T> {
  const release = hold(reviewingHere, owner, callId);
  try {
    const done = await commit();
    // The most any commit here made: an older review's commit that returns after a newer one's (an anchor sink slower
    // for it) must not take the count back.
    const counts = reviewsHere.take(owner, () => new Map());
    setNewest(counts, callId, Math.max(count, counts.get(callId) ?? 0), REVIEWS_KEPT);
    if (completed) answersHere.get(owner)?.delete(callId);
    return done;
  } finally {
    release();
  }
}

/** Holds `sourceCallId` as retried here until the release it returns is called (after the retry's call is recorded or refused). */
export function enterRetry(owner: SessionOwner, sourceCallId: string): () => void {
  return hold(retriesHere, owner, sourceCallId);
}

/** Holds `callId` as asked about here until the release it returns is called; null when a retry of it is under way here. */
export function askAbout(owner: SessionOwner, callId: string): (() => void) | null {
  if (retriesHere.get(owner)?.has(callId) === true) return null;
  return hold(askedHere, owner, callId);
}

/** Notes that `callId` of `owner`'s session, a retry made from a plan or not, is in flight here until `leaveCall`. */
export function enterCall(owner: SessionOwner, callId: string, retry: RetryAsked | null, action: ActionContext | undefined): void {
  inFlight.take(owner, () => new Map()).set(callId, { by: owner, retry: retry === null ? null : { step: stepOf(action), asked: retry } });
}

export function leaveCall(owner: SessionOwner, callId: string): void {
  const calls = inFlight.get(owner);
  calls?.delete(callId);
  if (calls?.size === 0) inFlight.delete(owner);
}

/**
 * The same refusal, when the attempt it names is still running in this process (a double submit under one key): the
 * advice is to wait for that call's result, which a call under the key then reads, not to recover it.
 */
export const stillRunning = (e: OperationInDoubtError): OperationInDoubtError =>
  new OperationInDoubtError(e.taskId, e.operationKey, e.callId, 'it is still running in this process',
    'wait for its result: a call under this key then returns it, or the failure to recover');

/** The approval change of an attempt that may follow another: it supersedes the requests earlier attempts left. */
export const settling = (call: ToolCall, binding: ApprovalBinding): ApprovalChange => ({ settle: { callId: call.id, binding, at: new Date().toISOString() } });

/**
 * Whether an attempt that ends before its body ends for an interrupt only (cancelled, its deadline, its session let
 * go or lost): that says nothing about the action, so the attempt leaves the operation's approval requests as they
 * are, an operator's decision on one included, for the attempt the run makes next (docs/design.md#durable-approvals).
 * A stopped task (`budget`) is no interrupt here: no attempt of its operations will be made.
 */
export const interruptedOnly = (outcome: Failure): boolean => outcome.category === 'cancelled' || outcome.category === 'timeout';

/** `work`'s result, or null when its commit was refused because an operator decided meanwhile (isDecidedMeanwhile). */
export async function unlessDecidedMeanwhile<T>(work: () => Promise<T>): Promise<T | null> {
  try {
    return await work();
  } catch (error) {
    if (isDecidedMeanwhile(error)) return null;
    throw error;
  }
}

/**
 * Why `callId` of `owner`'s session is still running in this process, or null: in flight (no result recorded yet), or
 * a late body (its result recorded when it was interrupted, its body not ended). A review of it could be overtaken by
 * it, and a retry would run beside it.
 */
export function runningHere(owner: SessionOwner, callId: string): 'in_flight' | 'late_body' | null {
  if (runningCalls(owner).has(callId)) return 'in_flight';
  return bodyStillRuns(owner, callId) ? 'late_body' : null;
}

/** What an identical write says of a caller key's latest attempt that did not succeed (identicalWriteOf). */
export interface IdenticalWriteStanding {
  /** The attempt that made the write the key's operation asked for: its repeat's retry, or the write it repeated. */
  readonly madeBy: string | null;
  /**
   * For a refused repeat whose identical write is not made: the latest attempt of the identical write whose row makes
   * the in-doubt guard refuse a retry of it (in doubt, maybe running, or its retry due), to settle first; null when
   * none does (that write was decided against, say).
   */
  readonly toSettle: string | null;
}

/**
 * The standing of `callId`, a caller key's latest attempt that did not succeed, beside identical writes, as
 * assessSession reads it from the owner's journal: made by one (`repeat_of_completed`: it was refused as a repeat of
 * a write made since; `made_by_repeat`: its write, decided against, was made by a repeat's retry), or waiting on one.
 * Null for an owner a store of this package did not make (its journal is not read here), for a journal whose
 * evidence the pass refuses, and for a call the journal does not hold.
 */
export async function identicalWriteOf(owner: SessionOwner, callId: string): Promise<IdenticalWriteStanding | null> {
  const record = await evidenceOf(owner, callId);
  if (record === undefined) return null;
  const madeBy = record.repeatedCompleted ?? record.madeByRepeat;
  return { madeBy: madeBy?.call.id ?? null, toSettle: record.waitsOn?.call.id ?? null };
}

/**
 * What a caller key's recorded attempt says of its write, for a call under that key with another binding (other
 * arguments, tool or contract): a re-delivered job whose payload a field changed in, or a step run again after a
 * redeploy, is the same step. The advice "use a new operation key" alone made the write twice when the key's write
 * was made or in doubt, so the refusal says which, and that a new key would run the write again
 * (docs/design.md#caller-keys-and-replay).
 */
export async function bindingChangedAdvice(owner: SessionOwner, recorded: RecordedAttempt): Promise<string> {
  const callId = recorded.callId;
  const again = 'a new operation key would make the write again';
  const done = (how: string) => `its write was made (${how}): that step is done, and ${again}; use one only for another write`;
  const doubt = (how: string) => `its write is in doubt (${how}): settle that call first (assessSession or jingwei inspect says how); ${again} if it was made`;
  const result = recorded.resultEvent?.kind.type === 'tool_result' ? recorded.resultEvent.kind.result : null;
  if (result?.outcome.status === 'succeeded') return done(`call ${callId} succeeded`);
  if (recorded.review?.outcome === 'completed') return done(`a review of call ${callId} confirmed it`);
  if (runningCalls(owner).has(callId) || bodyStillRuns(owner, callId)) {
    return `call ${callId} is still running here: wait for it to end; ${again}`;
  }
  const record = await evidenceOf(owner, callId);
  const madeBy = record?.repeatedCompleted ?? record?.madeByRepeat;
  if (madeBy !== undefined) return done(`by call ${madeBy.call.id}, an identical write`);
  const open = record === undefined ? null : earlierOpenAttempt(record);
  if (open !== null) return doubt(`call ${open.call.id}, an earlier attempt, may have run; call ${callId} was refused before its body`);
  if (record?.waitsOn !== undefined) return doubt(`call ${callId} was refused as a repeat of call ${record.waitsOn.call.id}, an identical write in doubt`);
  if (recorded.review === undefined && result?.outcome.status === 'failed' && result.outcome.category === 'approval_pending') {
    return `call ${callId} waits for a person's approval: approved, its request lets a retry under this key make the write, so deny it first ` +
      `(jingwei deny, or the decision inbox; jingwei queue lists it), and only then does a new operation key run this call without making the write twice`;
  }
  // A write a review found not made is due: whatever retries this key (a resumed run, the startup routine) makes it.
  const due = recorded.review?.outcome === 'not_executed' ? callId : record === undefined ? null : earlierDueAttempt(record)?.call.id ?? null;
  if (due !== null) {
    return `a review says call ${due} did not make its write, which is due: a retry under this key (a resumed run, the startup routine, ` +
      `prepareToolRetry) makes it, and ${again}, so use one only where nothing will retry this key`;
  }
  const notRun = result !== null && PRE_BODY_CATEGORIES.has(result.outcome.category) ? `call ${callId} was refused before its body (${result.outcome.category}: ${result.outcome.code})`
      : recorded.startedEvent === null ? `call ${callId} never started its body` : null;
  if (notRun !== null) return `${notRun}: a new operation key runs this call`;
  return doubt(`call ${callId}: ${result === null ? 'its body started and no result is recorded' : `it failed after its body started (${result.outcome.category}: ${result.outcome.code})`}`);
}

/** The evidence pass's record of `callId` in the owner's journal; undefined when it is not read here or refused. */
async function evidenceOf(owner: SessionOwner, callId: string): Promise<AttemptRecord | undefined> {
  const journal = keptJournalOf(owner);
  if (journal === null) return undefined;
  try {
    return collectEvidence(await journal).calls.get(callId);
  } catch (error) {
    // Evidence the pass refuses (assessSession refuses it too) leaves the key's answer as it was: in doubt.
    if (error instanceof ToolRetryError && error.code === 'invalid_evidence') return undefined;
    throw error;
  }
}
