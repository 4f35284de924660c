/**
 * Field access for the wire decoder (internal to src/event). A WireReader stands at one object of the wire record,
 * knows its path for error messages and its nesting depth, and turns every violation into a WireDecodeError.
 */
import { WireDecodeError } from '../errors.js';
import { hasLoneSurrogate, isPlainAsciiText, isValidText, rustTrim } from '../ids.js';
import { LIMITS } from '../limits.js';
import type { JsonObject, JsonValue } from '../json/types.js';
import { describeValue, utf8Length } from '../text.js';

export type Wire = Record<string, unknown>;

function isPlainObject(v: unknown): v is Wire {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** Sets an own data property, also for the key `__proto__` (plain assignment would change the prototype). */
export function defineOwn(target: JsonObject, key: string, value: JsonValue): void {
  if (key === '__proto__') {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

export class WireReader {
  /**
   * @param parent  the reader of the enclosing object (null for the root)
   * @param key     this object's key in it
   * @param depth   nesting depth of that object (the root object is 1)
   * @param trusted the record came from parseJson with the default depth bound: every value is already JSON data
   *                without lone surrogates, nested within LIMITS.maxJsonDepth
   */
  private constructor(
    private readonly parent: WireReader | null,
    private readonly key: string,
    readonly depth: number,
    readonly trusted: boolean,
  ) {}

  private static readonly roots = [new WireReader(null, '', 1, false), new WireReader(null, '', 1, true)] as const;

  /** The reader of a record's root object; readers hold no state of a record, so one serves them all. */
  static root(trusted: boolean): WireReader {
    return WireReader.roots[trusted ? 1 : 0];
  }

  /** Path of the object this reader stands at ('' for the root); built only for an error message. */
  get path(): string {
    return this.parent === null ? '' : this.parent.at(this.key);
  }

  at(key: string): string {
    const path = this.path;
    return path ? `${path}.${key}` : key;
  }

  child(key: string): WireReader {
    return new WireReader(this, key, this.depth + 1, this.trusted);
  }

  fail(key: string | null, message: string): never {
    throw new WireDecodeError(key === null ? this.path || '$' : this.at(key), message);
  }

  /** The value must be a plain object; with `allowed`, any other key is rejected. */
  object(v: unknown, allowed: readonly string[] | null): Wire {
    if (!isPlainObject(v)) return this.fail(null, `must be an object, got ${describeValue(v)}`);
    if (allowed) {
      for (const key of Object.keys(v)) {
        if (!allowed.includes(key)) this.fail(key, 'unknown field');
      }
    }
    return v;
  }

  /** An own property's value; undefined when absent. */
  get(o: Wire, key: string): unknown {
    return Object.hasOwn(o, key) ? o[key] : undefined;
  }

  required(o: Wire, key: string): unknown {
    if (!Object.hasOwn(o, key)) this.fail(key, 'missing field');
    return o[key];
  }

  string(o: Wire, key: string): string {
    const v = this.required(o, key);
    if (typeof v !== 'string') return this.fail(key, `must be a string, got ${describeValue(v)}`);
    if (!this.trusted && hasLoneSurrogate(v)) this.fail(key, 'contains a lone surrogate');
    return v;
  }

  /** The journal's text rule (isValidText): non-blank after trimming, at most LIMITS.maxTextBytes UTF-8 bytes. */
  text(o: Wire, key: string): string {
    const v = this.string(o, key);
    if (isValidText(v)) return v;
    if (rustTrim(v).length === 0) this.fail(key, 'must not be empty or blank');
    if (hasLoneSurrogate(v)) this.fail(key, 'contains a lone surrogate');
    return this.fail(key, `is ${utf8Length(v)} UTF-8 bytes, at most ${LIMITS.maxTextBytes} allowed`);
  }

  /**
   * An identifier (event, session, turn, call, task, operation key): the text rule, and never U+0000, which
   * PostgreSQL text cannot hold, so every store accepts the same ids (docs/design.md#event-ids-are-unique).
   */
  id(o: Wire, key: string): string {
    const plain = this.get(o, key);
    if (typeof plain === 'string' && isPlainAsciiText(plain)) return plain;
    const v = this.text(o, key);
    if (v.includes('\u0000')) this.fail(key, 'contains U+0000');
    return v;
  }

  /** An optional identifier (generation, message): absent or null, else a string without U+0000. */
  optionalId(o: Wire, key: string): string | undefined {
    const v = this.get(o, key);
    if (v === undefined || v === null) return undefined;
    const s = this.string(o, key);
    if (s.includes('\u0000')) this.fail(key, 'contains U+0000');
    return s;
  }

  /** A non-negative safe integer (`-0` reads as 0). */
  index(o: Wire, key: string): number {
    const v = this.required(o, key);
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
      return this.fail(key, `must be a non-negative integer, got ${typeof v === 'number' ? String(v) : describeValue(v)}`);
    }
    return v === 0 ? 0 : v;
  }

  /** Any JSON value, checked to be JSON data (unless trusted) nested within the depth bound of the whole record. */
  json(o: Wire, key: string): JsonValue {
    const v = this.required(o, key);
    if (!this.trusted) {
      if (hasLoneSurrogate(key)) this.fail(null, 'a key contains a lone surrogate');
      checkJson(v, [key], this.depth, this);
    }
    return v as JsonValue;
  }
}

/** Recursion is bounded by LIMITS.maxJsonDepth, so a deep or cyclic value fails instead of overflowing the stack. */
function checkJson(v: unknown, trail: (string | number)[], enclosing: number, reader: WireReader): void {
  switch (typeof v) {
    case 'string':
      if (hasLoneSurrogate(v)) failAt(reader, trail, 'contains a lone surrogate');
      return;
    case 'number':
      if (!Number.isFinite(v)) failAt(reader, trail, `the number ${String(v)} has no JSON form`);
      return;
    case 'boolean':
      return;
    case 'object': {
      if (v === null) return;
      if (enclosing + 1 > LIMITS.maxJsonDepth) failAt(reader, trail, `the record is nested deeper than ${LIMITS.maxJsonDepth} levels`);
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) {
          trail.push(i);
          checkJson(v[i], trail, enclosing + 1, reader);
          trail.pop();
        }
        return;
      }
      if (!isPlainObject(v)) failAt(reader, trail, 'is not JSON data (not a plain object)');
      const record = v as Wire;
      for (const key of Object.keys(record)) {
        trail.push(key);
        if (hasLoneSurrogate(key)) failAt(reader, trail, 'the key contains a lone surrogate');
        checkJson(record[key], trail, enclosing + 1, reader);
        trail.pop();
      }
      return;
    }
    default:
      failAt(reader, trail, `a ${typeof v} is not JSON data`);
  }
}

/** The error of a value inside a JSON field, at its path (array indexes as numbers). */
function failAt(reader: WireReader, trail: readonly (string | number)[], message: string): never {
  return reader.fail(trail.join('.'), message);
}
