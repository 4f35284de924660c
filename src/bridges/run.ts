/**
 * A framework's tool loop as a resumable run (docs/design.md#bridges-resume-from-the-journal): the framework-neutral
 * half of `aiSdkRun` and `openAiAgentsRun`. It journals each model response of the framework's loop with the tool
 * calls it asked for, exactly as runAgent does (the same `jingwei.run` events, so one run id is one conversation
 * whichever loop wrote it), and gives each requested call the operation key of its position (run id, step, index):
 * the framework's own tool call id is the model's and changes when the model is asked again, the position does not.
 *
 * Opening a run id the journal already holds rebuilds its steps: completed calls are replayed (nothing runs), a
 * recorded failure is read again, a call left open by a crash goes through the same recovery policy as a resumed
 * runAgent (reconcilers, then `retry_safe` or `suspend`), and a call never attempted runs now under its key. The
 * framework then continues its loop from the rebuilt conversation.
 */
import { InvalidInputError, OperationInDoubtError, ToolRuntimeHaltedError } from '../errors.js';
import type { ActionContext } from '../event/types.js';
import type { SessionOwner, SessionStore } from '../store/types.js';
import { readOwnJournal } from '../store/owner-journal.js';
import { asHolder, runUnchanged, takeTurn, type RunTurn } from '../agent/active-runs.js';
import { runReconcilers } from '../tool/runtime.js';
import type { Tool, ToolGateway } from '../tool/types.js';
import { preflightFailure } from './outcome.js';
import { outsideCallReader, readOutsideCall } from '../agent/outside-calls.js';
import { jsonEquals } from '../json/canonical.js';
import { describeValue, toWellFormed } from '../text.js';
import { distinctCallIds } from './call-ids.js';
import type { ChatResponse, ChatToolCall } from '../agent/model.js';
import { checkRunHost } from '../agent/run-options.js';
import { alsoWaiting, refusalToRead, settleCall, type AgentRecoveryPolicy, type AgentToolCall, type CallContext, type SettledCall } from '../agent/run-calls.js';
import { eitherSignal } from '../abort.js';
import { journalReviewsAtStart } from '../agent/run-reviews.js';
import { callRefusedEvent, checkRunId, journaledRefusal, modelResponseEvent, NOT_RUN_BY_FRAMEWORK, notOffered, readRun, runFinishedEvent, runFootprint, runOperationKey, runStartedEvent, type JournaledRun } from '../agent/run-journal.js';

/** What a bridge run needs; the framework's loop does the rest. */
export interface BridgeRunOptions {
  /** The session's fenced owner: the run's events are journaled through it. */
  readonly owner: SessionOwner;
  /** A gateway bound to the same owner and to the run's task. */
  readonly gateway: ToolGateway;
  /** The store the owner belongs to: the run is read back from the session's journal. */
  readonly store: Pick<SessionStore, 'loadHistory'>;
  /**
   * The run's id (letters, digits and `._:@-`, at most RUN_LIMITS.maxRunIdBytes). A new id starts a run; an id the
   * journal already holds resumes it. Choose it from what the run is for (an order, a ticket) so a restarted host
   * finds it again.
   */
  readonly runId: string;
  /** The user's message. Required for a new run; when resuming it may be left out, or must equal the journaled one. */
  readonly prompt?: string;
  /** What resuming does with a call left open (no result): `suspend` (default) or `retry_safe`, as for resumeAgent. */
  readonly recovery?: AgentRecoveryPolicy;
  /**
   * More tools whose `reconcile` is asked about open calls before the policy applies. The reconcilers of the tools
   * registered in the gateway's runtime are always asked (a copy here without one does not stand in for it).
   */
  readonly reconcilers?: readonly Tool[];
  /**
   * Cancels the calls the run makes (recorded as `cancelled`), as the framework's own signal for a call does
   * (`generateText`'s `abortSignal`, the Agents SDK's `run(…, { signal })`).
   */
  readonly signal?: AbortSignal;
}

/**
 * `running`: the framework's loop goes on from `messages`. `finished`: the model answered without tool calls; `text`
 * is its answer and nothing more needs running. `needs_review`: a call's outcome is open and nothing allows
 * retrying it (a person reviews it, then the run is opened again). `awaiting_approval`: a call waits on an
 * operator's durable approval decision.
 */
export type BridgeRunStatus = 'running' | 'finished' | 'needs_review' | 'awaiting_approval';

/** One journaled step as the framework's messages are rebuilt from it: the model's answer and what it read back. */
export interface BridgeRunStep {
  readonly response: ChatResponse;
  /** One per requested call, as each settled (fewer when the run stopped inside this step, or before a call ran). */
  readonly calls: AgentToolCall[];
}

/**
 * The value of a model's argument text, or null when it is not JSON (a framework never runs such a call unrepaired).
 * `noneAsEmpty`: no text at all as no arguments, `{}`, as the AI SDK runs it (the Agents SDK refuses it).
 */
function parsedArguments(text: string, noneAsEmpty: boolean): { readonly value: unknown } | null {
  try {
    return { value: JSON.parse(noneAsEmpty && text.trim() === '' ? '{}' : text) };
  } catch (error) {
    if (error instanceof SyntaxError) return null;
    throw error;
  }
}

/**
 * Whether the JSON text a model wrote holds `input`, the value a framework parsed from it: canonically equal, or, for
 * values canonical JSON does not take (a number past a double's range, a lone surrogate, deep nesting), written alike.
 */
function sameArguments(text: string, input: unknown, noneAsEmpty: boolean): boolean {
  const parsed = parsedArguments(text, noneAsEmpty);
  if (parsed === null) return false;
  if (jsonEquals(parsed.value, input)) return true;
  try {
    return JSON.stringify(parsed.value) === JSON.stringify(input);
  } catch {
    return false;
  }
}

/**
 * Why the framework's call of `name` with `input` is not the call journaled at `at` (undefined: it is). With `input`,
 * the model's text must hold it (written alike, or no text at all, which the AI SDK runs as {} and the Agents SDK
 * refuses), or be text that is not JSON, which a framework runs only once it has repaired it.
 */
function mismatch(at: Position | undefined, name: string, input: unknown): string | 'unknown' | undefined {
  if (at === undefined) return 'unknown';
  const made = `the model's call ${JSON.stringify(at.requested.id)} to ${JSON.stringify(at.requested.name)}`;
  if (at.refused === true || at.requested.name !== name) {
    const held = at.refused === true ? 'a tool the run does not offer (a call it repaired?): the journal holds that call refused' : '(a call it repaired?): the journal holds that call, not this one';
    return `the framework ran ${JSON.stringify(name)} for ${made}, ${held}, and nothing runs`;
  }
  if (input === undefined) return undefined;
  const text = at.requested.arguments;
  if (sameArguments(text, input, false) || sameArguments(text, input, true) || parsedArguments(text, true) === null) return undefined;
  return `the framework ran ${made} with arguments the model did not write for it (a call it repaired?), which the journal does not hold`;
}

interface Position {
  readonly step: number;
  readonly index: number;
  readonly requested: ChatToolCall;
  /** A call the framework refuses (a tool it was not given): journaled refused with its step, never run. */
  readonly refused?: boolean;
}

/** The options every bridge run takes, checked before anything is read or journaled: a run's, and its store and prompt. */
export function checkBridgeOptions(options: BridgeRunOptions): void {
  const o = checkRunHost(options);
  if (o.store === undefined) throw new InvalidInputError('store', 'is required: the run is read back from the session\'s journal');
  if (o.prompt !== undefined && typeof o.prompt !== 'string') throw new InvalidInputError('prompt', `must be a string, got ${describeValue(o.prompt)}`);
  if (typeof o.prompt === 'string' && toWellFormed(o.prompt) !== o.prompt) {
    throw new InvalidInputError('prompt', 'holds a lone surrogate (a broken character), which the journal cannot hold');
  }
}

/**
 * What a prompt holds of the run, for BridgeRun.checkPromptCurrent: the ids of its calls, and of those it says did not
 * run (the reading of a call the framework never handed to the run's tools). `field`: the option it came from.
 */
export interface PromptView {
  readonly field: string;
  readonly callIds: ReadonlySet<string>;
  readonly notRun: ReadonlySet<string>;
  /** The calls the prompt holds a result of that says the tool ran (not an error, not a refusal before the tool). */
  readonly answered: ReadonlySet<string>;
}

/** Whether a tool result's text is a bridge's refusal of a call before its tool ran (a preflight refusal, an errorFunction's). */
export const saysToolDidNotRun = (text: unknown): boolean => typeof text === 'string' && text.endsWith('The tool did not run.');

/** Whether a tool result's text is the run's reading of a call the framework never ran (BridgeRun.readBack). */
export const saysNotRun = (text: unknown): boolean => typeof text === 'string' && text.includes(`(${NOT_RUN_BY_FRAMEWORK.code})`);

/** The state both bridges share; each bridge turns `rebuilt` into its framework's messages. */
export class BridgeRun {
  readonly runId: string;
  readonly prompt: string;
  /**
   * The journaled steps: those opening the run settled, then each step this run object journals, with its calls as
   * they settle. The framework's messages are rebuilt from them whenever they are read.
   */
  readonly rebuilt: BridgeRunStep[] = [];
  status: BridgeRunStatus = 'running';
  text: string | null = null;
  readonly pendingCallIds: string[] = [];
  readonly toolCalls: AgentToolCall[] = [];
  private readonly ctx: CallContext;
  private readonly available: ReadonlySet<string>;
  /**
   * The positions of the calls this process journaled that the framework has not run yet, by their call id, which
   * names one position (distinctCallIds): the framework runs each call under the id its step was journaled with.
   */
  private readonly positions = new Map<string, Position>();
  private journaledSteps: number;
  /** The ids of the calls the framework handed to the run's tools in this process (run or running). */
  private readonly handedOver = new Set<string>();
  /** The step write under way: the next one follows it. */
  private recording: Promise<void> = Promise.resolve();

  private constructor(
    private readonly options: BridgeRunOptions,
    runId: string,
    prompt: string,
    journaledSteps: number,
    /** The tools the framework was given: it refuses a call to any other, so such a call is journaled refused. */
    private readonly offered: ReadonlySet<string> | null,
  ) {
    this.runId = runId;
    this.prompt = prompt;
    this.journaledSteps = journaledSteps;
    const { owner, gateway, store, signal } = options;
    this.ctx = { owner, runId, gateway, store, policy: options.recovery ?? 'suspend', reconcilers: runReconcilers(gateway, options.reconcilers ?? []), signal, reconciled: null, inboxJournaled: false, offered };
    this.available = new Set(gateway.schemas().map((s) => s.name));
  }

  /**
   * Opens (starts or resumes) the run `options.runId`; see the module comment. `offered`: the gateway tools the
   * framework is given (null: every one).
   */
  static async open(options: BridgeRunOptions, offered: ReadonlySet<string> | null = null): Promise<BridgeRun> {
    checkBridgeOptions(options);
    const runId = checkRunId(options.runId);
    // In its turn, with the calls and step writes under way of the run's older loop in this process settled first: a
    // call it had started, not yet journaled, would otherwise read as one the framework never ran.
    const turn = await takeTurn(options.owner, runId, 'open', options.signal);
    const read = { footprint: null as number | null };
    try {
      return await BridgeRun.openNow(options, runId, offered, turn, read);
    } catch (error) {
      // Refused with nothing journaled: the loop that had the run keeps it.
      await turn.giveBack(() => runUnchanged(options.owner, options.store, runId, read.footprint));
      throw error;
    } finally {
      turn.end();
    }
  }

  private static async openNow(options: BridgeRunOptions, runId: string, offered: ReadonlySet<string> | null, turn: RunTurn, read: { footprint: number | null }): Promise<BridgeRun> {
    const { owner, gateway, store } = options;
    // A run opened with a cancelled signal journals nothing, as runAgent's does not start.
    options.signal?.throwIfAborted();
    const events = await readOwnJournal(owner, store);
    read.footprint = runFootprint(events, runId);
    const journaled = readRun(events, runId);
    if (journaled === null) {
      if (options.prompt === undefined) throw new InvalidInputError('prompt', `is required: no run ${runId} is journaled in session ${owner.sessionId}`);
      const run = new BridgeRun(options, runId, options.prompt, 0, offered);
      turn.hold(run);
      await journalReviewsAtStart(run.ctx);
      const turnId = gateway.turnId;
      await owner.append([runStartedEvent(turnId, runId, gateway.taskId, options.prompt), { turnId, kind: { type: 'user_message', text: options.prompt } }]);
      return run;
    }
    if (journaled.taskId !== gateway.taskId) {
      throw new InvalidInputError('gateway', `is bound to task ${gateway.taskId}, but run ${runId} runs in task ${journaled.taskId}`);
    }
    if (options.prompt !== undefined && options.prompt !== journaled.input) throw new InvalidInputError('prompt', `differs from the prompt journaled for run ${runId}`);
    // From here this open is the run's loop (given back if it is refused before it journals anything).
    const run = new BridgeRun(options, runId, journaled.input, journaled.responses.length, offered);
    turn.hold(run);
    await journalReviewsAtStart(run.ctx);
    await run.replay(journaled);
    return run;
  }

  /** Settles every journaled step's calls against the journal, as a resumed runAgent does. */
  private async replay(journaled: JournaledRun): Promise<void> {
    const finished = journaled.finished !== null;
    const outsideAt = outsideCallReader(this.options.owner, this.options.store, this.runId, journaled.taskId);
    for (const [i, response] of journaled.responses.entries()) {
      const step = i + 1;
      const calls: AgentToolCall[] = [];
      this.rebuilt.push({ response, calls });
      this.text = response.text;
      // A call the framework runs is journaled (its attempt) before its body, so a call with no attempt and no
      // journaled refusal is one the framework never ran: it refused it without calling us (its own argument parsing,
      // a tool not active at that step, a response it rejected), in the last step as in any other, or the process
      // stopped first. Neither can be told from the other, and a resume must not make a call the framework refused:
      // it is read as not run, and the model may ask for it again.
      for (const [index, requested] of response.toolCalls.entries()) {
        const key = runOperationKey(this.runId, step, index);
        const refusal = await refusalToRead(journaled, step, index, this.options.owner, this.options.gateway.taskId, key, NOT_RUN_BY_FRAMEWORK);
        // Made by a tool outside the run (the gateway's own bridge tools given to the loop): read back as it ran.
        const outside = refusal?.code === NOT_RUN_BY_FRAMEWORK.code ? await outsideAt(`${step}/${index}`) : undefined;
        // One whose body may have run and that nothing settled: a person reviews it, as a call of the run's own.
        if (outside?.kind === 'open' && !finished) {
          this.stop('needs_review', outside.callId);
          return;
        }
        let call: AgentToolCall;
        if (outside !== undefined && outside.kind !== 'open') {
          call = readOutsideCall(requested, outside);
        } else if (refusal !== undefined) {
          call = { providerCallId: requested.id, name: requested.name, outcome: preflightFailure(requested.name, refusal), execution: null };
          // Read as not run with nothing journaled to say so: journaled as refused, so that whichever loop goes on
          // with the run (runAgent included) reads the same and never makes it.
          if (!finished && journaledRefusal(journaled, step, index) === undefined) {
            await this.options.owner.append([callRefusedEvent(this.options.gateway.turnId, this.runId, step, index, refusal.code, refusal.message)]);
          }
        } else {
          const settled = await this.settle({ step, index, requested }, finished);
          if (settled === null) break;
          if (settled.kind === 'stop') {
            this.stop(settled.reason, settled.callId);
            const later = response.toolCalls.slice(index + 1).map((c, i) => ({ requested: c, key: runOperationKey(this.runId, step, index + 1 + i), action: this.actionAt(step, index + 1 + i) }));
            for (const id of await alsoWaiting(this.ctx, later)) this.stop(settled.reason, id);
            return;
          }
          call = settled.call;
        }
        calls.push(call);
        this.toolCalls.push(call);
      }
    }
    const last = journaled.responses.at(-1);
    if (journaled.finished !== null) {
      this.status = 'finished';
      this.text = journaled.finished.text;
    } else if (last !== undefined && last.toolCalls.length === 0 && !journaled.frameworkSteps.has(journaled.responses.length)) {
      // Journaled by runAgent, which records the end of a run in a later write: its step without calls is its answer,
      // with text or none, and runAgent reads it so: record the end now. A step a bridge journaled without its end
      // (only the framework's own calls, text beside a handoff) is not an answer: the run goes on.
      await this.options.owner.append([runFinishedEvent(this.options.gateway.turnId, this.runId, 'completed', journaled.responses.length, last.text)]);
      this.status = 'finished';
    }
  }

  private stop(reason: 'needs_review' | 'awaiting_approval', callId: string): void {
    this.status = reason;
    if (!this.pendingCallIds.includes(callId)) this.pendingCallIds.push(callId);
  }

  private actionAt(step: number, index: number): ActionContext {
    return { decision: { taskId: this.options.gateway.taskId as ActionContext['decision']['taskId'], stepId: `${this.runId}/${step}` }, actionIndex: index };
  }

  private async settle(position: Position, replayOnly: boolean, ctx: CallContext = this.ctx): Promise<SettledCall | null> {
    const { gateway, owner } = this.options;
    const { step, index, requested } = position;
    const settled = await settleCall(ctx, requested, runOperationKey(this.runId, step, index), this.actionAt(step, index), replayOnly ? 'replay' : 'run');
    if (!replayOnly && settled?.kind === 'done' && settled.call.execution === null && !settled.call.outcome.ok && settled.call.outcome.category === 'preflight') {
      // Refused before anything was recorded: journaled so a resumed run shows the model the same refusal.
      await owner.append([callRefusedEvent(gateway.turnId, this.runId, step, index, settled.call.outcome.code, settled.call.outcome.message)]);
    }
    return settled;
  }

  /**
   * The run's context with another signal, for one call the framework may cancel: what the run learns meanwhile
   * (reconcilers asked, inbox reviews journaled) is still the run's, once for all its calls.
   */
  private withSignal(signal: AbortSignal | undefined): CallContext {
    const shared = this.ctx;
    return {
      ...shared,
      signal,
      get reconciled() { return shared.reconciled; },
      set reconciled(value) { shared.reconciled = value; },
      get inboxJournaled() { return shared.inboxJournaled; },
      set inboxJournaled(value) { shared.inboxJournaled = value; },
    };
  }

  /**
   * The steps as the framework's messages show them. A call of a step journaled here that the framework never handed
   * to the run's tools (a tool it was not given, input it could not parse) reads as not run, as opening the run again
   * reads it: without a result, the framework refuses the conversation (a call with no result) at the next step.
   */
  readBack(): BridgeRunStep[] {
    return this.rebuilt.map((step) => {
      const unrun = step.response.toolCalls.flatMap((c) => {
        const at = this.positions.get(c.id);
        if (at === undefined || step.calls.some((s) => s.providerCallId === c.id)) return [];
        const refusal = at.refused === true ? notOffered(c.name) : NOT_RUN_BY_FRAMEWORK;
        return [{ providerCallId: c.id, name: c.name, outcome: preflightFailure(c.name, refusal), execution: null }];
      });
      return unrun.length === 0 ? step : { response: step.response, calls: [...step.calls, ...unrun] };
    });
  }

  /** The number of model responses journaled so far (this run's steps, the resumed ones included). */
  get stepCount(): number {
    return this.journaledSteps;
  }

  /**
   * Journals one model response of the framework's loop as the run's next step, before any of its calls runs, and
   * remembers each call's position. A response without tool calls finishes the run; one whose only calls are the
   * framework's own (`foreignCalls`: an Agents SDK handoff, a tool the agent has besides the run's, a name the SDK
   * rejects), or that the framework does not take as an answer (the Agents SDK: no message at all), does not: the
   * framework goes on, or fails, and the run is not over. Returns the ids the calls were journaled with, in order:
   * the bridge hands the framework its calls under these, so each id names one position (distinctCallIds).
   * `otherIds`: the ids of the response's calls that are not the run's, which no call of the run may take.
   */
  async record(response: ChatResponse, foreignCalls = false, otherIds: readonly string[] = [], prompt?: PromptView): Promise<readonly string[]> {
    // A step write is work under way like a call: a newer open reads the journal after it. Two loops on one run
    // object (two generateText calls on it) journal their steps one after the other, each under its own number, and
    // each answer only if its prompt still holds the step before it: of two loops asked at once from one prompt, the
    // second answer is refused, never journaled, its calls never run.
    const mine = this.recording.then(() => asHolder(this.options.owner, this.runId, this, () => {
      if (prompt !== undefined) this.checkPromptCurrent(prompt);
      // Nor one the prompt holds already (a host's earlier turns before the run's messages, whose provider numbered its
      // calls the same way): a stale prompt would hold the next step's ids through them (r113 F4).
      return this.recordNow(response, foreignCalls, prompt === undefined ? otherIds : [...otherIds, ...prompt.callIds]);
    }));
    this.recording = mine.then(() => undefined, () => undefined);
    return mine;
  }

  private async recordNow(given: ChatResponse, foreignCalls: boolean, otherIds: readonly string[]): Promise<readonly string[]> {
    // A finished run takes no more steps: journaled after its end, they would be read by one loop and not the other.
    if (this.status === 'finished') throw new InvalidInputError('run', `${this.runId} is finished: start a new run (another run id) to go on`);
    // Nor does a stopped one: steps past a call that waits on a person would end the run with that call still open.
    if (this.status !== 'running') throw new InvalidInputError('run', `${this.runId} is ${this.status}: open it again once the call is decided`);
    const { owner, gateway } = this.options;
    const turnId = gateway.turnId;
    const step = this.journaledSteps + 1;
    // An id no call of the run has had: a provider that numbers each response's calls from zero would otherwise give
    // every step the same ids, and a prompt missing a step could not be told from one holding it.
    const taken = new Set([...this.positions.keys(), ...otherIds, ...this.rebuilt.flatMap((s) => s.response.toolCalls.map((c) => c.id))]);
    const response: ChatResponse = { ...given, toolCalls: distinctCallIds(given.toolCalls, step, taken) };
    const finishes = response.toolCalls.length === 0 && !foreignCalls;
    // A call to a tool the framework was not given: the framework refuses it without calling us, so its refusal is
    // journaled with the step, and a resumed run never runs it.
    const refused = response.toolCalls.flatMap((c, index) => (this.offered !== null && !this.offered.has(c.name) ? [index] : []));
    await owner.append([
      ...(response.text !== null && response.text.length > 0 ? [{ turnId, kind: { type: 'assistant_message', text: response.text } } as const] : []),
      modelResponseEvent(turnId, this.runId, step, response, this.available, true),
      ...refused.map((index) => {
        const refusal = notOffered(response.toolCalls[index]!.name);
        return callRefusedEvent(turnId, this.runId, step, index, refusal.code, refusal.message);
      }),
      ...(finishes ? [runFinishedEvent(turnId, this.runId, 'completed', step, response.text)] : []),
    ]);
    this.journaledSteps = step;
    this.rebuilt.push({ response, calls: [] });
    this.text = response.text;
    if (finishes) this.status = 'finished';
    for (const [index, requested] of response.toolCalls.entries()) {
      this.positions.set(requested.id, { step, index, requested, refused: refused.includes(index) });
    }
    return response.toolCalls.map((c) => c.id);
  }

  /**
   * Runs the call the framework's loop asks for, identified by the model's call id, under the key of the position
   * `record` gave it. A call that stops the run (it waits on an operator's approval) or that no recorded response
   * asked for throws ToolRuntimeHaltedError, so the framework's loop ends. `signal`: the framework's own for this
   * call; it cancels the call as the run's `signal` does.
   */
  async call(name: string, providerCallId: string, signal?: AbortSignal, input?: unknown): Promise<AgentToolCall> {
    let position: Position | undefined;
    let settled: SettledCall;
    const either = eitherSignal(this.ctx.signal, signal);
    try {
      // Only the run's loop calls (a newer open or a drive took it: AgentRunBusyError), and its call is work under
      // way that a newer entry waits for before it reads the journal.
      settled = (await asHolder(this.options.owner, this.runId, this, async () => {
        // By the call id the step was journaled with, which names one position; the framework's call must run the
        // tool that call names, with the arguments the model wrote for it (its input is checked against them): a call
        // the framework repaired into another tool or other arguments is not the journaled call, and runs nothing.
        const at = this.positions.get(providerCallId);
        const refusal = mismatch(at, name, input);
        if (refusal !== undefined) {
          throw new InvalidInputError('model', refusal === 'unknown' ? `the call ${JSON.stringify(providerCallId)} was not asked for through the run's model: give the framework the run's model wrapper` : refusal);
        }
        this.positions.delete(providerCallId);
        this.handedOver.add(providerCallId);
        position = at;
        // Not replay-only, so never null.
        return this.settle(at!, false, either.signal === this.ctx.signal ? this.ctx : this.withSignal(either.signal));
      }))!;
    } catch (error) {
      // What the runtime refused (budget, a fenced owner, storage, a key another loop used meanwhile) halts the
      // framework's loop; its text is model-safe, never the error's own (ids and keys are not for the model).
      throw error instanceof ToolRuntimeHaltedError ? error : new ToolRuntimeHaltedError(name, error);
    } finally {
      either.done();
    }
    if (settled.kind === 'stop') {
      this.stop(settled.reason, settled.callId);
      const key = runOperationKey(this.runId, position!.step, position!.index);
      const [detail, advice] = settled.reason === 'awaiting_approval'
        ? ['it waits on an operator\'s approval decision and has not run', 'open the run again once the operator decides']
        : ['its outcome is open and needs a review', 'open the run again once a review or a reconciler settles it'];
      throw new ToolRuntimeHaltedError(name, new OperationInDoubtError(this.options.gateway.taskId, key, settled.callId, detail, advice));
    }
    this.toolCalls.push(settled.call);
    this.rebuilt[position!.step - 1]?.calls.push(settled.call);
    return settled.call;
  }

  /**
   * Refuses a prompt that does not hold the run's last step (InvalidInputError `field`): the messages the run was
   * opened with, passed again after steps were journaled, say. The model would not see what that step's calls did,
   * and ask for them again: every write made anew at each step. `callIds`: the ids of the calls the prompt holds.
   */
  checkPromptCurrent(prompt: PromptView): void {
    // The latest step with calls of the run's tools, whether they ran, were refused, or never reached the tools.
    let at = this.rebuilt.length;
    while (at > 0 && this.rebuilt[at - 1]!.response.toolCalls.length === 0) at -= 1;
    const missing = at === 0 ? undefined : this.rebuilt[at - 1]!.response.toolCalls.find((c) => !prompt.callIds.has(c.id));
    if (missing !== undefined) {
      throw new InvalidInputError(prompt.field, `does not hold step ${at} of run ${this.runId} (its call of ${JSON.stringify(missing.name)}): ` +
        'the model would not see what that step did and ask for it again. Pass the run\'s messages as they are now (read them again from the run), ' +
        'or the messages the framework gave back');
    }
    // A call of the step that the framework never handed to the run's tools, and that has a result all the same: a tool
    // outside the run ran it (the gateway's own bridge tools, say), under a key of its own, and nothing the run
    // journals says so until it is opened again (docs/design.md#a-step-call-made-outside-the-run).
    const outside = at === 0 ? undefined
      : this.rebuilt[at - 1]!.response.toolCalls.find((c) => prompt.answered.has(c.id) && this.positions.get(c.id)?.refused === false);
    if (outside !== undefined) {
      throw new InvalidInputError(prompt.field, `holds a result of the call ${JSON.stringify(outside.id)} of ${JSON.stringify(outside.name)} (step ${at} of run ${this.runId}) ` +
        'that the run\'s tools never ran: a tool outside the run made it, under a key of its own, not the step\'s. Give the framework the run\'s tools ' +
        'only (run.tools), not the gateway\'s own bridge tools; the run, opened again, reads that call back from the attempt that made it');
    }
    // Messages read while a step's calls were being handed to the tools say a call did not run that ran since.
    const ran = [...prompt.notRun].find((id) => this.handedOver.has(id));
    if (ran !== undefined) {
      throw new InvalidInputError(prompt.field, `says the call ${JSON.stringify(ran)} of run ${this.runId} did not run, but it ran: the messages were read ` +
        'before the framework handed it to the tool. Read the run\'s messages again once the step is over');
    }
  }
}
