/**
 * What the runtime tells observers (docs/design.md#observability): the `onEvent` hook's events, and the shapes of
 * the tracer and meter it accepts. The shapes are structural: a Tracer and a Meter from `@opentelemetry/api` fit
 * them, and Jingwei imports no OpenTelemetry package at all.
 */
import type { ToolEffect, ToolFailureCategory, ToolReviewOutcome } from '../event/types.js';
import type { CallId, OperationKey, TaskId } from '../ids.js';
import type { ToolRecoveryStatus } from './retry-policy.js';

/** An attribute value the runtime sets: it only ever sets text, numbers and booleans. */
export type TelemetryAttributeValue = string | number | boolean;
export type TelemetryAttributes = Readonly<Record<string, TelemetryAttributeValue>>;

/** The part of an OpenTelemetry `Span` the runtime uses. */
export interface TelemetrySpan {
  setAttributes(attributes: TelemetryAttributes): unknown;
  addEvent(name: string, attributes?: TelemetryAttributes): unknown;
  /** `code` 2 is OpenTelemetry's `SpanStatusCode.ERROR`; the runtime sets no other. */
  setStatus(status: { code: number; message?: string }): unknown;
  end(): void;
}

/** The part of an OpenTelemetry `Tracer` the runtime uses (a Tracer from `@opentelemetry/api` fits). */
export interface TelemetryTracer {
  /** `kind` 0 is OpenTelemetry's `SpanKind.INTERNAL`, the kind the GenAI conventions give tool execution spans. */
  startSpan(name: string, options?: { kind?: number; attributes?: TelemetryAttributes }): TelemetrySpan;
}

export interface TelemetryInstrumentOptions {
  description?: string;
  unit?: string;
  advice?: { explicitBucketBoundaries?: number[] };
}

export interface TelemetryCounter {
  add(value: number, attributes?: TelemetryAttributes): void;
}

export interface TelemetryHistogram {
  record(value: number, attributes?: TelemetryAttributes): void;
}

/** The part of an OpenTelemetry `Meter` the runtime uses (a Meter from `@opentelemetry/api` fits). */
export interface TelemetryMeter {
  createCounter(name: string, options?: TelemetryInstrumentOptions): TelemetryCounter;
  createUpDownCounter(name: string, options?: TelemetryInstrumentOptions): TelemetryCounter;
  createHistogram(name: string, options?: TelemetryInstrumentOptions): TelemetryHistogram;
}

/** `ToolRuntimeConfig.telemetry`: either or both. */
export interface ToolTelemetry {
  /** Gets one span per admitted attempt. */
  readonly tracer?: TelemetryTracer;
  /** Gets the runtime's instruments, created once when the runtime is built. */
  readonly meter?: TelemetryMeter;
}

/** What every runtime event says about its attempt. */
export interface ToolRuntimeEventBase {
  /** When the runtime emitted the event (milliseconds since the epoch, the host's clock; for people, not decisions). */
  readonly time: number;
  readonly sessionId: string;
  readonly taskId: TaskId;
  readonly callId: CallId;
  /**
   * The tool name as the call gave it, even for a tool the caller cannot use (spans and metrics name such a call
   * `_OTHER` instead: docs/api.md#observability).
   */
  readonly tool: string;
  readonly operationKey: OperationKey;
  /** 1-based: 1 for a new operation, the plan's source attempt + 1 for a retry. */
  readonly attempt: number;
  readonly effect: ToolEffect;
  readonly revision: string;
}

/**
 * The write an admitted attempt could not make: `call` (the call itself is not journaled: the store refused it or
 * the write failed), `started` (the call is journaled, its start marker is not: the body never ran) or `result`.
 */
export type ToolUnrecordedStage = 'call' | 'started' | 'result';

/**
 * The facts the runtime reports about one attempt, in the order they happen. Every admitted attempt starts with
 * `attempt_admitted` and ends with exactly one `result_recorded` or `attempt_unrecorded`.
 */
export type ToolRuntimeEvent =
  | (ToolRuntimeEventBase & { readonly type: 'attempt_admitted' })
  /** A retry plan from prepareToolRetry was used for this attempt (right after `attempt_admitted`). */
  | (ToolRuntimeEventBase & { readonly type: 'retry_plan_used'; readonly sourceCallId: CallId; readonly review: ToolReviewOutcome | null })
  /** The attempt ends before its body, with this category (a check refused it, or it was interrupted first). */
  | (ToolRuntimeEventBase & { readonly type: 'attempt_refused'; readonly category: ToolFailureCategory; readonly code: string })
  | (ToolRuntimeEventBase & { readonly type: 'approval_requested'; readonly approver: string })
  /** `answer` is `approved`, or the category the attempt will be recorded with. */
  | (ToolRuntimeEventBase & {
      readonly type: 'approval_answered';
      readonly approver: string;
      readonly answer: 'approved' | ToolFailureCategory;
      readonly waitMs: number;
    })
  /** The start marker is in the journal; the body runs now. */
  | (ToolRuntimeEventBase & { readonly type: 'body_started' })
  | (ToolRuntimeEventBase & {
      readonly type: 'result_recorded';
      readonly outcome: 'succeeded' | 'failed';
      readonly category: ToolFailureCategory | null;
      readonly code: string | null;
      readonly bodyStarted: boolean;
      /** What recovery will find for this attempt. */
      readonly recoveryStatus: ToolRecoveryStatus;
      /** From admission to the recorded result. */
      readonly durationMs: number;
      readonly bodyMs: number | null;
      readonly approvalMs: number | null;
    })
  /**
   * The call threw instead of recording a result (a store refusal or a ToolRecordingError). `recoveryStatus` is
   * what the journal shows as far as this runtime knows (null when the call itself was not recorded).
   */
  | (ToolRuntimeEventBase & {
      readonly type: 'attempt_unrecorded';
      readonly stage: ToolUnrecordedStage;
      /** The thrown error's `code`, or its name. */
      readonly error: string;
      readonly bodyStarted: boolean;
      readonly recoveryStatus: ToolRecoveryStatus | null;
      readonly durationMs: number;
    });

export type ToolRuntimeEventType = ToolRuntimeEvent['type'];

/**
 * Called synchronously, in order, for every runtime event. Whatever it throws (or a promise or other thenable it
 * returns rejects with, from any realm) is swallowed: the call goes on and its journal is unchanged. Keep it quick:
 * the call waits for it.
 */
export type ToolRuntimeEventHandler = (event: ToolRuntimeEvent) => void;
