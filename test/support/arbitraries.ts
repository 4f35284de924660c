/**
 * Reusable fast-check arbitraries for JSON values, session events and their parts. Every generated value is valid
 * under the wire codec (decodeEvent(encodeEvent(e)) deep-equals e): plain objects, no `undefined`-valued optional
 * keys, no -0, no lone surrogates, texts within the journal's limits.
 */
import fc from 'fast-check';
import type { CallId, EventId, OperationKey, SessionId, TaskId, TurnId } from '../../src/ids.js';
import { isValidText } from '../../src/ids.js';
import type { JsonObject, JsonValue } from '../../src/json/types.js';
import { LIMITS } from '../../src/limits.js';
import { utf8Length } from '../../src/text.js';
import {
  TOOL_EFFECTS,
  TOOL_FAILURE_CATEGORIES,
  TOOL_REVIEW_OUTCOMES,
  type ActionContext,
  type SessionEvent,
  type SessionEventKind,
  type ToolCall,
  type ToolEffectContract,
  type ToolOperation,
  type ToolRecordedOutcome,
  type ToolResult,
  type ToolRetryAudit,
  type ToolRetryReview,
} from '../../src/event/types.js';

/** JSON.stringify writes these as integer literals beyond ±(2^53 − 1), which the journal refuses (not exact). */
const writtenAsUnsafeInteger = (v: number): boolean => Number.isInteger(v) && !Number.isSafeInteger(v) && Math.abs(v) < 1e21;

/**
 * Rebuilds a generated value as ordinary JSON data: plain prototypes, `-0` as 0, `__proto__` as an own key, and a
 * number that would be written as an unsafe integer literal scaled into the exponent form (the journal holds only
 * exact numbers; the refusal has its own tests).
 */
export function normalizeJson(v: JsonValue): JsonValue {
  if (typeof v === 'number') return v === 0 ? 0 : writtenAsUnsafeInteger(v) ? v * 1e6 : v;
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(normalizeJson);
  const out: JsonObject = {};
  for (const key of Object.keys(v)) {
    Object.defineProperty(out, key, { value: normalizeJson(v[key]!), enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** Any JSON value, unicode strings included, nested at most `maxDepth` containers deep. */
export function arbJsonValue(maxDepth = 3): fc.Arbitrary<JsonValue> {
  return fc.jsonValue({ maxDepth, stringUnit: 'grapheme' }).map((v) => normalizeJson(v as JsonValue));
}

export function arbJsonObject(maxDepth = 3): fc.Arbitrary<JsonObject> {
  return fc
    .dictionary(fc.string({ unit: 'grapheme', maxLength: 8 }), arbJsonValue(Math.max(0, maxDepth - 1)), { maxKeys: 6 })
    .map((o) => normalizeJson(o) as JsonObject);
}

/** Any string free of lone surrogates (may be empty). */
export const arbFreeText: fc.Arbitrary<string> = fc.string({ unit: 'grapheme', maxLength: 40 });

/** Text the journal accepts for ids, keys, revisions, review actor and evidence (isValidText). */
export const arbValidText: fc.Arbitrary<string> = fc.oneof(
  fc.uuid().map((u) => `id_${u}`),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 24 }).filter(isValidText),
  fc.constantFrom('😀'.repeat(256), 'a'.repeat(LIMITS.maxTextBytes), ' padded ', '€'.repeat(341)),
);

function prefixed<T extends string>(prefix: string): fc.Arbitrary<T> {
  return fc.oneof({ weight: 3, arbitrary: fc.uuid().map((u) => `${prefix}_${u}`) }, { weight: 1, arbitrary: arbValidText }) as fc.Arbitrary<T>;
}

export const arbSessionId = prefixed<SessionId>('sess');
export const arbTaskId = prefixed<TaskId>('task');
export const arbTurnId = prefixed<TurnId>('turn');
export const arbEventId = prefixed<EventId>('evt');
export const arbCallId = prefixed<CallId>('toolcall');
export const arbOperationKey = prefixed<OperationKey>('operation');

/** Tool names: non-empty, at most 256 UTF-8 bytes. */
export const arbToolName: fc.Arbitrary<string> = fc.oneof(
  fc.stringMatching(/^[a-z][a-z0-9_]{0,30}$/),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 16 }).filter((s) => utf8Length(s) <= LIMITS.maxToolNameBytes),
  fc.constant('😀'.repeat(64)),
);

export const arbToolEffectContract: fc.Arbitrary<ToolEffectContract> = fc.record(
  { effect: fc.constantFrom(...TOOL_EFFECTS), revision: arbValidText },
  { noNullPrototype: true },
);

export const arbToolRetryReview: fc.Arbitrary<ToolRetryReview> = fc.record(
  { actor: arbValidText, evidence: arbValidText, outcome: fc.constantFrom(...TOOL_REVIEW_OUTCOMES) },
  { noNullPrototype: true },
);

export const arbToolRetryAudit: fc.Arbitrary<ToolRetryAudit> = fc.record(
  { callId: arbCallId, eventId: arbEventId, review: fc.option(arbToolRetryReview, { nil: null }) },
  { noNullPrototype: true },
);

export const arbToolOperation: fc.Arbitrary<ToolOperation> = fc
  .tuple(arbTaskId, arbOperationKey, arbToolEffectContract, fc.option(arbToolRetryAudit, { nil: null }), fc.boolean())
  .map(([taskId, key, contract, retry, startMarker]): ToolOperation => {
    const op: ToolOperation = { taskId, key, contract, retry };
    return startMarker ? { ...op, startMarker: true } : op;
  });

export const arbActionContext: fc.Arbitrary<ActionContext> = fc
  .tuple(arbTaskId, arbValidText, fc.nat(), fc.option(arbFreeText, { nil: undefined }))
  .map(([taskId, stepId, actionIndex, providerCallId]): ActionContext => {
    const action: ActionContext = { decision: { taskId, stepId }, actionIndex };
    return providerCallId === undefined ? action : { ...action, providerCallId };
  });

/** A ToolCall; `legacy` calls (no operation) appear about one time in five. */
export const arbToolCall: fc.Arbitrary<ToolCall> = fc
  .tuple(
    arbCallId,
    arbToolName,
    arbJsonValue(),
    fc.option(arbToolOperation, { nil: undefined, freq: 5 }),
    fc.option(arbActionContext, { nil: undefined, freq: 2 }),
  )
  .map(([id, name, args, operation, action]): ToolCall => {
    const call: { -readonly [K in keyof ToolCall]: ToolCall[K] } = { id, name, arguments: args };
    if (operation) call.operation = operation;
    if (action) call.action = action;
    return call;
  });

export const arbToolRecordedOutcome: fc.Arbitrary<ToolRecordedOutcome> = fc.oneof(
  arbFreeText.map((output): ToolRecordedOutcome => ({ status: 'succeeded', output })),
  fc
    .tuple(fc.constantFrom(...TOOL_FAILURE_CATEGORIES), arbFreeText, arbFreeText, fc.boolean())
    .map(([category, code, message, retryable]): ToolRecordedOutcome => ({ status: 'failed', category, code, message, retryable })),
);

export const arbToolResult: fc.Arbitrary<ToolResult> = fc.record(
  { callId: arbCallId, outcome: arbToolRecordedOutcome },
  { noNullPrototype: true },
);

/** Kind types of Jingwei for Rust that this library keeps opaque, plus invented future ones. */
export const OPAQUE_WIRE_TYPES = [
  'assistant_delta',
  'model_request',
  'model_result',
  'task_run_report',
  'stage_progress',
  'mode',
  'plan_ready',
  'done',
  'error',
  'some_future_kind',
] as const;

export const arbOpaqueKind: fc.Arbitrary<SessionEventKind> = fc
  .tuple(fc.constantFrom(...OPAQUE_WIRE_TYPES), arbJsonObject())
  .map(([wireType, fields]): SessionEventKind => {
    const copy: JsonObject = {};
    for (const key of Object.keys(fields)) {
      if (key !== 'type') Object.defineProperty(copy, key, { value: fields[key], enumerable: true, writable: true, configurable: true });
    }
    return { type: 'opaque', wireType, fields: copy };
  });

export const arbSessionEventKind: fc.Arbitrary<SessionEventKind> = fc.oneof(
  { weight: 4, arbitrary: arbToolCall.map((call): SessionEventKind => ({ type: 'tool_call', call })) },
  { weight: 3, arbitrary: arbToolResult.map((result): SessionEventKind => ({ type: 'tool_result', result })) },
  { weight: 1, arbitrary: arbCallId.map((callId): SessionEventKind => ({ type: 'tool_started', callId })) },
  { weight: 1, arbitrary: arbFreeText.map((text): SessionEventKind => ({ type: 'user_message', text })) },
  { weight: 1, arbitrary: arbFreeText.map((text): SessionEventKind => ({ type: 'assistant_message', text })) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(arbFreeText, arbFreeText, arbJsonValue())
      .map(([plugin, kind, payload]): SessionEventKind => ({ type: 'custom', plugin, kind, payload })),
  },
  { weight: 1, arbitrary: arbOpaqueKind },
);

export interface ArbSessionEventOptions {
  /** Fix the session id (default: generated). */
  readonly sessionId?: SessionId;
  /** Fix the position (default: a generated non-negative safe integer). */
  readonly seq?: number;
}

export function arbSessionEvent(options: ArbSessionEventOptions = {}): fc.Arbitrary<SessionEvent> {
  return fc
    .tuple(
      arbEventId,
      options.sessionId === undefined ? arbSessionId : fc.constant(options.sessionId),
      arbTurnId,
      options.seq === undefined ? fc.oneof(fc.nat(1000), fc.maxSafeNat()) : fc.constant(options.seq),
      arbSessionEventKind,
      fc.option(arbFreeText, { nil: undefined }),
      fc.option(arbFreeText, { nil: undefined }),
    )
    .map(([eventId, sessionId, turnId, seq, kind, generationId, messageId]): SessionEvent => {
      const event: { -readonly [K in keyof SessionEvent]: SessionEvent[K] } = { eventId, sessionId, turnId, seq, kind };
      if (generationId !== undefined) event.generationId = generationId;
      if (messageId !== undefined) event.messageId = messageId;
      return event;
    });
}

/** A valid physical log of one session: `seq` equals the index, event ids unique. */
export function arbPhysicalLog(options: { readonly minLength?: number; readonly maxLength?: number } = {}): fc.Arbitrary<SessionEvent[]> {
  return arbSessionId.chain((sessionId) =>
    fc
      .uniqueArray(arbSessionEvent({ sessionId, seq: 0 }), {
        minLength: options.minLength ?? 0,
        maxLength: options.maxLength ?? 12,
        selector: (e) => e.eventId,
      })
      .map((events) => events.map((e, seq) => ({ ...e, seq }))),
  );
}

/**
 * Values JSON.stringify accepts but the journal's bounds may refuse, for comparing a faster check with the bounded
 * parser: lone and paired surrogates (also in keys), `\u` and backslash look-alikes, control characters, unsafe and
 * huge numbers, NaN and Infinity (written as null), undefined (dropped), long digit runs in strings, and nesting
 * around LIMITS.maxJsonDepth.
 */
export function arbHostileJson(): fc.Arbitrary<unknown> {
  const units = ['a', '0', '9', '1', '\\', 'u', 'd', '8', 'D', '"', ':', ',', '[', '{', '\u0000', '\u001f', '\u2028', '\ud800', '\udbff', '\udc00', '\udfff', '😀'];
  const text = fc.string({ unit: fc.constantFrom(...units), maxLength: 24 });
  const digits = fc.stringMatching(/^-?\d{14,22}$/);
  const number = fc.oneof(
    fc.double(),
    fc.integer(),
    fc.maxSafeInteger(),
    fc.constantFrom(2 ** 53, -(2 ** 53), 2 ** 53 - 1, 2 ** 53 + 2, 1e15, 1e16, 1e20, -1e20, 1e21, 1.5e300, Number.MAX_VALUE, 5e-324, -0, 0.1),
    fc.bigInt({ min: -(10n ** 22n), max: 10n ** 22n }).map(Number),
  );
  const leaf = fc.oneof(text, digits, number, fc.boolean(), fc.constant(null), fc.constant(undefined));
  const { value } = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      leaf,
      fc.array(tie('value'), { maxLength: 4 }),
      fc.dictionary(fc.oneof(text, digits), tie('value'), { maxKeys: 4 }),
    ),
  }));
  const nested = fc
    .tuple(fc.integer({ min: LIMITS.maxJsonDepth - 8, max: LIMITS.maxJsonDepth + 4 }), fc.boolean(), value)
    .map(([depth, inObjects, inner]) => {
      let v: unknown = inner;
      for (let i = 0; i < depth; i++) v = inObjects ? { k: v } : [v];
      return v;
    });
  return fc.oneof(value, nested);
}
