/**
 * THE wire codec: camelCase API types <-> the journal JSON of Jingwei for Rust (snake_case keys, `"type"`-tagged kinds,
 * `"status"`-tagged outcomes, snake_case enum values). Nothing else in the library converts.
 *
 * Encoding is a pure, non-validating mapping of an already-typed value. Decoding is strict: every field is checked
 * and every violation is a WireDecodeError naming the field's path (`kind.call.operation.task_id`). Unknown fields
 * are rejected where the original rejects them (ToolOperation, ToolEffectContract, ToolRetryAudit, ToolRetryReview),
 * in our own journaled review (ToolReviewRecord) and, deliberately stricter, in the event envelope; elsewhere (kinds, ToolCall, ActionContext, ToolResult) they are
 * dropped, as serde does by default.
 */
import type { CallId, EventId, OperationKey, SessionId, TaskId, TurnId } from '../ids.js';
import { LIMITS } from '../limits.js';
import { parseJson, parseStringifiedJson, type ParseJsonOptions } from '../json/parse.js';
import type { JsonObject } from '../json/types.js';
import { utf8Length } from '../text.js';
import {
  TOOL_EFFECTS,
  TOOL_FAILURE_CATEGORIES,
  TOOL_REVIEW_OUTCOMES,
  TOOL_REVIEW_SOURCES,
  TASK_LEDGER_CHANGES,
  TASK_LEDGER_STATES,
  type ActionContext,
  type TaskLedgerRecord,
  type SessionEvent,
  type SessionEventKind,
  type ToolCall,
  type ToolApprovalRecord,
  type ToolEffectContract,
  type ToolFailureCategory,
  type ToolOperation,
  type ToolRecordedOutcome,
  type ToolResult,
  type ToolRetryAudit,
  type ToolRetryReview,
  type ToolReviewRecord,
} from './types.js';
import { defineOwn, WireReader as Ctx, type Wire } from './wire-reader.js';

// ---------------------------------------------------------------------------------------------------------------
// Encoding

export function encodeToolRetryReview(review: ToolRetryReview): JsonObject {
  return { actor: review.actor, evidence: review.evidence, outcome: review.outcome };
}

function encodeAudit(audit: ToolRetryAudit): JsonObject {
  return {
    call_id: audit.callId,
    event_id: audit.eventId,
    review: audit.review ? encodeToolRetryReview(audit.review) : null,
  };
}

export function encodeToolOperation(op: ToolOperation): JsonObject {
  const wire: JsonObject = {
    task_id: op.taskId,
    key: op.key,
    contract: { effect: op.contract.effect, revision: op.contract.revision },
    retry: op.retry ? encodeAudit(op.retry) : null,
  };
  if (op.startMarker === true) wire.start_marker = true;
  return wire;
}

function encodeAction(action: ActionContext): JsonObject {
  const wire: JsonObject = {
    decision: { task_id: action.decision.taskId, step_id: action.decision.stepId },
    action_index: action.actionIndex,
  };
  if (action.providerCallId !== undefined) wire.provider_call_id = action.providerCallId;
  return wire;
}

export function encodeToolCall(call: ToolCall): JsonObject {
  const wire: JsonObject = {};
  if (call.operation) wire.operation = encodeToolOperation(call.operation);
  if (call.action) wire.action = encodeAction(call.action);
  wire.id = call.id;
  wire.name = call.name;
  wire.arguments = call.arguments;
  return wire;
}

function encodeOutcome(outcome: ToolRecordedOutcome): JsonObject {
  if (outcome.status === 'succeeded') return { status: 'succeeded', output: outcome.output };
  return {
    status: 'failed',
    category: outcome.category,
    code: outcome.code,
    message: outcome.message,
    retryable: outcome.retryable,
  };
}

function encodeApproval(a: ToolApprovalRecord): JsonObject {
  const wire: JsonObject = { request_id: a.requestId, decision: a.decision };
  if (a.actor !== undefined) wire.actor = a.actor;
  if (a.reason !== undefined) wire.reason = a.reason;
  return wire;
}

export function encodeToolResult(result: ToolResult): JsonObject {
  const wire: JsonObject = { call_id: result.callId, outcome: encodeOutcome(result.outcome) };
  if (result.approval !== undefined) wire.approval = encodeApproval(result.approval);
  return wire;
}

/** A journaled review (our own kind: Jingwei for Rust has no such event, so the Rust-format export drops it). */
export function encodeToolReviewRecord(review: ToolReviewRecord): JsonObject {
  const wire: JsonObject = {
    call_id: review.callId,
    actor: review.actor,
    outcome: review.outcome,
    evidence: review.evidence,
    source: review.source,
  };
  if (review.decisionId !== undefined) wire.decision_id = review.decisionId;
  return wire;
}

/** A task's ledger at a lifecycle change (our own kind: the Rust-format export drops it). */
export function encodeTaskLedger(ledger: TaskLedgerRecord): JsonObject {
  const amounts = (a: TaskLedgerRecord['limits']): JsonObject => ({ tool_calls: a.toolCalls, tool_output_bytes: a.toolOutputBytes, journal_bytes: a.journalBytes });
  return {
    task_id: ledger.taskId,
    change: ledger.change,
    state: ledger.state,
    limits: amounts(ledger.limits),
    charged: amounts(ledger.charged),
    reserved_output_bytes: ledger.reservedOutputBytes,
    stop_reason: ledger.stopReason,
  };
}

function encodeKind(kind: SessionEventKind): JsonObject {
  switch (kind.type) {
    case 'tool_call':
      return { type: 'tool_call', call: encodeToolCall(kind.call) };
    case 'tool_result':
      return { type: 'tool_result', result: encodeToolResult(kind.result) };
    case 'tool_started':
      return kind.approval === undefined
        ? { type: 'tool_started', call_id: kind.callId }
        : { type: 'tool_started', call_id: kind.callId, approval: encodeApproval(kind.approval) };
    case 'tool_review':
      return { type: 'tool_review', review: encodeToolReviewRecord(kind.review) };
    case 'task_ledger':
      return { type: 'task_ledger', ledger: encodeTaskLedger(kind.ledger) };
    case 'user_message':
      return { type: 'user_message', text: kind.text };
    case 'assistant_message':
      return { type: 'assistant_message', version: 1, text: kind.text };
    case 'custom':
      return { type: 'custom', plugin: kind.plugin, kind: kind.kind, payload: kind.payload };
    case 'opaque': {
      const wire: JsonObject = { type: kind.wireType };
      for (const key of Object.keys(kind.fields)) {
        if (key !== 'type') defineOwn(wire, key, kind.fields[key]!);
      }
      return wire;
    }
  }
}

/** The wire object of an event, keys in the original's order; optional ids omitted when absent. */
export function encodeEvent(e: SessionEvent): JsonObject {
  const wire: JsonObject = { event_id: e.eventId, session_id: e.sessionId, turn_id: e.turnId };
  if (e.generationId !== undefined) wire.generation_id = e.generationId;
  if (e.messageId !== undefined) wire.message_id = e.messageId;
  wire.seq = e.seq;
  if (e.recordedAt !== undefined) wire.recorded_at = e.recordedAt;
  wire.kind = encodeKind(e.kind);
  return wire;
}

/** Compact JSON text of `encodeEvent(e)`: one journal line. */
export function encodeEventText(e: SessionEvent): string {
  return JSON.stringify(encodeEvent(e));
}

// ---------------------------------------------------------------------------------------------------------------
// Decoding

function oneOf<T extends string>(ctx: Ctx, o: Wire, key: string, values: readonly T[]): T {
  const v = ctx.string(o, key);
  if (!(values as readonly string[]).includes(v)) {
    ctx.fail(key, `unknown value ${JSON.stringify(v)}, expected one of ${values.join(', ')}`);
  }
  return v as T;
}

function decodeReview(ctx: Ctx, wire: unknown): ToolRetryReview {
  const o = ctx.object(wire, ['actor', 'evidence', 'outcome']);
  return {
    actor: ctx.text(o, 'actor'),
    evidence: ctx.text(o, 'evidence'),
    outcome: oneOf(ctx, o, 'outcome', TOOL_REVIEW_OUTCOMES),
  };
}

function decodeAudit(ctx: Ctx, wire: unknown): ToolRetryAudit {
  const o = ctx.object(wire, ['call_id', 'event_id', 'review']);
  const review = ctx.get(o, 'review');
  return {
    callId: ctx.id(o, 'call_id') as CallId,
    eventId: ctx.id(o, 'event_id') as EventId,
    review: review === undefined || review === null ? null : decodeReview(ctx.child('review'), review),
  };
}

function decodeContract(ctx: Ctx, wire: unknown): ToolEffectContract {
  const o = ctx.object(wire, ['effect', 'revision']);
  return { effect: oneOf(ctx, o, 'effect', TOOL_EFFECTS), revision: ctx.text(o, 'revision') };
}

function decodeOperation(ctx: Ctx, wire: unknown): ToolOperation {
  const o = ctx.object(wire, ['task_id', 'key', 'contract', 'retry', 'start_marker']);
  const retryWire = ctx.get(o, 'retry');
  const taskId = ctx.id(o, 'task_id') as TaskId;
  const key = ctx.id(o, 'key') as OperationKey;
  const contract = decodeContract(ctx.child('contract'), ctx.required(o, 'contract'));
  const retry = retryWire === undefined || retryWire === null ? null : decodeAudit(ctx.child('retry'), retryWire);
  const marker = ctx.get(o, 'start_marker');
  if (marker !== undefined && typeof marker !== 'boolean') {
    ctx.fail('start_marker', 'must be a boolean');
  }
  return marker === true ? { taskId, key, contract, retry, startMarker: true } : { taskId, key, contract, retry };
}

function decodeAction(ctx: Ctx, wire: unknown): ActionContext {
  const o = ctx.object(wire, null);
  const decisionCtx = ctx.child('decision');
  const d = decisionCtx.object(ctx.required(o, 'decision'), null);
  const actionIndex = ctx.index(o, 'action_index');
  const decision = { taskId: decisionCtx.string(d, 'task_id') as TaskId, stepId: decisionCtx.string(d, 'step_id') };
  const providerCallId = optionalString(ctx, o, 'provider_call_id');
  return providerCallId === undefined ? { decision, actionIndex } : { decision, actionIndex, providerCallId };
}

function decodeCall(ctx: Ctx, wire: unknown): ToolCall {
  const o = ctx.object(wire, null);
  const id = ctx.id(o, 'id') as CallId;
  const name = ctx.string(o, 'name');
  if (name.length === 0) ctx.fail('name', 'must not be empty');
  const nameBytes = utf8Length(name);
  if (nameBytes > LIMITS.maxToolNameBytes) {
    ctx.fail('name', `is ${nameBytes} UTF-8 bytes, at most ${LIMITS.maxToolNameBytes} allowed`);
  }
  const args = ctx.json(o, 'arguments');
  const call: { -readonly [K in keyof ToolCall]: ToolCall[K] } = { id, name, arguments: args };
  const operation = ctx.get(o, 'operation');
  if (operation !== undefined && operation !== null) call.operation = decodeOperation(ctx.child('operation'), operation);
  const action = ctx.get(o, 'action');
  if (action !== undefined && action !== null) call.action = decodeAction(ctx.child('action'), action);
  return call;
}

function decodeOutcome(ctx: Ctx, wire: unknown): ToolRecordedOutcome {
  const o = ctx.object(wire, null);
  const status = ctx.string(o, 'status');
  if (status === 'succeeded') return { status, output: ctx.string(o, 'output') };
  if (status === 'failed') {
    const category: ToolFailureCategory = oneOf(ctx, o, 'category', TOOL_FAILURE_CATEGORIES);
    const code = ctx.string(o, 'code');
    const message = ctx.string(o, 'message');
    const retryable = ctx.get(o, 'retryable');
    if (typeof retryable !== 'boolean') ctx.fail('retryable', 'must be a boolean');
    return { status, category, code, message, retryable };
  }
  ctx.fail('status', `unknown status ${JSON.stringify(status)}, expected succeeded or failed`);
}

const APPROVAL_DECISIONS: readonly ToolApprovalRecord['decision'][] = ['pending', 'approved', 'denied'];

function decodeApproval(ctx: Ctx, wire: unknown): ToolApprovalRecord {
  const o = ctx.object(wire, ['request_id', 'decision', 'actor', 'reason']);
  const record: { -readonly [K in keyof ToolApprovalRecord]: ToolApprovalRecord[K] } = {
    requestId: ctx.id(o, 'request_id'),
    decision: oneOf(ctx, o, 'decision', APPROVAL_DECISIONS),
  };
  const actor = optionalString(ctx, o, 'actor');
  if (actor !== undefined) record.actor = actor;
  const reason = optionalString(ctx, o, 'reason');
  if (reason !== undefined) record.reason = reason;
  return record;
}

/** The optional approval record of a marker or result; null and absent read the same. */
function optionalApproval(ctx: Ctx, o: Wire): ToolApprovalRecord | undefined {
  const v = ctx.get(o, 'approval');
  return v === undefined || v === null ? undefined : decodeApproval(ctx.child('approval'), v);
}

function decodeResult(ctx: Ctx, wire: unknown): ToolResult {
  const o = ctx.object(wire, null);
  const result: ToolResult = {
    callId: ctx.id(o, 'call_id') as CallId,
    outcome: decodeOutcome(ctx.child('outcome'), ctx.required(o, 'outcome')),
  };
  const approval = optionalApproval(ctx, o);
  return approval === undefined ? result : { ...result, approval };
}

/** Strict, like the retry audit's review: unknown fields are refused, texts follow the journal's text rule. */
function decodeReviewRecord(ctx: Ctx, wire: unknown): ToolReviewRecord {
  const o = ctx.object(wire, ['call_id', 'actor', 'outcome', 'evidence', 'source', 'decision_id']);
  const review: ToolReviewRecord = {
    callId: ctx.id(o, 'call_id') as CallId,
    actor: ctx.text(o, 'actor'),
    outcome: oneOf(ctx, o, 'outcome', TOOL_REVIEW_OUTCOMES),
    evidence: ctx.text(o, 'evidence'),
    source: oneOf(ctx, o, 'source', TOOL_REVIEW_SOURCES),
  };
  return ctx.get(o, 'decision_id') === undefined ? review : { ...review, decisionId: ctx.id(o, 'decision_id') };
}

const LEDGER_AMOUNTS = ['tool_calls', 'tool_output_bytes', 'journal_bytes'] as const;

function decodeAmounts(ctx: Ctx, wire: unknown): TaskLedgerRecord['limits'] {
  const o = ctx.object(wire, LEDGER_AMOUNTS);
  return { toolCalls: ctx.index(o, 'tool_calls'), toolOutputBytes: ctx.index(o, 'tool_output_bytes'), journalBytes: ctx.index(o, 'journal_bytes') };
}

/** Strict: every field required, unknown fields rejected (only the store writes this kind). */
function decodeTaskLedger(ctx: Ctx, wire: unknown): TaskLedgerRecord {
  const o = ctx.object(wire, ['task_id', 'change', 'state', 'limits', 'charged', 'reserved_output_bytes', 'stop_reason']);
  const change = oneOf(ctx, o, 'change', TASK_LEDGER_CHANGES);
  const state = oneOf(ctx, o, 'state', TASK_LEDGER_STATES);
  if ((change === 'started') !== (state === 'running') || (change !== 'started' && change !== state)) {
    ctx.fail('state', `${state} does not follow the change ${change}`);
  }
  const reason = ctx.required(o, 'stop_reason');
  const stopReason = reason === null ? null : ctx.id(o, 'stop_reason');
  if ((stopReason !== null) !== (state === 'stopped')) ctx.fail('stop_reason', state === 'stopped' ? 'is required for a stopped task' : `must be null for a ${state} task`);
  return {
    taskId: ctx.id(o, 'task_id') as TaskId,
    change,
    state,
    limits: decodeAmounts(ctx.child('limits'), ctx.required(o, 'limits')),
    charged: decodeAmounts(ctx.child('charged'), ctx.required(o, 'charged')),
    reservedOutputBytes: ctx.index(o, 'reserved_output_bytes'),
    stopReason,
  };
}

function decodeKind(ctx: Ctx, wire: unknown): SessionEventKind {
  const o = ctx.object(wire, null);
  const type = ctx.string(o, 'type');
  switch (type) {
    case 'tool_call':
      return { type, call: decodeCall(ctx.child('call'), ctx.required(o, 'call')) };
    case 'tool_result':
      return { type, result: decodeResult(ctx.child('result'), ctx.required(o, 'result')) };
    case 'tool_started': {
      const callId = ctx.id(o, 'call_id') as CallId;
      const approval = optionalApproval(ctx, o);
      return approval === undefined ? { type, callId } : { type, callId, approval };
    }
    case 'tool_review':
      return { type, review: decodeReviewRecord(ctx.child('review'), ctx.required(o, 'review')) };
    case 'task_ledger':
      return { type, ledger: decodeTaskLedger(ctx.child('ledger'), ctx.required(o, 'ledger')) };
    case 'user_message':
      return { type, text: ctx.string(o, 'text') };
    case 'assistant_message': {
      const version = ctx.get(o, 'version');
      if (version !== undefined && version !== 1) ctx.fail('version', 'unsupported version, expected 1');
      return { type, text: ctx.string(o, 'text') };
    }
    case 'custom':
      return { type, plugin: ctx.string(o, 'plugin'), kind: ctx.string(o, 'kind'), payload: ctx.json(o, 'payload') };
    default: {
      const fields: JsonObject = {};
      for (const key of Object.keys(o)) {
        if (key !== 'type') defineOwn(fields, key, ctx.json(o, key));
      }
      return { type: 'opaque', wireType: type, fields };
    }
  }
}

/** An `Option<String>`: missing or null reads as absent. */
function optionalString(ctx: Ctx, o: Wire, key: string): string | undefined {
  const v = ctx.get(o, key);
  return v === undefined || v === null ? undefined : ctx.string(o, key);
}

/** The wire types decodeKind gives a kind of their own; any other type decodes as `opaque`. */
export const DECODED_WIRE_TYPES: ReadonlySet<string> = new Set(['tool_call', 'tool_result', 'tool_started', 'tool_review', 'task_ledger', 'user_message', 'assistant_message', 'custom']);

const ENVELOPE_FIELDS = ['event_id', 'session_id', 'turn_id', 'generation_id', 'message_id', 'seq', 'recorded_at', 'kind'] as const;

/** The one form of a recorded time: what `Date.prototype.toISOString` writes for a year 0000..9999. */
const RECORDED_AT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** The number written by the ASCII digits text[at..at+length) (RECORDED_AT has checked they are digits). */
function digits(text: string, at: number, length: number): number {
  let n = 0;
  for (let i = at; i < at + length; i++) n = n * 10 + text.charCodeAt(i) - 48;
  return n;
}

/**
 * Whether `text` is a recorded time in its one canonical form (a real instant, written as toISOString writes it):
 * the fields of a proleptic Gregorian date and a time of day within their ranges, which is exactly when parsing it
 * and writing it back gives the same text (checked against that definition in test/event/recorded-at.test.ts),
 * without building a Date per event read.
 */
export function isRecordedAt(text: string): boolean {
  // The events of one commit usually share their time: remember the last text found canonical.
  if (text === lastRecordedAt) return true;
  if (!RECORDED_AT.test(text)) return false;
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  if (month < 1 || month > 12 || day < 1 || digits(text, 11, 2) > 23 || digits(text, 14, 2) > 59 || digits(text, 17, 2) > 59) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  if (day > (month === 2 && leap ? 29 : MONTH_DAYS[month - 1]!)) return false;
  lastRecordedAt = text;
  return true;
}
let lastRecordedAt: string | null = null;

/** The canonical recorded-time text of epoch milliseconds. */
export function recordedAtText(ms: number): string {
  if (ms !== lastTextMs) {
    lastText = new Date(ms).toISOString();
    lastTextMs = ms;
  }
  return lastText;
}
let lastTextMs = Number.NaN;
let lastText = '';

function decodeEnvelope(ctx: Ctx, wire: unknown): SessionEvent {
  const o = ctx.object(wire, ENVELOPE_FIELDS);
  const eventId = ctx.id(o, 'event_id') as EventId;
  const sessionId = ctx.id(o, 'session_id') as SessionId;
  const turnId = ctx.id(o, 'turn_id') as TurnId;
  const generationId = ctx.optionalId(o, 'generation_id');
  const messageId = ctx.optionalId(o, 'message_id');
  const seq = ctx.index(o, 'seq');
  const recorded = ctx.get(o, 'recorded_at');
  let recordedAt: string | undefined;
  if (recorded !== undefined && recorded !== null) {
    recordedAt = ctx.string(o, 'recorded_at');
    if (!isRecordedAt(recordedAt)) ctx.fail('recorded_at', 'must be an ISO-8601 UTC time with milliseconds, e.g. 2026-12-01T03:25:25.123Z');
  }
  const kind = decodeKind(ctx.child('kind'), ctx.required(o, 'kind'));
  const event: { -readonly [K in keyof SessionEvent]: SessionEvent[K] } = { eventId, sessionId, turnId, seq, kind };
  if (generationId !== undefined) event.generationId = generationId;
  if (messageId !== undefined) event.messageId = messageId;
  if (recordedAt !== undefined) event.recordedAt = recordedAt;
  return event;
}

/** Decodes one wire object (already-parsed JSON, or any value) strictly. Throws WireDecodeError. */
export function decodeEvent(wire: unknown): SessionEvent {
  return decodeEnvelope(Ctx.root(false), wire);
}

/** parseJson, then decodeEvent. JsonParseError and WireDecodeError propagate. */
export function decodeEventText(text: string, options?: ParseJsonOptions): SessionEvent {
  const wire = parseJson(text, options);
  // With the default depth bound, parseJson has already guaranteed JSON data within it, free of lone surrogates.
  const trusted = options?.maxDepth === undefined || options.maxDepth <= LIMITS.maxJsonDepth;
  return decodeEnvelope(Ctx.root(trusted), wire);
}

/**
 * decodeEventText (default bounds) of a line encodeEventText has just written: the same result and the same errors,
 * without scanning what JSON.stringify guarantees (docs/design.md#what-a-store-refuses-to-write).
 */
export function decodeEncodedEventText(text: string): SessionEvent {
  return decodeEnvelope(Ctx.root(true), parseStringifiedJson(text));
}

export function decodeToolCall(wire: unknown): ToolCall {
  return decodeCall(Ctx.root(false), wire);
}

export function decodeToolResult(wire: unknown): ToolResult {
  return decodeResult(Ctx.root(false), wire);
}

export function decodeToolOperation(wire: unknown): ToolOperation {
  return decodeOperation(Ctx.root(false), wire);
}

export function decodeToolRetryReview(wire: unknown): ToolRetryReview {
  return decodeReview(Ctx.root(false), wire);
}

export function decodeToolReviewRecord(wire: unknown): ToolReviewRecord {
  return decodeReviewRecord(Ctx.root(false), wire);
}
