/**
 * Where the PostgreSQL suites get their server: JINGWEI_PG_URL, which `npm test` (scripts/test.mjs) sets to a
 * throwaway cluster it starts. Without it the suites are skipped with a message; with JINGWEI_PG_REQUIRED=1 (CI)
 * they fail instead.
 */
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { openPostgresStore as openStore } from '../../src/postgres.js';
import type { SessionStore } from '../../src/store/types.js';

export const PG_URL: string | undefined = process.env.JINGWEI_PG_URL || undefined;
const REQUIRED = process.env.JINGWEI_PG_REQUIRED === '1';

function unavailableReason(): string {
  return (
    process.env.JINGWEI_PG_SKIP_REASON ||
    'JINGWEI_PG_URL is not set and no throwaway cluster was started (run `npm test`, which starts one when PostgreSQL ' +
      'is installed, or set JINGWEI_PG_URL)'
  );
}

/**
 * Declares a PostgreSQL suite `name` whose tests `body(url)` declares when a server is configured; otherwise a
 * skipped suite that says why, or, under JINGWEI_PG_REQUIRED=1, a failing test. Call it at a file's top level.
 */
export function describePostgres(name: string, body: (url: string) => void): void {
  if (PG_URL) {
    const url = PG_URL;
    closeStoresAfterFile();
    adminPool(url);
    describe(name, () => body(url));
    return;
  }
  if (REQUIRED) {
    describe(name, () => {
      it('needs PostgreSQL (JINGWEI_PG_REQUIRED=1)', () => {
        throw new Error(`PostgreSQL is required but unavailable: ${unavailableReason()}`);
      });
    });
    return;
  }
  describe(name, () => {
    it('needs PostgreSQL', { skip: `PostgreSQL suite skipped: ${unavailableReason()}` }, () => {});
  });
}

const opened = new Set<SessionStore>();
let closing = false;

/**
 * openPostgresStore for the suites: every store opened through it is also closed when its test file ends. A test
 * that fails before its own `close()` would otherwise leave the store's pool open, and the file's process (and with
 * it `npm test`) would never exit instead of reporting the failure.
 */
export async function openPostgresStore(...args: Parameters<typeof openStore>): ReturnType<typeof openStore> {
  const store = await openStore(...args);
  opened.add(store);
  return store;
}

/** Registered once per file, before the admin pool's cleanup, so the stores close before their schemas are dropped. */
function closeStoresAfterFile(): void {
  if (closing) return;
  closing = true;
  after(async () => {
    for (const store of opened) await store.close().catch(() => {});
    opened.clear();
  });
}

let admin: pg.Pool | undefined;
const schemas: string[] = [];

/**
 * A pool for the test itself (tampering, killing backends), ended when the test file ends. describePostgres creates
 * it at the top level, so the cleanup hook belongs to the file, not to whichever test first asks for it.
 */
export function adminPool(url: string): pg.Pool {
  if (!admin) {
    const pool = new pg.Pool({ connectionString: url, max: 3, statement_timeout: 30_000 });
    pool.on('error', () => {});
    admin = pool;
    after(async () => {
      for (const schema of schemas.splice(0)) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
      await pool.end();
    });
  }
  return admin;
}

/** A fresh schema name (the store creates it on open), dropped when the test file ends. */
export function freshSchema(): string {
  const schema = `jw_test_${process.pid}_${schemas.length}_${randomBytes(3).toString('hex')}`;
  schemas.push(schema);
  return schema;
}

/**
 * SQL that takes schema `S` (quoted) back to an earlier version's layout of the attention index, where a later version
 * changed its columns, and records that version: what a store of that release holds, for an upgrade test.
 */
export function backToVersion(S: string, version: number): string {
  return `${version < 12 ? `ALTER TABLE ${S}.jw_attention DROP COLUMN pending_since; ` : ''}UPDATE ${S}.jw_schema_version SET version = ${version}`;
}
