import type { CallId, EventId, OperationKey, SessionId, TaskId, TurnId } from '../ids.js';
import type { JsonObject, JsonValue } from '../json/types.js';

/** A tool's declared side effect. Wire values are snake_case and identical to those of Jingwei for Rust. */
export const ToolEffect = {
  Unknown: 'unknown',
  ReadOnly: 'read_only',
  Idempotent: 'idempotent',
  NonIdempotent: 'non_idempotent',
} as const;
export type ToolEffect = (typeof ToolEffect)[keyof typeof ToolEffect];
export const TOOL_EFFECTS: readonly ToolEffect[] = Object.values(ToolEffect);

export const ToolReviewOutcome = {
  NotExecuted: 'not_executed',
  Completed: 'completed',
  Uncertain: 'uncertain',
} as const;
export type ToolReviewOutcome = (typeof ToolReviewOutcome)[keyof typeof ToolReviewOutcome];
export const TOOL_REVIEW_OUTCOMES: readonly ToolReviewOutcome[] = Object.values(ToolReviewOutcome);

export interface ToolEffectContract {
  readonly effect: ToolEffect;
  /** Maintained by the host; changes whenever the tool's inputs, results or effects change. */
  readonly revision: string;
}

/** Trusted host evidence about an earlier attempt. Never filled in from model output. */
export interface ToolRetryReview {
  readonly actor: string;
  readonly evidence: string;
  readonly outcome: ToolReviewOutcome;
}

/** Who gave a journaled review: a person (through the host), or a tool's reconciler asking the outside system. */
export const TOOL_REVIEW_SOURCES = ['human', 'reconciler'] as const;
export type ToolReviewSource = (typeof TOOL_REVIEW_SOURCES)[number];

/**
 * A review journaled as evidence about one call (docs/design.md#reviews-are-journaled-evidence): bound to a call that
 * was the latest attempt of its operation when it was written. Recovery reads the latest review of a call.
 */
export interface ToolReviewRecord {
  readonly callId: CallId;
  readonly actor: string;
  readonly outcome: ToolReviewOutcome;
  readonly evidence: string;
  readonly source: ToolReviewSource;
  /** The decision (for example an inbox entry) this review was copied from, when there is one. */
  readonly decisionId?: string;
}

/** Points at the immediately preceding attempt: its call id and the id of the event holding its ToolCall. */
export interface ToolRetryAudit {
  readonly callId: CallId;
  readonly eventId: EventId;
  readonly review: ToolRetryReview | null;
}

export interface ToolOperation {
  readonly taskId: TaskId;
  /** The logical action's identity: the same across attempts; tools deduplicate on (taskId, key). */
  readonly key: OperationKey;
  readonly contract: ToolEffectContract;
  readonly retry: ToolRetryAudit | null;
  /**
   * Set by the canonical runtime: this call records a `tool_started` marker right before its body runs
   * (docs/design.md#the-body-start-marker). Absent on the wire when false, so such records stay readable by
   * Jingwei for Rust.
   */
  readonly startMarker?: boolean;
}

/** The host-assigned origin of a call (which decision and action it came from). It grants nothing. */
export interface ActionContext {
  readonly decision: { readonly taskId: TaskId; readonly stepId: string };
  readonly actionIndex: number;
  readonly providerCallId?: string;
}

export interface ToolCall {
  readonly id: CallId;
  readonly name: string;
  readonly arguments: JsonValue;
  /** Absent only on legacy records, which decode but can never be retried. */
  readonly operation?: ToolOperation;
  readonly action?: ActionContext;
}

export const TOOL_FAILURE_CATEGORIES = [
  'unavailable',
  'invalid_arguments',
  'denied',
  'guard_fault',
  'approval_unavailable',
  'approval_denied',
  'approval_fault',
  'approval_pending',
  'timeout',
  'cancelled',
  'body_failure',
  'body_panic',
  'output_limit',
  'budget',
  'in_doubt',
] as const;
export type ToolFailureCategory = (typeof TOOL_FAILURE_CATEGORIES)[number];

/** Categories recorded only before a tool body starts: the body provably never ran. */
export const PRE_BODY_CATEGORIES: ReadonlySet<ToolFailureCategory> = new Set<ToolFailureCategory>([
  'unavailable',
  'invalid_arguments',
  'denied',
  'guard_fault',
  'approval_unavailable',
  'approval_denied',
  'approval_fault',
  'in_doubt',
  'approval_pending',
]);

export type ToolRecordedOutcome =
  | { readonly status: 'succeeded'; readonly output: string }
  | {
      readonly status: 'failed';
      readonly category: ToolFailureCategory;
      readonly code: string;
      readonly message: string;
      readonly retryable: boolean;
    };

/**
 * Approval evidence from the decision inbox (docs/design.md#durable-approvals): on a `tool_started` marker for an
 * operator's approval, on a result for an operator's denial (`denied`) or for an attempt left waiting (`pending`,
 * no actor yet). Absent when the in-process approver answered.
 */
export interface ToolApprovalRecord {
  readonly requestId: string;
  readonly decision: 'pending' | 'approved' | 'denied';
  /** The operator who decided; absent while pending. */
  readonly actor?: string;
  /** The operator's reason, or the approver's note while pending. */
  readonly reason?: string;
}

export interface ToolResult {
  readonly callId: CallId;
  readonly outcome: ToolRecordedOutcome;
  readonly approval?: ToolApprovalRecord;
}

/** Why a task's ledger changed: the lifecycle changes the store journals (docs/design.md#the-task-ledger-in-the-chain). */
export const TASK_LEDGER_CHANGES = ['started', 'stopped', 'completed'] as const;
export type TaskLedgerChange = (typeof TASK_LEDGER_CHANGES)[number];
export const TASK_LEDGER_STATES = ['running', 'stopped', 'completed'] as const;

/**
 * The task's ledger as the store wrote it in the same transaction as a lifecycle change: state, limits, charges and
 * reservations after the change. Written by the store only (the public append refuses it); Jingwei for Rust has
 * no such event, so the Rust-format export drops it.
 */
export interface TaskLedgerRecord {
  readonly taskId: TaskId;
  readonly change: TaskLedgerChange;
  readonly state: (typeof TASK_LEDGER_STATES)[number];
  readonly limits: { readonly toolCalls: number; readonly toolOutputBytes: number; readonly journalBytes: number };
  readonly charged: { readonly toolCalls: number; readonly toolOutputBytes: number; readonly journalBytes: number };
  readonly reservedOutputBytes: number;
  readonly stopReason: string | null;
}

/** Event kinds. `opaque` keeps any other kind written by Jingwei for Rust, unchanged in meaning and never interpreted. */
export type SessionEventKind =
  | { readonly type: 'tool_call'; readonly call: ToolCall }
  | { readonly type: 'tool_started'; readonly callId: CallId; readonly approval?: ToolApprovalRecord }
  | { readonly type: 'tool_result'; readonly result: ToolResult }
  | { readonly type: 'tool_review'; readonly review: ToolReviewRecord }
  | { readonly type: 'task_ledger'; readonly ledger: TaskLedgerRecord }
  | { readonly type: 'user_message'; readonly text: string }
  | { readonly type: 'assistant_message'; readonly text: string }
  | { readonly type: 'custom'; readonly plugin: string; readonly kind: string; readonly payload: JsonValue }
  | { readonly type: 'opaque'; readonly wireType: string; readonly fields: JsonObject };

export interface SessionEvent {
  readonly eventId: EventId;
  readonly sessionId: SessionId;
  readonly turnId: TurnId;
  /** Zero-based physical position in the session's journal. */
  readonly seq: number;
  readonly kind: SessionEventKind;
  readonly generationId?: string;
  readonly messageId?: string;
  /**
   * When the store recorded the event: ISO-8601 UTC with milliseconds (`2026-12-01T03:25:25.123Z`), inside the hash
   * chain, never decreasing within a session. Absent on events written before the store kept times and on imported
   * files that have none. Information for people, never an input to a recovery decision (docs/design.md#recorded-times).
   */
  readonly recordedAt?: string;
}

/** What a writer hands the store: everything but the position, which the store assigns. */
export interface EventDraft {
  readonly eventId?: EventId;
  /** The turn this event belongs to: a minted `turn_` id or the host's own (non-empty text, at most 1024 bytes). */
  readonly turnId: TurnId | string;
  readonly kind: SessionEventKind;
  readonly generationId?: string;
  readonly messageId?: string;
}
