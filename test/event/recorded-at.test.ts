import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { isRecordedAt, recordedAtText } from '../../src/event/codec.js';

/** The definitions without the remembered last answer. */
const reference = {
  isRecordedAt(text: string): boolean {
    if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(text)) return false;
    const ms = Date.parse(text);
    return Number.isFinite(ms) && new Date(ms).toISOString() === text;
  },
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
