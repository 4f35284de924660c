// biome-ignore-all lint/suspicious/noExplicitAny: these tests poke at deep paths of raw, deliberately malformed wire JSON
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { JsonParseError, WireDecodeError } from '../../src/errors.js';
import { decodeEvent, decodeEventText, decodeToolCall, decodeToolRetryReview, encodeEvent, encodeEventText } from '../../src/event/index.js';
import type { JsonObject, JsonValue } from '../../src/json/types.js';
import { arbJsonValue, arbSessionEvent } from '../support/arbitraries.js';

/** A complete wire event exercising every nested object, as plain JSON data. */
function fullWire(): Record<string, any> {
  return {
    event_id: 'evt_1',
    session_id: 'sess_1',
    turn_id: 'turn_1',
    seq: 4,
    kind: {
      type: 'tool_call',
      call: {
        operation: {
          task_id: 'task_1',
          key: 'operation_1',
          contract: { effect: 'idempotent', revision: 'v1' },
          retry: { call_id: 'toolcall_0', event_id: 'evt_0', review: { actor: 'ops', evidence: 'receipt', outcome: 'uncertain' } },
          start_marker: true,
        },
        action: { decision: { task_id: 'task_1', step_id: 'step_1' }, action_index: 1 },
        id: 'toolcall_1',
        name: 'charge',
        arguments: { cents: 100 },
      },
    },
  };
}

function resultWire(outcome: Record<string, unknown>): Record<string, any> {
  return { event_id: 'evt_2', session_id: 'sess_1', turn_id: 'turn_1', seq: 5, kind: { type: 'tool_result', result: { call_id: 'toolcall_1', outcome } } };
}

/** Sets (or with `undefined`, deletes) the field at a dotted path of a copy of `wire`. */
function withField(wire: Record<string, any>, path: string, value: unknown): Record<string, any> {
  const copy = structuredClone(wire);
  const keys = path.split('.');
  let at = copy;
  for (const key of keys.slice(0, -1)) at = at[key];
  const last = keys[keys.length - 1]!;
  if (value === undefined) delete at[last];
  else at[last] = value;
  return copy;
}

function rejectsAt(wire: unknown, path: string, message?: RegExp): void {
  assert.throws(
    () => decodeEvent(wire),
    (error: unknown) => {
      assert.ok(error instanceof WireDecodeError, `expected WireDecodeError at ${path}, got ${String(error)}`);
      assert.equal(error.path, path, error.message);
      assert.equal(error.code, 'invalid_event');
      if (message) assert.match(error.message, message);
      return true;
    },
  );
  // The same record as text fails the same way; an integer beyond 2^53 already fails to parse, at the same path.
  if (wire !== null && typeof wire === 'object') {
    assert.throws(
      () => decodeEventText(JSON.stringify(wire)),
      (e: unknown) => (e instanceof WireDecodeError && e.path === path) || (e instanceof JsonParseError && e.reason === 'unsafe_integer' && e.path === `$.${path}`),
    );
  }
}

describe('codec: unknown fields are rejected where the original rejects them', () => {
  it('accepts the full record', () => {
    const e = decodeEvent(fullWire());
    assert.deepStrictEqual(encodeEvent(e), fullWire());
  });
  const places = ['', 'kind.call.operation', 'kind.call.operation.contract', 'kind.call.operation.retry', 'kind.call.operation.retry.review'];
  for (const place of places) {
    it(`in ${place || 'the envelope'}`, () => {
      rejectsAt(withField(fullWire(), place ? `${place}.surprise` : 'surprise', 1), place ? `${place}.surprise` : 'surprise', /unknown field/);
    });
  }
  it('in a standalone review', () => {
    assert.throws(() => decodeToolRetryReview({ actor: 'a', evidence: 'e', outcome: 'completed', by_model: true }), WireDecodeError);
  });
});

describe('codec: wrong shapes are WireDecodeErrors with a path', () => {
  const cases: [string, unknown, string][] = [
    ['event_id', undefined, 'event_id'],
    ['event_id', 7, 'event_id'],
    ['session_id', null, 'session_id'],
    ['seq', -1, 'seq'],
    ['seq', 1.5, 'seq'],
    ['seq', '3', 'seq'],
    ['seq', 2 ** 53, 'seq'],
    ['generation_id', 5, 'generation_id'],
    ['kind', undefined, 'kind'],
    ['kind', [], 'kind'],
    ['kind.type', undefined, 'kind.type'],
    ['kind.type', 3, 'kind.type'],
    ['kind.call', undefined, 'kind.call'],
    ['kind.call', 'x', 'kind.call'],
    ['kind.call.id', undefined, 'kind.call.id'],
    ['kind.call.name', undefined, 'kind.call.name'],
    ['kind.call.arguments', undefined, 'kind.call.arguments'],
    ['kind.call.operation.task_id', undefined, 'kind.call.operation.task_id'],
    ['kind.call.operation.task_id', 12, 'kind.call.operation.task_id'],
    ['kind.call.operation.contract', null, 'kind.call.operation.contract'],
    ['kind.call.operation.contract.effect', 'safe', 'kind.call.operation.contract.effect'],
    ['kind.call.operation.contract.effect', 'ReadOnly', 'kind.call.operation.contract.effect'],
    ['kind.call.operation.contract.revision', undefined, 'kind.call.operation.contract.revision'],
    ['kind.call.operation.retry', 'x', 'kind.call.operation.retry'],
    ['kind.call.operation.retry.event_id', undefined, 'kind.call.operation.retry.event_id'],
    ['kind.call.operation.retry.review.outcome', 'done', 'kind.call.operation.retry.review.outcome'],
    ['kind.call.operation.retry.review', 1, 'kind.call.operation.retry.review'],
    ['kind.call.operation.start_marker', 'yes', 'kind.call.operation.start_marker'],
    ['kind.call.operation.start_marker', null, 'kind.call.operation.start_marker'],
    ['kind.call.action.decision', undefined, 'kind.call.action.decision'],
    ['kind.call.action.decision.step_id', 3, 'kind.call.action.decision.step_id'],
    ['kind.call.action.action_index', -2, 'kind.call.action.action_index'],
    ['kind.call.action.provider_call_id', 9, 'kind.call.action.provider_call_id'],
  ];
  for (const [path, value, errorPath] of cases) {
    it(`${path} = ${JSON.stringify(value) ?? 'missing'}`, () => rejectsAt(withField(fullWire(), path, value), errorPath));
  }

  it('rejects bad outcomes', () => {
    const failed = { status: 'failed', category: 'timeout', code: 'tool_timeout', message: 'm', retryable: true };
    assert.doesNotThrow(() => decodeEvent(resultWire(failed)));
    rejectsAt(resultWire({ ...failed, category: 'panic' }), 'kind.result.outcome.category');
    rejectsAt(resultWire({ ...failed, retryable: 'true' }), 'kind.result.outcome.retryable');
    rejectsAt(resultWire({ ...failed, code: undefined }), 'kind.result.outcome.code');
    rejectsAt(resultWire({ status: 'ok', output: 'x' }), 'kind.result.outcome.status');
    rejectsAt(resultWire({ status: 'succeeded' }), 'kind.result.outcome.output');
    rejectsAt(resultWire({ status: 'succeeded', output: 5 }), 'kind.result.outcome.output');
    rejectsAt(withField(resultWire(failed), 'kind.result.outcome', undefined), 'kind.result.outcome');
  });

  it('rejects an unsupported assistant_message version and a non-object record', () => {
    const wire = { event_id: 'e', session_id: 's', turn_id: 't', seq: 0, kind: { type: 'assistant_message', version: 2, text: 'x' } };
    rejectsAt(wire, 'kind.version');
    for (const notObject of [null, 1, 'x', [], undefined]) rejectsAt(notObject, '$');
    assert.throws(() => decodeEvent(new (class Event {})()), WireDecodeError);
  });

  it('rejects non-JSON values when decoding objects', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const bad: [unknown, string][] = [
      [{ a: undefined }, 'kind.call.arguments.a'],
      [[1, NaN], 'kind.call.arguments.1'],
      [{ f: () => 1 }, 'kind.call.arguments.f'],
      [new Date(0), 'kind.call.arguments'],
      [{ s: 'x\ud800' }, 'kind.call.arguments.s'],
      [1n, 'kind.call.arguments'],
    ];
    for (const [value, path] of bad) rejectsAtObjectOnly(withFieldRaw(fullWire(), value), path);
    assert.throws(() => decodeEvent(withFieldRaw(fullWire(), cyclic)), WireDecodeError);
  });

  it('bounds the depth of arguments by the depth of the whole record', () => {
    let deep: JsonValue = 1;
    // The call object sits at depth 3, so its arguments may nest 253 containers deep (256 in all).
    for (let i = 0; i < 253; i++) deep = [deep];
    assert.doesNotThrow(() => decodeEvent(withFieldRaw(fullWire(), deep)));
    assert.throws(() => decodeEvent(withFieldRaw(fullWire(), [deep])), WireDecodeError);
    assert.throws(() => decodeEventText(JSON.stringify(withFieldRaw(fullWire(), [deep]))), JsonParseError);
  });
});

function withFieldRaw(wire: Record<string, any>, args: unknown): Record<string, any> {
  wire.kind.call.arguments = args;
  return wire;
}

describe('codec: hostile input never crashes', () => {
  it('property: any JSON value decodes or throws WireDecodeError', () => {
    fc.assert(
      fc.property(arbJsonValue(4), (v) => {
        try {
          decodeEvent(v);
        } catch (error) {
          assert.ok(error instanceof WireDecodeError, String(error));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('property: a mutated valid record decodes to a stable event or throws WireDecodeError', () => {
    fc.assert(
      fc.property(arbSessionEvent(), fc.nat(), fc.oneof(arbJsonValue(2), fc.constant(undefined)), (e, pick, replacement) => {
        const wire = mutateNode(encodeEvent(e), pick, replacement);
        let decoded;
        try {
          decoded = decodeEvent(wire);
        } catch (error) {
          assert.ok(error instanceof WireDecodeError, String(error));
          return;
        }
        assert.deepStrictEqual(decodeEventText(encodeEventText(decoded)), decoded);
      }),
      { numRuns: 500 },
    );
  });

  it('property: any text is an event, a JsonParseError or a WireDecodeError', () => {
    const arbText = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 60 }),
      arbSessionEvent().chain((e) => {
        const text = encodeEventText(e);
        return fc.tuple(fc.nat(text.length), fc.nat(text.length), fc.string({ maxLength: 3 })).map(([a, b, s]) => text.slice(0, a) + s + text.slice(b));
      }),
    );
    fc.assert(
      fc.property(arbText, (text) => {
        try {
          decodeEventText(text);
        } catch (error) {
          assert.ok(error instanceof JsonParseError || error instanceof WireDecodeError, String(error));
        }
      }),
      { numRuns: 500 },
    );
  });

  it('rejects lone surrogates in text as JsonParseError and in objects as WireDecodeError', () => {
    const text = JSON.stringify(fullWire()).replace('"turn_1"', '"turn_\\ud800"');
    assert.throws(() => decodeEventText(text), (e: unknown) => e instanceof JsonParseError && e.reason === 'lone_surrogate');
    rejectsAtObjectOnly(withField(fullWire(), 'turn_id', 'turn_\ud800'), 'turn_id');
    rejectsAtObjectOnly(withField(fullWire(), 'kind.call.name', '\udc00'), 'kind.call.name');
    rejectsAtObjectOnly({ event_id: 'e', session_id: 's', turn_id: 't', seq: 0, kind: { type: 'x\ud800' } }, 'kind.type');
    rejectsAtObjectOnly({ event_id: 'e', session_id: 's', turn_id: 't', seq: 0, kind: { type: 'x', '\ud800': 1 } }, 'kind');
  });
});

function rejectsAtObjectOnly(wire: unknown, path: string): void {
  assert.throws(() => decodeEvent(wire), (e: unknown) => e instanceof WireDecodeError && e.path === path);
}

/** Replaces (or deletes, with undefined) the `pick`-th node of a wire object, pre-order, root excluded. */
function mutateNode(wire: JsonObject, pick: number, replacement: JsonValue | undefined): JsonObject {
  const copy = structuredClone(wire);
  const slots: [Record<string, unknown> | unknown[], string | number][] = [];
  const walk = (v: unknown): void => {
    if (v === null || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      v.forEach((c, i) => {
        slots.push([v, i]);
        walk(c);
      });
    } else {
      for (const [k, c] of Object.entries(v)) {
        slots.push([v as Record<string, unknown>, k]);
        walk(c);
      }
    }
  };
  walk(copy);
  const [parent, key] = slots[pick % slots.length]!;
  if (replacement === undefined && !Array.isArray(parent)) delete (parent as Record<string, unknown>)[key as string];
  else (parent as Record<string | number, unknown>)[key] = replacement ?? null;
  return copy;
}

describe('codec: decodeToolCall stands alone', () => {
  it('reports paths relative to the call', () => {
    assert.throws(() => decodeToolCall({ id: 'c', name: 'n', arguments: 1, operation: { task_id: 't' } }), (e: unknown) => e instanceof WireDecodeError && e.path === 'operation.key');
    assert.throws(() => decodeToolCall('call'), (e: unknown) => e instanceof WireDecodeError && e.path === '$');
  });
});
