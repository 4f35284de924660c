/**
 * Hand-built session histories for pure recovery tests. Every event gets a fresh event id and seq = its index.
 * Defaults are the fixtures of the retry tests of Jingwei for Rust: session `retry-session`, task `retry-task`, call `attempt-1`,
 * tool `probe`, arguments {"ok":true}, key `logical-1`, revision `v1`, turn `old-turn`.
 */
import assert from 'node:assert/strict';
import type {
  ToolReviewOutcome,
  SessionEvent,
  SessionEventKind,
  ToolCall,
  ToolEffect,
  ToolFailureCategory,
  ToolOperation,
  ToolRecordedOutcome,
  ToolRetryAudit,
  ToolRetryReview,
} from '../../src/event/types.js';
import { newEventId, type CallId, type EventId, type OperationKey, type SessionId, type TaskId, type TurnId } from '../../src/ids.js';
import type { JsonValue } from '../../src/json/types.js';
import { ToolRetryError, type ToolRetryErrorCode } from '../../src/errors.js';

export const FIXTURE = {
  session: 'retry-session' as SessionId,
  task: 'retry-task' as TaskId,
  call: 'attempt-1' as CallId,
  tool: 'probe',
  args: { ok: true } as JsonValue,
  key: 'logical-1' as OperationKey,
  revision: 'v1',
  turn: 'old-turn' as TurnId,
  actor: 'authenticated-host',
  evidence: 'external-receipt-1',
} as const;

export interface CallSpec {
  id?: string;
  name?: string;
  arguments?: JsonValue;
  effect?: ToolEffect;
  revision?: string;
  taskId?: string;
  key?: string;
  retry?: ToolRetryAudit | null;
  startMarker?: boolean;
  /** No operation at all: a legacy record. */
  legacy?: boolean;
}

/** A ToolCall with the fixture defaults; `legacy: true` drops the operation. */
export function makeCall(spec: CallSpec = {}): ToolCall {
  const base = {
    id: (spec.id ?? FIXTURE.call) as CallId,
    name: spec.name ?? FIXTURE.tool,
    arguments: spec.arguments === undefined ? FIXTURE.args : spec.arguments,
  };
  if (spec.legacy === true) return base;
  const operation: ToolOperation = {
    taskId: (spec.taskId ?? FIXTURE.task) as TaskId,
    key: (spec.key ?? FIXTURE.key) as OperationKey,
    contract: { effect: spec.effect ?? 'unknown', revision: spec.revision ?? FIXTURE.revision },
    retry: spec.retry ?? null,
    ...(spec.startMarker === true ? { startMarker: true } : {}),
  };
  return { ...base, operation };
}

export function review(outcome: ToolReviewOutcome, actor: string = FIXTURE.actor, evidence: string = FIXTURE.evidence): ToolRetryReview {
  return { actor, evidence, outcome };
}

export const succeeded = (output = 'ok'): ToolRecordedOutcome => ({ status: 'succeeded', output });

export function failed(category: ToolFailureCategory, retryable = false): ToolRecordedOutcome {
  return { status: 'failed', category, code: `tool_${category}`, message: `${category} happened`, retryable };
}

export interface EventOptions {
  turnId?: string;
  sessionId?: string;
  eventId?: string;
}

/** Appends events with seq = index. `events` is the live array; `build()` returns a copy. */
export class HistoryBuilder {
  readonly events: SessionEvent[] = [];
  constructor(
    readonly sessionId: string = FIXTURE.session,
    readonly turnId: string = FIXTURE.turn,
  ) {}

  push(kind: SessionEventKind, options: EventOptions = {}): SessionEvent {
    const event: SessionEvent = {
      eventId: (options.eventId ?? newEventId()) as EventId,
      sessionId: (options.sessionId ?? this.sessionId) as SessionId,
      turnId: (options.turnId ?? this.turnId) as TurnId,
      seq: this.events.length,
      kind,
    };
    this.events.push(event);
    return event;
  }

  call(spec: CallSpec = {}, options?: EventOptions): SessionEvent {
    return this.rawCall(makeCall(spec), options);
  }

  rawCall(call: ToolCall, options?: EventOptions): SessionEvent {
    return this.push({ type: 'tool_call', call }, options);
  }

  /** The next attempt of `previous` (an event holding a ToolCall), with a retry audit pointing at it. */
  retry(previous: SessionEvent, spec: CallSpec & { review?: ToolRetryReview | null } = {}, options?: EventOptions): SessionEvent {
    const prev = callOf(previous);
    const op = prev.operation!;
    const retry: ToolRetryAudit = { callId: prev.id, eventId: previous.eventId, review: spec.review ?? null };
    return this.call(
      {
        name: prev.name,
        arguments: prev.arguments,
        effect: op.contract.effect,
        revision: op.contract.revision,
        taskId: op.taskId,
        key: op.key,
        retry,
        ...spec,
      },
      options,
    );
  }

  started(callId: string = FIXTURE.call, options?: EventOptions): SessionEvent {
    return this.push({ type: 'tool_started', callId: callId as CallId }, options);
  }

  result(callId: string = FIXTURE.call, outcome: ToolRecordedOutcome = succeeded(), options?: EventOptions): SessionEvent {
    return this.push({ type: 'tool_result', result: { callId: callId as CallId, outcome } }, options);
  }

  message(text = 'hello', options?: EventOptions): SessionEvent {
    return this.push({ type: 'user_message', text }, options);
  }

  build(): SessionEvent[] {
    return [...this.events];
  }
}

export function callOf(event: SessionEvent): ToolCall {
  if (event.kind.type !== 'tool_call') throw new Error(`event ${event.seq} holds no call`);
  return event.kind.call;
}

/** A copy of `history` with event `index` replaced (seq kept), for tampering. */
export function replaceEvent(history: readonly SessionEvent[], index: number, change: (e: SessionEvent) => SessionEvent): SessionEvent[] {
  return history.map((e, i) => (i === index ? change(e) : e));
}

/** A copy of the call in event `index` with `change` applied to the ToolCall. */
export function replaceCall(history: readonly SessionEvent[], index: number, change: (c: ToolCall) => ToolCall): SessionEvent[] {
  return replaceEvent(history, index, (e) => ({ ...e, kind: { type: 'tool_call', call: change(callOf(e)) } }));
}

/** Re-numbers seq to the index, after events were moved. */
export function renumber(history: readonly SessionEvent[]): SessionEvent[] {
  return history.map((e, i) => ({ ...e, seq: i }));
}

/** Asserts `fn` throws a ToolRetryError with `code`; returns it for further checks. */
export function expectRetryError(fn: () => unknown, code: ToolRetryErrorCode, message?: string): ToolRetryError {
  let thrown: unknown;
  try {
    fn();
  } catch (error) {
    thrown = error;
  }
  assert.ok(thrown instanceof ToolRetryError, `${message ?? 'expected'} a ToolRetryError ${code}, got ${String(thrown)}`);
  assert.equal(thrown.code, code, `${message ?? ''} ${thrown.detail}`);
  return thrown;
}
