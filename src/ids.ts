import { randomFillSync } from 'node:crypto';
import { InvalidInputError } from './errors.js';
import { LIMITS } from './limits.js';
import { utf8Length } from './text.js';

declare const brand: unique symbol;
type Brand<T, B extends string> = T & { readonly [brand]: B };

export type SessionId = Brand<string, 'SessionId'>;
export type TaskId = Brand<string, 'TaskId'>;
export type TurnId = Brand<string, 'TurnId'>;
export type EventId = Brand<string, 'EventId'>;
export type CallId = Brand<string, 'CallId'>;
export type OperationKey = Brand<string, 'OperationKey'>;

/**
 * Random bytes for ids, filled from the system's CSPRNG a batch at a time: one fill serves 256 ids instead of one
 * call into the random source per id (a durable tool call mints five). Each byte is handed out once.
 */
const RANDOM_BYTES = 10; // 2 seed a millisecond's counter, 8 fill the variant's 62 random bits
const randomPool = new Uint8Array(256 * RANDOM_BYTES);
let randomNext = randomPool.length;

/** The last id's milliseconds and its 12-bit counter (rand_a): ids minted by one process sort in minting order. */
let lastMs = -1;
let counter = 0;

/** The two lowercase hex digits of each byte value, as ASCII codes: an id's text is written from these. */
const HEX_CODES = new Uint8Array(512);
for (let b = 0; b < 256; b++) {
  const hex = b.toString(16).padStart(2, '0');
  HEX_CODES[2 * b] = hex.charCodeAt(0);
  HEX_CODES[2 * b + 1] = hex.charCodeAt(1);
}
/** Where an id's text is written before it is read out as one flat string: 32 hex digits and four dashes. */
const ID_TEXT = Buffer.alloc(36, 0x2d);

function putHex(at: number, byte: number): void {
  ID_TEXT[at] = HEX_CODES[2 * byte]!;
  ID_TEXT[at + 1] = HEX_CODES[2 * byte + 1]!;
}

/**
 * A UUIDv7 string: 48-bit Unix milliseconds, version 7, a 12-bit counter, variant 10, 62 random bits. Within one
 * process ids increase strictly (RFC 9562 §6.2, method 1): an id minted in the same millisecond as the one before
 * (or after the clock went back) keeps that millisecond and counts up, starting from a random value below 2048 at
 * each new millisecond, so whatever lists by id (the decision inbox) lists in the order things were created.
 */
export function uuidv7(now: number = Date.now()): string {
  if (randomNext === randomPool.length) {
    randomFillSync(randomPool);
    randomNext = 0;
  }
  const r = randomNext;
  randomNext += RANDOM_BYTES;
  const pool = randomPool;
  if (now > lastMs) {
    lastMs = now;
    counter = ((pool[r]! << 8) | pool[r + 1]!) & 0x7ff;
  } else if (counter === 0xfff) {
    lastMs += 1; // 4,096 ids in one millisecond: borrow the next one
    counter = 0;
  } else {
    counter += 1;
  }
  // The 48-bit milliseconds as two 24-bit halves: bit operators work on 32 bits.
  const high = Math.floor(lastMs / 0x1000000);
  const low = lastMs - high * 0x1000000;
  putHex(0, high >>> 16);
  putHex(2, (high >>> 8) & 0xff);
  putHex(4, high & 0xff);
  putHex(6, low >>> 16);
  putHex(9, (low >>> 8) & 0xff);
  putHex(11, low & 0xff);
  putHex(14, 0x70 | (counter >> 8));
  putHex(16, counter & 0xff);
  putHex(19, 0x80 | (pool[r + 2]! & 0x3f));
  putHex(21, pool[r + 3]!);
  for (let i = 0; i < 6; i++) putHex(24 + 2 * i, pool[r + 4 + i]!);
  return ID_TEXT.toString('latin1', 0, 36);
}

export const newSessionId = (): SessionId => `sess_${uuidv7()}` as SessionId;
export const newTaskId = (): TaskId => `task_${uuidv7()}` as TaskId;
export const newTurnId = (): TurnId => `turn_${uuidv7()}` as TurnId;
export const newEventId = (): EventId => `evt_${uuidv7()}` as EventId;
export const newCallId = (): CallId => `toolcall_${uuidv7()}` as CallId;
export const newOperationKey = (): OperationKey => `operation_${uuidv7()}` as OperationKey;

/**
 * Rust's `str::trim` strips Unicode White_Space; JavaScript's `trim` also strips U+FEFF and does not strip U+0085.
 * The journal's rules follow the original, so use this, not String.prototype.trim, to judge text.
 */
const RUST_WHITE_SPACE = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+|[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/g;
export function rustTrim(s: string): string {
  return s.replace(RUST_WHITE_SPACE, '');
}

/** One code unit outside Rust's White_Space: exactly when `rustTrim(s)` is non-empty, without building the trimmed copy. */
const NOT_RUST_WHITE_SPACE = /[^\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;
const SURROGATE = /[\ud800-\udfff]/;

/** Printable ASCII with a character other than a space: no surrogate, no U+0000, one UTF-8 byte a character. */
const PRINTABLE_ASCII_TEXT = /^ *[!-~][ -~]*$/;

/**
 * The usual id or text, decided in one test: printable ASCII, not all spaces (the only Rust white space in that
 * range), at most LIMITS.maxTextBytes characters. Such a text is valid by the text rule and holds no U+0000; any
 * other text is decided by the full rule (checked against it in test/event/text-rule.test.ts).
 */
export function isPlainAsciiText(s: string): boolean {
  return s.length <= LIMITS.maxTextBytes && PRINTABLE_ASCII_TEXT.test(s);
}

/** The journal's text rule: non-empty after trimming and at most 1024 UTF-8 bytes (docs/design.md#limits). */
export function isValidText(s: unknown): s is string {
  if (typeof s !== 'string') return false;
  if (isPlainAsciiText(s)) return true;
  return NOT_RUST_WHITE_SPACE.test(s) && utf8Length(s) <= LIMITS.maxTextBytes && !hasLoneSurrogate(s);
}

export function hasLoneSurrogate(s: string): boolean {
  // Fast path for the usual text: no surrogate code unit at all, so none is lone.
  if (!SURROGATE.test(s)) return false;
  return /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s);
}

/** Checks a host-supplied id (session, task, turn, ...) and returns it branded. Throws InvalidInputError. */
export function checkId<T extends string>(field: string, value: unknown): T {
  if (typeof value !== 'string') throw new InvalidInputError(field, `must be a string, got ${typeof value}`);
  // The usual id passes every check below in one test (no surrogate, no U+0000, not blank, one byte a character).
  if (isPlainAsciiText(value)) return value as T;
  if (hasLoneSurrogate(value)) throw new InvalidInputError(field, 'contains a lone surrogate');
  // PostgreSQL text cannot hold U+0000; refusing it everywhere keeps every store accepting the same ids.
  if (value.includes('\u0000')) throw new InvalidInputError(field, 'contains U+0000');
  if (rustTrim(value).length === 0) throw new InvalidInputError(field, 'must not be empty or blank');
  const bytes = utf8Length(value);
  if (bytes > LIMITS.maxTextBytes) {
    throw new InvalidInputError(field, `is ${bytes} UTF-8 bytes, at most ${LIMITS.maxTextBytes} allowed`);
  }
  return value as T;
}
