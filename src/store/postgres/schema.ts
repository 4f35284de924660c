import { StorePathError, StoreUnavailableError } from '../../errors.js';
import { TASK_DEFAULTS } from '../../limits.js';
import type { Pool } from './driver.js';

import { POSTGRES_SCHEMA_VERSION } from './options.js';
import { INBOX_DDL } from './inbox.js';
import { attentionOfJournal, attentionOfStoredJournal } from '../attention.js';
import { schemaTooNew } from '../driver.js';
import { ATTENTION_COLUMNS, attentionValues, int, SESSION_COLUMNS, toSession, type SessionRecord } from '../sql-rows.js';
import type { SessionId } from '../../ids.js';
import type { PoolClient } from './driver.js';

/** Version 2 → 3: the decision inbox's table and indexes. */
const MIGRATE_INBOX = (S: string): string => INBOX_DDL(S);

export { POSTGRES_SCHEMA_VERSION };

/** A plain SQL identifier: the only schema names the store accepts (they are quoted into its SQL). */
export { IDENTIFIER } from './options.js';

/**
 * Version 3. Identity is per session: tasks keyed by (session_id, task_id), operations by (session_id, task_id, key)
 * (docs/design.md#identity-is-per-session). The old keys were unique store-wide, so every row fits the new ones.
 * Tasks also get their journal-bytes limit and charge (docs/design.md#budgets-are-exact): existing tasks take the
 * default limit and start at 0.
 */
const MIGRATE_SESSION_KEYS = (S: string): string => `
ALTER TABLE ${S}.jw_tasks DROP CONSTRAINT jw_tasks_pkey,
  ADD CONSTRAINT jw_tasks_pkey PRIMARY KEY (session_id, task_id),
  ADD COLUMN limit_journal_bytes BIGINT NOT NULL DEFAULT ${TASK_DEFAULTS.journalBytes},
  ADD COLUMN charged_journal_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE ${S}.jw_operations DROP CONSTRAINT jw_operations_pkey,
  ADD CONSTRAINT jw_operations_pkey PRIMARY KEY (session_id, task_id, key);`;

/**
 * Version 4. Recorded times and the attention index: one row per operation, kept by each commit. The upgrade then fills the
 * index from the journals (fillAttention).
 */
const MIGRATE_ATTENTION = (S: string) => `
ALTER TABLE ${S}.jw_sessions ADD COLUMN recorded_at BIGINT;
CREATE TABLE ${S}.jw_attention (
  session_id TEXT NOT NULL, task_id TEXT NOT NULL, key TEXT NOT NULL, call_id TEXT NOT NULL, tool TEXT NOT NULL,
  effect TEXT NOT NULL, revision TEXT NOT NULL, args_digest TEXT NOT NULL, start_marker BOOLEAN NOT NULL,
  started BOOLEAN NOT NULL, status TEXT NOT NULL, category TEXT, called_at BIGINT, started_at BIGINT,
  ended_at BIGINT, updated_at BIGINT,
  CONSTRAINT jw_attention_pkey PRIMARY KEY (session_id, task_id, key)
);
CREATE INDEX jw_attention_call ON ${S}.jw_attention (session_id, call_id);
CREATE INDEX jw_attention_binding ON ${S}.jw_attention (session_id, task_id, tool, args_digest);
CREATE INDEX jw_attention_status ON ${S}.jw_attention (status, session_id COLLATE "C", task_id COLLATE "C", key COLLATE "C");`;

/** Version 6. Leases (docs/design.md#leases): the expiry of the holder's lease, ms since the Unix epoch. */
function MIGRATE_LEASES(S: string): string {
  return `ALTER TABLE ${S}.jw_sessions ADD COLUMN lease_expires_at BIGINT;`;
}

/**
 * Version 7: events by id, so the unique-event-id check of a commit that names its ids is an index lookup rather than a
 * scan of the session's events (docs/design.md#events-are-found-by-id).
 */
const MIGRATE_EVENT_IDS = (S: string): string => `CREATE INDEX jw_events_event_id ON ${S}.jw_events (session_id, event_id);`;

/**
 * Version 8: attention rows by call id alone, the one index a commit's lookup by call id can use, so its plan cannot
 * fall back to scanning a session's rows (docs/design.md#lookups-that-do-not-decay).
 */
const MIGRATE_ATTENTION_CALL_IDS = (S: string): string =>
  `CREATE INDEX jw_attention_call_id ON ${S}.jw_attention (call_id); DROP INDEX ${S}.jw_attention_call;`;

/** The DDL of each schema version; index n migrates version n-1 to n. `S` is the quoted schema name. */
const MIGRATIONS: ReadonlyArray<(S: string) => string> = [
  () => '',
  (S) => `
CREATE TABLE ${S}.jw_sessions (
  session_id TEXT NOT NULL, owner TEXT, held BOOLEAN NOT NULL, epoch BIGINT NOT NULL,
  last_seq BIGINT NOT NULL, head_hash TEXT NOT NULL, body_bytes BIGINT NOT NULL,
  CONSTRAINT jw_sessions_pkey PRIMARY KEY (session_id)
);
CREATE TABLE ${S}.jw_events (
  session_id TEXT NOT NULL, seq BIGINT NOT NULL, event_id TEXT NOT NULL, epoch BIGINT NOT NULL,
  body TEXT NOT NULL, hash TEXT NOT NULL,
  CONSTRAINT jw_events_pkey PRIMARY KEY (session_id, seq)
);
CREATE TABLE ${S}.jw_tasks (
  task_id TEXT NOT NULL, session_id TEXT NOT NULL, state TEXT NOT NULL,
  limit_tool_calls BIGINT NOT NULL, limit_output_bytes BIGINT NOT NULL,
  charged_tool_calls BIGINT NOT NULL, charged_output_bytes BIGINT NOT NULL,
  reserved_output_bytes BIGINT NOT NULL, stop_reason TEXT,
  CONSTRAINT jw_tasks_pkey PRIMARY KEY (task_id)
);
CREATE TABLE ${S}.jw_operations (
  task_id TEXT NOT NULL, key TEXT NOT NULL, session_id TEXT NOT NULL, call_id TEXT NOT NULL, event_id TEXT NOT NULL,
  CONSTRAINT jw_operations_pkey PRIMARY KEY (task_id, key)
);`,
  // Version 2: each outstanding output reservation, so one left by a fenced owner can be settled.
  (S) => `ALTER TABLE ${S}.jw_tasks ADD COLUMN reservations TEXT NOT NULL DEFAULT '[]';`,
  MIGRATE_SESSION_KEYS,
  // Version 4: recorded times (the session's last one) and the attention index (docs/design.md#the-attention-index).
  (S) => MIGRATE_ATTENTION(S),
  // Version 5: the decision inbox (docs/design.md#the-decision-inbox).
  MIGRATE_INBOX,
  // Version 6: when the holder's lease runs out, on the database's clock (null for sessions held before).
  MIGRATE_LEASES,
  // Version 7: an index of events by id.
  MIGRATE_EVENT_IDS,
  // Version 8: attention rows by call id alone.
  MIGRATE_ATTENTION_CALL_IDS,
  // Version 9: the journal's own id, drawn once (docs/design.md#one-view-of-running-calls-per-database).
  (S) => `CREATE TABLE IF NOT EXISTS ${S}.jw_journal (singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton), id TEXT NOT NULL);
${drawJournalId(S)};
GRANT SELECT ON ${S}.jw_journal TO PUBLIC;`,
  // Version 10: no table changes. This release reads the journal differently from the ones before it, which misread
  // what it writes, so they refuse a store it has opened (docs/design.md#one-release-at-a-time); the upgrade
  // computes the attention index again (fillAttention).
  () => '',
  // Version 11: no table changes. The attention index tells an operation a review says did not happen (its write
  // still to be made, listed by the queue) from one a review says happened, which the releases before it made both
  // `resolved`; the upgrade computes the index again (fillAttention).
  () => '',
  // Version 12: since when an operation's outcome has been open, or its write due, across retries refused before
  // their body (AttentionRow.pendingSince), for the queue's age filter; the upgrade computes the index again.
  (S) => `ALTER TABLE ${S}.jw_attention ADD COLUMN IF NOT EXISTS pending_since BIGINT;`,
  // Version 13: no table changes. The attention index counts the `not_executed` review a retry plan carried as a
  // review of the attempt it retries, which the releases before it left open; the upgrade computes the index again.
  () => '',
];

/** Draws the journal's id into schema `S` (quoted) unless it has one: at version 9, and again for a row removed since. */
export function drawJournalId(S: string): string {
  return `INSERT INTO ${S}.jw_journal (id) VALUES (md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text)) ON CONFLICT (singleton) DO NOTHING`;
}

/**
 * Creates `schema` unless it exists, inside the caller's transaction, under a lock every opener that may create it
 * takes (the store's migration, the idempotency helper): `CREATE SCHEMA IF NOT EXISTS` alone fails one of two
 * sessions running it at the same moment (a unique violation on the catalog), so a host starting both at once
 * failed to open. Taken after the caller's own lock, always last, so no two openers wait on each other in a cycle.
 */
export async function ensureSchema(client: { query(text: string, values?: unknown[]): Promise<{ rowCount: number | null }> }, schema: string): Promise<void> {
  await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`jingwei.schema:${schema}`]);
  const ns = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
  if (ns.rowCount === 0) await client.query(`CREATE SCHEMA "${schema}"`);
}

/**
 * Creates or upgrades the store's tables. Fast path: the version is current, no lock and no DDL. Otherwise one
 * transaction under an advisory transaction lock (so concurrent openers never race), re-reading the version
 * inside it. With `mustExist` nothing is created: a missing schema is StorePathError('store_not_found'), a schema
 * without a journal StorePathError('store_not_journal'), both found by one read of the catalog before any lock or
 * DDL; a journal at an older version is upgraded as usual.
 */
export async function migrate(pool: Pool, schema: string, lockTimeoutMs: number, statementTimeoutMs: number, mustExist = false): Promise<void> {
  const S = `"${schema}"`;
  const client = await pool.connect();
  let broken: unknown;
  const onError = (error: unknown) => {
    broken = error;
  };
  client.on('error', onError);
  const readVersion = async (): Promise<number> => {
    const table = await client.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [`${S}.jw_schema_version`]);
    if (table.rows[0]?.t == null) return 0;
    const res = await client.query<{ version: number }>(`SELECT version FROM ${S}.jw_schema_version`);
    return res.rows[0]?.version ?? 0;
  };
  const tooNew = (version: number) =>
    schemaTooNew(`schema ${schema}`, version, POSTGRES_SCHEMA_VERSION);
  /** The same location and wording as the SQLite store's refusals, naming the schema and its database. */
  const notFound = (database: string) => new StorePathError('store_not_found', `schema ${schema}`, `no such schema in database ${database}`);
  const notJournal = (database: string) =>
    new StorePathError('store_not_journal', `schema ${schema}`, `holds no jingwei journal (in database ${database})`);
  /**
   * With `mustExist`: one read of the catalog, before anything could create the schema or a table, then the version
   * (0, a version table with no row, is no journal either). Returns the version.
   */
  /**
   * A schema holding the journal's tables with no version recorded: a version row or table lost (an edit, a partial
   * restore), not an empty schema. Refused as damaged: migrating would fail on the tables, and "no journal" would send
   * the operator to start a new one in its place.
   */
  const lostVersion = async (): Promise<void> => {
    const res = await client.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [`${S}.jw_sessions`]);
    if (res.rows[0]?.t == null) return;
    throw new StoreUnavailableError('store_failure',
      `schema ${schema} holds a jingwei journal's tables (jw_sessions) but no schema version (the jw_schema_version table or its row is missing: lost by an edit or a partial restore). ` +
      'It is a damaged journal, not an empty schema, and is not opened: do not start a new journal in its place; restore it from a backup (docs/operator-guide.md, "Restoring a backup"), or put the version row back by hand');
  };
  const existingVersion = async (): Promise<number> => {
    const res = await client.query<{ db: string; ns: boolean; t: string | null }>(
      'SELECT current_database() AS db, EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1) AS ns, to_regclass($2)::text AS t',
      [schema, `${S}.jw_schema_version`],
    );
    const row = res.rows[0]!;
    if (!row.ns) throw notFound(row.db);
    const version = row.t == null ? 0 : await readVersion();
    if (version === 0) {
      await lostVersion();
      throw notJournal(row.db);
    }
    return version;
  };
  try {
    const seen = mustExist ? await existingVersion() : await readVersion();
    if (seen > POSTGRES_SCHEMA_VERSION) throw tooNew(seen);
    if (seen === POSTGRES_SCHEMA_VERSION) return;
    await client.query(
      `BEGIN; SET LOCAL lock_timeout = ${lockTimeoutMs}; SET LOCAL statement_timeout = ${statementTimeoutMs}`,
    );
    try {
      await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`jingwei.migrate:${schema}`]);
      // Under the lock again: with `mustExist`, a schema or journal dropped since the check is refused, not created.
      if (mustExist) await existingVersion();
      await ensureSchema(client, schema);
      const table = await client.query<{ t: string | null }>('SELECT to_regclass($1)::text AS t', [`${S}.jw_schema_version`]);
      if (table.rows[0]?.t == null) {
        await client.query(
          `CREATE TABLE ${S}.jw_schema_version (singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton), version INTEGER NOT NULL)`,
        );
      }
      await client.query(`INSERT INTO ${S}.jw_schema_version (version) VALUES (0) ON CONFLICT (singleton) DO NOTHING`);
      const version = await readVersion();
      if (version > POSTGRES_SCHEMA_VERSION) throw tooNew(version);
      if (version === 0) await lostVersion();
      for (let v = version + 1; v <= POSTGRES_SCHEMA_VERSION; v++) {
        const ddl = MIGRATIONS[v]!(S);
        if (ddl !== '') await client.query(ddl);
      }
      if (version > 0) await fillAttention(client, S);
      await client.query(`UPDATE ${S}.jw_schema_version SET version = $1`, [POSTGRES_SCHEMA_VERSION]);
      await client.query('COMMIT');
    } catch (error) {
      if (broken === undefined) await client.query('ROLLBACK').catch((e: unknown) => { broken = e; });
      throw error;
    }
  } finally {
    client.off('error', onError);
    client.release(broken === undefined ? undefined : broken instanceof Error ? broken : new Error(String(broken)));
  }
}

/**
 * Computes the attention index again from every session's journal, in the upgrade's transaction, so the queue and
 * the in-doubt guard know the operations recorded before the upgrade, by this release's rules: an index the upgrade
 * has just created is empty, and rows an older release kept may follow rules since corrected
 * (docs/design.md#an-upgrade-computes-the-attention-index). A session whose journal does not verify keeps the rows its
 * commits kept (attentionOfStoredJournal).
 */
async function fillAttention(client: PoolClient, S: string): Promise<void> {
  const sessions = await client.query<SessionRecord>(`SELECT ${SESSION_COLUMNS} FROM ${S}.jw_sessions ORDER BY session_id`);
  const insert = `INSERT INTO ${S}.jw_attention (${ATTENTION_COLUMNS}) VALUES (${ATTENTION_COLUMNS.split(', ').map((_, i) => `$${i + 1}`).join(', ')})`;
  for (const record of sessions.rows) {
    const id = record.session_id as SessionId;
    const stored = await client.query<[string, string, string, string, string]>({
      text: `SELECT seq, event_id, epoch, body, hash FROM ${S}.jw_events WHERE session_id = $1 ORDER BY seq`, values: [id], rowMode: 'array',
    });
    const verified = attentionOfStoredJournal(id, () => toSession(record), () => stored.rows.map(([seq, eventId, epoch, body, hash]) =>
      ({ sessionId: id, seq: int(seq, 'seq', id), eventId, epoch: int(epoch, 'epoch', id), body, hash })));
    if (verified === null) {
      const kept = await client.query(`SELECT 1 FROM ${S}.jw_attention WHERE session_id = $1 LIMIT 1`, [id]);
      if (kept.rows.length > 0) continue;
    }
    await client.query(`DELETE FROM ${S}.jw_attention WHERE session_id = $1`, [id]);
    for (const row of verified ?? attentionOfJournal(id, stored.rows.map((r) => r[3]))) await client.query(insert, attentionValues(row, (b) => b));
  }
}
