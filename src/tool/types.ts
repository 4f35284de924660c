import type { ActionContext, SessionEvent, ToolCall, ToolOperation, ToolResult } from '../event/types.js';
import type { CallId } from '../ids.js';
import type { JsonValue } from '../json/types.js';
import type { SessionOwner } from '../store/types.js';
import type { JsonSchema, ToolMetadata } from './metadata.js';
import type { ToolRetryPlan } from './retry-plan.js';

/** What a tool body receives. `operation` is exactly the journaled call's: deduplicate on (taskId, key). */
export interface ToolBodyRequest {
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
  | ({ readonly decision: 'unavailable' } & Partial<ToolDenial>);

/** Asked on every attempt of a tool that requires it; never carries over. Throwing is recorded as approval_fault. */
export type ToolApprover = (ctx: ToolHookContext, signal: AbortSignal) => Promise<ToolApproval>;

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

/** Options only ever tighten limits. */
export interface ToolCallOptions {
  /** A single-use plan from prepareToolRetry; consumed before any other check. */
  readonly retry?: ToolRetryPlan;
  readonly timeoutMs?: number;
  readonly maxOutputBytes?: number;
  readonly signal?: AbortSignal;
  readonly action?: ActionContext;
}

export interface ToolExecution {
  readonly call: ToolCall;
  readonly result: ToolResult;
  readonly callEvent: SessionEvent;
  /** The `tool_started` marker, or null when the body never started. */
  readonly startedEvent: SessionEvent | null;
  readonly resultEvent: SessionEvent;
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
