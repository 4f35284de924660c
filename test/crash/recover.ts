/**
 * What a host does after a crash, as a fresh process runs it: take the session over, load the confirmed journal,
 * assess it, prepare what may be retried (asking the host's own review of the external ledger where the decision
 * table calls for one), run each retry through the canonical runtime, and report. Shared by the matrix's recovery
 * child and the soak child.
 */
import { assessSession, inspectToolRecovery, prepareToolRetry } from '../../src/index.js';
import type { SessionEvent, ToolCall, ToolResult, ToolRetryReview } from '../../src/event/types.js';
import type { JsonValue } from '../../src/json/types.js';
import type { SessionOwner, SessionStore } from '../../src/store/types.js';
import type { SessionAssessment } from '../../src/tool/assess.js';
import type { ToolRecoveryAssessment } from '../../src/tool/recovery.js';
import type { ToolRetryPlan } from '../../src/tool/retry-plan.js';
import type { SqliteIdempotencyStore } from '../../src/store/sqlite/idempotency.js';
import { operationOriginIn } from '../../src/tool/idempotency.js';
import type { ToolRuntime } from '../../src/tool/types.js';
import type { TaskCharge } from './invariants.js';
import { TAKEOVER_POINT, type Killer } from './killer.js';
import { CALLER, crashTools } from './tools.js';

export const REVIEW_ACTOR = 'crash-harness host';
/** How many of the latest calls a soak recovery cross-checks between assessSession and prepareToolRetry. */
const SOAK_PROBES = 24;

export interface RecoveryContext {
  readonly store: SessionStore;
  readonly sessionId: string;
  readonly business: SqliteIdempotencyStore;
  readonly runtime: ToolRuntime;
  readonly killer: Killer;
  readonly approvals: { count: number };
  /** Full inspections in the `before` line (the matrix compares them); the soak only needs counts. */
  readonly detail: boolean;
  readonly emit: (line: Record<string, unknown>) => void;
  /** Runs after the load and the `before` line, before any retry (the soak checks its invariants here). */
  readonly onLoaded?: (owner: SessionOwner, history: SessionEvent[]) => Promise<void>;
}

export type Inspection = ToolRecoveryAssessment | { readonly error: string };

/** What the host saw before acting: emitted as soon as it is known, so a recovery killed later still reports it. */
export interface BeforeLine {
  readonly phase: 'before';
  readonly epoch: number;
  readonly events: number;
  readonly assessment: SessionAssessment | null;
  /** Per call id: inspectToolRecovery, or the code it refused with. */
  readonly inspections: Record<string, Inspection>;
  /** Per call id (every call; in the soak the latest ones): prepareToolRetry without a review, 'plan' or the code. */
  readonly probes: Record<string, string>;
  /** inspectToolRecovery of an id no call ever had: it must refuse explicitly (C0: the call was never written). */
  readonly unknownCall: string;
  /**
   * Per listed call whose outcome is unknown: what its tool's reconciler answers (asked, never journaled, so the
   * recovery below runs exactly as without reconcilers), or 'none' for a tool without one.
   */
  readonly reconcilers: Record<string, string>;
}

export interface RecoveryAction {
  readonly callId: string;
  readonly name: string;
  readonly effect: string | null;
  readonly nextStep: string;
  /** The host review handed to prepareToolRetry, if the decision table asked for one. */
  readonly review: ToolRetryReview['outcome'] | null;
  /** 'plan', the code prepareToolRetry refused with, or 'skipped' (host policy: a deterministic rejection). */
  readonly prepared: string;
  readonly retry?: {
    readonly callId: string;
    readonly outcome: 'succeeded' | string;
    readonly output: string | null;
    readonly started: boolean;
    readonly approvalsAsked: number;
  };
  /** Code of the error a thrown retry ended with. */
  readonly retryError?: string;
  /** Code of the refusal of the plan's clone, used after the plan. */
  readonly cloneRefused?: string;
}

export interface RecoveryResult {
  readonly owner: SessionOwner;
  readonly before: BeforeLine;
  readonly actions: RecoveryAction[];
  readonly history: SessionEvent[];
  /** Problems the recovery itself noticed (assessment and prepareToolRetry disagreeing, a clone accepted...). */
  readonly problems: string[];
}

/** A recorded rejection that a retry with the same arguments would meet again; hosts leave these alone. */
export function isDeterministicRejection(result: ToolResult | null): boolean {
  return result?.outcome.status === 'failed' && result.outcome.category === 'invalid_arguments';
}

const codeOf = (error: unknown) => String((error as { code?: unknown })?.code ?? (error as Error)?.message ?? error);

export function toolCalls(history: readonly SessionEvent[]): ToolCall[] {
  const calls: ToolCall[] = [];
  for (const e of history) if (e.kind.type === 'tool_call') calls.push(e.kind.call);
  return calls;
}

/** Every task id the journal's calls belong to. */
export function taskIdsOf(history: readonly SessionEvent[]): string[] {
  return [...new Set(toolCalls(history).flatMap((c) => (c.operation ? [c.operation.taskId] : [])))];
}

/** The host's review of an unknown outcome: it looks for the operation's rows in the external system. */
function hostReview(business: SqliteIdempotencyStore, taskId: string, key: string): ToolRetryReview {
  const rows = (business.db.prepare('SELECT count(*) AS n FROM orders WHERE task_id = ? AND key = ?').get(taskId, key) as { n: number }).n;
  return {
    actor: REVIEW_ACTOR,
    evidence: `the business ledger holds ${rows} row(s) for operation ${key}`,
    outcome: rows > 0 ? 'completed' : 'not_executed',
  };
}

function probe(history: readonly SessionEvent[], callId: string, review: ToolRetryReview | null): { plan: ToolRetryPlan } | { code: string } {
  try {
    return { plan: prepareToolRetry(history, callId, review) };
  } catch (error) {
    return { code: codeOf(error) };
  }
}

const EXPECTED_PROBE: Record<string, (code: string) => boolean> = {
  retry_allowed: (c) => c === 'plan',
  needs_review: (c) => c === 'needs_review',
  completed: (c) => c === 'completed' || c === 'not_latest_attempt',
  superseded: (c) => c === 'not_latest_attempt' || c === 'completed',
  legacy: (c) => c === 'legacy_call',
};

export async function recover(ctx: RecoveryContext): Promise<RecoveryResult> {
  const problems: string[] = [];
  const owner = await ctx.store.acquire(ctx.sessionId, { owner: `recovery-${process.pid}`, takeover: true });
  ctx.killer.at(TAKEOVER_POINT);
  const history = await ctx.store.loadHistory(ctx.sessionId);
  const calls = toolCalls(history);

  const assessment = history.length > 0 ? assessSession(history) : null;
  const inspections: Record<string, Inspection> = {};
  const probes: Record<string, string> = {};
  // The matrix probes every call; the soak only the recent ones (older calls were probed by earlier recoveries,
  // and each probe validates the whole history again).
  const probed = ctx.detail ? calls : calls.slice(-SOAK_PROBES);
  for (const call of probed) {
    if (ctx.detail) {
      try {
        inspections[call.id] = inspectToolRecovery(history, call.id);
      } catch (error) {
        inspections[call.id] = { error: codeOf(error) };
      }
    }
    const p = probe(history, call.id, null);
    probes[call.id] = 'plan' in p ? 'plan' : p.code;
  }
  let unknownCall = 'accepted';
  try {
    inspectToolRecovery(history, 'toolcall_never-written');
  } catch (error) {
    unknownCall = codeOf(error);
  }
  const reconcilers = await askReconcilers(ctx, history, assessment, problems);
  const before: BeforeLine = { phase: 'before', epoch: owner.epoch, events: history.length, assessment, inspections, probes, unknownCall, reconcilers };
  ctx.emit(before as unknown as Record<string, unknown>);
  await ctx.onLoaded?.(owner, history);

  const listed = new Map((assessment?.calls ?? []).map((c) => [c.callId as string, c]));
  for (const call of probed) {
    const entry = listed.get(call.id);
    const got = probes[call.id]!;
    if (entry === undefined) {
      if (got !== 'completed') problems.push(`call ${call.id} succeeded, yet prepareToolRetry gave ${got}`);
    } else if (!EXPECTED_PROBE[entry.nextStep]?.(got)) {
      problems.push(`call ${call.id}: assessSession says ${entry.nextStep}, prepareToolRetry gives ${got}`);
    }
  }

  const actions: RecoveryAction[] = [];
  for (const entry of assessment?.calls ?? []) {
    if (entry.nextStep !== 'retry_allowed' && entry.nextStep !== 'needs_review') continue;
    const call = calls.find((c) => c.id === entry.callId)!;
    const op = call.operation!;
    // Host policy (D5: the library never retries by itself): arguments the schema rejected are rejected again.
    if (isDeterministicRejection(entry.result)) {
      actions.push({ callId: call.id, name: call.name, effect: entry.effect, nextStep: entry.nextStep, review: null, prepared: 'skipped' });
      continue;
    }
    const review = entry.nextStep === 'needs_review' ? hostReview(ctx.business, op.taskId, op.key) : null;
    const prepared = probe(history, call.id, review);
    const base = { callId: call.id, name: call.name, effect: entry.effect, nextStep: entry.nextStep, review: review?.outcome ?? null };
    if (!('plan' in prepared)) {
      actions.push({ ...base, prepared: prepared.code });
      continue;
    }
    const spare = prepared.plan.clone();
    const gateway = ctx.runtime.bind({ owner, taskId: op.taskId, caller: CALLER });
    const approvalsBefore = ctx.approvals.count;
    let action: RecoveryAction;
    try {
      const execution = await gateway.callWithOptions(call.name, call.arguments as JsonValue, { retry: prepared.plan });
      const outcome = execution.result.outcome;
      action = {
        ...base,
        prepared: 'plan',
        retry: {
          callId: execution.call.id,
          outcome: outcome.status === 'succeeded' ? 'succeeded' : outcome.category,
          output: outcome.status === 'succeeded' ? outcome.output : null,
          started: execution.startedEvent !== null,
          approvalsAsked: ctx.approvals.count - approvalsBefore,
        },
      };
    } catch (error) {
      action = { ...base, prepared: 'plan', retryError: codeOf(error) };
    }
    try {
      await gateway.callWithOptions(call.name, call.arguments as JsonValue, { retry: spare });
      problems.push(`the clone of the plan for ${call.id} was accepted after the plan was used`);
      action = { ...action, cloneRefused: 'accepted' };
    } catch (error) {
      action = { ...action, cloneRefused: codeOf(error) };
    }
    actions.push(action);
  }
  return { owner, before, actions, history, problems };
}

/**
 * Asks the reconciler of every listed call whose outcome is unknown, as reconcileUncertainCalls would, without
 * journaling the answer; a definite answer must agree with the external ledger (a problem otherwise).
 */
async function askReconcilers(ctx: RecoveryContext, history: readonly SessionEvent[], assessment: SessionAssessment | null, problems: string[]): Promise<Record<string, string>> {
  const answers: Record<string, string> = {};
  const tools = new Map(crashTools(ctx.business, () => undefined).map((t) => [t.name, t]));
  const calls = new Map(toolCalls(history).map((c) => [c.id as string, c]));
  for (const entry of assessment?.calls ?? []) {
    if (entry.status !== 'outcome_unknown' || (entry.nextStep !== 'needs_review' && entry.nextStep !== 'retry_allowed')) continue;
    const call = calls.get(entry.callId)!;
    const tool = tools.get(call.name);
    if (tool?.reconcile === undefined || call.operation === undefined) {
      answers[call.id] = 'none';
      continue;
    }
    const request = { sessionId: ctx.sessionId, operationOrigin: operationOriginIn(history, call.operation)!, callId: call.id, toolName: call.name, arguments: call.arguments, operation: call.operation };
    const answer = await tool.reconcile(request, new AbortController().signal);
    answers[call.id] = answer.outcome;
    const rows = (ctx.business.db.prepare('SELECT count(*) AS n FROM orders WHERE task_id = ? AND key = ?').get(call.operation.taskId, call.operation.key) as { n: number }).n;
    if (answer.outcome !== 'unknown' && (answer.outcome === 'completed') !== rows > 0) {
      problems.push(`the reconciler of ${call.name} answers ${answer.outcome} for ${call.id}, yet the ledger holds ${rows} row(s)`);
    }
  }
  return answers;
}

/** Each task's budget as `owner` reads it, for every task the history mentions (and `extraTasks`). */
export async function chargesOf(owner: SessionOwner, history: readonly SessionEvent[], extraTasks: readonly string[] = []): Promise<Record<string, TaskCharge>> {
  const charged: Record<string, TaskCharge> = {};
  for (const taskId of new Set([...taskIdsOf(history), ...extraTasks])) {
    try {
      const task = await owner.task(taskId);
      charged[taskId] = { ...task.charged, reservedOutputBytes: task.reservedOutputBytes };
    } catch (error) {
      if (codeOf(error) !== 'task_not_found') throw error;
    }
  }
  return charged;
}
