/**
 * The startup routine of a recovering host (docs/design.md#recovering-abandoned-sessions): take over each session
 * whose owner's lease ran out, ask the reconcilers about every uncertain call, then apply an explicit policy to what
 * is still open, and report what was done. Never takes a live session; never retries what needs a person.
 */
import { setMaxListeners } from 'node:events';
import { InvalidInputError, JingweiError, SessionBusyError, StaleOwnerError, StoreUnavailableError, ToolRecordingError } from '../errors.js';
import type { SessionEvent, ToolRetryReview } from '../event/types.js';
import type { CallId } from '../ids.js';
import { isValidText } from '../ids.js';
import { LEASE_LIMITS, RECOVERY_LIMITS } from '../limits.js';
import { bodiesEnded, stopRenewing } from '../store/owner-commit.js';
import type { AcquireOptions, SessionOwner, SessionStore, SessionSummary } from '../store/types.js';
import { HeadAnchor, type AnchorOptions } from '../store/anchors.js';
import { describeSetting } from '../text.js';
import { ToolAttention, type ToolNextStep, type ToolCallAssessment } from './assess.js';
import { inspectToolRecovery } from './recovery.js';
import type { ToolRecoveryStatus } from './retry-policy.js';
import type { ToolRetryPlan } from './retry-plan.js';
import { personDecided, reconcileUncertainCalls, type ReconciledCall } from './reconcile.js';
import { journalWaitingReviews, reviewDecisionsWaiting, sessionsWithWaitingReviews, type JournaledInboxReview } from './inbox-review.js';
import type { Tool, ToolRuntime } from './types.js';
import { hostPanicDescriber, registeredTools } from './runtime.js';
import { quietly } from './telemetry.js';
import { RECOVERY_POLICIES, approvalRetryPlan, approvalsToUse, callsAwaitingApproval, openCalls, safeRetryPlan, type RecoveryPolicy } from './retry-safe.js';

export { RECOVERY_POLICIES, RETRY_SAFE_ACTOR, approvalRetryPlan, approvalsToUse, callsAwaitingApproval, decidedApprovals, openCalls, operationOf, safeRetryPlan, type RecoveryPolicy } from './retry-safe.js';

/** What the routine needs from the host: its runtime, the tools registered in it, and whose grants retries use. */
export interface RecoveryHost {
  readonly runtime: ToolRuntime;
  /** The tools as registered now: their reconcilers are asked, and a retry runs the current contract. */
  readonly tools: readonly Tool[];
  /** The caller (a key of the runtime's grants) the policy's retries are made as. */
  readonly caller: string;
}

export interface RecoverOptions {
  /** Default `suspend`. */
  readonly policy?: RecoveryPolicy;
  /** The host identity recorded as the new owner of each session taken over. Default `jingwei-recover`. */
  readonly owner?: string;
  /** The lease of the recovering owner while it works (and after, with `keep`). */
  readonly leaseMs?: number;
  /**
   * Keep each session taken over (its owner is in the report, heartbeating) so the host can resume its runs;
   * default false: release it when done.
   */
  readonly keep?: boolean;
  /** Passed to reconcilers and to the retries' gateway. */
  readonly signal?: AbortSignal;
  /**
   * How many sessions are recovered at once, default 1 (one after the other). A session's own calls are always
   * reconciled and retried in order; with more, the retries of different sessions run side by side, so a host
   * restarting over many abandoned sessions is not held for the sum of their bodies' times. The report keeps the
   * listing order. At most 64.
   */
  readonly concurrency?: number;
  /**
   * Told each session's recovery as soon as it is final, before the routine returns (with `concurrency`, in the order
   * they finish): what a host logs, and what it still knows if the routine throws later (the store lost, say), since
   * the report is then never returned. An owner kept (`keep`) that it was told of is the host's from then on, and
   * stays held if the routine throws; the others are released as the routine ends. Called synchronously; whatever it
   * throws, or a promise it returns rejects with, is swallowed.
   */
  readonly onSession?: (recovery: SessionRecovery) => unknown;
  /**
   * The host's anchoring (docs/design.md#anchored-signed-heads): each owner the routine acquires signs checkpoints of
   * what it writes (its takeover, the reviews and reconcilers' answers it journals, its retries), as the host's own
   * owners do. Without it a journal rolled back to before the routine still verifies against the anchors.
   */
  readonly anchor?: AnchorOptions;
}

/** One retry the `retry_safe` policy made. */
export interface RecoveryRetry {
  /** The open call the plan was prepared from. */
  readonly callId: CallId;
  readonly name: string;
  /** The new attempt's call id, or null when the runtime refused before recording one. */
  readonly retryCallId: CallId | null;
  /**
   * `succeeded`, the recorded failure category, `refused` (the runtime threw before it journaled the attempt; `error`
   * says why), or `recording_failed` (the attempt was journaled, but its start or result could not be: in doubt).
   */
  readonly outcome: string;
  /** The new attempt's recovery status, or null when nothing was recorded. */
  readonly status: ToolRecoveryStatus | null;
  /** The review the retry audit carries: its actor is `policy:retry_safe`. */
  readonly review: ToolRetryReview;
  readonly error?: { readonly code: string; readonly message: string };
}

/** An open call left in the queue for a person (or a later run). */
export interface RecoveryLeftCall {
  readonly callId: CallId;
  readonly name: string;
  readonly nextStep: ToolNextStep;
  readonly attention: ToolAttention;
  /** Why it was left: the policy, or the decision-table row that needs a person. */
  readonly reason: string;
}

export type SessionRecovery =
  | {
      readonly sessionId: string;
      readonly action: 'skipped';
      /** `live`: its owner renewed the lease (or another host took it) between listing and takeover. */
      readonly reason: 'live';
      readonly holder: string;
      readonly leaseExpiresAt: number | null;
    }
  | {
      readonly sessionId: string;
      readonly action: 'skipped';
      /**
       * `released`: nobody holds it any more: another host's routine (or its owner) took it and released it between
       * listing and takeover. That routine recovered it and reported what it did; this one does nothing twice.
       */
      readonly reason: 'released';
    }
  | {
      readonly sessionId: string;
      readonly action: 'taken_over';
      /**
       * The abandoned owner, as listed; null when the session was taken over since it was listed (another host's
       * routine that stopped before it released it): the owner fenced is not the one listed.
       */
      readonly previousOwner: string | null;
      readonly epoch: number;
      /** Operators' review decisions from the decision inbox, journaled first (`journalInboxReviews`). */
      readonly reviewed: readonly JournaledInboxReview[];
      readonly reconciled: readonly ReconciledCall[];
      readonly retried: readonly RecoveryRetry[];
      readonly left: readonly RecoveryLeftCall[];
      /** With `keep`: the owner now holding the session; otherwise null (released, or held: `heldForNextRoutine`). */
      readonly owner: SessionOwner | null;
      /**
       * Not released: held with its heartbeat stopped, its lease left to run out, so the next routine finds it
       * abandoned again and decides again (a reconciler failed on a call left open, a review decision came into the
       * inbox while the routine ran, a retry was refused because the call's evidence moved meanwhile, or the routine
       * was cancelled while it worked there). A host that wants the session before then acquires it with
       * `takeover: 'expired'` once that lease has run out.
       */
      readonly heldForNextRoutine: boolean;
    }
  | {
      readonly sessionId: string;
      /**
       * A session nobody held, with operators' review decisions waiting in the inbox (its run finished and its host
       * released it, say): acquired, the decisions journaled, released. Nothing else is decided or retried there.
       */
      readonly action: 'reviews_journaled';
      readonly epoch: number;
      readonly reviewed: readonly JournaledInboxReview[];
    }
  | {
      readonly sessionId: string;
      /**
       * Under `retry_safe`, a session nobody held with approval decisions a person made after its host was gone (the
       * routine that took it over before had left its calls, nobody having decided yet): acquired, any review
       * decisions journaled, each call waiting for a decided approval retried once, released
       * (docs/design.md#approvals-its-host-never-used).
       */
      readonly action: 'approvals_used';
      readonly epoch: number;
      readonly reviewed: readonly JournaledInboxReview[];
      readonly retried: readonly RecoveryRetry[];
      readonly left: readonly RecoveryLeftCall[];
    }
  | {
      readonly sessionId: string;
      readonly action: 'failed';
      /** The owner taken over, or null when the takeover itself failed. */
      readonly epoch: number | null;
      readonly error: { readonly code: string; readonly message: string };
    };

export interface RecoveryReport {
  readonly policy: RecoveryPolicy;
  /**
   * Every session whose lease had expired when listed, in listing order; then every session nobody held whose
   * operators' review decisions waited in the inbox (`reviews_journaled`), or, under `retry_safe`, where a call
   * waited for an approval a person had decided (`approvals_used`).
   */
  readonly sessions: readonly SessionRecovery[];
}

function errorOf(error: unknown): { code: string; message: string } {
  if (error instanceof JingweiError) return { code: error.code, message: error.message };
  return { code: 'unexpected', message: error instanceof Error ? error.message : String(error) };
}

/** The acquire options the routine passes on from its own: the lease and the anchoring. */
const leaseAndAnchor = (settings: RecoverOptions): Pick<AcquireOptions, 'leaseMs' | 'anchor'> => ({
  ...(settings.leaseMs === undefined ? {} : { leaseMs: settings.leaseMs }),
  ...(settings.anchor === undefined ? {} : { anchor: settings.anchor }),
});

const tell = (onSession: RecoverOptions['onSession'], recovery: SessionRecovery): void => {
  if (onSession !== undefined) quietly(() => onSession(recovery));
};

function checkArguments(
  store: SessionStore,
  host: RecoveryHost,
  options: RecoverOptions,
): Required<Pick<RecoverOptions, 'policy' | 'owner' | 'keep' | 'concurrency'>> & Pick<RecoverOptions, 'onSession'> {
  if (typeof store !== 'object' || store === null || typeof store.listExpiredSessions !== 'function') {
    throw new InvalidInputError('store', 'must be a SessionStore');
  }
  if (typeof host !== 'object' || host === null || typeof host.runtime?.bind !== 'function') {
    throw new InvalidInputError('host.runtime', 'must be the ToolRuntime the host registered its tools in');
  }
  if (!Array.isArray(host.tools)) throw new InvalidInputError('host.tools', 'must be the array of tools registered in the runtime');
  // Their reconcilers are asked before any person's review is used: a list that leaves one out (or a copy without its
  // reconcile) would let a retry through on a review the tool's exact reconciler would have contradicted.
  // A wrapper's tools cannot be listed, so a list that leaves one out could not be told from a complete one.
  const registered = registeredTools(host.runtime);
  if (registered === null) {
    throw new InvalidInputError('host.runtime', 'must be the runtime createToolRuntime returned (or a Proxy of it): host.tools is checked against the tools registered in it, which a wrapper does not show');
  }
  for (const [i, t] of (host.tools as readonly unknown[]).entries()) {
    const name = (t as { name?: unknown } | null)?.name;
    if (typeof name !== 'string' || registered.get(name) !== t) {
      throw new InvalidInputError(`host.tools[${i}]`, `must be a tool registered in host.runtime (the same object), got ${typeof name === 'string' ? `a ${JSON.stringify(name)} that is not it` : 'something else'}`);
    }
  }
  const given = new Set(host.tools);
  const missing = [...registered.values()].filter((t) => !given.has(t)).map((t) => t.name);
  if (missing.length > 0) throw new InvalidInputError('host.tools', `must hold every tool registered in host.runtime; missing: ${missing.join(', ')}`);
  if (typeof host.caller !== 'string' || !isValidText(host.caller)) throw new InvalidInputError('host.caller', 'must name a caller of the runtime\'s grants');
  if (typeof options !== 'object' || options === null) throw new InvalidInputError('options', 'must be a policy name or an options object');
  const policy = options.policy ?? 'suspend';
  if (!(RECOVERY_POLICIES as readonly unknown[]).includes(policy)) {
    throw new InvalidInputError('policy', `${JSON.stringify(policy)} is not one of ${RECOVERY_POLICIES.join(', ')}`);
  }
  const lease = options.leaseMs;
  if (lease !== undefined && (!Number.isSafeInteger(lease) || lease < LEASE_LIMITS.minMs || lease > LEASE_LIMITS.maxMs)) {
    throw new InvalidInputError('leaseMs', `must be an integer from ${LEASE_LIMITS.minMs} to ${LEASE_LIMITS.maxMs} ms, got ${describeSetting(lease)}`);
  }
  const owner = options.owner ?? 'jingwei-recover';
  if (typeof owner !== 'string' || !isValidText(owner)) throw new InvalidInputError('owner', 'must be 1..1024 bytes of non-blank text');
  const concurrency = options.concurrency ?? 1;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1 || concurrency > RECOVERY_LIMITS.maxConcurrency) {
    throw new InvalidInputError('concurrency', `must be an integer from 1 to ${RECOVERY_LIMITS.maxConcurrency}, got ${describeSetting(concurrency)}`);
  }
  const onSession = options.onSession;
  if (onSession !== undefined && typeof onSession !== 'function') throw new InvalidInputError('onSession', 'must be a function');
  // Checked before anything is taken over, as each acquire checks it again.
  if (options.anchor !== undefined) new HeadAnchor(options.anchor);
  return { policy, owner, keep: options.keep === true, concurrency, ...(onSession === undefined ? {} : { onSession }) };
}

/**
 * `work` applied to every item, at most `limit` at once, the results in the items' order. After the first failure no
 * further item is started; the ones under way are waited for (each releases or keeps its session as it decides)
 * before that failure is thrown, so nothing the routine started is left running behind its caller.
 */
async function inOrder<T, R>(items: readonly T[], limit: number, stopped: () => boolean, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  const failures: unknown[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (failures.length === 0 && !stopped() && next < items.length) {
      const index = next++;
      try {
        results[index] = await work(items[index]!);
      } catch (error) {
        failures.push(error);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failures.length > 0) throw failures[0];
  // Cancelled: the items never started are left out (sparse slots dropped), the rest in order.
  return results.filter(() => true);
}

/**
 * Recovers every abandoned session of `store` (docs/design.md#recovering-abandoned-sessions): for each session
 * whose owner's lease ran out, acquires it with `takeover: 'abandoned'` (a session that became live meanwhile, or
 * that another host's routine recovered and released since the listing, is skipped and reported, never fenced),
 * asks the reconcilers of `host.tools` about every uncertain call, then, with policy `retry_safe`, executes one retry
 * of each open call prepareToolRetry plans without a review passed by anyone, its audit carrying a review by
 * `policy:retry_safe`. Everything else stays in the queue for a person. Releases each session unless `keep`. Then
 * journals the operators' review decisions waiting in the inbox for sessions nobody holds (a finished run's, released
 * by its host), which no host would come back to. With `concurrency`, that many sessions at once, each one's calls in
 * order and the report in listing order. Throws InvalidInputError for bad arguments (an unknown policy, a bad
 * `leaseMs` or `concurrency`) and the store's own errors when the store is closed or unreachable, once the sessions
 * under way have finished; a failure inside one session is reported for that session and the routine goes on.
 */
export async function recoverAbandoned(
  store: SessionStore,
  host: RecoveryHost,
  options: RecoveryPolicy | RecoverOptions = {},
): Promise<RecoveryReport> {
  const settings: RecoverOptions = typeof options === 'string' ? { policy: options } : options;
  const checked = checkArguments(store, host, settings);
  const expired = await store.listExpiredSessions();
  // One listener on the caller's signal, however many sessions are under way (each session's calls listen to it).
  const cancel = new AbortController();
  const outer = settings.signal;
  const forward = () => cancel.abort(outer?.reason);
  if (outer?.aborted === true) forward();
  else outer?.addEventListener('abort', forward, { once: true });
  setMaxListeners(0, cancel.signal);
  const inner: RecoverOptions = outer === undefined ? settings : { ...settings, signal: cancel.signal };
  const stopped = () => cancel.signal.aborted;
  // Sessions kept for the host (`keep`) whose report cannot reach it, the routine failing after them: released, or
  // their owners would renew leases nobody can use or let go until the process exits.
  const kept: SessionOwner[] = [];
  try {
    const sessions: SessionRecovery[] = await inOrder(expired, checked.concurrency, stopped, async (summary) => {
      const recovered = await recoverOne(store, host, summary, checked, inner);
      // Handed to the host through onSession, a kept owner is the host's: not released if the routine throws later.
      if (recovered.action === 'taken_over' && recovered.owner !== null && checked.onSession === undefined) kept.push(recovered.owner);
      tell(checked.onSession, recovered);
      return recovered;
    });
    const listed = new Set<string>(expired.map((summary) => summary.sessionId));
    const waiting = stopped() ? [] : [
      ...(await sessionsWithWaitingReviews(store)),
      ...(checked.policy === 'retry_safe' ? (await approvalsToUse(store, (id) => listed.has(id))).map((found) => found.sessionId) : []),
    ];
    const released = [...new Set(waiting)].filter((sessionId) => !listed.has(sessionId));
    const journaled = await inOrder(released, checked.concurrency, stopped, async (sessionId) => {
      const recovery = await recoverReleased(store, host, sessionId, checked, inner);
      if (recovery !== null) tell(checked.onSession, recovery);
      return recovery;
    });
    for (const session of journaled) if (session !== null) sessions.push(session);
    kept.length = 0;
    return { policy: checked.policy, sessions };
  } finally {
    outer?.removeEventListener('abort', forward);
    await Promise.all(kept.map((owner) => owner.release().catch(() => stopRenewing(owner))));
  }
}

/**
 * Under `retry_safe`, each call awaiting an approval that a person has decided and no attempt has used is retried
 * once, the decision answering for it; under `suspend`, and while nobody has decided, it is left, saying why.
 */
async function useDecidedApprovals(
  store: SessionStore,
  host: RecoveryHost,
  owner: SessionOwner,
  history: readonly SessionEvent[],
  policy: RecoveryPolicy,
  signal: AbortSignal | undefined,
): Promise<{ readonly retried: RecoveryRetry[]; readonly left: RecoveryLeftCall[] }> {
  const retried: RecoveryRetry[] = [];
  const left: RecoveryLeftCall[] = [];
  for (const call of callsAwaitingApproval(history)) {
    const decision = owner.decidedApproval ? await owner.decidedApproval(call.taskId!, call.key!) : undefined;
    const planned = approvalRetryPlan(history, call, decision, policy);
    if ('reason' in planned) {
      left.push({ callId: call.callId, name: call.name, nextStep: call.nextStep, attention: call.attention, reason: planned.reason });
      continue;
    }
    const retry = await runRetry(host, owner, call, planned.plan, planned.review, signal);
    const after = await store.loadHistory(owner.sessionId);
    const open = openCalls(after).find((c) => c.callId === retry.retryCallId);
    const leave = (reason: string) => left.push({ callId: open?.callId ?? call.callId, name: call.name, nextStep: open?.nextStep ?? call.nextStep, attention: open?.attention ?? call.attention, reason: `${planned.decided}; ${reason}` });
    if (open !== undefined) leave(`its retry (call ${retry.retryCallId}) ended ${retry.outcome}: a person reviews the call`);
    else if (retry.outcome === 'refused') leave(`the retry was refused, nothing written: ${retry.error?.message ?? 'no reason given'}`);
    // Recorded refused before its body (its tool redeployed since, say): the approved write was not made, and no
    // host will make it on this decision.
    else if (retry.outcome !== 'succeeded' && retry.outcome !== 'approval_denied') {
      leave(`the routine retried it once and the retry ended ${retry.outcome} before its body: the approved write was not made, and the decision is spent (no host will make the write on it); the queue does not list a call that provably never ran, so this report is where it shows: a person decides whether to make it again (a new call, approved again)`);
    }
    retried.push(retry.retryCallId === null ? retry : { ...retry, status: inspectToolRecovery(after, retry.retryCallId).status });
  }
  return { retried, left };
}

/**
 * A session nobody holds whose operators' review decisions wait in the inbox: no host would ever come back to journal
 * them (its run finished, its host released it), and the queue would show the call in doubt for good. Acquired
 * without a takeover (a session some host holds is left to it: null; so is one whose decisions another routine used
 * since the listing), the reviews journaled, released. Under
 * `retry_safe`, so is one with approval decisions a person made after the routine had left its calls (nobody had
 * decided then), and those calls are retried once, as when the session is taken over.
 */
async function recoverReleased(
  store: SessionStore,
  host: RecoveryHost,
  sessionId: string,
  checked: { policy: RecoveryPolicy; owner: string },
  settings: RecoverOptions,
): Promise<SessionRecovery | null> {
  let owner: SessionOwner;
  try {
    owner = await store.acquire(sessionId, { owner: checked.owner, ...leaseAndAnchor(settings) });
  } catch (error) {
    if (error instanceof SessionBusyError) return null;
    if (error instanceof StoreUnavailableError || error instanceof InvalidInputError) throw error;
    return { sessionId, action: 'failed', epoch: null, error: errorOf(error) };
  }
  try {
    const inbox = await journalWaitingReviews(owner, store, await store.loadHistory(sessionId));
    let leftForApprovals = 0;
    if (checked.policy === 'retry_safe') {
      const approvals = await useDecidedApprovals(store, host, owner, inbox.history, 'retry_safe', settings.signal);
      if (approvals.retried.length > 0) {
        return { sessionId, action: 'approvals_used', epoch: owner.epoch, reviewed: inbox.journaled, ...approvals };
      }
      leftForApprovals = approvals.left.length;
    }
    // Another host's routine did what was waiting between the listing and this acquire: nothing to report.
    if (inbox.journaled.length === 0 && leftForApprovals === 0) return null;
    return { sessionId, action: 'reviews_journaled', epoch: owner.epoch, reviewed: inbox.journaled };
  } catch (error) {
    if (error instanceof StoreUnavailableError) throw error;
    return { sessionId, action: 'failed', epoch: owner.epoch, error: errorOf(error) };
  } finally {
    // Released as it was found, whatever happened: a session whose journal cannot be read is reported again by every
    // routine while its review waits, and is not made to look abandoned (held by the routine, a host's acquire
    // refused until the lease ran out, then taken over and failed by every routine).
    await owner.release().catch(() => undefined);
  }
}

async function recoverOne(
  store: SessionStore,
  host: RecoveryHost,
  summary: SessionSummary,
  checked: { policy: RecoveryPolicy; owner: string; keep: boolean },
  settings: RecoverOptions,
): Promise<SessionRecovery> {
  const { sessionId } = summary;
  let owner: SessionOwner;
  try {
    // Only a session still held and abandoned: one another host's routine recovered and released since the listing
    // is not taken and recovered again (its calls reported twice, a safe retry made again).
    owner = await store.acquire(sessionId, { owner: checked.owner, takeover: 'abandoned', ...leaseAndAnchor(settings) });
  } catch (error) {
    if (error instanceof SessionBusyError) {
      return { sessionId, action: 'skipped', reason: 'live', holder: error.holder, leaseExpiresAt: error.leaseExpiresAt };
    }
    if (error instanceof StaleOwnerError) return { sessionId, action: 'skipped', reason: 'released' };
    if (error instanceof StoreUnavailableError || error instanceof InvalidInputError) throw error;
    return { sessionId, action: 'failed', epoch: null, error: errorOf(error) };
  }
  let keep = false;
  let failed = false;
  let revisit = false;
  try {
    const signal = settings.signal;
    const inbox = await journalWaitingReviews(owner, store, await store.loadHistory(sessionId));
    const describePanic = hostPanicDescriber(host.runtime);
    const reconciled = await reconcileUncertainCalls(owner, host.tools, inbox.history, {
      ...(signal === undefined ? {} : { signal }),
      ...(describePanic === undefined ? {} : { describePanic }),
    });
    let history = reconciled.history;
    const retried: RecoveryRetry[] = [];
    const left: RecoveryLeftCall[] = [];
    for (const call of openCalls(history)) {
      const leave = (reason: string) => left.push({ callId: call.callId, name: call.name, nextStep: call.nextStep, attention: call.attention, reason });
      const asked = reconciled.calls.find((c) => c.callId === call.callId);
      // A reconciler that failed on a call left open may answer in a later routine: that routine must find it, whatever
      // the policy.
      const reconcilerFailed = asked?.action === 'failed';
      // A person's not_executed review that the tool's own reconciler could not check (it threw or timed out, or the
      // routine was cancelled while it asked): the outside system's exact answer is not overridden by a person's
      // reading of it (docs/design.md#reconcilers). The pass journaled that as an uncertain review over the person's,
      // so no host retries on it; it says why.
      if (reconcilerFailed && asked.review !== null) {
        leave(`the tool's reconciler ${asked.review.evidence}`);
        revisit = true;
        continue;
      }
      if (checked.policy === 'suspend') {
        // A person who decided over a reconciler that could not say has decided: nothing is waiting for it.
        if (reconcilerFailed && !personDecided(history, call.callId)) revisit = true;
        leave(`policy suspend: ${call.reason}`);
        continue;
      }
      const safe = safeRetryPlan(history, call);
      if ('reason' in safe) {
        if (reconcilerFailed) revisit = true;
        leave(safe.reason);
        continue;
      }
      const retry = await runRetry(host, owner, call, safe.plan, safe.review, signal);
      // Refused with nothing written because the call's evidence moved while the retry was under way (an operator's
      // review decision came into the inbox, or a review was journaled here): the call is still open. The session is
      // kept held, its lease left to run out, so the next routine journals the decision first and decides again;
      // released, no routine would ever come back to it.
      const moved = retry.outcome === 'refused' && (retry.error?.code === 'needs_review' || retry.error?.code === 'history_changed' || retry.error?.code === 'being_reconciled');
      if (moved) {
        leave(`the retry was refused, nothing written: ${retry.error!.message}; the next routine decides it again`);
        revisit = true;
      }
      history = await store.loadHistory(sessionId);
      // Still open after the retry, which settled nothing: refused for another reason (its tool redeployed under another
      // contract since, say), recorded refused before its body (the caller's grant withdrawn, a guard), or ended in doubt
      // itself. Only a person can settle it now, and the open call named is the one the queue lists (the retry, when it
      // is the operation's latest attempt). One settled meanwhile (another host's attempt succeeded) is not left.
      const open = moved ? undefined : openCalls(history).find((c) => c.callId === call.callId || c.callId === retry.retryCallId);
      if (open !== undefined) {
        const why = retry.outcome === 'refused'
          ? `the retry was refused, nothing written: ${retry.error?.message ?? 'no reason given'}`
          : `the retry (call ${retry.retryCallId}) ended ${retry.outcome} and settled nothing`;
        // Still in doubt: a person finds out what happened. Not in doubt (a write a review left due, its retry refused
        // before its body): nothing is left to review, only the cause of the refusal to fix.
        const next = open.attention === ToolAttention.InDoubt ? 'a person reviews the call' : 'a host retries it once what refused it is fixed';
        left.push({ callId: open.callId, name: open.name, nextStep: open.nextStep, attention: open.attention, reason: `${why}; ${next}` });
      }
      retried.push(retry.retryCallId === null ? retry : { ...retry, status: inspectToolRecovery(history, retry.retryCallId).status });
    }
    // Calls waiting for an approval: a decided one is a write a person said to make (or not) that no attempt has
    // used, and the host that waited for it is gone (docs/design.md#approvals-its-host-never-used).
    const approvals = await useDecidedApprovals(store, host, owner, history, checked.policy, signal);
    retried.push(...approvals.retried);
    left.push(...approvals.left);
    // A review decision recorded while the routine ran (after it journaled the inbox): the next routine journals it
    // first, so the session is kept held for it; released, no routine would come back to the session.
    if (await reviewDecisionsWaiting(store, sessionId)) revisit = true;
    // Cancelled while it worked here: a reconciler not asked, a retry stopped. The next routine decides again.
    if (signal?.aborted === true) revisit = true;
    keep = checked.keep;
    return {
      sessionId, action: 'taken_over', previousOwner: owner.epoch === summary.epoch + 1 ? summary.owner : null, epoch: owner.epoch, reviewed: inbox.journaled, reconciled: reconciled.calls, retried, left,
      owner: keep ? owner : null, heldForNextRoutine: revisit && !keep,
    };
  } catch (error) {
    // The store failed (or closed) in the middle of the session: held for the next routine, not released with calls
    // a reconciler could settle still open and no routine to come back to them.
    failed = true;
    if (error instanceof StoreUnavailableError) throw error;
    return { sessionId, action: 'failed', epoch: owner.epoch, error: errorOf(error) };
  } finally {
    // A session this routine could not recover (a corrupt journal) is not released: released, it would drop out of
    // every later startup routine and take new writes on top of what could not be read. It stays held, its lease
    // left to run out, so it is abandoned again and reported by the next routine until a person deals with it.
    // So is one with a call left open whose reconciler failed (or the routine was cancelled while it asked): released,
    // no later routine would ask that reconciler again, though the outside system may answer then. And one with a
    // review decision recorded while the routine ran, or a retry refused because the call's evidence moved meanwhile:
    // the next routine journals the decision and decides again.
    // Either way, not before the bodies of its calls still running here have ended (a retry's, stopped by a cancel,
    // that ignores its signal, or one an earlier owner here started): until then its lease is renewed, so no other
    // routine asks a reconciler, or retries, under a body that can still make its write. A routine cancelled while it
    // waits returns, and the session is let go once they end (a body that never ends would hold the routine for ever).
    if (failed || (revisit && !keep)) await afterBodiesEnd(owner, settings.signal, () => stopRenewing(owner));
    else if (!keep) await afterBodiesEnd(owner, settings.signal, () => owner.release());
  }
}

/** Lets `owner`'s session go (`letGo`) once its bodies still running here have ended; after them, if `signal` aborts first. */
async function afterBodiesEnd(owner: SessionOwner, signal: AbortSignal | undefined, letGo: () => unknown): Promise<void> {
  const letGoQuietly = async () => {
    try {
      await letGo();
    } catch {
      // A release that fails leaves the session to its lease, as a host that stopped would.
    }
  };
  const waiter = 'the startup routine (recoverAbandoned)';
  if (await bodiesEnded(owner, waiter, signal) !== 'aborted') await letGoQuietly();
  else void bodiesEnded(owner, waiter).then(letGoQuietly);
}

async function runRetry(
  host: RecoveryHost,
  owner: SessionOwner,
  call: ToolCallAssessment,
  plan: ToolRetryPlan,
  review: ToolRetryReview,
  signal: AbortSignal | undefined,
): Promise<RecoveryRetry> {
  const gateway = host.runtime.bind({ owner, taskId: plan.taskId, caller: host.caller, ...(signal === undefined ? {} : { signal }) });
  const base = { callId: call.callId, name: call.name, review };
  try {
    const execution = await gateway.callWithOptions(plan.toolName, plan.arguments, { retry: plan });
    const outcome = execution.result.outcome;
    return { ...base, retryCallId: execution.call.id, outcome: outcome.status === 'succeeded' ? 'succeeded' : outcome.category, status: null };
  } catch (error) {
    if (error instanceof StoreUnavailableError) throw error;
    // Fenced (another host took the session over): the routine no longer holds it, and says so for the session.
    if (error instanceof StaleOwnerError || (error instanceof ToolRecordingError && error.cause instanceof StaleOwnerError)) throw error;
    // The attempt was journaled but its start or result could not be: its outcome is open, not refused.
    if (error instanceof ToolRecordingError && error.stage !== 'call') {
      return { ...base, retryCallId: error.call.id, outcome: 'recording_failed', status: null, error: errorOf(error) };
    }
    return { ...base, retryCallId: null, outcome: 'refused', status: null, error: errorOf(error) };
  }
}
