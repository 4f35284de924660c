/**
 * What the startup routine may retry on its own: the open calls, the plan `retry_safe` makes for one (a call no person
 * must review), and the calls waiting for an approval a person decided after their host was gone
 * (docs/design.md#recovering-abandoned-sessions, docs/design.md#approvals-its-host-never-used).
 */
import type { SessionEvent, ToolRetryReview } from '../event/types.js';
import { LIMITS } from '../limits.js';
import type { DecisionRow } from '../store/inbox-rows.js';
import { decisionInboxIfAny } from '../store/inbox.js';
import type { SessionStore } from '../store/types.js';
import { StoreUnavailableError } from '../errors.js';
import { truncateUtf8 } from '../text.js';
import { finishedRunOf } from '../agent/run-journal.js';
import { assessSession, ToolAttention, ToolNextStep, type SessionAssessment, type ToolCallAssessment } from './assess.js';
import { ToolRecoveryStatus } from './retry-policy.js';
import { prepareToolRetry, type ToolRetryPlan } from './retry-plan.js';
import { sessionsWithDecidedApprovals } from './inbox-review.js';

/** `suspend` (the default) leaves every open call in the queue; `retry_safe` retries those no person must review. */
export const RECOVERY_POLICIES = ['suspend', 'retry_safe'] as const;
export type RecoveryPolicy = (typeof RECOVERY_POLICIES)[number];

/** The actor of the review a `retry_safe` retry carries, for recovery at startup and for resumed runs alike. */
export const RETRY_SAFE_ACTOR = 'policy:retry_safe';

/** The calls that need a host to act: in doubt, or interrupted before an answer (docs/design.md#attention-means-attention). */
export function openCalls(history: readonly SessionEvent[]): ToolCallAssessment[] {
  if (history.length === 0) return [];
  return assessSession(history).calls.filter((c) => c.attention !== ToolAttention.None);
}

/**
 * The calls that are their operation's latest attempt and wait for an approval (recorded `approval_pending`, not
 * settled since by a review): a host retries each once a person has decided (docs/design.md#approvals-its-host-never-used).
 */
export function callsAwaitingApproval(history: readonly SessionEvent[]): ToolCallAssessment[] {
  if (history.length === 0) return [];
  return awaitingApproval(assessSession(history));
}

/** callsAwaitingApproval of a session already assessed. */
export function awaitingApproval(assessment: SessionAssessment): ToolCallAssessment[] {
  return assessment.calls.filter((c) => c.attempt === c.attempts && c.taskId !== null && c.key !== null &&
    c.nextStep === ToolNextStep.RetryAllowed && c.result?.outcome.status === 'failed' && c.result.outcome.category === 'approval_pending');
}

/**
 * What the routine does with a call awaiting approval under `policy`, given the inbox's decided decision for its
 * operation that no attempt has used (none: nobody has decided): retry it with this plan, which the decision answers
 * for, or leave it, saying why.
 */
export function approvalRetryPlan(
  history: readonly SessionEvent[],
  call: ToolCallAssessment,
  decision: Pick<DecisionRow, 'id' | 'decision' | 'actor'> | undefined,
  policy: RecoveryPolicy,
): { plan: ToolRetryPlan; review: ToolRetryReview; decided: string; unused: string } | { reason: string } {
  if (decision === undefined) {
    return { reason: 'it waits for a person\'s decision on its approval request (jingwei queue lists it); once decided, a host retries it (prepareToolRetry), and the decision answers for that attempt' };
  }
  // `decided` names the decision alone: after the retry the decision is used (or superseded), which the caller says.
  const decided = `its approval request ${decision.id} was ${decision.decision ?? 'decided'} by ${decision.actor ?? 'a person'}`;
  const unused = `${decided}, and no attempt has used the decision yet`;
  if (policy === 'suspend') return { reason: `policy suspend: ${unused}; a host retries it (prepareToolRetry), and the decision answers for that attempt` };
  const safe = safeRetryPlan(history, call);
  return 'reason' in safe ? { reason: `${unused}; ${safe.reason}` } : { ...safe, decided, unused };
}

/**
 * The plan `retry_safe` may execute for `call`, or the reason it may not: only where prepareToolRetry gives a plan
 * without a review passed by anyone (read-only or idempotent, provably not started, or a reconciler's journaled
 * `not_executed`). The plan then carries a review by `policy:retry_safe` stating the same grounds.
 */
export function safeRetryPlan(history: readonly SessionEvent[], call: ToolCallAssessment): { plan: ToolRetryPlan; review: ToolRetryReview } | { reason: string } {
  if (call.nextStep !== ToolNextStep.RetryAllowed) return { reason: call.reason };
  // The run's model read this call's result and gave its answer: a retry now would make a write the user was told
  // may not have happened, whoever left the session held (docs/design.md#recovering-abandoned-sessions).
  const run = call.taskId === null || call.key === null ? null : finishedRunOf(history, call.taskId, call.key);
  if (run !== null) {
    return { reason: `agent run ${run} finished after its model read this call's result: the run is over, and a person or a new run decides the next step` };
  }
  let unreviewed: ToolRetryPlan;
  try {
    unreviewed = prepareToolRetry(history, call.callId);
  } catch (error) {
    return { reason: error instanceof Error ? error.message : String(error) };
  }
  const journaled = unreviewed.review;
  const outcome = call.status === ToolRecoveryStatus.NotExecuted || journaled?.outcome === 'not_executed' ? 'not_executed' : 'uncertain';
  const grounds = journaled === null ? call.reason : `${call.reason}; journaled review by ${journaled.actor}: ${journaled.evidence}`;
  const review: ToolRetryReview = { actor: RETRY_SAFE_ACTOR, outcome, evidence: truncateUtf8(grounds, LIMITS.maxTextBytes) };
  try {
    return { plan: prepareToolRetry(history, call.callId, review), review };
  } catch (error) {
    // The policy's own review refused where the journaled one was taken (a body that went on after its result and
    // returned: a not_executed must say the outside system was checked, which no policy can): left for a person.
    return { reason: error instanceof Error ? error.message : String(error) };
  }
}

/** How decidedApprovals keys an operation. */
export const operationOf = (taskId: string, key: string): string => JSON.stringify([taskId, key]);

/**
 * A session's approval decisions made and not used by any attempt yet, by operation (operationOf), the first in the
 * inbox's order as the owner's lookup (decidedApproval) takes it; none without an inbox.
 */
export async function decidedApprovals(store: SessionStore, sessionId: string): Promise<Map<string, DecisionRow>> {
  const byOperation = new Map<string, DecisionRow>();
  const inbox = decisionInboxIfAny(store);
  if (inbox === null) return byOperation;
  let after: string | undefined;
  for (;;) {
    const page = await inbox.list({ sessionId, kind: 'approval', states: ['decided'], limit: 500, ...(after === undefined ? {} : { after }) });
    for (const row of page.items) {
      const operation = row.binding === null ? null : operationOf(row.binding.taskId, row.binding.key);
      if (operation !== null && !byOperation.has(operation)) byOperation.set(operation, row);
    }
    if (page.next === null) return byOperation;
    after = page.next;
  }
}

/** A session with a call awaiting an approval that the routine would retry on its decision, as approvalsToUse read it. */
export interface ApprovalsToUse {
  readonly sessionId: string;
  readonly history: readonly SessionEvent[];
  /** The session's decided approvals no attempt has used, by operation (decidedApprovals). */
  readonly decided: ReadonlyMap<string, DecisionRow>;
}

/**
 * The sessions with decided approvals no attempt has used (all but those `skip` names), and of those, each with a call
 * awaiting an approval whose decision the routine would retry it on: read, not acquired, so that a session whose
 * decided approval no retry can use (its run finished, say) is not taken and released by every routine. One whose
 * journal does not verify is left out: the queue and `jingwei verify` show it.
 */
export async function approvalsToUse(store: SessionStore, skip: (sessionId: string) => boolean): Promise<ApprovalsToUse[]> {
  const found: ApprovalsToUse[] = [];
  for (const sessionId of await sessionsWithDecidedApprovals(store)) {
    if (skip(sessionId)) continue;
    let history: readonly SessionEvent[];
    try {
      history = await store.loadHistory(sessionId);
    } catch (error) {
      if (error instanceof StoreUnavailableError) throw error;
      continue;
    }
    const calls = callsAwaitingApproval(history);
    if (calls.length === 0) continue;
    const decided = await decidedApprovals(store, sessionId);
    const usable = calls.some((call) => {
      const row = decided.get(operationOf(call.taskId!, call.key!));
      return row !== undefined && !('reason' in approvalRetryPlan(history, call, row, 'retry_safe'));
    });
    if (usable) found.push({ sessionId, history, decided });
  }
  return found;
}

