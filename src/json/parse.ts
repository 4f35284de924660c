/**
 * Bounded JSON parsing for untrusted text (journal lines, imported files, CLI input).
 *
 * One linear, iterative pass validates the whole RFC 8259 grammar and the bounds (size, depth, duplicate keys, lone
 * surrogates, numbers that overflow to Infinity, integer literals beyond ±(2^53 − 1), which a JavaScript number
 * cannot hold exactly), reporting the first problem with a reason code and a UTF-16 offset (and, for an unsafe
 * integer, its JSON path); only then does JSON.parse build the value. JSON.parse defines every key, `__proto__` included, as an own
 * data property, so no key can reach a prototype. No recursion: input nested 100,000 deep fails with `too_deep`.
 */
import { JsonParseError, type JsonParseReason } from '../errors.js';
import { LIMITS } from '../limits.js';
import { utf8Length } from '../text.js';
import type { JsonValue } from './types.js';

export interface ParseJsonOptions {
  /** Largest accepted input in UTF-8 bytes. Default LIMITS.maxJsonBytes. */
  readonly maxBytes?: number;
  /** Deepest accepted nesting of arrays and objects (`[]` is depth 1). Default LIMITS.maxJsonDepth. */
  readonly maxDepth?: number;
}

/** Parses untrusted JSON text within bounds. Throws JsonParseError; never a stack overflow. */
export function parseJson(text: string, options: ParseJsonOptions = {}): JsonValue {
  if (typeof text !== 'string') throw new JsonParseError('syntax', 0, `expected a string, got ${typeof text}`);
  const maxBytes = options.maxBytes ?? LIMITS.maxJsonBytes;
  const maxDepth = options.maxDepth ?? LIMITS.maxJsonDepth;
  // A UTF-16 code unit takes 1 to 3 UTF-8 bytes, so the exact count is needed only in between.
  if (text.length > maxBytes || (text.length * 3 > maxBytes && utf8Length(text) > maxBytes)) {
    throw new JsonParseError('too_large', 0, `input is larger than ${maxBytes} UTF-8 bytes`);
  }
  new Scanner(text, maxDepth).run();
  return JSON.parse(text) as JsonValue;
}

/** A possible integer literal of 16 or more digits (as many as 2^53 − 1 has): the only ones that can be unsafe. */
const LONG_INTEGER = /(?:^|[:,[])-?\d{16}/;

/**
 * parseJson, for text JSON.stringify has just written in this process (a journal line, a call's arguments): the same
 * value and exactly the same refusals, cheaper. Such text is always valid JSON without duplicate keys, unescaped lone
 * surrogates or numbers beyond the finite range, so only the bounds can refuse it: its size, its depth, an escaped
 * lone surrogate and an unsafe integer literal. When a quick look cannot rule all four out, the full scan decides,
 * so every refusal is parseJson's own.
 */
export function parseStringifiedJson(text: string, options: ParseJsonOptions = {}): JsonValue {
  const maxBytes = options.maxBytes ?? LIMITS.maxJsonBytes;
  const maxDepth = options.maxDepth ?? LIMITS.maxJsonDepth;
  if (text.length * 3 <= maxBytes && !text.includes('\\u') && !LONG_INTEGER.test(text) && openersAtMost(text, maxDepth)) {
    return JSON.parse(text) as JsonValue;
  }
  return parseJson(text, options);
}

/** Whether the text holds at most `max` of `{` and `[` (in strings too): then nothing in it nests deeper. */
function openersAtMost(text: string, max: number): boolean {
  // Nesting deeper than `max` needs more than `max` openers and as many closers.
  if (text.length <= 2 * max + 1) return true;
  let count = 0;
  for (let i = text.indexOf('{'); i !== -1; i = text.indexOf('{', i + 1)) if (++count > max) return false;
  for (let i = text.indexOf('['); i !== -1; i = text.indexOf('[', i + 1)) if (++count > max) return false;
  return true;
}

// biome-ignore lint/suspicious/noConstEnum: module-private and compiled by tsc, which inlines it in the hot scanning loop
const enum Expect {
  /** A value (top level, after `:` or after `,` in an array). */
  Value,
  /** A value or `]` (just after `[`). */
  ValueOrClose,
  /** A key or `}` (just after `{`). */
  KeyOrClose,
  /** A key (after `,` in an object). */
  Key,
  /** `,` or the closing bracket, or the end of input at top level. */
  Next,
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66);
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/** An open container: the keys seen so far and the current key of an object, or the current index of an array. */
interface Open {
  readonly keys: Set<string> | null;
  key: string;
  index: number;
}

/** `$`, `.name` for identifier-like keys, `["any key"]` otherwise, `[3]` for array elements. */
function pathOf(open: readonly Open[]): string {
  let path = '$';
  for (const o of open) {
    if (o.keys === null) path += `[${o.index}]`;
    else path += /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(o.key) ? `.${o.key}` : `[${JSON.stringify(o.key)}]`;
  }
  return path;
}

/** Digits of Number.MAX_SAFE_INTEGER (2^53 − 1). */
const MAX_SAFE_DIGITS = String(Number.MAX_SAFE_INTEGER);

class Scanner {
  private i = 0;
  /** One entry per open container. */
  private readonly open: Open[] = [];
  /** Set by `string()`: whether the last string held an escape (then its key must be decoded). */
  private escaped = false;

  constructor(
    private readonly s: string,
    private readonly maxDepth: number,
  ) {}

  private fail(reason: JsonParseReason, at: number, message: string): never {
    throw new JsonParseError(reason, at, message);
  }

  private skipWhitespace(): void {
    const s = this.s;
    let i = this.i;
    for (;;) {
      const c = s.charCodeAt(i);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else break;
    }
    this.i = i;
  }

  run(): void {
    const s = this.s;
    const n = s.length;
    const open = this.open;
    let expect = Expect.Value;
    for (;;) {
      this.skipWhitespace();
      const at = this.i;
      if (at >= n) {
        if (expect === Expect.Next && open.length === 0) return;
        this.fail('unexpected_end', at, 'unexpected end of input');
      }
      const c = s.charCodeAt(at);
      switch (expect) {
        // biome-ignore lint/suspicious/noFallthroughSwitchClause: no close bracket here, so a value follows
        case Expect.ValueOrClose:
          if (c === 0x5d /* ] */) {
            open.pop();
            this.i++;
            expect = Expect.Next;
            break;
          }
        // falls through
        case Expect.Value:
          if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
            if (open.length >= this.maxDepth) this.fail('too_deep', at, `nesting deeper than ${this.maxDepth}`);
            open.push({ keys: c === 0x7b ? new Set<string>() : null, key: '', index: 0 });
            this.i++;
            expect = c === 0x7b ? Expect.KeyOrClose : Expect.ValueOrClose;
          } else {
            this.scalar(c);
            expect = Expect.Next;
          }
          break;
        // biome-ignore lint/suspicious/noFallthroughSwitchClause: no close brace here, so a key follows
        case Expect.KeyOrClose:
          if (c === 0x7d /* } */) {
            open.pop();
            this.i++;
            expect = Expect.Next;
            break;
          }
        // falls through
        case Expect.Key: {
          if (c !== QUOTE) this.fail('syntax', at, 'expected a string key');
          this.string();
          const raw = s.slice(at, this.i);
          const key = this.escaped ? (JSON.parse(raw) as string) : raw.slice(1, -1);
          const top = open[open.length - 1]!;
          const keys = top.keys!;
          if (keys.has(key)) this.fail('duplicate_key', at, `duplicate key ${raw}`);
          keys.add(key);
          top.key = key;
          this.skipWhitespace();
          if (this.i >= n) this.fail('unexpected_end', this.i, 'unexpected end of input');
          if (s.charCodeAt(this.i) !== 0x3a /* : */) this.fail('syntax', this.i, "expected ':' after a key");
          this.i++;
          expect = Expect.Value;
          break;
        }
        case Expect.Next: {
          if (open.length === 0) this.fail('trailing_data', at, 'unexpected data after the JSON value');
          const top = open[open.length - 1]!;
          const inObject = top.keys !== null;
          if (c === 0x2c /* , */) {
            this.i++;
            top.index++;
            expect = inObject ? Expect.Key : Expect.Value;
          } else if (c === (inObject ? 0x7d : 0x5d)) {
            open.pop();
            this.i++;
          } else {
            this.fail('syntax', at, inObject ? "expected ',' or '}'" : "expected ',' or ']'");
          }
          break;
        }
      }
    }
  }

  private scalar(c: number): void {
    if (c === QUOTE) this.string();
    else if (c === 0x2d /* - */ || isDigit(c)) this.number();
    else if (c === 0x74 /* t */) this.literal('true');
    else if (c === 0x66 /* f */) this.literal('false');
    else if (c === 0x6e /* n */) this.literal('null');
    else this.fail('syntax', this.i, `unexpected character ${JSON.stringify(this.s[this.i])}`);
  }

  private literal(word: string): void {
    const s = this.s;
    const at = this.i;
    if (s.startsWith(word, at)) {
      this.i = at + word.length;
      return;
    }
    const rest = s.slice(at, at + word.length);
    if (at + rest.length === s.length && word.startsWith(rest)) this.fail('unexpected_end', s.length, 'unexpected end of input');
    this.fail('syntax', at, `invalid literal, expected ${word}`);
  }

  private digits(): void {
    const s = this.s;
    const start = this.i;
    while (isDigit(s.charCodeAt(this.i))) this.i++;
    if (this.i === start) {
      if (this.i >= s.length) this.fail('unexpected_end', this.i, 'unexpected end of input in a number');
      this.fail('syntax', this.i, 'expected a digit');
    }
  }

  private number(): void {
    const s = this.s;
    const start = this.i;
    let exponent = false;
    let fraction = false;
    if (s.charCodeAt(this.i) === 0x2d) this.i++;
    const intStart = this.i;
    if (s.charCodeAt(this.i) === 0x30) {
      this.i++;
      if (isDigit(s.charCodeAt(this.i))) this.fail('syntax', this.i, 'a number must not have a leading zero');
    } else {
      this.digits();
    }
    const intEnd = this.i;
    if (s.charCodeAt(this.i) === 0x2e /* . */) {
      fraction = true;
      this.i++;
      this.digits();
    }
    const e = s.charCodeAt(this.i);
    if (e === 0x65 || e === 0x45) {
      exponent = true;
      this.i++;
      const sign = s.charCodeAt(this.i);
      if (sign === 0x2b || sign === 0x2d) this.i++;
      this.digits();
    }
    // Like serde_json, refuse numbers that would become Infinity: they have no JSON form afterwards.
    if ((exponent || this.i - start > 308) && !Number.isFinite(Number(s.slice(start, this.i)))) {
      this.fail('syntax', start, 'number out of range');
    }
    // An integer literal must be held exactly: beyond 2^53 − 1 a JavaScript number would silently round it.
    const length = intEnd - intStart;
    if (!fraction && !exponent && length >= MAX_SAFE_DIGITS.length) {
      if (length > MAX_SAFE_DIGITS.length || s.slice(intStart, intEnd) > MAX_SAFE_DIGITS) {
        const path = pathOf(this.open);
        throw new JsonParseError(
          'unsafe_integer',
          start,
          `the integer ${s.slice(start, Math.min(this.i, start + 40))}${this.i - start > 40 ? '…' : ''} at ${path} is beyond ±(2^53 − 1) and cannot be held exactly; send it as a string`,
          path,
        );
      }
    }
  }

  /** Scans a string starting at its opening quote; leaves `i` after the closing quote. */
  private string(): void {
    const s = this.s;
    const n = s.length;
    let i = this.i + 1;
    let escaped = false;
    for (;;) {
      if (i >= n) this.fail('unexpected_end', i, 'unexpected end of input in a string');
      const c = s.charCodeAt(i);
      if (c === QUOTE) break;
      if (c === BACKSLASH) {
        escaped = true;
        i = this.escape(i);
      } else if (c < 0x20) {
        this.fail('syntax', i, 'unescaped control character in a string');
      } else if (c >= 0xd800 && c <= 0xdfff) {
        const next = s.charCodeAt(i + 1);
        if (c > 0xdbff || !(next >= 0xdc00 && next <= 0xdfff)) this.fail('lone_surrogate', i, 'lone surrogate in a string');
        i += 2;
      } else {
        i++;
      }
    }
    this.i = i + 1;
    this.escaped = escaped;
  }

  /** Reads `\uXXXX` at `i` (the backslash); returns the code unit. */
  private unicodeEscape(i: number): number {
    const s = this.s;
    for (let k = i + 2; k < i + 6; k++) {
      if (k >= s.length) this.fail('unexpected_end', k, 'unexpected end of input in an escape');
      if (!isHex(s.charCodeAt(k))) this.fail('syntax', k, 'invalid \\u escape');
    }
    return parseInt(s.slice(i + 2, i + 6), 16);
  }

  /** Validates the escape at `i` (the backslash); returns the index after it. */
  private escape(i: number): number {
    const s = this.s;
    if (i + 1 >= s.length) this.fail('unexpected_end', i + 1, 'unexpected end of input in an escape');
    switch (s.charCodeAt(i + 1)) {
      case QUOTE:
      case BACKSLASH:
      case 0x2f: // /
      case 0x62: // b
      case 0x66: // f
      case 0x6e: // n
      case 0x72: // r
      case 0x74: // t
        return i + 2;
      case 0x75: {
        const unit = this.unicodeEscape(i);
        if (unit >= 0xdc00 && unit <= 0xdfff) this.fail('lone_surrogate', i, 'escaped low surrogate without a high one');
        if (unit < 0xd800 || unit > 0xdbff) return i + 6;
        // A high surrogate must be followed at once by an escaped low surrogate.
        if (s.charCodeAt(i + 6) === BACKSLASH && s.charCodeAt(i + 7) === 0x75) {
          const low = this.unicodeEscape(i + 6);
          if (low >= 0xdc00 && low <= 0xdfff) return i + 12;
        } else if (i + 6 >= s.length || (i + 7 >= s.length && s.charCodeAt(i + 6) === BACKSLASH)) {
          this.fail('unexpected_end', s.length, 'unexpected end of input after a high surrogate');
        }
        return this.fail('lone_surrogate', i, 'escaped high surrogate without a low one');
      }
      default:
        return this.fail('syntax', i, 'invalid escape');
    }
  }
}
