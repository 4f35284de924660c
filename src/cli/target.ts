/**
 * The one place the CLI turns a store argument into a SessionStore: a postgres:// (or postgresql://) URL opens the
 * PostgreSQL store, loaded on demand so the CLI works in a build without it; anything else is a SQLite file.
 * A `schema` query parameter (postgres://host/db?schema=jingwei) names the PostgreSQL schema holding the tables.
 */
import { existsSync, statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../store/sqlite.js';
import type { SessionStore } from '../store/types.js';
import { StoreAccessError, UsageError } from './exit.js';

export interface OpenTargetOptions {
  /** SQLite only: create the file when it does not exist (import, demo). Reading commands never create one. */
  readonly create?: boolean;
}

export function isPostgresTarget(target: string): boolean {
  return /^postgres(ql)?:\/\//i.test(target);
}

/** A URL without its password, for messages. */
export function describeTarget(target: string): string {
  if (!isPostgresTarget(target)) return target;
  try {
    const url = new URL(target);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return 'the PostgreSQL URL';
  }
}

type PostgresModule = { openPostgresStore?: (url: string, options?: { schema?: string }) => SessionStore | Promise<SessionStore> };

/** Splits the CLI's own `schema` parameter off the URL; the rest goes to the driver unchanged. */
function splitSchema(target: string): { url: string; schema: string | undefined } {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw new UsageError('the PostgreSQL URL cannot be parsed (postgres://user:password@host:port/database?schema=name)');
  }
  const schema = url.searchParams.get('schema') ?? undefined;
  if (schema === undefined) return { url: target, schema };
  url.searchParams.delete('schema');
  return { url: url.toString(), schema };
}

async function openPostgres(target: string): Promise<SessionStore> {
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
  const { url, schema } = splitSchema(target);
  try {
    return await mod.openPostgresStore(url, schema !== undefined ? { schema } : {});
  } catch (error) {
    if ((error as { code?: unknown }).code === 'invalid_input') throw error;
    throw new StoreAccessError(`cannot open ${describeTarget(target)}: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * Looks at an existing SQLite file through a read-only connection before the store opens it, so a mistyped path
 * never gets jingwei's tables added to somebody else's database. Damage is left for the store to report.
 */
function checkSqliteFile(path: string, create: boolean): void {
  let raw: Database.Database | undefined;
  try {
    raw = new Database(path, { readonly: true, fileMustExist: true });
    const hasJournal = raw.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'jw_sessions'").get() as { n: number };
    if (hasJournal.n === 1) return;
    const tables = raw.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get() as { n: number };
    if (tables.n === 0 && create) return;
    throw new StoreAccessError(
      tables.n === 0
        ? `${path} holds no jingwei journal (it is an empty database)`
        : `${path} is a SQLite database but not a jingwei journal (it has no jw_sessions table); nothing was changed`,
    );
  } catch (error) {
    if (error instanceof StoreAccessError) throw error;
    const code = (error as { code?: unknown }).code;
    if (code === 'SQLITE_NOTADB') throw new StoreAccessError(`${path} is not a SQLite database (or its header is damaged)`, { cause: error });
    if (typeof code === 'string' && code.startsWith('SQLITE_CORRUPT')) return; // the store reports it as JournalCorruptError
    throw new StoreAccessError(`cannot read ${path}: ${(error as Error).message}`, { cause: error });
  } finally {
    raw?.close();
  }
}

/** Opens the store a CLI argument names. Throws UsageError or StoreAccessError; the store's own errors pass through. */
export async function openStoreFromTarget(target: string, options: OpenTargetOptions = {}): Promise<SessionStore> {
  if (typeof target !== 'string' || target.trim() === '') throw new UsageError('the store argument is empty: give a SQLite file or a postgres:// URL');
  if (isPostgresTarget(target)) return openPostgres(target);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(target)) {
    throw new UsageError(`unsupported store URL ${JSON.stringify(target)}: give a SQLite file path or a postgres:// URL`);
  }
  const create = options.create === true;
  if (existsSync(target)) {
    if (statSync(target).isDirectory()) throw new StoreAccessError(`${target} is a directory, not a SQLite journal file`);
    checkSqliteFile(target, create);
  } else if (!create) {
    throw new StoreAccessError(`no such file: ${target}`);
  }
  try {
    return openSqliteStore(target);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'journal_corrupt') throw error;
    throw new StoreAccessError(`cannot open ${target}: ${(error as Error).message}`, { cause: error });
  }
}
