/**
 * The reference agent loop: bounded, journaled, resumable, and with no automatic retry anywhere. It shows the
 * smallest correct way to drive a model with a ToolGateway; frameworks get the same behaviour through the bridges.
 *
 * One run: the user's message is journaled with the run's start; then at most `maxSteps` times the model is asked
 * for the next assistant message, which is journaled with the tool calls it asked for, and those calls go one by
 * one through the gateway under operation keys derived from (run id, step, index). The model reads each outcome as
 * text: the output, or the failure's category, code and message and whether the tool ran. It never sees call ids,
 * operation keys, retry plans or reviews. A failed tool is never called again by the loop.
 *
 * Running it again with the run's id (or `resumeAgent`) resumes from the journal (docs/design.md#resumable-runs):
 * journaled model responses are not asked again, completed calls are replayed and never run, and each call left
 * open by a crash goes through the host's recovery policy; a finished run is returned as it finished.
 */
import { InvalidInputError } from '../errors.js';
import { toWellFormed } from '../text.js';
import { faultPoint } from '../fault.js';
import { uuidv7, type TurnId } from '../ids.js';
import type { ActionContext } from '../event/types.js';
import { readOwnJournal } from '../store/owner-journal.js';
import type { SessionOwner, SessionStore } from '../store/types.js';
import type { Tool, ToolGateway } from '../tool/types.js';
import { objectSchema, selectSchemas } from '../bridges/schema.js';
import { preflightFailure } from '../bridges/outcome.js';
import { outsideCallReader, readOutsideCall } from './outside-calls.js';
import { checkChatResponse, type ChatMessage, type ChatModel, type ChatResponse, type ChatToolCall, type ChatToolDefinition } from './model.js';
import { checkRunOptions, readRunOptions } from './run-options.js';
import { runUnchanged, takeTurn, type RunTurn } from './active-runs.js';
import { runReconcilers } from '../tool/runtime.js';
import { alsoWaiting, refusalToRead, settleCall, type AgentRecoveryPolicy, type AgentToolCall, type CallContext } from './run-calls.js';
import { journalReviewsAtStart } from './run-reviews.js';
import { callRefusedEvent, checkRunId, idFits, journaledRefusal, modelResponseEvent, NOT_JOURNALED, NOT_RUN_BY_FRAMEWORK, notOffered, readRun, runFinishedEvent, runFootprint, runOperationKey, runStartedEvent, type FinishedStopReason, type JournaledRun } from './run-journal.js';

export type { AgentRecoveryPolicy, AgentToolCall } from './run-calls.js';

export interface RunAgentOptions {
  readonly model: ChatModel;
  /** The session's fenced owner: user and assistant messages are journaled through it. */
  readonly owner: SessionOwner;
  /** A gateway bound to the same owner; its turn id is the run's. */
  readonly gateway: ToolGateway;
  /** The user's message for this run (journaled as `user_message`). When resuming, it must equal the journaled one. */
  readonly input: string;
  /**
   * The run's id (letters, digits and `._:@-`, at most RUN_LIMITS.maxRunIdBytes). A new id starts a run under it;
   * an id the session's journal already holds resumes that run (then `store` is required). Default: a fresh id.
   */
  readonly runId?: string;
  /** Where the session's journal is read from when resuming: the store the owner belongs to. Required with `runId`. */
  readonly store?: Pick<SessionStore, 'loadHistory'>;
  /**
   * What a resumed run does with a call the journal leaves open (no result): `suspend` (default) stops the run as
   * `needs_review` unless a journaled review unblocks the call; `retry_safe` also retries it where prepareToolRetry
   * allows that without a review (read-only, idempotent, or stopped before its body), with a review by
   * `policy:retry_safe` in the retry's audit. Reconcilers (`reconcilers`) are asked first either way.
   */
  readonly recovery?: AgentRecoveryPolicy;
  /**
   * More tools whose `reconcile` is asked about open calls before the policy applies. The reconcilers of the tools
   * registered in the gateway's runtime are always asked (a copy here without one does not stand in for it).
   */
  readonly reconcilers?: readonly Tool[];
  /** A system prompt, sent first and not journaled (it is configuration, not conversation). */
  readonly system?: string;
  /** Earlier conversation to send before the input (not journaled again). */
  readonly history?: readonly ChatMessage[];
  /**
   * The most model requests this run makes. Required: the loop is always bounded. A resumed run settles every step
   * its journal already holds even when they are more (they are not new requests: their calls were asked for, and a
   * call left open must surface), and then asks the model nothing more.
   */
  readonly maxSteps: number;
  /**
   * Only these tools are offered (each must be granted to the gateway's caller); a call the model makes to any other
   * is refused before anything runs (`unavailable_tool`, journaled with its step). Default: every granted tool.
   */
  readonly tools?: readonly string[];
  /**
   * Stop the run as soon as a call fails when its action may have taken effect (its body started, or it retried
   * an earlier attempt that may have run), rather than let the model decide what to do next. Default false: the
   * model reads that the tool may have taken effect.
   */
  readonly stopOnUncertainOutcome?: boolean;
  /** Cancels the model request in flight and the tool call in flight (recorded as `cancelled`). */
  readonly signal?: AbortSignal;
}

export type AgentStopReason =
  /** The model answered without tool calls. */
  | 'completed'
  /** `maxSteps` model requests were made and the last still asked for tools (their results are in `messages`). */
  | 'max_steps'
  /** `stopOnUncertainOutcome` was set and a call failed whose action may have taken effect; later calls of that step were not run. */
  | 'uncertain_outcome'
  /** A resumed run met a call whose outcome is open and that nothing allows retrying: a person reviews it. */
  | 'needs_review'
  /** A call waits on an operator's decision (durable approval); resume after `jingwei approve` or `deny`. */
  | 'awaiting_approval';

export interface AgentRunResult {
  readonly stopReason: AgentStopReason;
  /** The last assistant text, or null. */
  readonly text: string | null;
  /** The run's id: pass it to `resumeAgent` (or `runAgent`) to resume or read back this run. */
  readonly runId: string;
  /** Steps of the run, journaled ones included (each is one model response). */
  readonly steps: number;
  /** With `needs_review` and `awaiting_approval`: the call ids the run waits on. Empty otherwise. */
  readonly pendingCallIds: readonly string[];
  readonly toolCalls: readonly AgentToolCall[];
  /** The conversation as the model saw it, this run's answers included. */
  readonly messages: readonly ChatMessage[];
}

function definitions(gateway: ToolGateway, only: readonly string[] | undefined): ChatToolDefinition[] {
  return selectSchemas(gateway, only).map((schema) => ({
    name: schema.name,
    description: schema.description,
    parameters: objectSchema(schema.inputSchema),
  }));
}


/** Resumes the run `runId` from the session's journal; see runAgent. The input is read from the journal. */
export type ResumeAgentOptions = Omit<RunAgentOptions, 'input' | 'runId' | 'store'> & {
  readonly runId: string;
  readonly store: Pick<SessionStore, 'loadHistory'>;
};

export async function resumeAgent(given: ResumeAgentOptions): Promise<AgentRunResult> {
  const options = readRunOptions(given);
  checkRunOptions(options);
  if (options.runId === undefined) throw new InvalidInputError('runId', 'is required to resume a run: the id runAgent returned');
  return drive(options, undefined);
}

/** Runs (or resumes) the bounded loop; see the module comment. Throws what the gateway throws for budget, task, owner and storage. */
export async function runAgent(given: RunAgentOptions): Promise<AgentRunResult> {
  const options = readRunOptions(given);
  checkRunOptions(options);
  if (typeof options.input !== 'string') throw new InvalidInputError('input', 'must be a string');
  if (toWellFormed(options.input) !== options.input) throw new InvalidInputError('input', 'holds a lone surrogate (a broken character), which the journal cannot hold');
  return drive(options, options.input);
}

async function drive(options: Omit<RunAgentOptions, 'input'>, input: string | undefined): Promise<AgentRunResult> {
  const runId = options.runId === undefined ? `run_${uuidv7()}` : checkRunId(options.runId);
  // In its turn: a framework's loop on the same run through this owner (a bridge's open) starts nothing new, and the
  // calls and step writes it has under way settle first, so the journal is read with their attempts in it.
  const turn = await takeTurn(options.owner, runId, 'drive', options.signal);
  const read = { footprint: null as number | null };
  try {
    return await driveRun(options, input, runId, turn, read);
  } catch (error) {
    // Refused with nothing journaled: a bridge's loop that had the run keeps it.
    await turn.giveBack(() => runUnchanged(options.owner, options.store, runId, read.footprint));
    throw error;
  } finally {
    turn.end();
  }
}

async function driveRun(options: Omit<RunAgentOptions, 'input'>, input: string | undefined, runId: string, turn: RunTurn, read: { footprint: number | null }): Promise<AgentRunResult> {
  const { model, owner, gateway, signal } = options;
  const policy = options.recovery ?? 'suspend';
  let journaled: JournaledRun | null = null;
  if (options.runId !== undefined) {
    if (options.store === undefined) {
      throw new InvalidInputError('store', 'is required with runId: the run is read back from the session\'s journal');
    }
    const events = await readOwnJournal(owner, options.store);
    read.footprint = runFootprint(events, runId);
    journaled = readRun(events, runId);
  }
  if (journaled !== null) {
    if (journaled.taskId !== gateway.taskId) {
      throw new InvalidInputError('gateway', `is bound to task ${gateway.taskId}, but run ${runId} runs in task ${journaled.taskId}`);
    }
    if (input !== undefined && input !== journaled.input) throw new InvalidInputError('input', `differs from the input journaled for run ${runId}`);
  } else if (input === undefined) {
    throw new InvalidInputError('runId', `no run ${runId} is journaled in session ${owner.sessionId}`);
  }
  const userInput = journaled?.input ?? input!;
  const tools = definitions(gateway, options.tools);
  // A model may name a tool it was not offered: with `tools` given, such a call is refused, as a framework refuses it.
  const offered = options.tools === undefined ? null : new Set(tools.map((t) => t.name));
  const refusedHere = (call: ChatToolCall) => offered !== null && !offered.has(call.name) && idFits(call.id);
  const turnId = gateway.turnId as TurnId;
  const messages: ChatMessage[] = [
    ...(options.system !== undefined ? [{ role: 'system', content: options.system } as const] : []),
    ...(options.history ?? []),
    { role: 'user', content: userInput },
  ];
  const toolCalls: AgentToolCall[] = [];
  // A run cancelled before it starts journals nothing.
  signal?.throwIfAborted();
  // From here this drive is the run's loop (given back if it is refused before it journals anything).
  turn.hold(turn);
  // An operator's review that waits in the inbox is journaled as the run is picked up, whatever it reviews: a call
  // the run settles, or one that has a result and would otherwise stay in the queue (and in doubt) for ever.
  const ctx: CallContext = { owner, runId, gateway, store: options.store, policy, reconcilers: runReconcilers(gateway, options.reconcilers ?? []), signal, reconciled: null, inboxJournaled: false, offered };
  await journalReviewsAtStart(ctx);
  // Only a framework's step has calls a tool outside the run may have made.
  const outsideAt = journaled !== null && journaled.frameworkSteps.size > 0 && options.store !== undefined
    ? outsideCallReader(owner, options.store, runId, journaled.taskId) : async () => undefined;
  if (journaled === null) {
    await owner.append([runStartedEvent(turnId, runId, gateway.taskId, userInput), { turnId, kind: { type: 'user_message', text: userInput } }]);
  }
  const finished = journaled?.finished ?? null;
  const replayOnly = finished !== null;
  const result = (stopReason: AgentStopReason, text: string | null, steps: number, pendingCallIds: readonly string[] = []): AgentRunResult =>
    ({ stopReason, text, runId, steps, pendingCallIds, toolCalls, messages });
  // The model's answer (a step without calls) is journaled with the run's end in one commit: both fit, or neither is
  // written; a journal with room for the answer and not for its end had every later resume fail on the end for good.
  let finishedWithStep = false;
  const finish = async (stopReason: FinishedStopReason, text: string | null, steps: number): Promise<AgentRunResult> => {
    if (finished !== null) return result(finished.stopReason, finished.text, finished.steps);
    if (!finishedWithStep) await owner.append([runFinishedEvent(turnId, runId, stopReason, steps, text)]);
    return result(stopReason, text, steps);
  };
  const known = journaled?.responses ?? [];
  const available = new Set(gateway.schemas().map((s) => s.name));
  const lastStep = replayOnly ? known.length : Math.max(options.maxSteps, known.length);

  let text: string | null = null;
  for (let step = 1; step <= lastStep; step += 1) {
    signal?.throwIfAborted();
    let response: ChatResponse;
    if (step <= known.length) {
      // Journaled: the model is not asked again for this step.
      response = known[step - 1]!;
    } else {
      response = checkChatResponse(await model.complete({ messages: [...messages], tools }, signal));
      // A call to a tool not offered is journaled refused with its step, so a resumed run never makes it.
      await owner.append([
        ...(response.text !== null && response.text.length > 0 ? [{ turnId, kind: { type: 'assistant_message', text: response.text } } as const] : []),
        modelResponseEvent(turnId, runId, step, response, available),
        ...response.toolCalls.flatMap((call, index) => {
          if (!refusedHere(call)) return [];
          const refusal = notOffered(call.name);
          return [callRefusedEvent(turnId, runId, step, index, refusal.code, refusal.message)];
        }),
        ...(response.toolCalls.length === 0 ? [runFinishedEvent(turnId, runId, 'completed', step, response.text)] : []),
      ]);
      finishedWithStep = response.toolCalls.length === 0;
      faultPoint('step:after');
    }
    text = response.text;
    if (response.toolCalls.length === 0 && step <= known.length && journaled!.frameworkSteps.has(step)) {
      // A bridge journals the run's end with its last step, so its step without calls of the run's tools is not the
      // model's answer (text beside a handoff, only the framework's own calls): the run goes on, as the bridge reads it.
      if (response.text !== null) messages.push({ role: 'assistant', content: response.text });
      continue;
    }
    messages.push({ role: 'assistant', content: response.text, ...(response.toolCalls.length > 0 ? { toolCalls: [...response.toolCalls] } : {}) });
    if (response.toolCalls.length === 0) return finish('completed', text, step);

    for (const [index, requested] of response.toolCalls.entries()) {
      // A cancelled run starts no further call (each would be journaled as an attempt).
      signal?.throwIfAborted();
      const action: ActionContext = { decision: { taskId: gateway.taskId as ActionContext['decision']['taskId'], stepId: `${runId}/${step}` }, actionIndex: index };
      const key = runOperationKey(runId, step, index);
      // A call of a step asked now whose provider id the journal could not hold is refused as a read-back refuses it.
      const asked = step > known.length;
      // A journaled call with no attempt and no refusal: one a framework's loop never handed to its tool is never
      // made (as its bridge reads it), nor one to a tool this run does not offer, nor one of a step the run went past
      // (a later step is journaled): this loop settles every call of a step before it asks the next, so only a
      // framework's loop leaves one behind, in a step journaled before bridges marked theirs.
      const unattempted = asked ? undefined
        : journaled!.frameworkSteps.has(step) ? NOT_RUN_BY_FRAMEWORK : refusedHere(requested) ? notOffered(requested.name)
        : step < known.length ? NOT_RUN_BY_FRAMEWORK : undefined;
      const refusal = asked && !idFits(requested.id)
        ? NOT_JOURNALED
        : asked && refusedHere(requested) ? notOffered(requested.name) : await refusalToRead(journaled, step, index, owner, gateway.taskId, key, unattempted);
      // A framework step's call made by a tool outside the run (as its bridge reads it): read back as it ran.
      const outside = !asked && refusal?.code === NOT_RUN_BY_FRAMEWORK.code ? await outsideAt(`${step}/${index}`) : undefined;
      // One whose body may have run and that nothing settled: a person reviews it, as a call of the run's own.
      if (outside?.kind === 'open' && !replayOnly) return result('needs_review', text, step, [outside.callId]);
      let call: AgentToolCall;
      if (outside !== undefined && outside.kind !== 'open') {
        call = readOutsideCall(requested, outside);
      } else if (refusal !== undefined) {
        // Refused before anything was recorded when the step ran: the model reads the same refusal again.
        call = { providerCallId: requested.id, name: requested.name, outcome: preflightFailure(requested.name, refusal), execution: null };
        // Refused now, with nothing journaled to say so: journaled, so every later reader reads the same.
        if (!asked && !replayOnly && journaledRefusal(journaled, step, index) === undefined) {
          await owner.append([callRefusedEvent(turnId, runId, step, index, refusal.code, refusal.message)]);
        }
      } else {
        const settled = await settleCall(ctx, requested, key, action, replayOnly ? 'replay' : 'run', step < known.length);
        if (settled === null) return finish('uncertain_outcome', text, step);
        if (settled.kind === 'stop') {
          const later = response.toolCalls.slice(index + 1).map((c, i) => ({
            requested: c,
            key: runOperationKey(runId, step, index + 1 + i),
            action: { ...action, actionIndex: index + 1 + i },
          }));
          return result(settled.reason, text, step, [settled.callId, ...(await alsoWaiting(ctx, later))]);
        }
        call = settled.call;
        if (!replayOnly && !call.outcome.ok && call.outcome.category === 'preflight') {
          await owner.append([callRefusedEvent(turnId, runId, step, index, call.outcome.code, call.outcome.message)]);
        }
      }
      toolCalls.push(call);
      messages.push({ role: 'tool', toolCallId: requested.id, content: call.outcome.ok ? call.outcome.output : call.outcome.text });
      if (!replayOnly && options.stopOnUncertainOutcome === true && !call.outcome.ok && call.outcome.mayHaveTakenEffect) {
        return finish('uncertain_outcome', text, step);
      }
    }
  }
  return finish('max_steps', text, lastStep);
}

