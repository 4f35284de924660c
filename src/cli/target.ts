/**
 * The one place the CLI turns a store argument into a SessionStore: a postgres:// (or postgresql://) URL opens the
 * PostgreSQL store, loaded on demand so the CLI works in a build without it; anything else is a SQLite file.
 * A `schema` query parameter (postgres://host/db?schema=jingwei) names the PostgreSQL schema holding the tables.
 */
import { StorePathError } from '../errors.js';
import type { SessionStore } from '../store/types.js';
import { StoreAccessError, UsageError } from './exit.js';

export interface OpenTargetOptions {
  /**
   * Create the store when it does not exist (import, demo): a SQLite file, or a PostgreSQL schema and its tables.
   * Every other command never creates one, and refuses (exit 3) a file, database or schema that holds no journal.
   */
  readonly create?: boolean;
}

export function isPostgresTarget(target: string): boolean {
  return /^postgres(ql)?:\/\//i.test(target);
}

/**
 * A URL without its passwords, for messages: the one in its userinfo, and any query parameter node-postgres reads as
 * one (`password`, `sslpassword`).
 */
export function describeTarget(target: string): string {
  if (!isPostgresTarget(target)) return target;
  try {
    const url = new URL(target);
    if (url.password) url.password = '***';
    for (const name of [...url.searchParams.keys()]) {
      if (/password/i.test(name)) url.searchParams.set(name, '***');
    }
    return url.toString();
  } catch {
    return 'the PostgreSQL URL';
  }
}

type PostgresModule = {
  openPostgresStore?: (url: string, options?: { schema?: string; mustExist?: boolean }) => SessionStore | Promise<SessionStore>;
};

async function openPostgres(target: string, create: boolean): Promise<SessionStore> {
  // A computed specifier: the CLI must compile and run in a build that has no PostgreSQL store.
  const specifier = '../postgres.js';
  let mod: PostgresModule;
  try {
    mod = (await import(specifier)) as PostgresModule;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'ERR_PACKAGE_PATH_NOT_EXPORTED') {
      throw new StoreAccessError(`PostgreSQL is not available in this build of jingwei: ${(error as Error).message}`, { cause: error });
    }
    throw error;
  }
  if (typeof mod.openPostgresStore !== 'function') {
    throw new StoreAccessError('PostgreSQL is not available in this build of jingwei: openPostgresStore is missing');
  }
  try {
    // As for SQLite: only a command that creates a journal may create the schema or its tables. The URL's
    // `?schema=` is the store's, read by openPostgresStore as it is for a host given the same URL.
    return await mod.openPostgresStore(target, { mustExist: !create });
  } catch (error) {
    if ((error as { code?: unknown }).code === 'invalid_input') throw error;
    throw new StoreAccessError(`cannot open ${describeTarget(target)}: ${(error as Error).message}`, { cause: error });
  }
}

type SqliteModule = { openSqliteStore: (path: string, options?: { mustExist?: boolean }) => SessionStore };

/** The SQLite store, loaded on demand like PostgreSQL's, so a missing driver is a clear store error. */
async function loadSqlite(): Promise<SqliteModule> {
  try {
    return (await import('../store/sqlite/backend.js')) as SqliteModule;
  } catch (error) {
    if ((error as { code?: unknown }).code === 'driver_missing') throw new StoreAccessError((error as Error).message, { cause: error });
    throw error;
  }
}

/** Opens the store a CLI argument names. Throws UsageError or StoreAccessError; the store's own errors pass through. */
export async function openStoreFromTarget(target: string, options: OpenTargetOptions = {}): Promise<SessionStore> {
  if (typeof target !== 'string' || target.trim() === '') throw new UsageError('the store argument is empty: give a SQLite file or a postgres:// URL');
  const create = options.create === true;
  if (isPostgresTarget(target)) return openPostgres(target, create);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(target)) {
    throw new UsageError(`unsupported store URL ${JSON.stringify(target)}: give a SQLite file path or a postgres:// URL`);
  }
  const { openSqliteStore } = await loadSqlite();
  try {
    // Reading commands never create a file or a journal; the store refuses, untouched, a file that is not one.
    return openSqliteStore(target, { mustExist: !create });
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'journal_corrupt') throw error;
    if (error instanceof StorePathError) throw new StoreAccessError(error.message, { cause: error });
    throw new StoreAccessError(`cannot open ${target}: ${(error as Error).message}`, { cause: error });
  }
}
