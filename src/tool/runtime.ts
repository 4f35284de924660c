import { DecisionError, InvalidInputError, OperationConfirmedError, OperationInDoubtError, OperationMadeByIdenticalError, StoreConflictError, ToolConfigError, ToolOverloadedError, ToolPreflightError, ToolRecordingError, ToolRetryError, ToolTurnClosedError } from '../errors.js';
import type { EventDraft, SessionEvent, ToolApprovalRecord, ToolCall, ToolEffectContract, ToolOperation, ToolResult } from '../event/types.js';
import type { ApprovalBinding } from '../store/inbox-rows.js';
import { approvalBinding, operatorDecision, pendingApproval, type OperatorDecision } from './durable-approval.js';
import { contractChangedRefusal } from './contract-changed.js';
import { sameContract } from './evidence.js';
import { approvalRestore, hasPendingBodyEnds, journalPendingBodyEnds, trackLateBody, unrecordedBodyEnd, type LateBodyEnd } from './late-bodies.js';
import { STOPPED_BEFORE_BODY, stoppedBeforeBody } from './retry-policy.js';
import { checkId, newCallId, newOperationKey, newTurnId, type OperationKey, type TaskId, type TurnId } from '../ids.js';
import { jsonEquals, jsonTextBytes } from '../json/canonical.js';
import type { JsonValue } from '../json/types.js';
import { LIMITS, RUNTIME_DEFAULTS } from '../limits.js';
import type { ApprovalChange, BudgetChange, CommitRequest, RecordedAttempt, RepeatedRow, SessionOwner } from '../store/types.js';
import { describeSetting, toWellFormed, utf8Length } from '../text.js';
import { checkRuntimeConfig, checkSignal } from './runtime-config.js';
import { askApproval, checkAvailability, checkGrantAndSchema, checkInDoubt, failure, runGuards, type Failure, type RegisteredTool } from './admission-checks.js';
import { CallControl } from './control.js';
import { faultPoint } from '../fault.js';
import { DEFAULT_CONTRACT, type ToolMetadata } from './metadata.js';
import { compileInputSchema, createSchemaAjv } from './schema-ajv.js';
import { planOperationCalls, planOperationOrigin, planRepeatedRows, planTouchesRepeats, planSourceRow, ToolRetryPlan } from './retry-plan.js';
import { noteRetrySource } from './retry-source.js';
import { defaultPanicDescription } from './panic.js';
import { Observability, type AttemptObserver } from './telemetry.js';
import type { PanicDescriber, ToolApprover, ToolGuard, ToolBinding, ToolCallOptions, ToolExecution, ToolGateway, ToolRuntime, ToolRuntimeConfig, ToolSchema, Tool } from './types.js';
import { canCommit, commitAs, holdSessionForBody, onOwnerLost, ownerMayBeLost } from '../store/owner-commit.js';
import { checkAction, checkOperationKey, effectiveLimit, positiveSetting, preflight, readCallOptions } from './call-inputs.js';
import { type AttemptCondition, type RetryAsked, askRetry, attemptCondition, bindingChangedAdvice, callsRunningAs, enterCall, enterRetry, identicalWriteOf, leaveCall, interruptedOnly, notRegistered, refuseUnsafeRetryHere, refuseWhileReviewWaits, retriesUnderWay, retryCallWritten, runningCalls, settling, stillRunning, unlessDecidedMeanwhile } from './attempt-rules.js';
import { bodyFailure, frozenOperation, hookView, panicDetail, serializeOutput } from './body-outcome.js';

/** The canonical runtime (docs/design.md#the-runtime): every check on every attempt, every outcome journaled as evidence. */
class CanonicalRuntime implements ToolRuntime {
  readonly tools = new Map<string, RegisteredTool>();
  readonly grants = new Map<string, '*' | ReadonlySet<string>>();
  readonly guards: readonly ToolGuard[];
  readonly approvers: ReadonlyMap<string, ToolApprover>;
  readonly defaultTimeoutMs: number;
  readonly maxOutputBytes: number;
  readonly maxInFlight: number;
  readonly describePanic: PanicDescriber;
  readonly inDoubtGuard: boolean;
  /** Null unless a tracer, a meter or an onEvent hook is configured (docs/design.md#observability). */
  readonly observability: Observability | null;
  inFlight = 0;

  constructor(config: ToolRuntimeConfig) {
    checkRuntimeConfig(config);
    this.defaultTimeoutMs = positiveSetting('defaultTimeoutMs', config.defaultTimeoutMs, RUNTIME_DEFAULTS.timeoutMs, LIMITS.maxTimeoutMs);
    this.maxOutputBytes = positiveSetting('maxOutputBytes', config.maxOutputBytes, RUNTIME_DEFAULTS.maxOutputBytes);
    this.maxInFlight = positiveSetting('maxInFlight', config.maxInFlight, RUNTIME_DEFAULTS.maxInFlight);
    this.describePanic = config.describePanic ?? defaultPanicDescription;
    if (config.inDoubtGuard !== undefined && typeof config.inDoubtGuard !== 'boolean') {
      throw new ToolConfigError(`inDoubtGuard must be a boolean, got ${describeSetting(config.inDoubtGuard)}`);
    }
    this.inDoubtGuard = config.inDoubtGuard !== false;
    this.observability = Observability.from(config.telemetry, config.onEvent);
    this.guards = [...(config.guards ?? [])];
    this.approvers = new Map(Object.entries(config.approvers ?? {}));
    const ajv = createSchemaAjv();
    for (const tool of config.tools) {
      if (this.tools.has(tool.name)) throw new ToolConfigError(`two tools are named ${tool.name}`);
      try {
        preflight(tool.name, null);
      } catch (error) {
        throw new ToolConfigError(`tool name ${JSON.stringify(tool.name)} is invalid: ${(error as Error).message}`);
      }
      const approval = tool.metadata.approval;
      if (approval !== null && !this.approvers.has(approval)) {
        throw new ToolConfigError(`tool ${tool.name} requires approval ${approval}, but no approver has that key`);
      }
      let validate;
      try {
        validate = compileInputSchema(ajv, tool.metadata.inputSchema);
      } catch (error) {
        throw new ToolConfigError(`the input schema of ${tool.name} is invalid: ${(error as Error).message}`, { cause: error });
      }
      this.tools.set(tool.name, { tool, validate });
    }
    for (const [caller, grant] of Object.entries(config.grants)) {
      if (grant === '*') {
        this.grants.set(caller, '*');
        continue;
      }
      for (const name of grant) if (!this.tools.has(name)) throw new ToolConfigError(`caller ${caller} is granted ${name}, which is not registered`);
      this.grants.set(caller, new Set(grant));
    }
  }

  granted(caller: string, name: string): boolean {
    const grant = this.grants.get(caller);
    return grant === '*' || grant?.has(name) === true;
  }

  bind(binding: ToolBinding): ToolGateway {
    return new Gateway(this, binding);
  }
}

/**
 * How `gateway` runs `name` now against the contract a call recorded: `same`, `changed` (redeployed with another
 * effect or revision) or `removed` (not registered); null for a gateway this module did not make, which cannot say.
 */
export function contractChangeFor(gateway: ToolGateway, name: string, recorded: ToolEffectContract): 'same' | 'changed' | 'removed' | null {
  const made = gatewayMadeHere(gateway);
  if (made === null) return null;
  const current = made.contractOf(name);
  if (current === null) return 'removed';
  return sameContract(current, recorded) ? 'same' : 'changed';
}

/** The approver key `name` requires through `gateway` now (null: none), or undefined for a gateway this module did not make. */
export function approverFor(gateway: ToolGateway, name: string): string | null | undefined {
  return gatewayMadeHere(gateway)?.approverOf(name);
}

/**
 * The describePanic hook the host gave `runtime` (undefined when it gave none, or for a runtime this module did not
 * make): what a reconcile pass describes a reconciler's throw with, so a host that redacts its panics redacts those.
 */
export function hostPanicDescriber(runtime: ToolRuntime): PanicDescriber | undefined {
  return isCanonical(runtime) && runtime.describePanic !== defaultPanicDescription ? runtime.describePanic : undefined;
}

/** The describePanic hook the host gave the runtime `gateway` was bound from, as hostPanicDescriber. */
export function gatewayPanicDescriber(gateway: ToolGateway): PanicDescriber | undefined {
  const made = gatewayMadeHere(gateway);
  return made === null ? undefined : hostPanicDescriber(made.runtimeOf);
}

/**
 * Checks a bridge's `timeoutMs` and `maxOutputBytes` for tool `name` as each of its calls through `gateway` would
 * (ToolPreflightError `invalid_options` above a ceiling, naming the setting that raises it); nothing for a gateway this
 * module did not make, which checks them at each call.
 */
export function checkCallLimits(gateway: ToolGateway, name: string, given: { readonly timeoutMs?: number; readonly maxOutputBytes?: number }): void {
  gatewayMadeHere(gateway)?.limitsOf(name, given);
}

/** Whether the in-doubt guard is on for calls through `gateway`; true for a gateway this module did not make (which cannot say). */
export function inDoubtGuardOn(gateway: ToolGateway): boolean {
  const runtime = gatewayMadeHere(gateway)?.runtimeOf;
  return !isCanonical(runtime) || runtime.inDoubtGuard;
}

/** The tools registered in `runtime`, by name; null for a runtime this module did not make. */
export function registeredTools(runtime: ToolRuntime): ReadonlyMap<string, Tool> | null {
  return isCanonical(runtime) ? new Map([...runtime.tools].map(([name, r]) => [name, r.tool])) : null;
}

/**
 * A runtime createToolRuntime made, or a Proxy of one: an object that only borrows its prototype has none of its
 * fields, and is a runtime this module did not make.
 */
function isCanonical(runtime: unknown): runtime is CanonicalRuntime {
  return runtime instanceof CanonicalRuntime && runtime.tools instanceof Map;
}

/**
 * Whether `args` fit the current input schema of tool `name` in `gateway`'s runtime; null for a gateway this module did
 * not make, or a tool it does not register. A call in doubt whose recorded arguments no longer fit cannot be repeated
 * identically, so the in-doubt guard, which matches identical arguments, cannot stop its repeat.
 */
export function argumentsFitNow(gateway: ToolGateway, name: string, args: JsonValue): boolean | null {
  const made = gatewayMadeHere(gateway);
  const registered = made === null ? undefined : (made.runtimeOf as CanonicalRuntime).tools.get(name);
  return registered === undefined ? null : registered.validate(args) === true;
}

/** The gateway `gateway` is, or reads through to (a Proxy of one); null for one this module did not make. */
function gatewayMadeHere(gateway: ToolGateway): Gateway | null {
  return gateway instanceof Gateway && isCanonical(gateway.runtimeOf) && isObjectLike(gateway.bindingOf) ? gateway : null;
}

/** No call passed over as running: what the in-doubt guard reads for a retry of a refused repeat. */
const NONE_RUNNING: ReadonlySet<string> = new Set();

const isObjectLike = (value: unknown): boolean => typeof value === 'object' && value !== null;

/**
 * The reconcilers a run asks through `gateway`: every tool registered in the gateway's runtime that has one, then those
 * of `given` whose names the runtime has none for. A run must not use a person's review that the tool's own
 * reconciler would contradict, whether or not its host remembered to pass it (or passed a copy without it).
 */
export function runReconcilers(gateway: ToolGateway, given: readonly Tool[]): readonly Tool[] {
  const made = gatewayMadeHere(gateway);
  const registered = made === null ? null : registeredTools(made.runtimeOf);
  if (registered === null) return given;
  const own = [...registered.values()].filter((t) => t.reconcile !== undefined);
  const named = new Set(own.map((t) => t.name));
  return [...own, ...given.filter((t) => !named.has(t.name))];
}

/** The owner `gateway` writes its evidence through; null for a gateway this module did not make. */
export function boundOwnerOf(gateway: ToolGateway): SessionOwner | null {
  return gatewayMadeHere(gateway)?.boundOwner ?? null;
}

class Gateway implements ToolGateway {
  readonly sessionId: string;
  readonly taskId: TaskId;
  readonly turnId: TurnId;
  private readonly caller: string;

  constructor(private readonly runtime: CanonicalRuntime, private readonly binding: ToolBinding) {
    if (!binding?.owner) throw new InvalidInputError('owner', 'a gateway needs the session owner');
    // The runtime writes evidence through the store's own path, which only an owner a store returned has.
    if (!canCommit(binding.owner)) throw new InvalidInputError('owner', 'must be a session owner a jingwei store returned (acquire)');
    checkSignal(binding.signal, 'signal');
    this.sessionId = binding.owner.sessionId;
    this.taskId = checkId<TaskId>('taskId', binding.taskId);
    this.caller = checkId<string>('caller', binding.caller);
    this.turnId = binding.turnId === undefined ? newTurnId() : checkId<TurnId>('turnId', binding.turnId);
  }

  get boundOwner(): SessionOwner {
    return this.binding.owner;
  }

  get runtimeOf(): ToolRuntime {
    return this.runtime;
  }

  get bindingOf(): ToolBinding {
    return this.binding;
  }

  /** The approver key `name` requires in this runtime; null when it requires none or is not registered. */
  approverOf(name: string): string | null {
    return this.runtime.tools.get(name)?.tool.metadata.approval ?? null;
  }

  /** The contract `name` runs under in this runtime; null when it is not registered. */
  contractOf(name: string): ToolEffectContract | null {
    const registered = this.runtime.tools.get(name);
    return registered ? (registered.tool.metadata.effect ?? DEFAULT_CONTRACT) : null;
  }

  /**
   * The deadline and output limit a call of `name` with these options gets: each option may only tighten its ceiling
   * (the lower of the runtime's and the tool's), and one above it is refused (ToolPreflightError `invalid_options`).
   */
  limitsOf(
    name: string,
    given: { readonly timeoutMs?: number | undefined; readonly maxOutputBytes?: number | undefined },
    metadata: ToolMetadata | undefined = this.runtime.tools.get(name)?.tool.metadata,
  ): { timeoutMs: number; maxOutputBytes: number } {
    return {
      timeoutMs: effectiveLimit(
        'timeoutMs', given.timeoutMs, this.runtime.defaultTimeoutMs, 'the runtime\'s defaultTimeoutMs (createToolRuntime)',
        metadata?.timeoutCeilingMs, () => `the tool's ceiling (ToolMetadata.withTimeoutCeiling on ${name})`,
      ),
      maxOutputBytes: effectiveLimit(
        'maxOutputBytes', given.maxOutputBytes, this.runtime.maxOutputBytes, 'the runtime\'s maxOutputBytes (createToolRuntime)',
        metadata?.outputCeilingBytes, () => `the tool's ceiling (ToolMetadata.withOutputCeiling on ${name})`,
      ),
    };
  }

  schemas(): ToolSchema[] {
    const out: ToolSchema[] = [];
    for (const [name, { tool }] of this.runtime.tools) {
      if (this.runtime.granted(this.caller, name)) {
        out.push({ name, description: tool.metadata.description, inputSchema: tool.metadata.inputSchema });
      }
    }
    return out;
  }

  call(name: string, args: JsonValue): Promise<ToolExecution> {
    return this.callWithOptions(name, args, {});
  }

  callWithOptions(name: string, args: JsonValue, options: ToolCallOptions = {}): Promise<ToolExecution> {
    let given: CallOptionsRead;
    try {
      given = readCallOptions(options);
    } catch (error) {
      return Promise.reject(error);
    }
    // The call's own promise, not one wrapping it: a caller resumes as soon as the result is journaled.
    return given.retry instanceof ToolRetryPlan ? this.callRetry(name, args, given) : this.callGiven(name, args, given, null);
  }

  /** A retry from a plan: from now until its call is journaled, or it ends, an identical new call at the in-doubt guard waits for it. */
  private async callRetry(name: string, args: JsonValue, given: CallOptionsRead): Promise<ToolExecution> {
    const asked = askRetry(this.binding.owner);
    try {
      return await this.callGiven(name, args, given, asked);
    } finally {
      asked.done();
    }
  }

  private async callGiven(name: string, args: JsonValue, given: CallOptionsRead, asked: RetryAsked | null): Promise<ToolExecution> {
    const checked = preflight(name, args);
    const registered = this.runtime.tools.get(name);
    const metadata = registered?.tool.metadata;
    const { timeoutMs, maxOutputBytes: outputLimit } = this.limitsOf(name, given, metadata);
    if (this.binding.signal?.aborted) throw new ToolTurnClosedError();
    // A body end this process knows of and no journal has taken yet goes in before anything else this owner writes.
    if (hasPendingBodyEnds(this.binding.owner)) await journalPendingBodyEnds(this.binding.owner);
    if (given.retry instanceof ToolRetryPlan) {
      await refuseWhileReviewWaits(this.binding.owner, given.retry);
      refuseUnsafeRetryHere(this.binding.owner, given.retry);
    }
    // A retry of a call that provably never ran, under a contract the tool no longer has, is recorded refused before
    // its body, under the contract its operation recorded (docs/design.md#a-redeploy-while-a-call-waits).
    const changed = given.retry instanceof ToolRetryPlan && given.operationKey === undefined
      ? contractChangedRefusal(given.retry, metadata?.effect ?? null) : null;
    // A call to a tool this caller cannot use is journaled (with its `unavailable` result) only with small
    // arguments: otherwise calls to tools that do not exist could fill the session's journal. A retry's arguments
    // are in the journal already, and its refusal must be journaled whatever their size: it is what says that an
    // earlier attempt may have run, where an unrecorded refusal would read as a call that never did.
    const usable = registered !== undefined && this.runtime.granted(this.caller, name);
    if (!usable && changed === null && given.retry === undefined && checked.bytes > LIMITS.maxUnavailableArgumentsBytes) {
      throw new ToolPreflightError(
        'unavailable_tool',
        `tool ${JSON.stringify(name)} is not available to this caller, and its ${checked.bytes} bytes of arguments (over ${LIMITS.maxUnavailableArgumentsBytes}) were not recorded`,
      );
    }
    const contract = metadata?.effect ?? DEFAULT_CONTRACT;
    let callerKey: OperationKey | null = null;
    if (given.operationKey !== undefined) {
      if (given.retry !== undefined) {
        throw new ToolPreflightError('invalid_options', 'operationKey cannot be combined with retry: a retry takes its key from its plan');
      }
      callerKey = checkOperationKey(given.operationKey);
      const recorded = await this.binding.owner.readOperation(this.taskId, callerKey);
      if (recorded) return await this.replay(recorded, name, checked.value, contract, registered !== undefined);
    }
    // The action is checked and copied for an attempt (a replay uses none), before a retry's plan is taken.
    const action = checkAction(given.action, this.taskId);
    // Frozen where it is made: the hooks and the body are handed this very object, and nothing changes it after.
    const operation = frozenOperation(callerKey === null
      ? this.operationFor(name, checked.value, changed ? given.retry!.contract : contract, given.retry, registered !== undefined || changed !== null)
      : { taskId: this.taskId, key: callerKey, contract, retry: null, startMarker: true });
    if (this.runtime.inFlight >= this.runtime.maxInFlight) throw new ToolOverloadedError(this.runtime.maxInFlight);
    this.runtime.inFlight += 1;
    let control: CallControl | null = null;
    let observer: AttemptObserver | null = null;
    const callId = newCallId();
    enterCall(this.binding.owner, callId, asked, action);
    // Held from the check above (no wait between them) until this attempt is recorded: no pass here asks meanwhile.
    const retrying = given.retry instanceof ToolRetryPlan ? enterRetry(this.binding.owner, given.retry.sourceCallId) : null;
    try {
      control = new CallControl(
        timeoutMs,
        [this.binding.signal, given.signal],
        (onStop) => this.binding.owner.onTaskStopped((taskId, reason) => { if (taskId === this.taskId) onStop(reason); }),
        (onLost) => onOwnerLost(this.binding.owner, onLost),
        () => ownerMayBeLost(this.binding.owner),
      );
      const call: ToolCall = {
        id: callId,
        name,
        arguments: checked.value,
        operation,
        ...(action ? { action } : {}),
      };
      observer = this.runtime.observability?.attempt(this.sessionId, call, given.retry, usable) ?? null;
      const execution = changed
        ? await this.refuseChangedContract(call, changed, observer, given.retry!)
        : await this.run(call, registered, outputLimit, control, checked.text, callerKey !== null, observer, given.retry);
      if (given.retry instanceof ToolRetryPlan) noteRetrySource(execution, planSourceRow(given.retry));
      observer?.recorded(execution.result.outcome);
      return execution;
    } catch (error) {
      observer?.unrecorded(error);
      throw error;
    } finally {
      leaveCall(this.binding.owner, callId);
      retrying?.();
      control?.dispose();
      this.runtime.inFlight -= 1;
    }
  }

  /** A new logical action gets a new key; a retry takes its key from the plan, which is consumed here. */
  private operationFor(name: string, args: JsonValue, contract: ToolOperation['contract'], plan: ToolRetryPlan | undefined, registered: boolean): ToolOperation {
    if (plan === undefined) return { taskId: this.taskId, key: newOperationKey(), contract, retry: null, startMarker: true };
    if (!(plan instanceof ToolRetryPlan)) throw new ToolRetryError('invalid_evidence', 'options.retry is not a plan from prepareToolRetry');
    if (!registered) throw notRegistered(name, 'the plan was not consumed');
    const taken = plan.takeOperation({ sessionId: this.sessionId, taskId: this.taskId, name, arguments: args, contract });
    faultPoint('plan:taken');
    return { ...taken, startMarker: true };
  }

  /**
   * A caller key that already has an attempt: the recorded execution when it completed with this binding; nothing
   * runs, nothing is written, nothing is charged (docs/design.md#caller-keys-and-replay). Never a retry (D5).
   */
  private async replay(recorded: RecordedAttempt, name: string, args: JsonValue, contract: ToolOperation['contract'], registered: boolean): Promise<ToolExecution> {
    const kind = recorded.callEvent.kind;
    if (kind.type !== 'tool_call') throw new ToolRetryError('invalid_evidence', `the operation row of ${recorded.key} names no tool call`);
    if (!registered) throw notRegistered(name, 'its recorded result was not returned');
    const call = kind.call;
    const was = call.operation?.contract;
    const changed = call.name !== name ? `the tool (${call.name}, now ${name})`
      : !jsonEquals(call.arguments, args) ? 'the arguments'
        : was === undefined || !sameContract(was, contract) ? "the tool's contract" : null;
    if (changed !== null) {
      throw new ToolRetryError('binding_changed', `operation ${recorded.key} was recorded by call ${call.id} with other ${changed.replace(/^the /, '')}`,
        await bindingChangedAdvice(this.binding.owner, recorded));
    }
    if (!this.runtime.granted(this.caller, name)) {
      throw new ToolPreflightError('unavailable_tool', `tool ${JSON.stringify(name)} is not available to this caller; its recorded result was not returned`);
    }
    const resultKind = recorded.resultEvent?.kind;
    const succeeded = resultKind?.type === 'tool_result' && resultKind.result.outcome.status === 'succeeded';
    // Confirmed made by a review (its result never journaled, or a refusal the write overtook): done, with no output.
    if (!succeeded && recorded.review?.outcome === 'completed') {
      throw new OperationConfirmedError(this.taskId, recorded.key, call.id, recorded.review.actor, recorded.review.evidence);
    }
    if (resultKind?.type !== 'tool_result') {
      const why = recorded.startedEvent ? 'its body started and no result is recorded' : 'no result is recorded';
      const inDoubt = new OperationInDoubtError(this.taskId, recorded.key, call.id, why);
      throw runningCalls(this.binding.owner).has(call.id) ? stillRunning(inDoubt) : inDoubt;
    }
    const result = resultKind.result;
    if (result.outcome.status !== 'succeeded') {
      // Made by an identical write since (the one it repeated, or a repeat's retry of it): done, as assessSession says.
      const identical = await identicalWriteOf(this.binding.owner, call.id);
      if (identical?.madeBy != null) throw new OperationMadeByIdenticalError(this.taskId, recorded.key, call.id, identical.madeBy);
      // A refused repeat's write is the identical call's it named: that call is what to settle, not this one.
      const refused = 'it was refused as a repeat of an identical call whose write was in doubt';
      const advice = result.outcome.category !== 'in_doubt' ? undefined
        : identical?.toSettle != null
          ? `${refused}: settle that call (${identical.toSettle}) first, while it is open (assessSession or jingwei inspect says how); once its write is made this one is never retried, and once it is decided against this one may be`
          : `${refused}, and no identical write it waits on is open now: assessSession (or jingwei inspect) says whether a retry of this one may be made`;
      throw new OperationInDoubtError(this.taskId, recorded.key, call.id, `it failed (${result.outcome.category}: ${result.outcome.code})`, advice);
    }
    return { call, result, callEvent: recorded.callEvent, startedEvent: recorded.startedEvent, resultEvent: recorded.resultEvent!, replayed: true };
  }

  private async run(
    call: ToolCall,
    registered: RegisteredTool | undefined,
    outputLimit: number,
    control: CallControl,
    argsText: string,
    callerKeyed: boolean,
    observer: AttemptObserver | null,
    plan: ToolRetryPlan | undefined,
  ): Promise<ToolExecution> {
    const op = call.operation!;
    // Guards and approvers read a frozen copy: whatever they do to it cannot change the call that is validated,
    // journaled and run, nor the digests an operator's approval is bound to.
    // The context itself is frozen too: a guard cannot hand a later guard or the approver another call or caller.
    const ctx = Object.freeze({ caller: this.caller, call: this.runtime.guards.length > 0 || registered?.tool.metadata.approval ? hookView(call, argsText) : call });
    const callDraft = this.draft({ type: 'tool_call', call });
    const admit: BudgetChange = { taskId: this.taskId, admit: { maxOutputBytes: outputLimit } };
    const latest = attemptCondition(this.binding.owner, op, plan, callerKeyed);
    const approval = registered?.tool.metadata.approval ?? null;

    // Checks without side effects run before the call is written; a rejection is journaled with its call.
    // An interrupt that came before the call is written is recorded with it, without a start marker: provably unrun.
    // How an unexpected throw of a hook, the body or its output's serialization is recorded: through describePanic.
    const describe = this.describeThrown(call);
    const rejected = checkGrantAndSchema(registered, this.runtime.granted(this.caller, call.name), call)
      ?? checkAvailability(registered!, describe)
      // Before the host's guards: a repeat of a write in doubt is that, whatever a guard would say of it. Refused by a
      // guard first, it was a denial of its own, and a host that retried it once the write was confirmed made it twice.
      ?? (this.runtime.inDoubtGuard ? await this.inDoubt(call, plan) : null)
      ?? (await runGuards(this.runtime.guards, ctx, control, describe))
      ?? control.interrupt()
      // Asked again once the guards and the in-doubt read have waited: a tool that could run then may not now (its
      // server's connection dropped, or came back with the tool changed), and the answer that counts is the last one
      // before the start marker.
      ?? checkAvailability(registered!, describe);
    // A retry that may run looks in the inbox once more after the guards and the in-doubt read have waited: an
    // operator's review decision recorded meanwhile is not written over (the plan is spent, nothing is written).
    if (rejected === null && plan !== undefined) await refuseWhileReviewWaits(this.binding.owner, plan);
    faultPoint('call:before');
    if (rejected) {
      const recorded = await (async () => {
        // Interrupted, an attempt leaves the operation's requests for the next one (interruptedOnly).
        if ((!callerKeyed && op.retry === null) || interruptedOnly(rejected)) return this.recordRefused(call, rejected, latest);
        // Refused before it was asked about, an attempt that follows another supersedes the requests earlier attempts
        // left, as one its approver refused does: none stays in the queue waiting for a host, who will make no attempt
        // of an operation the run has read as refused (docs/design.md#durable-approvals). An operator's denial of this
        // very action is not superseded: it is this attempt's answer, recorded and used, as for a changed contract.
        const binding = approvalBinding(call, op, approval);
        const settled = await unlessDecidedMeanwhile(() => this.recordRefused(call, rejected, latest, { change: settling(call, binding) }));
        if (settled !== null) return settled;
        const denied = await this.decidedMeanwhile(call, binding);
        return denied.denial
          ? this.recordRefused(call, denied.denial, latest, { change: denied.change, record: denied.record })
          : this.recordRefused(call, rejected, latest, { change: settling(call, binding) });
      })();
      // Told once written, with the outcome written: an operator's denial may have taken the check's place.
      observer?.refused(recorded.result.outcome);
      return recorded;
    }

    const startedDraft = this.draft({ type: 'tool_started', callId: call.id });
    // A retry of a tool that no longer asks for approval (a redeploy dropped it) still takes an operator's decision on
    // the request an earlier attempt left: a denial of this very action stands, and an approval is used, not left
    // waiting in the queue (docs/design.md#durable-approvals). Without one, its start marker supersedes the requests
    // earlier attempts left, as an approved attempt's does, and a denial decided meanwhile is its answer: so it is
    // written as an approval tool's is, the call first.
    const decidedEarlier = approval === null && op.retry !== null ? await operatorDecision(this.binding.owner, call, approvalBinding(call, op, null)) : null;
    let callEvent: SessionEvent;
    let startedEvent: SessionEvent;
    let reserved: number;
    /** The request of the operator's approval the start marker spent: put back if the body is then never called. */
    let spentApproval: string | undefined;
    if (approval === null && op.retry === null) {
      const receipt = await this.write('call', call, null, { events: [callDraft, startedDraft], budget: admit, ...latest })
        .catch((error: unknown) => this.neverCalled(call, error));
      [callEvent, startedEvent] = receipt.events as [SessionEvent, SessionEvent];
      reserved = receipt.reservedOutputBytes;
      faultPoint('call:after');
    } else {
      // A retry's commit (`latest`) is refused while a review decision about its operation waits in the inbox, and
      // checks again, inside its transaction, what was journaled here: a review the owner's own inbox pass journaled
      // while the guards ran, or while this commit waited for its connection, is seen.
      const receipt = await this.write('call', call, null, { events: [callDraft], budget: admit, ...latest });
      callEvent = receipt.events[0]!;
      reserved = receipt.reservedOutputBytes;
      faultPoint('call:after');
      // An operator's decision from the decision inbox answers for this attempt in place of the approver, used
      // (and journaled) in the same transaction as the marker or the denial (docs/design.md#durable-approvals).
      const binding = approvalBinding(call, op, approval);
      // A decision answers only the request an earlier attempt of the same operation left, so a key minted for
      // this call (no caller key, no retry plan) has none to find: the inbox is read only for the others.
      const follows = callerKeyed || op.retry !== null;
      let operator = decidedEarlier ?? (follows ? await operatorDecision(this.binding.owner, call, binding) : null);
      if (operator === null && approval !== null) {
        observer?.approvalRequested(approval);
        const answer = (await askApproval(this.runtime.approvers.get(approval)!, ctx, control, describe)) ?? control.interrupt();
        const pending = answer && 'pending' in answer ? pendingApproval(call, binding, answer) : null;
        const refusal = pending !== null ? pending.outcome : answer && !('pending' in answer) ? answer : null;
        observer?.approvalAnswered(refusal);
        if (refusal) {
          // A pending answer leaves a request. Refused by the approver, an attempt that may follow another supersedes
          // the requests earlier attempts left, as an approved one does: none stays in the queue for a person to
          // approve, which would let a later attempt run on it without asking the approver that refused this one.
          // Interrupted while asking, it leaves them, and an operator's decision made meanwhile, for the next attempt.
          const change = pending !== null ? { change: pending.change, record: pending.record }
            : follows && !interruptedOnly(refusal) ? { change: settling(call, binding) } : undefined;
          const ended = await unlessDecidedMeanwhile(() => this.finish(call, callEvent, null, refusal, 0, observer, change));
          if (ended !== null) return ended;
          // An operator decided an earlier attempt's request of this very action while the approver was asked:
          // that decision is this attempt's answer.
          operator = await this.decidedMeanwhile(call, binding);
        }
      }
      let started = startedDraft;
      if (operator) {
        const stop = operator.denial ?? control.interrupt();
        if (stop) return this.finish(call, callEvent, null, stop, 0, observer, operator.denial ? { change: operator.change, record: operator.record } : undefined);
        started = this.draft({ type: 'tool_started', callId: call.id, approval: operator.record });
      }
      faultPoint('approval:after');
      // Approved by the approver, an attempt that may follow another (a caller key or a retry) supersedes the
      // requests earlier attempts left, so a decision made later for one of them is never spent on a later attempt.
      const settle = operator === null && follows ? settling(call, binding) : undefined;
      // The marker is written only while this call is still the latest attempt of its operation: a retry made
      // while the approval was pending supersedes it, and its body never runs (docs/design.md#a-stale-attempt-cannot-start).
      // A retry's marker is refused while an operator's review decision about its operation waits in the inbox:
      // recorded since the inbox was last looked at (while the approver was asked), it may say the write was made.
      const reviewCalls = plan !== undefined ? [...planOperationCalls(plan), call.id] : undefined;
      // A retry that could make its write twice with an identical operation (a repeat, or what it repeated) starts only
      // while that operation's row is still as its plan read it: waiting for its approver, this call is not one the
      // in-doubt guard reads, so an identical retry may have made the write meanwhile (docs/design.md#the-in-doubt-guard).
      const related = plan !== undefined ? planRepeatedRows(plan) : [];
      const marker = { reviewCalls, related };
      let marked = await unlessDecidedMeanwhile(() => this.writeStarted(call, op, registered!, started, operator?.change ?? settle, marker));
      if (marked === null) {
        // An operator decided an earlier attempt's request of this very action while the approver approved this
        // one: a denial stands, an approval is used.
        const late = await this.decidedMeanwhile(call, binding);
        if (late.denial) return this.finish(call, callEvent, null, late.denial, 0, observer, { change: late.change, record: late.record });
        marked = await this.writeStarted(call, op, registered!, this.draft({ type: 'tool_started', callId: call.id, approval: late.record }), late.change, marker);
        spentApproval = late.record.requestId;
      } else if (operator !== null) spentApproval = operator.record.requestId;
      if ('refused' in marked) return this.finish(call, callEvent, null, marked.refused, 0, observer);
      startedEvent = marked.event;
    }
    faultPoint('started:after');
    observer?.bodyStarted();

    // The body gets its own copy of the arguments and the operation, frozen (callWithOptions froze it): whatever it
    // does to them cannot change the recorded call, nor the key its late end is tracked under.
    // The operation's first attempt's call event (ToolBodyRequest.operationOrigin): this one's, unless it is a retry.
    const operationOrigin = plan ? planOperationOrigin(plan) : callEvent.eventId;
    const request = { sessionId: this.sessionId, operationOrigin, callId: call.id, arguments: JSON.parse(argsText) as JsonValue, operation: op };
    let outcome: Failure | { status: 'succeeded'; output: string };
    let charge = reserved;
    /** How the body ends, when an interrupt was recorded first: the call is still running until then. */
    let lateBody: Promise<LateBodyEnd> | null = null;
    /** Interrupted before its body was called: known from the race, never from a code a body's own failure may carry. */
    let bodyNotCalled = false;
    // Until the body has ended and its end is journaled, whichever owner here holds the session keeps it held when it
    // would let it go: an owner that took it over in this process learns nothing of this body until this owner hears
    // of the takeover, and a session let go under it could be retried elsewhere while it makes its write.
    const bodyJournaled = holdSessionForBody(this.binding.owner);
    try {
      control.bodyStarts();
      const ran = await control.race(() => registered!.tool.execute(request, control.signal));
      if ('interrupt' in ran && ran.ended === undefined) {
        // Interrupted while the marker was written: the body was never called, and the result says so, under the
        // interrupt's own category (a deadline stays a timeout, a stopped task `budget`), and nothing is charged for
        // output it never produced (docs/design.md#tasks-and-budgets).
        bodyNotCalled = true;
        observer?.bodyNotCalled();
        charge = 0;
        outcome = { ...ran.interrupt, code: STOPPED_BEFORE_BODY, message: `${ran.interrupt.message}, before the body was called` };
      } else if ('interrupt' in ran) {
        outcome = ran.interrupt;
        lateBody = ran.ended!;
      } else {
        // Text output is journaled well-formed (a lone surrogate becomes U+FFFD, as any UTF-8 encoder writes it);
        // JSON output escapes one instead. Either way the result can be journaled, so a finished body is never in doubt.
        const output = typeof ran.value === 'string'
          ? toWellFormed(ran.value)
          : serializeOutput(ran.value, describe);
        if (typeof output !== 'string') outcome = output;
        else {
          // Counted as the journal stores it, JSON-escaped: the room kept for the result and the task's journal
          // budget hold what is written (docs/design.md#output-is-counted-as-it-is-journaled).
          const text = utf8Length(output);
          const bytes = text > reserved ? text : jsonTextBytes(output);
          // Refused output is never charged past the reservation (docs/design.md#budgets-are-exact).
          charge = Math.min(bytes, reserved);
          // The store reserved min(outputLimit, what the task's budget had left): that is this call's limit.
          outcome = bytes > reserved
            ? failure('output_limit', 'tool_output_limit', bytes === text
              ? `the output is ${bytes} bytes, over the limit of ${reserved}`
              : `the output is ${text} bytes, ${bytes} as the journal stores it (JSON-escaped), over the limit of ${reserved}`)
            : { status: 'succeeded', output };
        }
      }
    } catch (error) {
      outcome = bodyFailure(error, describe);
    }
    let recorded: Promise<ToolExecution>;
    try {
      faultPoint('body:after');
      observer?.bodySettled(outcome);
      // Never called, the body leaves the operator's approval unspent: it answers the operation's next attempt
      // (docs/design.md#durable-approvals).
      const restore = bodyNotCalled && spentApproval !== undefined ? { change: approvalRestore(spentApproval, call.id, op) } : undefined;
      recorded = this.finish(call, callEvent, startedEvent, outcome, charge, observer, restore);
    } catch (error) {
      bodyJournaled();
      throw error;
    }
    if (lateBody !== null) {
      trackLateBody(this.binding.owner, call, callEvent.turnId, lateBody, recorded);
      bodyJournaled();
    } else {
      // The body ended, or was never called after its marker (the session may have been lost meanwhile): if its
      // result cannot be written, that end is journaled through another owner here that took the session over
      // meanwhile, or kept until an owner here can write it (unrecordedBodyEnd), so no review is taken blind to it.
      const ended: LateBodyEnd = bodyNotCalled ? 'not_called'
        : outcome.status === 'failed' && (outcome.category === 'body_failure' || outcome.category === 'body_panic') ? 'threw' : 'returned';
      const owner = this.binding.owner;
      recorded.then(bodyJournaled, () => unrecordedBodyEnd(owner, call, callEvent.turnId, ended, spentApproval).then(bodyJournaled, bodyJournaled));
    }
    return recorded;
  }

  private async finish(
    call: ToolCall,
    callEvent: SessionEvent,
    startedEvent: SessionEvent | null,
    outcome: ToolResult['outcome'],
    charge: number,
    observer: AttemptObserver | null,
    approval?: { change: ApprovalChange; record?: ToolApprovalRecord },
  ): Promise<ToolExecution> {
    const result: ToolResult = approval?.record ? { callId: call.id, outcome, approval: approval.record } : { callId: call.id, outcome };
    const receipt = await this.write('result', call, result, {
      events: [this.draft({ type: 'tool_result', result })],
      budget: { taskId: this.taskId, settle: { chargeOutputBytes: startedEvent ? charge : 0 } },
      ...(approval ? { approval: approval.change } : {}),
    });
    // Told once written: a refusal whose commit an operator's decision overtook is not one.
    if (startedEvent === null) observer?.refused(outcome);
    faultPoint('result:after');
    return { call, result, callEvent, startedEvent, resultEvent: receipt.events[0]! };
  }

  /**
   * A retry of a call that never ran, whose tool changed since: recorded with its refusal in one commit that
   * supersedes the operation's approval requests, so none waits for an operator who could never let it run. An
   * operator's denial of this very action (decided before, or while this commit was made) is recorded instead, and used.
   */
  private async refuseChangedContract(call: ToolCall, refusal: Failure, observer: AttemptObserver | null, plan: ToolRetryPlan): Promise<ToolExecution> {
    const op = call.operation!;
    const binding = approvalBinding(call, op, this.approverOf(call.name));
    const latest = attemptCondition(this.binding.owner, op, plan, false);
    const record = async (outcome: Failure, change: ApprovalChange, approval?: ToolApprovalRecord): Promise<ToolExecution> => {
      const execution = await this.recordRefused(call, outcome, latest, { change, ...(approval ? { record: approval } : {}) });
      // Told once written: a first write refused for an operator's late denial is made again with that denial.
      observer?.refused(outcome);
      return execution;
    };
    const denied = await operatorDecision(this.binding.owner, call, binding);
    if (denied?.denial) return record(denied.denial, denied.change, denied.record);
    const refused = await unlessDecidedMeanwhile(() => record(refusal, settling(call, binding)));
    if (refused !== null) return refused;
    const late = await this.decidedMeanwhile(call, binding);
    return late.denial ? record(late.denial, late.change, late.record) : record(refusal, settling(call, binding));
  }

  /**
   * A call refused before its body, written with its result in one commit: admitted (one tool call charged, never
   * refunded) with nothing reserved, so the body never starts.
   */
  private async recordRefused(
    call: ToolCall,
    outcome: Failure,
    condition: AttemptCondition,
    approval?: { change: ApprovalChange; record?: ToolApprovalRecord },
  ): Promise<ToolExecution> {
    const result: ToolResult = approval?.record ? { callId: call.id, outcome, approval: approval.record } : { callId: call.id, outcome };
    const { events } = await this.write('call', call, null, {
      events: [this.draft({ type: 'tool_call', call }), this.draft({ type: 'tool_result', result })],
      budget: { taskId: this.taskId, admit: { maxOutputBytes: 0 } },
      ...(approval ? { approval: approval.change } : {}),
      ...condition,
    });
    faultPoint('result:after');
    return { call, result, callEvent: events[0]!, startedEvent: null, resultEvent: events[1]! };
  }

  /**
   * The in-doubt guard's read; a store that cannot answer fails the call as a recording error, nothing written. A
   * retry of a refused repeat is not passed by an identical call running here: that call may be the write it repeats.
   */
  private async inDoubt(call: ToolCall, plan: ToolRetryPlan | undefined) {
    try {
      // A retry of a write of its own is not held back by identical writes of their own beside it, only by those its
      // plan relates it to (its repeats, or what it repeated), which it could make twice with.
      const repeats = plan !== undefined && planTouchesRepeats(plan);
      const retry = plan === undefined ? undefined : { related: new Set<string>(planRepeatedRows(plan).map((r) => r.callId)) };
      // A new operation identical to one whose retry runs here is a repeat of that write (retriesUnderWay).
      const retrying = plan === undefined ? () => retriesUnderWay(this.binding.owner, call.action) : undefined;
      return await checkInDoubt(this.binding.owner, call, repeats ? NONE_RUNNING : callsRunningAs(this.binding.owner), retry, retrying);
    } catch (error) {
      throw new ToolRecordingError('call', call, null, error);
    }
  }

  /** How a hook's unexpected throw about `call` is recorded: through the host's describePanic. */
  private describeThrown(call: ToolCall): (error: unknown) => string {
    return (error) => panicDetail(error, this.runtime.describePanic, { tool: call.name, callId: call.id });
  }

  /**
   * Writes the start marker conditioned on the latest attempt and on a running task. Refused (nothing written, the
   * body never runs) when a newer attempt superseded this call or its task was stopped or completed while it waited.
   */
  private async writeStarted(
    call: ToolCall,
    op: NonNullable<ToolCall['operation']>,
    registered: RegisteredTool,
    startedDraft: EventDraft,
    approval: ApprovalChange | undefined,
    marker: { readonly reviewCalls: readonly string[] | undefined; readonly related: readonly RepeatedRow[] },
  ): Promise<{ event: SessionEvent } | { refused: Failure }> {
    // Asking a person can take hours: whether the tool can run is asked again before its start marker, so an
    // approved call never runs on a server whose tool changed meanwhile, nor is sent over a connection known to be
    // down (docs/bridges-in-production.md). Refused as `unavailable`, never started, the decision left unused.
    const gone = checkAvailability(registered, this.describeThrown(call));
    if (gone) return { refused: gone };
    try {
      const receipt = await commitAs(this.binding.owner, {
        events: [startedDraft],
        budget: { taskId: this.taskId },
        expectLatestAttempt: { taskId: op.taskId, key: op.key, callId: call.id, ...(marker.related.length > 0 ? { repeated: marker.related } : {}) },
        ...(approval ? { approval } : {}),
        ...(marker.reviewCalls ? { expectNoWaitingReview: marker.reviewCalls } : {}),
      });
      return { event: receipt.events[0]! };
    } catch (error) {
      const { code, state } = (error ?? {}) as { code?: unknown; state?: unknown };
      if (code === 'task_not_running') {
        return { refused: failure('budget', 'tool_budget_stopped', `the task was ${state === 'completed' ? 'completed' : 'stopped'} while this call waited; its body never ran`) };
      }
      if (code === 'not_latest_attempt') {
        return { refused: failure('unavailable', 'tool_superseded', 'a newer attempt of this operation was made while this one waited; its body never ran') };
      }
      if (code === 'history_changed' && marker.related.length > 0 && error instanceof StoreConflictError) {
        return { refused: failure('in_doubt', 'tool_in_doubt', `${error.message.replace(/; load the history again and prepare a new plan; nothing was written$/, '')}; its body never ran`) };
      }
      if (code === 'needs_review' && error instanceof ToolRetryError) {
        return { refused: failure('in_doubt', 'tool_review_waiting', `${error.detail.replace(/; nothing was written$/, '')}; its body never ran`) };
      }
      return this.neverCalled(call, new ToolRecordingError('started', call, null, error));
    }
  }

  /**
   * A commit of the call's start marker failed (`error`): it may have landed all the same, its answer lost on the way
   * back (a connection cut after COMMIT), and then the journal says the body started while this process knows it was
   * never called. That end is kept like a late body's (unrecordedBodyEnd), journaled by this owner's next write,
   * review, run start or heartbeat, so the inbox no longer waits for a body this host will never run; a journal that does not
   * hold the call refuses it. Then throws `error`, a recording error saying so.
   */
  private neverCalled(call: ToolCall, error: unknown): never {
    if (!(error instanceof ToolRecordingError)) throw error;
    void unrecordedBodyEnd(this.binding.owner, call, this.turnId, 'not_called');
    throw new ToolRecordingError(error.stage, call, null, error.cause, true);
  }

  /**
   * The operator's decision a commit was refused for (isDecidedMeanwhile): read again, it is this attempt's answer.
   * Gone by then (another attempt used it), the attempt ends unrecorded, its body never started.
   */
  private async decidedMeanwhile(call: ToolCall, binding: ApprovalBinding): Promise<OperatorDecision> {
    const decision = await operatorDecision(this.binding.owner, call, binding);
    if (decision === null) throw new ToolRecordingError('started', call, null, new DecisionError('decision_stale', null, 'the decision an operator made while the approver was asked was used by another attempt'));
    return decision;
  }

  private draft(kind: EventDraft['kind']): EventDraft {
    return { turnId: this.turnId, kind };
  }

  /** Budget refusals, a stopped task and D4 pass through untouched; any other failure to write is a recording error. */
  private async write(stage: 'call' | 'started' | 'result', call: ToolCall, result: ToolResult | null, request: CommitRequest) {
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          return await commitAs(this.binding.owner, request);
        } catch (error) {
          const code = (error as { code?: string }).code;
          // A busy store rolled the write back: a result, which the call cannot get again, is written again.
          if (stage === 'result' && code === 'store_busy' && attempt < RUNTIME_DEFAULTS.resultWriteAttempts) continue;
          if (error instanceof OperationInDoubtError && runningCalls(this.binding.owner).has(error.callId)) throw stillRunning(error);
          // A retry's own conditions (attemptCondition): refused as they would be before its plan was taken.
          if (stage === 'call' && error instanceof ToolRetryError) throw error;
          if (stage === 'call' && (code === 'budget_exhausted' || code === 'task_not_running' || code === 'task_not_found' || code === 'history_changed' || code === 'journal_full' || code === 'operation_in_doubt')) {
            throw error;
          }
          // The runtime's own interrupt between the marker and the body (never a body's failure of the same code).
          throw new ToolRecordingError(stage, call, result, error, false, stoppedBeforeBody(result?.outcome));
        }
      }
    } finally {
      // A retry's call journaled, or refused and never to be: an identical new call waiting at the guard reads it now.
      if (stage === 'call' && call.operation?.retry != null) retryCallWritten(this.binding.owner, call.id);
    }
  }
}

type CallOptionsRead = ReturnType<typeof readCallOptions>;

/** Builds the canonical runtime. Throws ToolConfigError for duplicate names, unknown grants, missing approvers or invalid schemas. */
export function createToolRuntime(config: ToolRuntimeConfig): ToolRuntime {
  return new CanonicalRuntime(config);
}
