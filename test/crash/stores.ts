/**
 * The store axis of the crash matrix. SQLite always runs; PostgreSQL runs when JINGWEI_PG_URL is set. The
 * PostgreSQL store is loaded by a computed specifier, so these files compile and run on SQLite whether or not
 * src/postgres.ts is present.
 */
import { openSqliteStore } from '../../src/sqlite.js';
import type { SessionStore } from '../../src/store/types.js';

export type StoreKind = 'sqlite' | 'postgres';

/** Where a case's journal lives: a SQLite file, or a PostgreSQL URL and schema shared by the run's cases. */
export interface StoreSpec {
  readonly kind: StoreKind;
  /** SQLite: the journal file. PostgreSQL: the connection URL. */
  readonly location: string;
  /** PostgreSQL only: the schema holding the run's journal tables. */
  readonly schema?: string;
}

/** The store kinds this run covers: SQLite, and PostgreSQL when JINGWEI_PG_URL names a server. */
export function enabledStoreKinds(): StoreKind[] {
  return process.env.JINGWEI_PG_URL ? ['sqlite', 'postgres'] : ['sqlite'];
}

interface PostgresModule {
  openPostgresStore(url: string, options: { schema?: string; poolSize?: number }): Promise<SessionStore>;
}

const POSTGRES_ENTRY = '../../src/postgres.js';

/** The PostgreSQL entry point; fails loudly (never skips) when JINGWEI_PG_URL asked for it and it is missing. */
export async function loadPostgres(): Promise<PostgresModule> {
  const specifier: string = new URL(POSTGRES_ENTRY, import.meta.url).href;
  try {
    return (await import(specifier)) as PostgresModule;
  } catch (error) {
    throw new Error(`JINGWEI_PG_URL is set but the PostgreSQL store cannot be loaded from ${specifier}: ${String(error)}`);
  }
}

export interface OpenOptions {
  /** SQLite: run quick_check on open. */
  readonly verifyOnOpen?: boolean;
}

/** Opens the journal store a spec names, with the production options (a small pool on PostgreSQL). */
export async function openStore(spec: StoreSpec, options: OpenOptions = {}): Promise<SessionStore> {
  if (spec.kind === 'sqlite') return openSqliteStore(spec.location, { verifyOnOpen: options.verifyOnOpen === true });
  const { openPostgresStore } = await loadPostgres();
  return openPostgresStore(spec.location, { ...(spec.schema ? { schema: spec.schema } : {}), poolSize: 2 });
}
