import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decodeEvent } from '../../src/event/codec.js';
import { InvalidInputError, WireDecodeError } from '../../src/errors.js';
import { checkId, hasLoneSurrogate, isPlainAsciiText, isValidText, rustTrim } from '../../src/ids.js';
import { LIMITS } from '../../src/limits.js';

/** The text rule as isValidText stated it before its one-test path for plain ASCII. */
function textRule(s: unknown): boolean {
  return typeof s === 'string' && /[^\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/.test(s)
    && Buffer.byteLength(s, 'utf8') <= LIMITS.maxTextBytes && !hasLoneSurrogate(s);
}

/** Texts near every edge of the rule: blank or not, ASCII or not, around the byte limit, with U+0000 and lone surrogates. */
const arbText = fc.oneof(
  fc.string({ unit: fc.constantFrom(' ', '\t', 'a', '~', '!', '\u0000', '\u007f', '\u00a0', 'é', '\ud800', '\udc00', '😀', '\u3000'), maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.tuple(fc.integer({ min: LIMITS.maxTextBytes - 3, max: LIMITS.maxTextBytes + 2 }), fc.constantFrom('a', ' ', 'é', '\u0000'), fc.nat(3))
    .map(([n, ch, at]) => {
      const s = 'x'.repeat(n);
      return s.slice(0, at) + ch + s.slice(at + 1);
    }),
  fc.nat(LIMITS.maxTextBytes + 2).map((n) => ' '.repeat(n)),
);

/** checkId as it was before its one-test path for plain ASCII: the message of its refusal, or null. */
function idRefusal(value: unknown): string | null {
  if (typeof value !== 'string') return `must be a string, got ${typeof value}`;
  if (hasLoneSurrogate(value)) return 'contains a lone surrogate';
  if (value.includes('\u0000')) return 'contains U+0000';
  if (rustTrim(value).length === 0) return 'must not be empty or blank';
  const bytes = Buffer.byteLength(value, 'utf8');
  return bytes > LIMITS.maxTextBytes ? `is ${bytes} UTF-8 bytes, at most ${LIMITS.maxTextBytes} allowed` : null;
}

describe('the text rule', () => {
  it('checkId accepts and refuses as its full rule does, with the same message', () => {
    fc.assert(fc.property(fc.oneof(arbText, fc.constantFrom<unknown>(undefined, null, 1, {}, [])), (value) => {
      const expected = idRefusal(value);
      try {
        assert.equal(checkId('field', value), value);
        assert.equal(expected, null, JSON.stringify(value));
      } catch (error) {
        if (!(error instanceof InvalidInputError)) throw error;
        assert.equal(error.message, new InvalidInputError('field', expected ?? 'accepted').message, JSON.stringify(value));
      }
    }), { numRuns: 20_000 });
  });

  it('isValidText decides as the full rule does', () => {
    fc.assert(fc.property(arbText, (s) => assert.equal(isValidText(s), textRule(s), JSON.stringify(s))), { numRuns: 20_000 });
    for (const v of [undefined, null, 1, {}, []]) assert.equal(isValidText(v), false);
  });

  it('a plain ASCII text is valid and holds no U+0000, so an id needs no other check', () => {
    fc.assert(fc.property(arbText, (s) => {
      if (isPlainAsciiText(s)) assert.ok(textRule(s) && !s.includes('\u0000'), JSON.stringify(s));
    }), { numRuns: 20_000 });
  });

  it('the decoder accepts an id exactly when it is valid text without U+0000, and names the field otherwise', () => {
    const wire = (id: string) => ({ event_id: id, session_id: 's', turn_id: 't', seq: 0, kind: { type: 'user_message', text: 'x' } });
    fc.assert(fc.property(arbText, (id) => {
      const valid = textRule(id) && !id.includes('\u0000');
      try {
        assert.equal(decodeEvent(wire(id)).eventId, id);
        assert.ok(valid, JSON.stringify(id));
      } catch (error) {
        if (!(error instanceof WireDecodeError)) throw error;
        assert.ok(!valid, JSON.stringify(id));
        assert.equal(error.path, 'event_id');
      }
    }), { numRuns: 10_000 });
  });
});
