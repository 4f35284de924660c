/**
 * One requested call of an agent run, settled against the journal (docs/design.md#resumable-runs): a call its
 * operation key never saw runs as a first attempt under that key; a completed one is replayed (nothing runs); a
 * recorded failure is what the model reads again; an open call (no result) goes through the host's recovery policy;
 * an attempt waiting on a durable approval is retried once the operator decided, and otherwise stops the run.
 */
import { BudgetExhaustedError, JsonParseError, StoreConflictError, TaskNotRunningError, ToolPreflightError, ToolRetryError } from '../errors.js';
import { decisionInboxIfAny } from '../store/inbox.js';
import { ToolEffect, type ActionContext, type SessionEvent, type ToolReviewRecord } from '../event/types.js';
import { isValidText } from '../ids.js';
import { jsonEquals } from '../json/canonical.js';
import { parseJson } from '../json/parse.js';
import type { JsonValue } from '../json/types.js';
import { LIMITS } from '../limits.js';
import type { RecordedAttempt, SessionOwner, SessionStore } from '../store/types.js';
import { prepareToolRetry, sourceRowBefore, type ToolRetryPlan } from '../tool/retry-plan.js';
import { noteRetrySource } from '../tool/retry-source.js';
import { classifyAttempt, collectEvidence, latestReview as latestAttemptReview } from '../tool/evidence.js';
import { stoppedBeforeBody, ToolRecoveryStatus } from '../tool/retry-policy.js';
import { argumentsDigest } from '../store/attention.js';
import type { PassReport } from '../tool/reconcile.js';
import { reviewsBeforeDeciding } from './run-reviews.js';
import { RETRY_SAFE_ACTOR, type RecoveryPolicy } from '../tool/recover.js';
import { approverFor, argumentsFitNow, contractChangeFor, inDoubtGuardOn } from '../tool/runtime.js';
import type { Tool, ToolExecution, ToolGateway } from '../tool/types.js';
import { modelFacingOutcome, preflightFailure, type ModelFacingOutcome } from '../bridges/outcome.js';
import type { ChatToolCall } from './model.js';
import { journaledRefusal, type JournaledRun } from './run-journal.js';
import { keptOwnJournal } from '../store/owner-journal.js';

/**
 * What a resumed run does with a call whose outcome the journal leaves open (docs/design.md#resumable-runs): the
 * same policies, with the same review actor, as recovery at startup.
 */
export type AgentRecoveryPolicy = RecoveryPolicy;

/** One tool call of a run, host side. */
export interface AgentToolCall {
  /** The model's id for the call. */
  readonly providerCallId: string;
  readonly name: string;
  /** What the model read. */
  readonly outcome: ModelFacingOutcome;
  /**
   * The journaled execution (`replayed: true` when read back from the journal); null when preflight refused the
   * call before anything was recorded, or when a journaled `completed` review settled its attempt (one left open, or
   * one whose recorded failure left its outcome in doubt).
   */
  readonly execution: ToolExecution | null;
}

export type SettledCall =
  | { readonly kind: 'done'; readonly call: AgentToolCall }
  | { readonly kind: 'stop'; readonly reason: 'needs_review' | 'awaiting_approval'; readonly callId: string };

export interface CallContext {
  readonly owner: SessionOwner;
  /** The run's calls are the ones whose operation key starts with `<runId>/`: the only ones its reconcilers are asked about. */
  readonly runId: string;
  readonly gateway: ToolGateway;
  readonly store: Pick<SessionStore, 'loadHistory'> | undefined;
  readonly policy: AgentRecoveryPolicy;
  readonly reconcilers: readonly Tool[];
  readonly signal: AbortSignal | undefined;
  /** Reconcilers are asked at most once per invocation. */
  reconciled: PassReport | null;
  /** Operators' reviews waiting in the decision inbox are journaled at most once per invocation. */
  inboxJournaled: boolean;
  /** The tools offered to the model (the run's `tools`, the framework's), by the names it calls them; null: every tool granted. */
  readonly offered: ReadonlySet<string> | null;
}

/**
 * The model's argument text as JSON. Text that is not JSON is passed on as a string: the call is still journaled,
 * and the schema check records it as `invalid_arguments` for the model to read. An integer the journal cannot hold
 * exactly (beyond ±(2^53 − 1)) is refused before anything is recorded (ToolPreflightError `unsafe_integer`, which
 * the model reads with its JSON path and the advice to send it as a string): rounding it would run the tool with a
 * value the model never sent. So is an object naming one key twice (`duplicate_key`), for a call not yet journaled
 * (`fresh`): which value counts would be a parser's choice, not the model's. A journaled call's text is read as it
 * was when the call was made (as text, before duplicate keys were refused), so its replay still matches it.
 */
function parseArguments(text: string, fresh: boolean): JsonValue {
  if (text.trim() === '') return {};
  try {
    return parseJson(text, { maxBytes: LIMITS.maxArgumentsBytes, maxDepth: LIMITS.maxArgumentsDepth });
  } catch (error) {
    if (error instanceof JsonParseError && error.reason === 'unsafe_integer') {
      throw new ToolPreflightError('unsafe_integer', error.message, { cause: error });
    }
    if (fresh && error instanceof JsonParseError && error.reason === 'duplicate_key') {
      throw new ToolPreflightError('duplicate_key', `${error.message}: one of its values would go unread; send each key once`, { cause: error });
    }
    return text;
  }
}

function withProvider(action: ActionContext, providerCallId: string): ActionContext {
  return isValidText(providerCallId) ? { decision: action.decision, actionIndex: action.actionIndex, providerCallId } : action;
}

function reviewWaited(execution: ToolExecution): boolean {
  const outcome = execution.result.outcome;
  return outcome.status === 'failed' && outcome.code === 'tool_review_waiting';
}

function done(requested: ChatToolCall, execution: ToolExecution): SettledCall {
  if (execution.result.outcome.status === 'failed' && execution.result.outcome.category === 'approval_pending') {
    return { kind: 'stop', reason: 'awaiting_approval', callId: execution.call.id };
  }
  // A retry stopped before its body by an operator's review decision about its operation, waiting in the inbox: the
  // model is not told it failed; the next resume journals the decision and reads the call by it.
  if (reviewWaited(execution)) return { kind: 'stop', reason: 'needs_review', callId: execution.call.id };
  return { kind: 'done', call: { providerCallId: requested.id, name: requested.name, outcome: modelFacingOutcome(execution), execution } };
}

/**
 * Runs one gateway call (`fresh`: the call's first attempt). A first attempt's preflight refusal (nothing recorded) is
 * what the model reads: the tool did not run. A retry's is thrown: its operation holds an attempt that may have run,
 * or that a later invocation would retry, so "did not run" would be false, or would lead the model to do the action
 * another way before the operation's own attempt is made after all.
 */
async function attempt(requested: ChatToolCall, run: (args: JsonValue) => Promise<ToolExecution>, fresh = false): Promise<SettledCall> {
  try {
    return done(requested, await run(parseArguments(requested.arguments, fresh)));
  } catch (error) {
    if (fresh && error instanceof ToolPreflightError) {
      return { kind: 'done', call: { providerCallId: requested.id, name: requested.name, outcome: preflightFailure(requested.name, error), execution: null } };
    }
    throw error;
  }
}

/**
 * Whether a completed call is read back from the journal although its tool was redeployed since: under another
 * contract and still offered to the gateway's caller, or no longer registered at all (removed, or renamed), and the
 * journaled call is this one (same tool and arguments). Anything else, a grant withdrawn from the caller among it,
 * goes through the gateway's caller-key replay, which refuses it.
 */
function replaysDespiteRedeploy(gateway: ToolGateway, name: string, args: JsonValue, execution: ToolExecution): boolean {
  const call = execution.call;
  const contract = call.operation?.contract;
  const change = contract === undefined ? null : contractChangeFor(gateway, name, contract);
  if (change !== 'changed' && change !== 'removed') return false;
  return call.name === name && jsonEquals(call.arguments, args) && (change === 'removed' || gateway.schemas().some((s) => s.name === name));
}

function recordedExecution(recorded: RecordedAttempt): ToolExecution | null {
  const callKind = recorded.callEvent.kind;
  const resultKind = recorded.resultEvent?.kind;
  if (callKind.type !== 'tool_call' || resultKind?.type !== 'tool_result') return null;
  return { call: callKind.call, result: resultKind.result, callEvent: recorded.callEvent, startedEvent: recorded.startedEvent, resultEvent: recorded.resultEvent!, replayed: true };
}

/** What the model reads of a call a `completed` review settled, its output not asked of a reconciler. */
export const CONFIRMED_OUTSIDE = 'The tool completed; its output was confirmed outside the journal and is not available.';

/**
 * A call a `completed` review settled: it has no recorded result, so the model reads the reconciler's output when
 * this invocation asked it, and otherwise that the output is not available.
 */
function confirmedOutside(requested: ChatToolCall, output: JsonValue | undefined): SettledCall {
  const text = output === undefined ? CONFIRMED_OUTSIDE : typeof output === 'string' ? output : JSON.stringify(output);
  return { kind: 'done', call: { providerCallId: requested.id, name: requested.name, outcome: { ok: true, output: text }, execution: null } };
}

/**
 * The call in doubt (outcome unknown, no review settling it) that `execution` or an identical call of its task left, when
 * its tool, one that may write, is no longer offered to the model under the name it was `requested` by (redeployed
 * under another name, removed, its grant withdrawn, or left out of the run's `tools`), or is offered under an input
 * schema its recorded arguments no longer fit (no repeat can be identical, so the guard could not stop one); null
 * otherwise, or when the guard is off.
 */
async function doubtOfWithdrawnTool(ctx: CallContext, requested: ChatToolCall, execution: ToolExecution): Promise<string | null> {
  const call = execution.call;
  const op = call.operation;
  if (!op || op.contract.effect === ToolEffect.ReadOnly || !ctx.owner.findInDoubt || !inDoubtGuardOn(ctx.gateway)) return null;
  if (offeredNow(ctx, requested.name) && argumentsFitNow(ctx.gateway, call.name, call.arguments) !== false) return null;
  const earlier = await ctx.owner.findInDoubt({ taskId: op.taskId, tool: call.name, argsDigest: argumentsDigest(call.arguments) });
  // A write a review left due is not in doubt: nobody needs to review it again, and the queue keeps it listed.
  return earlier !== null && earlier.status !== 'reviewed_not_executed' ? earlier.callId : null;
}

/** Whether the model is offered the tool `name` (the name it calls it by) in this invocation. */
function offeredNow(ctx: CallContext, name: string): boolean {
  return (ctx.offered === null || ctx.offered.has(name)) && ctx.gateway.schemas().some((s) => s.name === name);
}

/** A retry refused before its body (denied, unavailable, interrupted while it waited): its operation's doubt is still open. */
function retryNeverRan(execution: ToolExecution): boolean {
  return execution.startedEvent === null && execution.result.outcome.status === 'failed' && (execution.call.operation?.retry ?? null) !== null;
}

/**
 * A retry that ended before its body while an operator's review decision about its operation waits in the inbox (its
 * approver denied it while a colleague recorded that the earlier attempt made the write): the run stops for a resume,
 * which journals the decision first, instead of telling the model the call did not run.
 */
async function unlessReviewWaits(ctx: CallContext, settled: SettledCall): Promise<SettledCall> {
  const execution = settled.kind === 'done' ? settled.call.execution : null;
  if (execution === null || !retryNeverRan(execution) || ctx.owner.waitingReview === undefined) return settled;
  const id = execution.call.id;
  const attempts = collectEvidence(await history(ctx), id).calls.get(id)?.operation?.attempts.map((a) => a.call.id) ?? [id];
  const waiting = await ctx.owner.waitingReview(attempts);
  return waiting === undefined ? settled : { kind: 'stop', reason: 'needs_review', callId: execution.call.id };
}

function latestReview(history: readonly SessionEvent[], callId: string): ToolReviewRecord | null {
  let latest: ToolReviewRecord | null = null;
  for (const event of history) if (event.kind.type === 'tool_review' && event.kind.review.callId === callId) latest = event.kind.review;
  return latest;
}

async function history(ctx: CallContext): Promise<readonly SessionEvent[]> {
  return ctx.store!.loadHistory(ctx.owner.sessionId);
}

/**
 * The journal to look a recorded call's reviews up in: the owner's kept read when it has written nothing since, so
 * that a resumed run reading back its recorded failures reads the journal once, not once for each of them.
 */
function lookupHistory(ctx: CallContext): Promise<readonly SessionEvent[]> {
  return keptOwnJournal(ctx.owner, ctx.store!);
}

/** Whether a person's `completed` review is the latest journaled review of `callId`: its write was made. */
async function settledCompleted(ctx: CallContext, callId: string): Promise<boolean> {
  return latestReview(await lookupHistory(ctx), callId)?.outcome === 'completed';
}

/**
 * A recorded execution as the model read it when it ran: a retry refused before its body says "did not run" only
 * when the attempt it retried provably did not either (one that waited for approval, say), which the live run knew from
 * its plan and a read-back learns from the journal before the retry.
 */
async function readBack(ctx: CallContext, execution: ToolExecution): Promise<ToolExecution> {
  if (execution.call.operation?.retry && execution.startedEvent === null && execution.result.outcome.status === 'failed') {
    noteRetrySource(execution, sourceRowBefore(await lookupHistory(ctx), execution.call.id));
  }
  return execution;
}

/** The call an attempt recorded, as the model's request of it. */
function asRecorded(requested: ChatToolCall, recorded: RecordedAttempt): ChatToolCall {
  const kind = recorded.callEvent.kind;
  return kind.type === 'tool_call' ? { id: requested.id, name: kind.call.name, arguments: JSON.stringify(kind.call.arguments) } : requested;
}

/**
 * How a call is settled: `run` makes, replays or recovers it; `replay` (a finished run read back) never runs or
 * recovers anything, and a call with no recorded result answers null; `peek` only says whether the call would stop
 * the run (a `stop`): it makes no attempt and runs nothing, and answers null wherever `run` would act or read back
 * (it may journal the inbox's waiting reviews and the reconcilers' answers, as deciding about any open call does).
 */
export type SettleMode = 'run' | 'replay' | 'peek';

/**
 * An attempt stopped before its body by an interrupt (the store closing or the session released in a graceful
 * shutdown, the host's hold on the session lost, the caller's cancel): provably not run, whatever the tool's effect.
 */
function interruptedBeforeBody(execution: ToolExecution): boolean {
  const outcome = execution.result.outcome;
  if (outcome.status !== 'failed' || outcome.category !== 'cancelled') return false;
  return execution.startedEvent === null || stoppedBeforeBody(outcome);
}

/**
 * An attempt this run just made (a call's first, or a retry), stopped before its body by the runtime, not by the
 * run's caller: the store closing or the session released under it, or this host's hold on the session lost (or
 * possibly lost, a stall longer than its lease). Its action is not handed to the model as a failure: it is made
 * again, once, now, through every check. The retry's own commit says whether this host still holds the session:
 * fenced, released or closed, it throws, and the run stops without asking the model again (a resume makes the call);
 * still held, the call runs. Null: nothing to do.
 */
async function againAfterInterrupt(ctx: CallContext, requested: ChatToolCall, first: SettledCall, options: CallOptions): Promise<SettledCall | null> {
  const execution = first.kind === 'done' ? first.call.execution : null;
  if (execution === null || !interruptedBeforeBody(execution) || ctx.signal?.aborted === true || ctx.store === undefined) return null;
  try {
    const plan = prepareToolRetry(await history(ctx), execution.call.id);
    return await attempt(requested, (args) => ctx.gateway.callWithOptions(requested.name, args, { ...options, retry: plan }));
  } catch (error) {
    // Refused with nothing written (a review decision came into the inbox meanwhile, the task's budget spent by the
    // interrupted attempt, the task stopped): the model reads the interrupted attempt, as it did before any retry.
    if (error instanceof ToolRetryError || error instanceof BudgetExhaustedError || error instanceof TaskNotRunningError) return null;
    throw error;
  }
}

type CallOptions = { readonly action: ActionContext; readonly signal?: AbortSignal };

/**
 * One attempt of the run (`attempt`'s `run` and `fresh`), made again at once if the runtime stopped it before its
 * body (againAfterInterrupt), and read as unlessReviewWaits says.
 */
async function attemptOnce(ctx: CallContext, requested: ChatToolCall, options: CallOptions, run: (args: JsonValue) => Promise<ToolExecution>, fresh = false): Promise<SettledCall> {
  const first = await attempt(requested, run, fresh);
  const settled = await unlessReviewWaits(ctx, (await againAfterInterrupt(ctx, requested, first, options)) ?? first);
  return fresh ? settled : unlessToolWithdrawn(ctx, requested, settled);
}

/**
 * A retry this run just made that failed and left its operation in doubt (refused before its body because a redeploy
 * moved the caller's grant to a renamed tool, say), of a tool the model is no longer offered under the name it asked
 * for: the run stops for a person, as for such a failure read back, before the model is asked again and makes the
 * write under the new name, which the in-doubt guard does not know it by (docs/design.md#the-in-doubt-guard).
 */
async function unlessToolWithdrawn(ctx: CallContext, requested: ChatToolCall, settled: SettledCall): Promise<SettledCall> {
  const execution = settled.kind === 'done' ? settled.call.execution : null;
  if (execution === null || execution.result.outcome.status !== 'failed') return settled;
  const doubt = await doubtOfWithdrawnTool(ctx, requested, execution);
  return doubt === null ? settled : { kind: 'stop', reason: 'needs_review', callId: doubt };
}

/**
 * Settles the `index`-th requested call of a step under `key`, as `mode` says. `wentPast`: a later step of the run is
 * journaled, so the model read this step's outcomes; false for the step a run stopped in (a bridge's steps count as
 * gone past: its framework's loop decides what it asks again).
 */
export async function settleCall(ctx: CallContext, journaledRequest: ChatToolCall, key: string, action: ActionContext, mode: SettleMode, wentPast = true): Promise<SettledCall | null> {
  const { gateway, owner, signal } = ctx;
  const replayOnly = mode === 'replay';
  const peek = mode === 'peek';
  const recorded = await owner.readOperation(gateway.taskId, key);
  // A call journaled elided (its name or arguments empty) that has an attempt (a run journaled by an earlier version,
  // which ran calls elided for their provider id) is settled as its attempt recorded it.
  const elided = journaledRequest.name === '' || journaledRequest.arguments === '';
  const requested = recorded !== undefined && elided ? asRecorded(journaledRequest, recorded) : journaledRequest;
  const act = withProvider(action, requested.id);
  const options = signal ? { action: act, signal } : { action: act };
  const keyed = signal ? { action: act, signal, operationKey: key } : { action: act, operationKey: key };
  if (recorded === undefined) {
    if (replayOnly || peek) return null;
    return attemptOnce(ctx, requested, options, (args) => gateway.callWithOptions(requested.name, args, keyed), true);
  }
  const execution = recordedExecution(recorded);
  if (execution !== null && execution.result.outcome.status === 'succeeded') {
    if (peek) return null;
    const args = parseArguments(requested.arguments, false);
    // The tool redeployed since under another contract and still offered to this caller, or removed: the call ran
    // under the contract it recorded, and its result is read back from the journal (docs/design.md#resumable-runs).
    if (replaysDespiteRedeploy(gateway, requested.name, args, execution)) return done(requested, execution);
    // Caller-key replay: checks the binding and the grant, runs nothing, writes nothing, charges nothing. Its refusal
    // (the grant withdrawn since) is thrown, not read by the model as a call refused before anything was recorded:
    // this call ran, and neither the model nor the journal may be told otherwise.
    try {
      return done(requested, await gateway.callWithOptions(requested.name, args, keyed));
    } catch (error) {
      // A gateway this package did not make (a wrapper of runtime.bind) cannot say whether the tool was redeployed:
      // its replay refuses a contract changed or a tool removed since as `binding_changed`, and the call, these same
      // arguments (under the name the wrapper gives the tool, which may not be the runtime's), is read back from the
      // journal as it is through the gateway itself.
      const contract = execution.call.operation?.contract;
      const wrapped = contract !== undefined && contractChangeFor(gateway, requested.name, contract) === null;
      if (wrapped && error instanceof ToolRetryError && error.code === 'binding_changed' && jsonEquals(execution.call.arguments, args)) return done(requested, execution);
      throw error;
    }
  }
  const pending = execution !== null && execution.result.outcome.status === 'failed' && execution.result.outcome.category === 'approval_pending';
  const waited = execution !== null && reviewWaited(execution);
  const neverRan = execution !== null && retryNeverRan(execution);
  if (replayOnly) {
    if (execution !== null && !pending && !neverRan) return settledFailure(ctx, requested, recorded, execution);
    // Settled by a `completed` review when the run went past it (an attempt with no result, one waiting for an
    // approval, or one an operator's review stopped before its body): it reads the same way when the run is read back.
    if (await settledCompleted(ctx, recorded.callId)) return confirmedOutside(requested, undefined);
    return execution !== null ? done(requested, await readBack(ctx, execution)) : null;
  }
  if (execution !== null) {
    if (pending) {
      // A journaled `completed` review of the attempt waiting for approval says the operation's write was made (by
      // an earlier attempt): nothing is asked or made again, whatever the operator decides on the request.
      if ((await settledCompleted(ctx, recorded.callId))) return confirmedOutside(requested, undefined);
      const decided = owner.decidedApproval ? await owner.decidedApproval(gateway.taskId, key) : undefined;
      // A tool redeployed (or removed) since can never run on the request, whatever an operator decides: the retry
      // records that the call did not run, for the model to read (docs/design.md#a-redeploy-while-a-call-waits).
      const contract = execution.call.operation?.contract;
      const change = contract === undefined ? null : contractChangeFor(gateway, execution.call.name, contract);
      const changed = change === 'changed' || change === 'removed';
      if (decided === undefined && !changed && (await waitsForDecision(ctx, execution))) return { kind: 'stop', reason: 'awaiting_approval', callId: recorded.callId };
      if (peek) return null;
      // The operator decided: one more attempt of the same operation, which the decision answers for.
      const plan = prepareToolRetry(await history(ctx), recorded.callId);
      signal?.throwIfAborted();
      return attemptOnce(ctx, requested, options, (args) => gateway.callWithOptions(requested.name, args, { ...options, retry: plan }));
    }
    // Stopped before its body by an operator's review decision about the operation: decided as an open call is,
    // once the decision is journaled (a `completed` one settles it; otherwise its operation is retried).
    if (waited) return recoverOpen(ctx, requested, recorded, options, peek);
    // Stopped before its body by an interrupt in the step the run stopped in (a graceful shutdown closed the store
    // while the approver was asked, say): no model read that outcome, so the call is decided as an open call is,
    // as a crash at the same moment would have had it decided (a `completed` review settles it; an earlier attempt
    // that may have run waits for a review under `suspend`). Read to the model instead, the shutdown lost the action.
    if (!wentPast && interruptedBeforeBody(execution)) return recoverOpen(ctx, requested, recorded, options, peek);
    // A retry refused before its body (its approver denied it, say) while a colleague recorded that an earlier attempt
    // made the write: that journaled review, not the refusal, is what the model reads.
    if (neverRan && (await settledCompleted(ctx, recorded.callId))) return confirmedOutside(requested, undefined);
    // A recorded failure still in doubt, of a tool this caller is no longer offered (renamed or removed by a
    // redeploy): the in-doubt guard knows a repeat by its tool's name, so the model could make the write again under
    // the new one. The run stops for a person instead (docs/design.md#the-in-doubt-guard).
    const doubt = await doubtOfWithdrawnTool(ctx, requested, execution);
    if (doubt !== null) return { kind: 'stop', reason: 'needs_review', callId: doubt };
    return peek ? null : settledFailure(ctx, requested, recorded, execution);
  }
  return recoverOpen(ctx, requested, recorded, options, peek);
}

/**
 * A recorded failure as the model reads it: again, as it did when the step ran; unless a person's `completed` review
 * of the call has settled it since. Then the model reads that the write was made: told only that it "may have taken
 * effect" while the in-doubt guard, the call no longer in doubt, lets an identical call through, it could make the write
 * again.
 */
async function settledFailure(ctx: CallContext, requested: ChatToolCall, recorded: RecordedAttempt, execution: ToolExecution): Promise<SettledCall> {
  if (execution.result.outcome.status === 'failed' && (await settledCompleted(ctx, recorded.callId))) return confirmedOutside(requested, undefined);
  return done(requested, await readBack(ctx, execution));
}

/**
 * The calls after the one a run stopped at, of the same step, that would stop it too (each `peek`ed: no attempt is
 * made): so a run names every call of its step that waits on a person, not one per opening.
 */
export async function alsoWaiting(ctx: CallContext, later: readonly { readonly requested: ChatToolCall; readonly key: string; readonly action: ActionContext }[]): Promise<string[]> {
  const ids: string[] = [];
  for (const { requested, key, action } of later) {
    const settled = await settleCall(ctx, requested, key, action, 'peek');
    if (settled?.kind === 'stop' && !ids.includes(settled.callId)) ids.push(settled.callId);
  }
  return ids;
}

/**
 * Whether the run waits for an operator's decision on the approval request an attempt left. It does not when the
 * request can never be decided: missing from the store's inbox (the journal was moved to another store; `jingwei
 * export` and `import` carry the journal, not the inbox), or superseded. Nor when the tool no longer asks the approver
 * the request was left for (a redeploy dropped its approval, or moved it to another approver): no decision on it
 * could let the call run. The attempt never ran, so the run makes the next one, which asks the approver the tool
 * requires now (leaving its request here), or runs as a first call of the tool would, and supersedes the request.
 */
async function waitsForDecision(ctx: CallContext, execution: ToolExecution): Promise<boolean> {
  const requestId = execution.result.approval?.requestId;
  if (requestId === undefined) return true;
  // A gateway this package did not make (a wrapper of runtime.bind) cannot say which approver its tool asks: waited for.
  const asksNow = approverFor(ctx.gateway, execution.call.name);
  if (asksNow === undefined) return true;
  if (asksNow === null) return false;
  const inbox = ctx.store === undefined ? null : decisionInboxIfAny(ctx.store);
  if (inbox === null) return true;
  const row = await inbox.get(requestId);
  // Superseded while its attempt is still the operation's latest: its task ended, and the next attempt is refused
  // as the task's state says (task_not_running), rather than the run waiting on a request nobody can decide.
  if (row === undefined || row.state === 'superseded') return false;
  // A request left before approvers were recorded with it says nothing about its approver: it is waited for.
  const askedOf = row.binding?.approver;
  return askedOf === undefined || askedOf === asksNow;
}

/**
 * Whether no attempt of `callId`'s operation can have taken effect: each stopped before its body (the journal proves
 * it: no start marker where one was due), or a journaled review says it did not run. Such a call is not in doubt,
 * and no review of it is taken (`not_in_doubt`): retrying it is what its first attempt would have done, under any
 * policy (docs/design.md#resumable-runs).
 */
function operationNeverRan(history: readonly SessionEvent[], callId: string): boolean {
  const record = collectEvidence(history, callId).calls.get(callId);
  if (record === undefined) return false;
  const attempts = record.operation?.attempts ?? [record];
  return attempts.every((a) => classifyAttempt(a).status === ToolRecoveryStatus.NotExecuted || latestAttemptReview(a)?.outcome === 'not_executed');
}

function uncheckedPersonReview(ctx: CallContext, tool: string, history: readonly SessionEvent[], callId: string): boolean {
  const reviewed = latestReview(history, callId);
  if (reviewed?.outcome !== 'not_executed' || reviewed.source === 'reconciler') return false;
  if (!ctx.reconcilers.some((t) => t.name === tool && t.reconcile !== undefined)) return false;
  const reviews = history.filter((e) => e.kind.type === 'tool_review' && e.kind.review.callId === callId).length;
  return ctx.reconciled?.seen.get(callId) !== reviews;
}

/**
 * An attempt with no result: operators' reviews from the decision inbox are journaled first (a review recorded
 * with `jingwei review` from another process reaches the run without the host doing anything), then reconcilers,
 * then a journaled review decides, then the policy.
 */
async function recoverOpen(
  ctx: CallContext,
  requested: ChatToolCall,
  recorded: RecordedAttempt,
  options: { readonly action: ActionContext; readonly signal?: AbortSignal },
  peek: boolean,
): Promise<SettledCall | null> {
  const callId = recorded.callId;
  const current = await reviewsBeforeDeciding(ctx);
  // Cancelled while a reconciler was asked (which reports its rejection as a failed answer): a cancelled run starts
  // no further call, and a retry made now would be recorded as cancelled, which later resumes read as its failure.
  ctx.signal?.throwIfAborted();
  // A person's not_executed review the tool's own reconciler could not check (it threw, or did not answer in time),
  // which the pass marked with an uncertain review of its own: the exact answer of the outside system is not
  // overridden by a person's reading of it, so nothing is retried yet.
  const asked = ctx.reconciled?.calls.find((c) => c.callId === callId);
  if (asked?.action === 'failed' && asked.review !== null) return { kind: 'stop', reason: 'needs_review', callId };
  // A person's not_executed review this run's pass did not see (journaled since by another run of the session, from
  // the inbox): the tool's reconciler has not been asked about it, so it is not used yet; the next resume asks.
  if (uncheckedPersonReview(ctx, requested.name, current, callId)) return { kind: 'stop', reason: 'needs_review', callId };
  let plan: ToolRetryPlan;
  try {
    plan = prepareToolRetry(current, callId);
  } catch (error) {
    if (error instanceof ToolRetryError && error.code === 'completed') {
      return peek ? null : confirmedOutside(requested, ctx.reconciled?.calls.find((c) => c.callId === callId)?.output);
    }
    if (error instanceof ToolRetryError) return { kind: 'stop', reason: 'needs_review', callId };
    throw error;
  }
  const review = latestReview(current, callId);
  if (review === null || review.outcome === 'uncertain') {
    // No journaled review vouches for a retry: the policy decides, unless no attempt of the operation can have run.
    if (ctx.policy === 'suspend') {
      if (!operationNeverRan(current, callId)) return { kind: 'stop', reason: 'needs_review', callId };
    } else {
      plan = prepareToolRetry(current, callId, {
        actor: RETRY_SAFE_ACTOR,
        outcome: 'uncertain',
        evidence: `resumed run: the journal allows retrying ${requested.name} without a review (read-only, idempotent, or stopped before its body)`,
      });
    }
  }
  if (peek) return null;
  const chosen = plan;
  // Cancelled while the journal was read or the reconcilers asked: a cancelled run starts no further call.
  ctx.signal?.throwIfAborted();
  try {
    return await attemptOnce(ctx, requested, options, (args) => ctx.gateway.callWithOptions(requested.name, args, { ...options, retry: chosen }));
  } catch (error) {
    // The tool was redeployed or removed since this call, which may have run: only a person can say whether it took
    // effect; once a review says it did not, the retry is recorded as not run (docs/design.md#a-redeploy-while-a-call-waits).
    if (error instanceof ToolRetryError && error.code === 'binding_changed') return { kind: 'stop', reason: 'needs_review', callId };
    // Its body still runs in this process (an owner this one took the session from): its outcome is open, so the run
    // stops for it as for any open call, and a later resume reads what it did.
    if (error instanceof ToolRetryError && error.code === 'body_running') return { kind: 'stop', reason: 'needs_review', callId };
    // Another run's pass here is asking the call's reconciler, or an operator's review decision of the call came into
    // the inbox since the run journaled it, or a review of it was journaled here (the host's own inbox pass) while the
    // retry was under way, or a reconciler's completed answer is kept here: nothing was written, and a later resume
    // reads the answer, or journals the decision first.
    if (error instanceof ToolRetryError && (error.code === 'being_reconciled' || error.code === 'needs_review' || error.code === 'completed' || error.code === 'not_latest_attempt')) {
      return { kind: 'stop', reason: 'needs_review', callId };
    }
    if (error instanceof StoreConflictError && error.code === 'history_changed') return { kind: 'stop', reason: 'needs_review', callId };
    throw error;
  }
}

/**
 * The refusal the model reads again for the call at (step, index), or undefined when the call is settled from the
 * journal. A refusal means nothing was recorded under the call's key, so a key that holds an attempt is settled from
 * it: journals written before a completed call's replay refusal (a grant withdrawn since) stopped being journaled as
 * a refusal hold such a `call_refused`, and the call it names ran. `unattempted`: what the model reads when nothing
 * is journaled for the call, neither a refusal nor an attempt (a bridge's call the framework moved on from).
 */
export async function refusalToRead(
  journaled: JournaledRun | null,
  step: number,
  index: number,
  owner: SessionOwner,
  taskId: string,
  key: string,
  unattempted?: { readonly code: string; readonly message: string },
) {
  const refusal = journaledRefusal(journaled, step, index) ?? unattempted;
  if (refusal === undefined) return undefined;
  return (await owner.readOperation(taskId, key)) === undefined ? refusal : undefined;
}
