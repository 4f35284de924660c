/**
 * RFC 8785 (JSON Canonicalization Scheme) for argument digests and canonical equality.
 *
 * Only JSON data is accepted: null, booleans, finite numbers, strings without lone surrogates, arrays without holes,
 * and plain objects (prototype `Object.prototype` or `null`). Anything else is a CanonicalJsonError rather than being
 * silently coerced the way JSON.stringify coerces it (dropping `undefined`, calling `toJSON`, turning NaN into null),
 * because two different values must never share a digest.
 */
import { CanonicalJsonError } from '../errors.js';
import { hasLoneSurrogate } from '../ids.js';
import { LIMITS } from '../limits.js';
import { sha256Hex } from '../sha256.js';
import { utf8Length } from '../text.js';

/** A string needs JSON.stringify (escaping) or the lone-surrogate check only if it contains one of these. */
const NEEDS_CARE = /["\\\u0000-\u001f\ud800-\udfff]/;
const SURROGATE = /[\ud800-\udfff]/;

/** Sorts keys by UTF-16 code units (RFC 8785 §3.2.3) in place; insertion sort for the usual handful of keys. */
function sortKeys(keys: string[]): void {
  const n = keys.length;
  if (n > 16) {
    keys.sort();
    return;
  }
  for (let i = 1; i < n; i++) {
    const key = keys[i]!;
    let j = i - 1;
    while (j >= 0 && keys[j]! > key) {
      keys[j + 1] = keys[j]!;
      j--;
    }
    keys[j + 1] = key;
  }
}

function isPlainObject(v: object): boolean {
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** One pooled output buffer, so a canonicalization allocates no intermediate strings. Retained up to this size. */
const POOL_RETAIN_BYTES = 4 * 1024 * 1024;
let pool: Buffer | null = Buffer.allocUnsafe(64 * 1024);

/**
 * Writes UTF-8 canonical JSON straight into a growing buffer: building it from string pieces is dominated by garbage
 * collection, which makes it several times slower.
 */
class Writer {
  buf: Buffer;
  len = 0;
  /** The containers enclosing the value being written, to tell a cycle from mere depth. */
  private readonly ancestors: object[] = [];

  constructor() {
    // A getter could canonicalize reentrantly; only one writer holds the pooled buffer at a time.
    this.buf = pool ?? Buffer.allocUnsafe(64 * 1024);
    pool = null;
  }

  release(): void {
    if (this.buf.length <= POOL_RETAIN_BYTES) pool = this.buf;
  }

  private reserve(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
  }

  private byte(c: number): void {
    if (this.len >= this.buf.length) this.reserve(1);
    this.buf[this.len++] = c;
  }

  private ascii(s: string): void {
    this.reserve(s.length);
    const buf = this.buf;
    for (let i = 0; i < s.length; i++) buf[this.len++] = s.charCodeAt(i);
  }

  private string(s: string, what: string): void {
    if (NEEDS_CARE.test(s)) {
      if (SURROGATE.test(s) && hasLoneSurrogate(s)) throw new CanonicalJsonError(`${what} contains a lone surrogate`);
      // ECMAScript's JSON.stringify escaping is exactly RFC 8785 §3.2.2.2 for well-formed strings.
      const quoted = JSON.stringify(s);
      this.reserve(quoted.length * 3);
      this.len += this.buf.write(quoted, this.len, 'utf8');
      return;
    }
    this.reserve(s.length * 3 + 2);
    this.buf[this.len++] = 0x22;
    this.len += this.buf.write(s, this.len, 'utf8');
    this.buf[this.len++] = 0x22;
  }

  /** `depth` counts the containers enclosing `v`. */
  value(v: unknown, depth: number): void {
    switch (typeof v) {
      case 'string':
        this.string(v, 'a string');
        return;
      case 'number':
        if (!Number.isFinite(v)) throw new CanonicalJsonError(`the number ${String(v)} has no JSON form`);
        // ECMAScript Number::toString is RFC 8785's number format; String(-0) is already "0".
        this.ascii(String(v));
        return;
      case 'boolean':
        this.ascii(v ? 'true' : 'false');
        return;
      case 'object':
        if (v === null) this.ascii('null');
        else this.container(v, depth);
        return;
      default:
        // undefined (also an array hole or an undefined-valued property), function, symbol, bigint.
        throw new CanonicalJsonError(`a value of type ${typeof v} is not JSON data`);
    }
  }

  private container(v: object, depth: number): void {
    if (depth >= LIMITS.maxJsonDepth) {
      if (this.ancestors.includes(v)) throw new CanonicalJsonError('the value contains a cycle');
      throw new CanonicalJsonError(`the value is nested deeper than ${LIMITS.maxJsonDepth} levels`);
    }
    this.ancestors.push(v);
    if (Array.isArray(v)) {
      this.byte(0x5b);
      for (let i = 0; i < v.length; i++) {
        if (i > 0) this.byte(0x2c);
        this.value(v[i], depth + 1);
      }
      this.byte(0x5d);
    } else {
      if (!isPlainObject(v)) {
        throw new CanonicalJsonError('an object whose prototype is not Object.prototype or null is not JSON data');
      }
      const record = v as Record<string, unknown>;
      const keys = Object.keys(record);
      sortKeys(keys);
      this.byte(0x7b);
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]!;
        if (i > 0) this.byte(0x2c);
        this.string(key, 'an object key');
        this.byte(0x3a);
        this.value(record[key], depth + 1);
      }
      this.byte(0x7d);
    }
    this.ancestors.pop();
  }
}

function canonicalBytes<T>(value: unknown, use: (bytes: Buffer) => T): T {
  const writer = new Writer();
  try {
    writer.value(value, 0);
    return use(writer.buf.subarray(0, writer.len));
  } finally {
    writer.release();
  }
}

/** The RFC 8785 canonical text of a JSON value. Throws CanonicalJsonError for anything that is not JSON data. */
export function canonicalJson(value: unknown): string {
  return canonicalBytes(value, (bytes) => bytes.toString('utf8'));
}

/** Throws the CanonicalJsonError canonicalJson would, without building the text. */
export function checkCanonicalJson(value: unknown): void {
  canonicalBytes(value, () => undefined);
}

/** SHA-256 (lowercase hex) of the UTF-8 canonical text. Equal for values that differ only in key order. */
export function jsonDigest(value: unknown): string {
  return canonicalBytes(value, sha256Hex);
}

/** Canonical equality: key order is ignored. False when either side is not canonicalizable JSON data. */
export function jsonEquals(a: unknown, b: unknown): boolean {
  let left: string;
  let right: string;
  try {
    left = canonicalJson(a);
    right = canonicalJson(b);
  } catch (error) {
    if (error instanceof CanonicalJsonError) return false;
    throw error;
  }
  return left === right;
}

/**
 * UTF-8 length of `text` inside a JSON string, as the journal stores a text (JSON.stringify without its quotes): a
 * quote or a backslash takes two bytes, a control character two or six. What a tool's output takes in the journal.
 */
export function jsonTextBytes(text: string): number {
  return NEEDS_CARE.test(text) ? utf8Length(JSON.stringify(text)) - 2 : utf8Length(text);
}

/**
 * UTF-8 length of JSON.stringify(value): the "compact JSON" size every byte limit counts. Throws CanonicalJsonError
 * when JSON.stringify produces nothing (undefined, a function, a symbol) or fails (a cycle, a bigint, too deep).
 */
export function compactJsonBytes(value: unknown): number {
  let text: string | undefined;
  try {
    text = JSON.stringify(value) as string | undefined;
  } catch (error) {
    throw new CanonicalJsonError(`the value cannot be serialized: ${(error as Error).message}`);
  }
  if (text === undefined) throw new CanonicalJsonError(`a value of type ${typeof value} has no JSON form`);
  return utf8Length(text);
}
