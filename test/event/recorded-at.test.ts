import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { isRecordedAt, recordedAtText } from '../../src/event/codec.js';

/** The definition isRecordedAt had before it checked the fields itself: parse the text, write it back, compare. */
function roundTrips(text: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(text)) return false;
  const ms = Date.parse(text);
  return Number.isFinite(ms) && new Date(ms).toISOString() === text;
}

const pad = (n: number, width: number): string => String(n).padStart(width, '0');

/** Texts of the recorded-time shape whose fields straddle their ranges: month 0..13, day 0..32, hour 0..25, ... */
const arbShaped = fc
  .record({
    year: fc.oneof(fc.integer({ min: 0, max: 9999 }), fc.constantFrom(0, 1, 4, 100, 200, 400, 1600, 1900, 1970, 2000, 2100, 2400, 9999)),
    month: fc.integer({ min: 0, max: 19 }),
    day: fc.oneof(fc.integer({ min: 0, max: 32 }), fc.constantFrom(28, 29, 30, 31)),
    hour: fc.integer({ min: 0, max: 25 }),
    minute: fc.integer({ min: 0, max: 61 }),
    second: fc.integer({ min: 0, max: 61 }),
    ms: fc.integer({ min: 0, max: 999 }),
  })
  .map((t) => `${pad(t.year, 4)}-${pad(t.month, 2)}-${pad(t.day, 2)}T${pad(t.hour, 2)}:${pad(t.minute, 2)}:${pad(t.second, 2)}.${pad(t.ms, 3)}Z`);

/** One character of a canonical time changed, dropped or doubled. */
const arbMangled = fc
  .tuple(fc.integer({ min: 0, max: 253_402_300_799_999 }), fc.nat(), fc.constantFrom('replace', 'drop', 'insert'), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }))
  .map(([ms, at, how, ch]) => {
    const text = recordedAtText(ms);
    const i = at % text.length;
    if (how === 'drop') return text.slice(0, i) + text.slice(i + 1);
    if (how === 'insert') return text.slice(0, i) + ch + text.slice(i);
    return text.slice(0, i) + ch + text.slice(i + 1);
  });

describe('isRecordedAt', () => {
  it('accepts exactly the texts that parse and write back unchanged', () => {
    fc.assert(
      fc.property(fc.oneof(arbShaped, arbMangled, fc.string(), fc.string({ unit: 'binary', maxLength: 30 })), (text) => {
        assert.equal(isRecordedAt(text), roundTrips(text), text);
      }),
      { numRuns: 20_000 },
    );
  });

  it('accepts every canonical time from 0000 to 9999', () => {
    fc.assert(
      fc.property(fc.integer({ min: -62_167_219_200_000, max: 253_402_300_799_999 }), (ms) => {
        assert.equal(isRecordedAt(recordedAtText(ms)), true);
      }),
      { numRuns: 5_000 },
    );
  });

  it('decides leap days and range ends as the calendar does', () => {
    for (const text of [
      '2000-02-29T00:00:00.000Z', '1900-02-29T00:00:00.000Z', '2024-02-29T23:59:59.999Z', '2023-02-29T00:00:00.000Z',
      '0000-02-29T00:00:00.000Z', '0100-02-29T00:00:00.000Z', '2026-04-31T00:00:00.000Z', '2026-12-31T24:00:00.000Z',
      '2026-12-31T23:60:00.000Z', '2026-12-31T23:59:60.000Z', '2026-00-10T00:00:00.000Z', '2026-13-10T00:00:00.000Z',
      '2026-01-00T00:00:00.000Z', '9999-12-31T23:59:59.999Z', '0000-01-01T00:00:00.000Z',
    ]) {
      assert.equal(isRecordedAt(text), roundTrips(text), text);
    }
  });
});

/** The definitions without the remembered last answer. */
const reference = {
  isRecordedAt: roundTrips,
  recordedAtText: (ms: number): string => new Date(ms).toISOString(),
};

const outcome = (f: () => unknown): unknown => {
  try {
    return { value: f() };
  } catch (error) {
    return { error: (error as Error).constructor.name };
  }
};

const arbMs = fc.oneof(
  fc.integer({ min: -62167219200000, max: 253402300799999 }),
  fc.constantFrom(0, -0, 1.5, -1, Number.NaN, Number.POSITIVE_INFINITY, 8.64e15, 8.64e15 + 1, 253402300800000),
);
const arbText = fc.oneof(
  arbMs.filter((ms) => Number.isFinite(ms) && Math.abs(ms) <= 8.64e15).map((ms) => new Date(ms).toISOString()),
  fc.constantFrom('', '2026-12-01T10:00:00.000Z', '2026-02-30T10:00:00.000Z', '2026-12-01T10:00:00Z', '+010000-01-01T00:00:00.000Z', '2026-12-01T24:00:00.000Z'),
  fc.string({ maxLength: 26 }),
);

describe('recorded times: remembering the last answer changes none', () => {
  it('property: isRecordedAt and recordedAtText agree with their definitions over any sequence of calls', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(arbText.map((t) => ({ t })), arbMs.map((ms) => ({ ms }))), { maxLength: 20 }), (calls) => {
        for (const c of calls) {
          if ('t' in c) assert.equal(isRecordedAt(c.t), reference.isRecordedAt(c.t), JSON.stringify(c.t));
          else assert.deepStrictEqual(outcome(() => recordedAtText(c.ms)), outcome(() => reference.recordedAtText(c.ms)), String(c.ms));
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('an empty text is never a recorded time, also right after a valid one', () => {
    assert.equal(isRecordedAt('2026-12-01T10:00:00.000Z'), true);
    assert.equal(isRecordedAt(''), false);
    assert.equal(isRecordedAt('2026-12-01T10:00:00.000Z'), true);
    assert.equal(isRecordedAt('2026-12-01T10:00:00.000Z '), false);
  });
});
