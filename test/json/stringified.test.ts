import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { JsonParseError } from '../../src/errors.js';
import { decodeEncodedEventText, decodeEventText, encodeEventText } from '../../src/event/codec.js';
import type { SessionEvent } from '../../src/event/types.js';
import { parseJson, parseStringifiedJson } from '../../src/json/parse.js';
import type { JsonValue } from '../../src/json/types.js';
import { LIMITS } from '../../src/limits.js';
import { arbHostileJson, arbSessionEvent } from '../support/arbitraries.js';

/** What a parse gave: the value, or everything an error carries. */
function outcome(parse: () => unknown): unknown {
  try {
    return { value: parse() };
  } catch (error) {
    const e = error as JsonParseError & { path?: unknown };
    return { error: e.constructor.name, code: e.code, reason: e.reason, offset: e.offset, path: e.path, message: e.message };
  }
}

function sameAsParseJson(text: string): void {
  assert.deepStrictEqual(outcome(() => parseStringifiedJson(text)), outcome(() => parseJson(text)), text.slice(0, 200));
}

describe('parseStringifiedJson: exactly parseJson on what JSON.stringify writes', () => {
  it('property: the same value or the same error, on hostile values', () => {
    fc.assert(
      fc.property(arbHostileJson(), (value) => {
        const text = JSON.stringify(value) as string | undefined;
        if (text !== undefined) sameAsParseJson(text);
      }),
      { numRuns: 3000 },
    );
  });

  it('property: the same, for hostile values inside an event line', () => {
    fc.assert(
      fc.property(arbHostileJson(), fc.string({ unit: fc.constantFrom('a', '\ud800', '\udc00', '\\', 'u', '😀'), maxLength: 8 }), (value, key) => {
        sameAsParseJson(JSON.stringify({ event_id: 'e', seq: 9007199254740991, kind: { type: 'custom', payload: { [key]: value } } }));
      }),
      { numRuns: 2000 },
    );
  });

  it('property: the same under other bounds (a call\'s arguments are parsed with a smaller depth)', () => {
    fc.assert(
      fc.property(arbHostileJson(), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 400 }), (value, maxDepth, maxBytes) => {
        const text = JSON.stringify(value) as string | undefined;
        if (text === undefined) return;
        for (const options of [{ maxDepth }, { maxBytes }, { maxDepth, maxBytes }, { maxDepth: LIMITS.maxArgumentsDepth }]) {
          assert.deepStrictEqual(outcome(() => parseStringifiedJson(text, options)), outcome(() => parseJson(text, options)), `${JSON.stringify(options)} ${text.slice(0, 200)}`);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('refuses each bound as parseJson does, on both sides of it', () => {
    let deep: unknown = 1;
    for (let i = 0; i < LIMITS.maxJsonDepth; i++) deep = [deep];
    const cases: unknown[] = [
      deep,
      [deep],
      { a: deep },
      '\ud800',
      { '\udfff': 1 },
      'a\ud83d\ude00b',
      '\\ud800',
      2 ** 53 - 1,
      -(2 ** 53 - 1),
      2 ** 53,
      [1, -(2 ** 53)],
      { n: 1e20 },
      1e21,
      '12345678901234567890',
      { '12345678901234567890': 1 },
      '\u0000\u001f',
      'x'.repeat(2 * LIMITS.maxJsonDepth + 10),
      '['.repeat(LIMITS.maxJsonDepth + 1),
    ];
    for (const value of cases) sameAsParseJson(JSON.stringify(value));
    assert.throws(() => parseStringifiedJson(JSON.stringify([deep])), (e: unknown) => e instanceof JsonParseError && e.reason === 'too_deep');
    assert.throws(() => parseStringifiedJson(JSON.stringify('\ud800')), (e: unknown) => e instanceof JsonParseError && e.reason === 'lone_surrogate');
    assert.throws(() => parseStringifiedJson(JSON.stringify({ n: 2 ** 53 })), (e: unknown) => e instanceof JsonParseError && e.reason === 'unsafe_integer');
  });

  it('refuses a line beyond the size bound as parseJson does', () => {
    const big = JSON.stringify(['é'.repeat(LIMITS.maxJsonBytes / 2)]);
    sameAsParseJson(big);
    assert.throws(() => parseStringifiedJson(big), (e: unknown) => e instanceof JsonParseError && e.reason === 'too_large');
  });
});

describe('decodeEncodedEventText: exactly decodeEventText on an encoded event', () => {
  it('property: the same event or the same error, with hostile arguments and payloads', () => {
    const arbEvent = fc.tuple(arbSessionEvent(), arbHostileJson(), fc.nat(2)).map(([event, hostile, where]): SessionEvent => {
      const kind =
        where === 0
          ? { type: 'custom' as const, plugin: 'p', kind: 'k', payload: hostile as JsonValue }
          : where === 1
            ? { type: 'tool_call' as const, call: { id: 'call' as never, name: 'tool', arguments: hostile as JsonValue } }
            : event.kind;
      return { ...event, kind };
    });
    fc.assert(
      fc.property(arbEvent, (event) => {
        let text: string;
        try {
          text = encodeEventText(event);
        } catch {
          return; // not encodable at all: both paths fail before any decode
        }
        assert.deepStrictEqual(outcome(() => decodeEncodedEventText(text)), outcome(() => decodeEventText(text)));
      }),
      { numRuns: 2000 },
    );
  });
});
