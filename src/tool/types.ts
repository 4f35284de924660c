import type { ActionContext, SessionEvent, ToolCall, ToolOperation, ToolResult } from '../event/types.js';
import type { CallId } from '../ids.js';
import type { JsonValue } from '../json/types.js';
import type { SessionOwner } from '../store/types.js';
import type { JsonSchema, ToolMetadata } from './metadata.js';
import type { ToolRetryPlan } from './retry-plan.js';
import type { ToolRuntimeEventHandler, ToolTelemetry } from './telemetry-types.js';

/**
 * What a tool body receives. `operation` is exactly the journaled call's: deduplicate on the operation
 * (sessionId, taskId, key), as the idempotency helpers do; a task id is unique within its session only.
 */
export interface ToolBodyRequest {
  /** The session whose journal holds the call. */
  readonly sessionId: string;
  /**
   * The event id of the operation's first attempt's call: minted for this operation, the same on every later attempt
   * of it, so the key a provider dedupes on (externalIdempotencyKey) names it apart from any other operation with the
   * same ids (another journal's session of the same id, or this journal re-created).
   */
  readonly operationOrigin: string;
  readonly callId: CallId;
  readonly arguments: JsonValue;
  readonly operation: ToolOperation;
}

export interface Tool {
  readonly name: string;
  readonly metadata: ToolMetadata;
  /**
   * Runs the tool. A string result is recorded as is; anything else is recorded as its JSON text. Throw a
   * ToolBodyError for a failure the tool reports; any other exception is recorded as a panic. The signal fires
   * on timeout, cancellation and task stop: stop work when it does.
   */
  execute(request: ToolBodyRequest, signal: AbortSignal): Promise<string | JsonValue>;
  /**
   * Optional: asked before the call's start marker is written. A denial means the tool knows it cannot run now
   * (say, its server's connection is down): the call is recorded as `unavailable` with that code and message, the
   * body never starts, and recovery knows it did not run. Return null when the tool can run. Must not throw or
   * block; a throw is recorded as `unavailable` too.
   */
  availability?(): ToolDenial | null;
  /**
   * Optional: asks the outside system what happened to an operation whose outcome the journal leaves uncertain
   * (docs/design.md#reconcilers). reconcileUncertainCalls asks it before any person is asked and journals the
   * answer as a review by `reconciler:<tool>@<revision>`. Answer `unknown` whenever the outside system cannot say
   * for sure; `not_executed` unblocks a retry of a non-idempotent call, so only answer it when the effect provably
   * did not happen (and cannot still happen).
   */
  reconcile?(request: ToolReconcileRequest, signal: AbortSignal): ToolReconcileAnswer | Promise<ToolReconcileAnswer>;
  /**
   * Optional: how long `reconcile` is waited for, in milliseconds, wherever it is asked (a resumed run, a bridge's
   * open, recoverAbandoned), unless reconcileUncertainCalls is given its own `timeoutMs`. A positive integer of at
   * most LIMITS.maxTimeoutMs; default RUNTIME_DEFAULTS.reconcileTimeoutMs. Past it the answer counts as failed: the
   * call waits for a person, and a person's `not_executed` review of it is not used until the reconciler answers.
   */
  readonly reconcileTimeoutMs?: number;
}

/** What a reconciler is asked about: one journaled call and its operation. Satisfies IdempotencyRequest. */
export interface ToolReconcileRequest {
  readonly sessionId: string;
  /** As ToolBodyRequest.operationOrigin: a reconciler looks the write up by the key its body sent. */
  readonly operationOrigin: string;
  readonly callId: CallId;
  readonly toolName: string;
  readonly arguments: JsonValue;
  /** The journaled call's operation: task, key and the contract it was recorded with. */
  readonly operation: ToolOperation;
}

/** A reconciler's answer. `evidence` says what it looked at (1..1024 bytes; longer text is cut). */
export interface ToolReconcileAnswer {
  readonly outcome: 'completed' | 'not_executed' | 'unknown';
  readonly evidence: string;
  /** With `completed`: the operation's output, when the outside system keeps it (returned, not journaled). */
  readonly output?: JsonValue;
}

export interface ToolDenial {
  readonly code: string;
  readonly message: string;
  readonly retryable?: boolean;
}

export interface ToolHookContext {
  readonly caller: string;
  /** The call being admitted, operation and retry audit included. */
  readonly call: ToolCall;
}

/** Runs in order before every attempt; can only deny. Throwing is recorded as guard_fault. */
export type ToolGuard = (ctx: ToolHookContext) => ToolDenial | null | undefined | Promise<ToolDenial | null | undefined>;

export type ToolApproval =
  | { readonly decision: 'approved' }
  | ({ readonly decision: 'denied' } & ToolDenial)
  /** The approval service could not be reached or could not decide; recorded as approval_unavailable. */
  | ({ readonly decision: 'unavailable' } & Partial<ToolDenial>)
  /**
   * A person decides, later (docs/design.md#durable-approvals): the attempt is recorded as approval_pending (its
   * body never ran) and leaves an approval request in the store's decision inbox, in the same transaction. An
   * operator's decision there is used once, by the next attempt of the same operation with the same tool,
   * contract revision and arguments, in place of asking again. Needs a store with a decision inbox.
   */
  | { readonly decision: 'pending'; readonly note?: string };

/**
 * Asked on every attempt of a tool that requires it, unless an operator's decision from the decision inbox answers
 * for that attempt; never carries over. Throwing is recorded as approval_fault.
 */
export type ToolApprover = (ctx: ToolHookContext, signal: AbortSignal) => Promise<ToolApproval>;

/** Which call a panic happened in. */
export interface PanicContext {
  readonly tool: string;
  readonly callId: CallId;
}

/**
 * Turns an unexpected throw of a tool body into the text journaled for operators (cut to 1,024 bytes). The model
 * never reads it, whatever it returns. Use it to redact secrets before they reach the journal.
 */
export type PanicDescriber = (error: unknown, context: PanicContext) => string;

export interface ToolRuntimeConfig {
  readonly tools: readonly Tool[];
  /** caller → every tool ('*') or the named ones. */
  readonly grants: Readonly<Record<string, '*' | readonly string[]>>;
  readonly guards?: readonly ToolGuard[];
  readonly approvers?: Readonly<Record<string, ToolApprover>>;
  /** Default 30,000 ms. */
  readonly defaultTimeoutMs?: number;
  /** Default 65,536 bytes. */
  readonly maxOutputBytes?: number;
  /** Default 1,024 calls in flight across every gateway of this runtime. */
  readonly maxInFlight?: number;
  /**
   * What the journal keeps of a body panic (an unexpected throw). Default: the error's stack (name, message and
   * frames), or its text. The model reads a fixed sentence either way.
   */
  readonly describePanic?: PanicDescriber;
  /**
   * The in-doubt guard (docs/design.md#the-in-doubt-guard): a new operation identical (task, tool, contract revision,
   * canonical arguments) to an earlier unknown or non-idempotent operation whose outcome is in doubt is refused
   * before its body, recorded as `in_doubt`. Default true; false turns it off.
   */
  readonly inDoubtGuard?: boolean;
  /**
   * OpenTelemetry: a span per attempt and the runtime's metrics (docs/design.md#observability). Pass a Tracer and a
   * Meter from your own `@opentelemetry/api`; Jingwei imports no OpenTelemetry package.
   */
  readonly telemetry?: ToolTelemetry;
  /** Gets every runtime event, for a logger (see ToolRuntimeEvent). What it throws is swallowed. */
  readonly onEvent?: ToolRuntimeEventHandler;
}

export interface ToolBinding {
  /** The fenced owner of the session this gateway journals to. */
  readonly owner: SessionOwner;
  readonly taskId: string;
  /** Whose grants apply. */
  readonly caller: string;
  /** Defaults to a fresh turn id. */
  readonly turnId?: string;
  /** Cancels every call of this gateway. */
  readonly signal?: AbortSignal;
}

/**
 * Options only ever tighten limits: a value above its ceiling (the runtime's, or the tool's when lower) is refused
 * with ToolPreflightError `invalid_options`, never silently cut.
 */
export interface ToolCallOptions {
  /** A single-use plan from prepareToolRetry; consumed before any other check. */
  readonly retry?: ToolRetryPlan;
  /** At most the runtime's `defaultTimeoutMs` and the tool's timeout ceiling. Default: the lower of the two. */
  readonly timeoutMs?: number;
  /** At most the runtime's `maxOutputBytes` and the tool's output ceiling. Default: the lower of the two. */
  readonly maxOutputBytes?: number;
  readonly signal?: AbortSignal;
  readonly action?: ActionContext;
  /**
   * The caller's key for this logical operation within the task (docs/design.md#caller-keys-and-replay): a new key
   * is a first attempt under it; a key whose operation completed with the same tool, arguments and contract returns
   * the recorded execution (`replayed: true`) without running, writing or charging anything; another binding is
   * ToolRetryError `binding_changed`; a key whose latest attempt did not complete is OperationInDoubtError. Letters,
   * digits and `._:/@-`, at most OPERATION_KEY_LIMITS.maxBytes. Not with `retry`, whose plan names the key.
   */
  readonly operationKey?: string;
}

export interface ToolExecution {
  readonly call: ToolCall;
  readonly result: ToolResult;
  readonly callEvent: SessionEvent;
  /** The `tool_started` marker, or null when the body never started. */
  readonly startedEvent: SessionEvent | null;
  readonly resultEvent: SessionEvent;
  /** True when this execution was read back from the journal for a completed caller key: nothing ran this time. */
  readonly replayed?: boolean;
}

export interface ToolSchema {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: JsonSchema;
}

export interface ToolGateway {
  readonly sessionId: string;
  readonly taskId: string;
  readonly turnId: string;
  /** What this caller may use. Never exposes effects' internals, plans or reviews. */
  schemas(): ToolSchema[];
  call(name: string, args: JsonValue): Promise<ToolExecution>;
  callWithOptions(name: string, args: JsonValue, options: ToolCallOptions): Promise<ToolExecution>;
}

export interface ToolRuntime {
  bind(binding: ToolBinding): ToolGateway;
  /** Calls admitted and not yet recorded, across all gateways. */
  readonly inFlight: number;
}
