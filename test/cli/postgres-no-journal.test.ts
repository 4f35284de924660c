/**
 * The CLI never creates a journal where it only reads (or only writes decisions): pointed at a PostgreSQL database or
 * schema that holds no jingwei journal, every command but import exits 3, names the schema, and leaves the catalog
 * as it was, the way the SQLite path refuses a missing or non-journal file. Runs when JINGWEI_PG_URL names a server.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, it } from 'node:test';
import pg from 'pg';
import { StorePathError } from '../../src/errors.js';
import { POSTGRES_SCHEMA_VERSION } from '../../src/postgres.js';
import { backToVersion, describePostgres, adminPool, freshSchema, openPostgresStore } from '../support/postgres.js';
import { tempDir } from '../support/tmp.js';
import { MAIN, alphaOnPostgres, cliAsync, withSchema } from './helpers.js';

const dir = tempDir('jingwei-cli-pg-nojournal-');

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** Every command that takes a store and does not create a journal, with the arguments it needs. */
function nonCreatingCommands(target: string): string[][] {
  return [
    ['sessions', target],
    ['queue', target],
    ['queue', target, '--json'],
    ['events', target, 'alpha'],
    ['inspect', target, 'alpha'],
    ['verify', target],
    ['verify', target, 'alpha'],
    ['recover', target],
    ['export', target, 'alpha'],
    ['approve', target, 'approval_x', '--actor', 'op'],
    ['deny', target, 'approval_x', '--actor', 'op'],
    ['review', target, 'toolcall_x', '--session', 'alpha', '--outcome', 'completed', '--evidence', 'ticket 1', '--actor', 'op'],
    ['console', target, '--read-only'],
  ];
}

/** Runs one command, bounded: a console that (wrongly) opened the store would serve until killed. */
function run(args: readonly string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', input: '', timeout: 20_000, env: { ...process.env, NO_COLOR: '1' } });
  if (r.error && (r.error as NodeJS.ErrnoException).code !== 'ETIMEDOUT') throw r.error;
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The schemas of a database and its tables whose names start with jw_: what a wrongly migrating open would add. */
async function catalog(pool: pg.Pool): Promise<{ schemas: string[]; jwTables: string[] }> {
  const schemas = await pool.query<{ nspname: string }>('SELECT nspname FROM pg_namespace ORDER BY nspname');
  const tables = await pool.query<{ t: string }>(
    "SELECT n.nspname || '.' || c.relname AS t FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname LIKE 'jw\\_%' ORDER BY 1",
  );
  return { schemas: schemas.rows.map((r) => r.nspname), jwTables: tables.rows.map((r) => r.t) };
}

describePostgres('the CLI refuses a PostgreSQL database or schema without a journal', (url) => {
  it('a database with no jingwei tables: every non-creating command exits 3 (store_not_journal, schema public) and creates nothing', async () => {
    const database = `jw_empty_${process.pid}_${randomBytes(3).toString('hex')}`;
    const admin = adminPool(url);
    await admin.query(`CREATE DATABASE "${database}"`);
    const pool = new pg.Pool({ connectionString: withDatabase(url, database), max: 1 });
    pool.on('error', () => {});
    after(async () => {
      await pool.end().catch(() => {});
      await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`).catch(() => {});
    });
    const before = await catalog(pool);
    assert.deepEqual(before.jwTables, []);

    const target = withDatabase(url, database);
    for (const args of nonCreatingCommands(target)) {
      const r = run(args);
      assert.equal(r.code, 3, `${args[0]}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, new RegExp(`schema public: holds no jingwei journal \\(in database ${database}\\)`), args[0]);
      assert.doesNotMatch(r.stdout, /Nothing needs attention|No sessions/, args[0]);
    }
    assert.deepEqual(await catalog(pool), before, 'no table or schema was created in the database');
  });

  it('a mistyped schema: every non-creating command exits 3 (store_not_found, naming the schema) and the schema is not created', async () => {
    // A fresh name: nothing creates it (the file's cleanup drops it should a failing run have created it).
    const schema = freshSchema();
    const admin = adminPool(url);
    const before = await catalog(admin);
    const target = withSchema(url, schema);
    for (const args of nonCreatingCommands(target)) {
      const r = run(args);
      assert.equal(r.code, 3, `${args[0]}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, new RegExp(`cannot open .*\\?schema=${schema}: schema ${schema}: no such schema in database `), args[0]);
    }
    const now = await catalog(admin);
    assert.ok(!now.schemas.includes(schema), 'the schema was not created');
    assert.deepEqual(now.jwTables.filter((t) => t.startsWith(`${schema}.`)), []);
    assert.deepEqual(now.jwTables.filter((t) => t.startsWith('public.')), before.jwTables.filter((t) => t.startsWith('public.')), 'nothing added to public');
  });

  it('a schema with other tables but no journal: exit 3 (store_not_journal), and no jw_ table is added to it', async () => {
    const schema = freshSchema();
    const admin = adminPool(url);
    await admin.query(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".orders (id INTEGER PRIMARY KEY)`);
    for (const args of [['sessions', withSchema(url, schema)], ['queue', withSchema(url, schema)]]) {
      const r = run(args);
      assert.equal(r.code, 3, `${args[0]}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, new RegExp(`schema ${schema}: holds no jingwei journal`));
    }
    const tables = await admin.query<{ relname: string }>(
      'SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 ORDER BY 1',
      [schema],
    );
    assert.deepEqual(tables.rows.map((r) => r.relname), ['orders', 'orders_pkey']);
  });

  it('openPostgresStore with mustExist: typed StorePathError, nothing created', async () => {
    const schema = freshSchema();
    await assert.rejects(openPostgresStore(url, { schema, mustExist: true }), (error: unknown) => {
      assert.ok(error instanceof StorePathError);
      assert.equal(error.code, 'store_not_found');
      assert.equal(error.path, `schema ${schema}`);
      return true;
    });
    const ns = await adminPool(url).query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    assert.equal(ns.rowCount, 0);
  });

  it('on a real journal the same commands still work; a journal at an older version is upgraded, as SQLite reading commands do', async () => {
    const schema = freshSchema();
    const { target, imported } = await alphaOnPostgres(url, schema, dir);
    assert.equal(imported.code, 0, imported.stderr);

    const sessions = await cliAsync(['sessions', target]);
    assert.equal(sessions.code, 0, sessions.stderr);
    assert.match(sessions.stdout, /^alpha\s+10\s/m);
    const queue = await cliAsync(['queue', target, '--json']);
    assert.equal(queue.code, 0, queue.stderr);
    assert.ok((JSON.parse(queue.stdout) as { items: unknown[] }).items.length > 0, queue.stdout);
    assert.equal((await cliAsync(['verify', target])).code, 0);
    assert.equal((await cliAsync(['events', target, 'alpha'])).code, 0);
    assert.equal((await cliAsync(['inspect', target, 'alpha'])).code, 1, 'calls that need a host decision');
    assert.equal((await cliAsync(['recover', target])).code, 0);
    const review = await cliAsync(['review', target, 'toolcall_x', '--session', 'alpha', '--outcome', 'completed', '--evidence', 'e', '--actor', 'op']);
    assert.equal(review.code, 2, `an unknown call in a real journal is a usage error, not a store error: ${review.stderr}`);

    // Back to version 7 (before the attention index by call id): a reading command upgrades it, like a SQLite file.
    const admin = adminPool(url);
    await admin.query(
      `DROP INDEX "${schema}".jw_attention_call_id; CREATE INDEX jw_attention_call ON "${schema}".jw_attention (session_id, call_id); ` +
        backToVersion(`"${schema}"`, 7),
    );
    const old = await cliAsync(['sessions', target]);
    assert.equal(old.code, 0, old.stderr);
    assert.match(old.stdout, /^alpha\s+10\s/m);
    assert.equal((await admin.query<{ version: number }>(`SELECT version FROM "${schema}".jw_schema_version`)).rows[0]!.version, POSTGRES_SCHEMA_VERSION);
  });
});
