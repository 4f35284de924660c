import { InvalidInputError } from '../../errors.js';
import { LIMITS } from '../../limits.js';
import type { PgPool } from './driver-types.js';
import { describeSetting } from '../../text.js';

/** A schema name the store accepts: a plain SQL identifier, at most 63 bytes. */
export const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** The schema version this code writes and understands. A database at a higher version is refused on open. */
export const POSTGRES_SCHEMA_VERSION = 13;

export interface PostgresStoreOptions {
  /**
   * The PostgreSQL schema (namespace) that holds the store's tables, created on open if missing (unless `mustExist`). A plain
   * identifier: letters, digits and underscores, at most 63 bytes. Default `public`.
   */
  schema?: string;
  /**
   * The schema must exist and already hold a journal, as SQLite's `mustExist`: a missing schema fails with
   * StorePathError('store_not_found'), a schema without the journal's tables (no `jw_schema_version`, or version 0)
   * with StorePathError('store_not_journal'), both decided by one read of the catalog; nothing is created. A journal
   * at an older schema version is upgraded as without this option. Default false (the schema and tables are created).
   */
  mustExist?: boolean;
  /**
   * How long a transaction waits for a row lock held by another writer (`SET LOCAL lock_timeout`) before it fails
   * with StoreBusyError. Default 5,000 ms.
   */
  lockTimeoutMs?: number;
  /** Upper bound for any one statement (`SET LOCAL statement_timeout`); exceeding it is StoreBusyError. Default 30,000 ms. */
  statementTimeoutMs?: number;
  /**
   * `SET LOCAL idle_in_transaction_session_timeout` for the store's own transactions: if this process stalls (GC
   * pause, SIGSTOP) while holding an owner row lock, the server ends its connection after this long, releasing the
   * lock and rolling the transaction back. 0 leaves the server's setting. Default 60,000 ms.
   */
  idleInTransactionTimeoutMs?: number;
  /** Connections in the pool the store creates from a URL (ignored for a pool you pass in). Default 10. */
  poolSize?: number;
  /** How long to wait for a connection from the pool the store creates (ignored for a pool you pass in). Default 10,000 ms. */
  connectTimeoutMs?: number;
  /**
   * Use named (server-side prepared) statements for the write path, parsed once per connection. Set false behind
   * a transaction-mode pooler that cannot carry prepared statements. Default true.
   */
  prepare?: boolean;
  /**
   * The clock event times are recorded with, in epoch milliseconds. Default `Date.now`. Times never decrease within a
   * session whatever it returns (docs/design.md#recorded-times).
   */
  clock?: () => number;
}

export type { PgPool };

/**
 * An option in milliseconds (or a count): `fallback` when not given, else an integer from `min` to 2^31 − 1, the
 * most PostgreSQL's timeout settings (and Node's timers) take: a larger one would fail every transaction later.
 */
export function checkMs(name: string, value: number | undefined, fallback: number, min: number): number {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v < min || v > LIMITS.maxTimeoutMs) {
    throw new InvalidInputError(name, `must be an integer from ${min} to ${LIMITS.maxTimeoutMs}, got ${describeSetting(v)}`);
  }
  return v;
}

/**
 * Refuses what node-postgres would not read as a connection string: a postgres:// or postgresql:// URL, a socket:
 * URL, or a socket directory. Anything else would reach the network as a host name and read as "unreachable".
 */
export function checkConnectionUrl(url: string): void {
  if (url.trim() === '') throw new InvalidInputError('url', 'must be a PostgreSQL connection URL');
  if (!/^(postgres(ql)?:\/\/|socket:|\/)/i.test(url.trim())) {
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url.trim())?.[1];
    throw new InvalidInputError('url', `must be a PostgreSQL connection URL (postgres://user@host:5432/db), got ${scheme ? `a ${scheme}: URL` : 'text that is not one'}`);
  }
}

/**
 * The connection string for the driver and the schema the store uses: `schema=name` in the query of a connection URL
 * (the form the CLI and the docs give a store; the name matched in any case) names the schema, and is taken off
 * before the URL reaches the driver, which would ignore it and leave the store in `public`, outside the fencing of
 * every host that opened the named schema. The rest of the URL reaches the driver byte for byte (a socket URL
 * `postgres://user@/db?host=/run/postgresql` included). A URL and an option that name two different schemas are
 * refused: no one can tell which was meant.
 */
export function connectionAndSchema(url: string, option: string | undefined): { url: string; schema: string } {
  checkConnectionUrl(url);
  const query = url.startsWith('/') ? -1 : url.indexOf('?');
  let inUrl: string | undefined;
  let rest = url;
  if (query >= 0) {
    const parts = url.slice(query + 1).split('&');
    const named = parts.filter((part) => part.split('=')[0]!.toLowerCase() === 'schema');
    if (named.length > 1) throw new InvalidInputError('url', `names the schema ${named.length} times (?schema=): give it once`);
    if (named.length === 1) {
      inUrl = new URLSearchParams(named[0]).values().next().value ?? '';
      const kept = parts.filter((part) => part !== named[0]);
      rest = url.slice(0, query) + (kept.length > 0 ? `?${kept.join('&')}` : '');
    }
  }
  if (inUrl !== undefined && option !== undefined && inUrl !== option) {
    throw new InvalidInputError('schema', `the URL names schema ${JSON.stringify(inUrl)} (?schema=) and the schema option ${JSON.stringify(option)}: give one, or the same`);
  }
  const schema = option ?? inUrl ?? 'public';
  if (typeof schema !== 'string' || !IDENTIFIER.test(schema)) {
    throw new InvalidInputError('schema', `must be a plain identifier (letters, digits, underscores; at most 63 bytes)${inUrl !== undefined && option === undefined ? `, as the URL's ?schema= gives it` : ''}`);
  }
  return { url: rest, schema };
}
