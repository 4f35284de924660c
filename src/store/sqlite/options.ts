import { InvalidInputError } from '../../errors.js';
import { LIMITS } from '../../limits.js';
import { describeSetting } from '../../text.js';

/** The schema version this code writes and understands (`PRAGMA user_version`). A newer file is refused on open. */
export const SQLITE_SCHEMA_VERSION = 12;

export interface SqliteStoreOptions {
  /** How long a writer waits for another connection's lock before StoreBusyError. Default 5,000 ms. */
  busyTimeoutMs?: number;
  /** Run `PRAGMA quick_check` on open (cost grows with the file). Default false. */
  verifyOnOpen?: boolean;
  /**
   * The file must exist and already hold a journal: a missing file fails with StorePathError('store_not_found'),
   * a database without the journal's tables with StorePathError('store_not_journal'). Nothing is created.
   * Default false (a missing file is created with an empty journal).
   */
  mustExist?: boolean;
  /**
   * Open a read-only connection (implies `mustExist`): reads work, every write fails. The journal must be at the
   * current schema version. Default false.
   */
  readonly?: boolean;
  /**
   * The clock event times are recorded with, in epoch milliseconds. Default `Date.now`. Times never decrease within a
   * session whatever it returns (docs/design.md#recorded-times).
   */
  clock?: () => number;
}

/**
 * The part of a better-sqlite3 statement that the idempotency helper's callers use. Declared here so the published
 * types do not need `@types/better-sqlite3`; a better-sqlite3 statement is one.
 */
export interface SqliteStatement {
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

/** The part of a better-sqlite3 `Database` handle the library relies on; pass an open better-sqlite3 handle. */
export interface SqliteDatabase {
  readonly open: boolean;
  prepare(source: string): SqliteStatement;
  exec(source: string): unknown;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  close(): unknown;
}

/** The busy timeout a SQLite connection is opened with: 0 (fail at once) up to what Node's timers hold. */
export function checkBusyTimeout(value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > LIMITS.maxTimeoutMs) {
    throw new InvalidInputError('busyTimeoutMs', `must be an integer from 0 to ${LIMITS.maxTimeoutMs}, got ${describeSetting(value)}`);
  }
  return value;
}
