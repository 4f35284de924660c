/** The store axis of the crash matrix. SQLite always runs; PostgreSQL runs when JINGWEI_PG_URL is set. */
import { openPostgresStore } from '../../src/postgres.js';
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

export interface OpenOptions {
  /** SQLite: run quick_check on open. */
  readonly verifyOnOpen?: boolean;
}

/** Opens the journal store a spec names, with the production options (a small pool on PostgreSQL). */
export async function openStore(spec: StoreSpec, options: OpenOptions = {}): Promise<SessionStore> {
  if (spec.kind === 'sqlite') return openSqliteStore(spec.location, { verifyOnOpen: options.verifyOnOpen === true });
  return openPostgresStore(spec.location, { ...(spec.schema ? { schema: spec.schema } : {}), poolSize: 2 });
}
