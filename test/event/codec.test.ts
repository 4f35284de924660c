import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  decodeEvent,
  decodeEventText,
  decodeToolCall,
  decodeToolOperation,
  decodeToolResult,
  decodeToolRetryReview,
  encodeEvent,
  encodeEventText,
  encodeToolCall,
  encodeToolOperation,
  encodeToolResult,
  encodeToolRetryReview,
  type SessionEvent,
} from '../../src/event/index.js';
import type { CallId, EventId, OperationKey, SessionId, TaskId, TurnId } from '../../src/ids.js';
import { canonicalJson, parseJson } from '../../src/json/index.js';
import {
  arbSessionEvent,
  arbToolCall,
  arbToolOperation,
  arbToolResult,
  arbToolRetryReview,
  OPAQUE_WIRE_TYPES,
} from '../support/arbitraries.js';

const envelope = {
  eventId: 'evt_1' as EventId,
  sessionId: 'sess_1' as SessionId,
  turnId: 'turn_1' as TurnId,
};

describe('codec: round trips', () => {
  it('property: decodeEvent(encodeEvent(e)) deep-equals e', () => {
    fc.assert(
      fc.property(arbSessionEvent(), (e) => {
        assert.deepStrictEqual(decodeEvent(encodeEvent(e)), e);
      }),
      { numRuns: 500 },
    );
  });

  it('property: through text, and the text is stable', () => {
    fc.assert(
      fc.property(arbSessionEvent(), (e) => {
        const text = encodeEventText(e);
        const back = decodeEventText(text);
        assert.deepStrictEqual(back, e);
        assert.equal(encodeEventText(back), text);
        assert.equal(text, JSON.stringify(encodeEvent(e)));
      }),
      { numRuns: 500 },
    );
  });

  it('property: the parts round-trip on their own', () => {
    fc.assert(
      fc.property(arbToolCall, arbToolResult, arbToolOperation, arbToolRetryReview, (call, result, op, review) => {
        assert.deepStrictEqual(decodeToolCall(encodeToolCall(call)), call);
        assert.deepStrictEqual(decodeToolResult(encodeToolResult(result)), result);
        assert.deepStrictEqual(decodeToolOperation(encodeToolOperation(op)), op);
        assert.deepStrictEqual(decodeToolRetryReview(encodeToolRetryReview(review)), review);
        assert.deepStrictEqual(decodeToolCall(parseJson(JSON.stringify(encodeToolCall(call)))), call);
      }),
      { numRuns: 300 },
    );
  });

  it('property: decoded objects carry no undefined-valued keys', () => {
    const walk = (v: unknown): void => {
      if (v === null || typeof v !== 'object') return;
      for (const [key, child] of Object.entries(v)) {
        assert.notEqual(child, undefined, `key ${key} is undefined`);
        walk(child);
      }
    };
    fc.assert(
      fc.property(arbSessionEvent(), (e) => walk(decodeEventText(encodeEventText(e)))),
      { numRuns: 200 },
    );
  });
});

describe('codec: the wire format is that of Jingwei for Rust', () => {
  it('writes a full tool call in the original key order, snake_case', () => {
    const e: SessionEvent = {
      ...envelope,
      seq: 3,
      kind: {
        type: 'tool_call',
        call: {
          id: 'toolcall_1' as CallId,
          name: 'pay',
          arguments: { amount: 5 },
          operation: {
            taskId: 'task_1' as TaskId,
            key: 'operation_1' as OperationKey,
            contract: { effect: 'non_idempotent', revision: 'v2' },
            retry: {
              callId: 'toolcall_0' as CallId,
              eventId: 'evt_0' as EventId,
              review: { actor: 'ops', evidence: 'ticket 7', outcome: 'not_executed' },
            },
          },
          action: { decision: { taskId: 'task_1' as TaskId, stepId: 'step_1' }, actionIndex: 0, providerCallId: 'p1' },
        },
      },
    };
    const text =
      '{"event_id":"evt_1","session_id":"sess_1","turn_id":"turn_1","seq":3,"kind":{"type":"tool_call","call":{' +
      '"operation":{"task_id":"task_1","key":"operation_1","contract":{"effect":"non_idempotent","revision":"v2"},' +
      '"retry":{"call_id":"toolcall_0","event_id":"evt_0","review":{"actor":"ops","evidence":"ticket 7","outcome":"not_executed"}}},' +
      '"action":{"decision":{"task_id":"task_1","step_id":"step_1"},"action_index":0,"provider_call_id":"p1"},' +
      '"id":"toolcall_1","name":"pay","arguments":{"amount":5}}}}';
    assert.equal(encodeEventText(e), text);
    assert.deepStrictEqual(decodeEventText(text), e);
  });

  it('writes retry and review as null when absent, omits operation, action and the optional ids', () => {
    const op = { taskId: 'task_1' as TaskId, key: 'k' as OperationKey, contract: { effect: 'read_only', revision: 'r' }, retry: null } as const;
    assert.equal(
      JSON.stringify(encodeToolOperation(op)),
      '{"task_id":"task_1","key":"k","contract":{"effect":"read_only","revision":"r"},"retry":null}',
    );
    const audit = { ...op, retry: { callId: 'c' as CallId, eventId: 'e' as EventId, review: null } };
    assert.equal(JSON.stringify(encodeToolOperation(audit).retry), '{"call_id":"c","event_id":"e","review":null}');
    const e: SessionEvent = { ...envelope, seq: 0, kind: { type: 'user_message', text: 'hi' } };
    assert.equal(encodeEventText(e), '{"event_id":"evt_1","session_id":"sess_1","turn_id":"turn_1","seq":0,"kind":{"type":"user_message","text":"hi"}}');
    const withIds: SessionEvent = { ...e, generationId: 'gen_1', messageId: 'msg_1' };
    assert.equal(
      encodeEventText(withIds),
      '{"event_id":"evt_1","session_id":"sess_1","turn_id":"turn_1","generation_id":"gen_1","message_id":"msg_1","seq":0,"kind":{"type":"user_message","text":"hi"}}',
    );
  });

  it('decodes retry and review from missing or null alike', () => {
    const base = { task_id: 't', key: 'k', contract: { effect: 'idempotent', revision: 'r' } };
    assert.equal(decodeToolOperation(base).retry, null);
    assert.equal(decodeToolOperation({ ...base, retry: null }).retry, null);
    assert.equal(decodeToolOperation({ ...base, retry: { call_id: 'c', event_id: 'e' } }).retry?.review, null);
    assert.equal(decodeToolOperation({ ...base, retry: { call_id: 'c', event_id: 'e', review: null } }).retry?.review, null);
  });

  it('writes start_marker only when true, and reads false or missing as absent', () => {
    const op = { taskId: 't' as TaskId, key: 'k' as OperationKey, contract: { effect: 'unknown', revision: 'unspecified' }, retry: null } as const;
    assert.equal(encodeToolOperation({ ...op, startMarker: true }).start_marker, true);
    assert.ok(!('start_marker' in encodeToolOperation({ ...op, startMarker: false })));
    assert.ok(!('start_marker' in encodeToolOperation(op)));
    const wire = { task_id: 't', key: 'k', contract: { effect: 'unknown', revision: 'unspecified' }, retry: null };
    assert.deepStrictEqual(decodeToolOperation({ ...wire, start_marker: true }), { ...op, startMarker: true });
    assert.deepStrictEqual(decodeToolOperation({ ...wire, start_marker: false }), op);
    assert.deepStrictEqual(decodeToolOperation(wire), op);
  });

  it('matches the serialization tests of Jingwei for Rust for tool results', () => {
    const ok = '{"call_id":"call_success","outcome":{"status":"succeeded","output":"indexed 3 files"}}';
    assert.equal(JSON.stringify(encodeToolResult(decodeToolResult(JSON.parse(ok)))), ok);
    const failed =
      '{"call_id":"call_failure","outcome":{"status":"failed","category":"approval_denied","code":"approval_denied","message":"the requested operation was not approved","retryable":false}}';
    assert.equal(JSON.stringify(encodeToolResult(decodeToolResult(JSON.parse(failed)))), failed);
  });

  it('writes assistant_message with version 1 and reads it with or without', () => {
    const e: SessionEvent = { ...envelope, seq: 1, kind: { type: 'assistant_message', text: 'done' } };
    assert.deepStrictEqual(encodeEvent(e).kind, { type: 'assistant_message', version: 1, text: 'done' });
    const wire = encodeEvent(e) as Record<string, unknown>;
    assert.deepStrictEqual(decodeEvent({ ...wire, kind: { type: 'assistant_message', text: 'done' } }), e);
  });

  it('writes tool_started as {type, call_id}', () => {
    const e: SessionEvent = { ...envelope, seq: 2, kind: { type: 'tool_started', callId: 'toolcall_9' as CallId } };
    assert.deepStrictEqual(encodeEvent(e).kind, { type: 'tool_started', call_id: 'toolcall_9' });
    assert.deepStrictEqual(decodeEvent(encodeEvent(e)), e);
  });

  it('normalizes -0 in seq and action_index to 0', () => {
    const e = decodeEventText('{"event_id":"e","session_id":"s","turn_id":"t","seq":-0,"kind":{"type":"user_message","text":""}}');
    assert.ok(Object.is(e.seq, 0));
  });
});

describe('codec: legacy and foreign records', () => {
  it('decodes a legacy ToolCall without operation, and re-encodes it without one', () => {
    const text = '{"event_id":"evt_1","session_id":"sess_1","turn_id":"turn_1","seq":0,"kind":{"type":"tool_call","call":{"id":"call_1","name":"read","arguments":{"path":"/x"}}}}';
    const e = decodeEventText(text);
    assert.deepStrictEqual(e.kind, { type: 'tool_call', call: { id: 'call_1', name: 'read', arguments: { path: '/x' } } });
    assert.ok(e.kind.type === 'tool_call' && !('operation' in e.kind.call));
    assert.equal(encodeEventText(e), text);
    assert.ok(!('operation' in decodeToolCall({ id: 'c', name: 'n', arguments: null, operation: null })));
  });

  it('keeps every other kind opaque and re-encodes it to the same wire object', () => {
    const kinds = [
      { type: 'done', status: 'completed' },
      { type: 'done', status: 'waiting_for_input', artifact: { path: 'out.md' } },
      { type: 'assistant_delta', text: 'par' },
      { type: 'stage_progress', stage: 'plan', status: 'started', message: 'go' },
      { type: 'mode', mode: 'write', decided_by: 'router', reason: 'asked' },
      { type: 'plan_ready', plan: [1, { a: null }] },
      { type: 'error', code: 'x', message: 'y', retryable: true },
      { type: 'model_request', request: { version: 1, call_id: 'mcall_1', mode: 'stream', input: {}, options: { max_tokens: null } } },
      { type: 'model_result', result: { version: 1, call_id: 'mcall_1', outcome: { status: 'succeeded', response: {} } } },
      { type: 'task_run_report', report: { steps: 3 } },
      { type: 'opaque', whatever: 1 },
      { type: 'from_the_future' },
      { type: '' },
    ];
    for (const kind of kinds) {
      const wire = { event_id: 'evt_1', session_id: 'sess_1', turn_id: 'turn_1', seq: 7, kind };
      const text = JSON.stringify(wire);
      const e = decodeEventText(text);
      const { type, ...fields } = kind;
      assert.deepStrictEqual(e.kind, { type: 'opaque', wireType: type, fields });
      assert.deepStrictEqual(encodeEvent(e), wire);
      assert.equal(encodeEventText(e), text);
    }
    assert.equal(
      encodeEventText(decodeEventText('{"event_id":"evt_1","session_id":"sess_1","turn_id":"turn_1","seq":0,"kind":{"type":"done","status":"completed"}}')),
      '{"event_id":"evt_1","session_id":"sess_1","turn_id":"turn_1","seq":0,"kind":{"type":"done","status":"completed"}}',
    );
  });

  it('property: opaque kinds of every original type survive text round trips', () => {
    fc.assert(
      fc.property(arbSessionEvent(), (e) => {
        fc.pre(e.kind.type === 'opaque');
        const again = decodeEventText(encodeEventText(e));
        assert.deepStrictEqual(again, e);
        assert.ok((OPAQUE_WIRE_TYPES as readonly string[]).includes(e.kind.type === 'opaque' ? e.kind.wireType : ''));
      }),
      { numRuns: 100 },
    );
  });

  it('keeps a __proto__ field of an opaque kind as data', () => {
    const text = '{"event_id":"e","session_id":"s","turn_id":"t","seq":0,"kind":{"type":"plan_ready","__proto__":{"x":1},"plan":null}}';
    const e = decodeEventText(text);
    assert.ok(e.kind.type === 'opaque');
    assert.equal(Object.getPrototypeOf(e.kind.fields), Object.prototype);
    assert.ok(Object.hasOwn(e.kind.fields, '__proto__'));
    assert.equal(encodeEventText(e), text);
    assert.equal(canonicalJson(encodeEvent(e)), canonicalJson(parseJson(text)));
  });

  it('drops unknown fields where the original tolerates them', () => {
    const call = decodeToolCall({ id: 'c', name: 'n', arguments: 1, extra: true, action: { decision: { task_id: 't', step_id: 's', x: 1 }, action_index: 2, y: 2 } });
    assert.deepStrictEqual(call, { id: 'c', name: 'n', arguments: 1, action: { decision: { taskId: 't', stepId: 's' }, actionIndex: 2 } });
    const result = decodeToolResult({ call_id: 'c', outcome: { status: 'succeeded', output: 'o', extra: 1 }, more: 2 });
    assert.deepStrictEqual(result, { callId: 'c', outcome: { status: 'succeeded', output: 'o' } });
    const e = decodeEvent({ event_id: 'e', session_id: 's', turn_id: 't', seq: 0, kind: { type: 'user_message', text: 'x', extra: 1 } });
    assert.deepStrictEqual(e.kind, { type: 'user_message', text: 'x' });
  });
});
