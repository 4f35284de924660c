/**
 * The durable stores a suite runs on: SQLite always, PostgreSQL when `npm test` started a server (or
 * JINGWEI_PG_URL is set); without one the PostgreSQL half says it was skipped, or fails under JINGWEI_PG_REQUIRED=1.
 */
import { describe } from 'node:test';
import { openSqliteStore } from '../../src/sqlite.js';
import type { SessionStore } from '../../src/store/types.js';
import { describePostgres, freshSchema, openPostgresStore } from './postgres.js';
import { tempDbPath, tempDir } from './tmp.js';

/** One journal location: what a child process needs to open it (`target`, `schema`) and how to open it here. */
export interface JournalLocation {
  readonly target: string;
  readonly schema?: string;
  open(): Promise<SessionStore>;
}

export interface StoreTarget {
  readonly name: 'sqlite' | 'postgres';
  /** A fresh, empty journal. */
  fresh(): JournalLocation;
}

function sqliteTarget(dir: string): StoreTarget {
  return {
    name: 'sqlite',
    fresh() {
      const path = tempDbPath(dir, 'journal');
      return { target: path, open: async () => openSqliteStore(path) };
    },
  };
}

function postgresTarget(url: string): StoreTarget {
  return {
    name: 'postgres',
    fresh() {
      const schema = freshSchema();
      return { target: url, schema, open: () => openPostgresStore(url, { schema, poolSize: 4 }) };
    },
  };
}

/** Declares `body` once per store, as suites named `${title} on sqlite` and `${title} on postgres`. */
export function forEachStore(title: string, body: (target: StoreTarget) => void): void {
  const dir = tempDir();
  describe(`${title} on sqlite`, () => body(sqliteTarget(dir)));
  describePostgres(`${title} on postgres`, (url) => body(postgresTarget(url)));
}

/** Opens a journal location given as child-process arguments. */
export async function openTarget(target: string, schema: string | undefined): Promise<SessionStore> {
  return /^postgres(ql)?:\/\//.test(target) ? openPostgresStore(target, { ...(schema === undefined ? {} : { schema }), poolSize: 2 }) : openSqliteStore(target);
}
