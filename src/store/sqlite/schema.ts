import { JournalCorruptError, StorePathError, StoreUnavailableError } from '../../errors.js';
import type { Database } from './driver.js';
import { STORE_DEFAULTS, TASK_DEFAULTS } from '../../limits.js';
import { SQLITE_SCHEMA_VERSION, type SqliteStoreOptions } from './options.js';
import { markJournalFile, switchToWal } from './wal.js';
import { attentionOfJournal, attentionOfStoredJournal } from '../attention.js';
import { schemaTooNew } from '../driver.js';
import { ATTENTION_COLUMNS, attentionValues, SESSION_COLUMNS, toSession, type SessionRecord } from '../sql-rows.js';
import type { EventRow } from '../rows.js';
import type { SessionId } from '../../ids.js';
import { thrownMessage } from '../../text.js';

export { SQLITE_SCHEMA_VERSION };

/**
 * The page size of a journal this code creates. Every B-tree a commit touches writes one whole page to the WAL, and
 * a call touches about a dozen (events, owner row, task ledger, operation and attention rows and their indexes): with
 * 4 KiB pages a call's two synced commits write 86–115 KB of WAL for about 1.5 KB of events, with 1 KiB pages 25–38 KB
 * (docs/design.md#small-pages). A journal created with other pages keeps them.
 */
export const JOURNAL_PAGE_SIZE = 1024;

/** The attention index (docs/design.md#the-attention-index): one row per operation, kept by each commit. */
const ATTENTION_TABLE = `
CREATE TABLE jw_attention (
  session_id TEXT NOT NULL, task_id TEXT NOT NULL, key TEXT NOT NULL, call_id TEXT NOT NULL, tool TEXT NOT NULL,
  effect TEXT NOT NULL, revision TEXT NOT NULL, args_digest TEXT NOT NULL, start_marker INTEGER NOT NULL,
  started INTEGER NOT NULL, status TEXT NOT NULL, category TEXT, called_at INTEGER, started_at INTEGER,
  ended_at INTEGER, updated_at INTEGER, PRIMARY KEY (session_id, task_id, key)
) STRICT;
CREATE INDEX jw_attention_call ON jw_attention (session_id, call_id);
CREATE INDEX jw_attention_binding ON jw_attention (session_id, task_id, tool, args_digest);
CREATE INDEX jw_attention_status ON jw_attention (status, session_id, task_id, key);
`;

/**
 * Version 11: since when an operation's outcome has been open, or its write due, across retries refused before their
 * body (AttentionRow.pendingSince), for the queue's age filter; the upgrade computes the index again (fillAttention).
 */
const MIGRATE_PENDING_SINCE = 'ALTER TABLE jw_attention ADD COLUMN pending_since INTEGER';

const SCHEMA = `
CREATE TABLE jw_sessions (
  session_id TEXT PRIMARY KEY, owner TEXT, held INTEGER NOT NULL, epoch INTEGER NOT NULL,
  last_seq INTEGER NOT NULL, head_hash TEXT NOT NULL, body_bytes INTEGER NOT NULL, recorded_at INTEGER, lease_expires_at INTEGER
) STRICT;
CREATE TABLE jw_events (
  session_id TEXT NOT NULL, seq INTEGER NOT NULL, event_id TEXT NOT NULL, epoch INTEGER NOT NULL,
  body TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (session_id, seq)
) STRICT;
CREATE INDEX jw_events_event_id ON jw_events (session_id, event_id);
CREATE TABLE jw_tasks (
  task_id TEXT NOT NULL, session_id TEXT NOT NULL, state TEXT NOT NULL,
  limit_tool_calls INTEGER NOT NULL, limit_output_bytes INTEGER NOT NULL,
  charged_tool_calls INTEGER NOT NULL, charged_output_bytes INTEGER NOT NULL,
  reserved_output_bytes INTEGER NOT NULL, stop_reason TEXT, reservations TEXT NOT NULL DEFAULT '[]',
  limit_journal_bytes INTEGER NOT NULL DEFAULT ${TASK_DEFAULTS.journalBytes}, charged_journal_bytes INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (session_id, task_id)
) STRICT;
CREATE TABLE jw_operations (
  task_id TEXT NOT NULL, key TEXT NOT NULL, session_id TEXT NOT NULL, call_id TEXT NOT NULL, event_id TEXT NOT NULL,
  PRIMARY KEY (session_id, task_id, key)
) STRICT;
${ATTENTION_TABLE}
${MIGRATE_PENDING_SINCE};`;

/** The decision inbox (docs/design.md#the-decision-inbox): approval requests and review decisions, by id. */
const INBOX_TABLE = `
CREATE TABLE jw_decisions (
  id TEXT PRIMARY KEY, kind TEXT NOT NULL, session_id TEXT NOT NULL, call_id TEXT NOT NULL, state TEXT NOT NULL,
  task_id TEXT, op_key TEXT, detail TEXT NOT NULL
) STRICT;
CREATE INDEX jw_decisions_by_session ON jw_decisions (session_id, id);
CREATE INDEX jw_decisions_by_operation ON jw_decisions (task_id, op_key) WHERE task_id IS NOT NULL;
`;

/** Version 2 → 3: the decision inbox. */
const MIGRATE_INBOX = INBOX_TABLE;

/** Version 1 → 2: each outstanding output reservation, so one left by a fenced owner can be settled. */
const MIGRATE_1_TO_2 = "ALTER TABLE jw_tasks ADD COLUMN reservations TEXT NOT NULL DEFAULT '[]'";

/**
 * Version 3. Identity is per session: tasks keyed by (session_id, task_id), operations by (session_id, task_id, key)
 * (docs/design.md#identity-is-per-session). SQLite cannot change a primary key in place, so each table is rebuilt;
 * the old keys were unique store-wide, so every row carries over. Tasks also get their journal-bytes limit and
 * charge (docs/design.md#budgets-are-exact): existing tasks take the default limit and start at 0.
 */
const MIGRATE_SESSION_KEYS = `
CREATE TABLE jw_tasks_by_session (
  task_id TEXT NOT NULL, session_id TEXT NOT NULL, state TEXT NOT NULL,
  limit_tool_calls INTEGER NOT NULL, limit_output_bytes INTEGER NOT NULL,
  charged_tool_calls INTEGER NOT NULL, charged_output_bytes INTEGER NOT NULL,
  reserved_output_bytes INTEGER NOT NULL, stop_reason TEXT, reservations TEXT NOT NULL DEFAULT '[]',
  limit_journal_bytes INTEGER NOT NULL DEFAULT ${TASK_DEFAULTS.journalBytes}, charged_journal_bytes INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (session_id, task_id)
) STRICT;
INSERT INTO jw_tasks_by_session (task_id, session_id, state, limit_tool_calls, limit_output_bytes, charged_tool_calls,
  charged_output_bytes, reserved_output_bytes, stop_reason, reservations)
  SELECT task_id, session_id, state, limit_tool_calls, limit_output_bytes, charged_tool_calls, charged_output_bytes,
    reserved_output_bytes, stop_reason, reservations FROM jw_tasks;
DROP TABLE jw_tasks;
ALTER TABLE jw_tasks_by_session RENAME TO jw_tasks;
CREATE TABLE jw_operations_by_session (
  task_id TEXT NOT NULL, key TEXT NOT NULL, session_id TEXT NOT NULL, call_id TEXT NOT NULL, event_id TEXT NOT NULL,
  PRIMARY KEY (session_id, task_id, key)
) STRICT;
INSERT INTO jw_operations_by_session (task_id, key, session_id, call_id, event_id)
  SELECT task_id, key, session_id, call_id, event_id FROM jw_operations;
DROP TABLE jw_operations;
ALTER TABLE jw_operations_by_session RENAME TO jw_operations;
`;

/**
 * Version 3 → 4: recorded times (the session's last one) and the attention index. The upgrade then fills the index from
 * the journals (fillAttention).
 */
const MIGRATE_ATTENTION = `ALTER TABLE jw_sessions ADD COLUMN recorded_at INTEGER;
${ATTENTION_TABLE}`;

/** Version 5 → 6: when the holder's lease runs out (docs/design.md#leases); null for sessions held before it. */
const MIGRATE_LEASES = 'ALTER TABLE jw_sessions ADD COLUMN lease_expires_at INTEGER';

/** The step from each version to the next: index n migrates version n to n + 1 (index 0 is the fresh schema). */
/**
 * Version 7: events by id, so the unique-event-id check of a commit that names its ids (docs/design.md#event-ids-are-unique)
 * is an index lookup rather than a scan of the session's events (docs/design.md#events-are-found-by-id).
 */
const MIGRATE_EVENT_IDS = 'CREATE INDEX jw_events_event_id ON jw_events (session_id, event_id)';
/**
 * Version 8: the journal's own id, drawn once when its tables are made (or upgraded) and kept by every copy of the
 * file: what names the journal in this process's one view of its running calls, whatever path it is opened by
 * (docs/design.md#one-view-of-running-calls-per-database).
 */
const JOURNAL_ID_TABLE = `CREATE TABLE IF NOT EXISTS jw_journal (singleton INTEGER PRIMARY KEY CHECK (singleton = 1), id TEXT NOT NULL) STRICT;
INSERT OR IGNORE INTO jw_journal (singleton, id) VALUES (1, lower(hex(randomblob(16))));`;
/**
 * Version 9: no table changes. This release reads the journal differently from the ones before it, which misread what
 * it writes, so they refuse a journal it has opened (docs/design.md#one-release-at-a-time); the upgrade computes the
 * attention index again (fillAttention).
 */
const MIGRATE_ONE_RELEASE = '';
/**
 * Version 10: no table changes. The attention index tells an operation a review says did not happen (its write still
 * to be made, listed by the queue) from one a review says happened; the releases before it made both `resolved`, and
 * read the new status as none they know. The upgrade computes the index again (fillAttention).
 */
const MIGRATE_REVIEWED_NOT_EXECUTED = '';
/**
 * Version 12: no table changes. The attention index counts the `not_executed` review a retry plan carried as a review
 * of the attempt it retries (docs/design.md#a-plans-review-is-journaled-with-its-retry), which the releases before it
 * left open; the upgrade computes the index again (fillAttention).
 */
const MIGRATE_CARRIED_REVIEWS = '';
const MIGRATIONS: readonly string[] = [
  SCHEMA, MIGRATE_1_TO_2, MIGRATE_SESSION_KEYS, MIGRATE_ATTENTION, MIGRATE_INBOX, MIGRATE_LEASES, MIGRATE_EVENT_IDS, JOURNAL_ID_TABLE,
  MIGRATE_ONE_RELEASE, MIGRATE_REVIEWED_NOT_EXECUTED, MIGRATE_PENDING_SINCE, MIGRATE_CARRIED_REVIEWS,
];

/**
 * The journal's id (JOURNAL_ID_TABLE). A journal of an older version opened read-only has none (undefined: a view of
 * its own, which cannot write); any other journal without a readable one is refused, rather than opened as a view of
 * its own beside another handle on it.
 */
export function journalId(db: Database, path: string): string | undefined {
  let id: unknown;
  try {
    id = db.prepare('SELECT id FROM jw_journal WHERE singleton = 1').pluck().get();
  } catch (error) {
    if (db.readonly && (db.pragma('user_version', { simple: true }) as number) < SQLITE_SCHEMA_VERSION) return undefined;
    throw new StoreUnavailableError('store_failure', `${path}: the journal's id could not be read: ${thrownMessage(error)}`, { cause: error });
  }
  if (typeof id === 'string' && id !== '') return id;
  if (db.readonly) return undefined;
  throw new StoreUnavailableError('store_failure', `${path}: the journal has no id (its jw_journal row was removed while it was open?); open it again`);
}

/**
 * The schema version and the number of tables, read by one statement, so from one snapshot: read one after the
 * other, another process creating the journal in between looks like a foreign database (version 0 read before its
 * commit, its tables counted after).
 */
const schemaState = (db: Database): { version: number; tables: number } =>
  db.prepare("SELECT (SELECT user_version FROM pragma_user_version) AS version, (SELECT count(*) FROM sqlite_schema WHERE type = 'table') AS tables")
    .get() as { version: number; tables: number };

/** Sets the connection up (WAL, synchronous=FULL), then creates or upgrades the journal's tables in one transaction. */
export function prepareDatabase(db: Database, path: string, options: SqliteStoreOptions): void {
  if (options.readonly) {
    prepareReadonly(db, path, options);
    return;
  }
  // Before anything writes (even the switch to WAL rewrites the header): never touch somebody else's database.
  refuseForeign(db, path, options);
  // Takes effect only on a database that holds nothing yet: it must precede the switch to WAL, the first write.
  db.pragma(`page_size = ${JOURNAL_PAGE_SIZE}`);
  if (path !== ':memory:') markJournalFile(db, options.busyTimeoutMs ?? STORE_DEFAULTS.busyTimeoutMs);
  const mode = switchToWal(db, options.busyTimeoutMs ?? STORE_DEFAULTS.busyTimeoutMs);
  if (path !== ':memory:' && mode !== 'wal') {
    throw new StoreUnavailableError('store_failure', `SQLite refused WAL mode (got ${String(mode)}); is ${path} on a network filesystem?`);
  }
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  db.pragma('trusted_schema = OFF');
  quickCheck(db, options);
  // A journal already at this version, with its id, needs no write to open: opened without the write lock, it can be
  // read (the queue, verify) while another process holds that lock, even one paused inside a write for good.
  if (isCurrent(db)) return;
  // A newer journal is refused before this code takes its write lock.
  const seen = schemaState(db).version;
  if (seen > SQLITE_SCHEMA_VERSION) throw schemaTooNew(path, seen, SQLITE_SCHEMA_VERSION);
  db.transaction(() => {
    const { version, tables } = schemaState(db);
    if (version > SQLITE_SCHEMA_VERSION) {
      throw schemaTooNew(path, version, SQLITE_SCHEMA_VERSION);
    }
    if (version === 0) {
      if (tables > 0) {
        throw foreignOrDamaged(db, path);
      }
      if (options.mustExist) throw new StorePathError('store_not_journal', path, 'holds no jingwei journal (it is an empty database)');
      db.exec(SCHEMA);
      db.exec(INBOX_TABLE);
    } else if (version < SQLITE_SCHEMA_VERSION) {
      for (let v = version; v < SQLITE_SCHEMA_VERSION; v++) if (MIGRATIONS[v] !== '') migrate(db, path, version, v);
      fillAttention(db);
    }
    if (version !== SQLITE_SCHEMA_VERSION) db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION}`);
    // Drawn here for a new journal, and again for a row deleted since (by hand, by a restore tool): a journal without
    // its id would be a view of its own, beside another handle on it.
    db.exec(JOURNAL_ID_TABLE);
  }).immediate();
}

/**
 * Runs the step from version `v` to `v + 1` of a journal that recorded `recorded`. A step that finds what it adds
 * already there means the recorded version is lower than the tables: the file was edited or damaged, and SQLite's
 * own "duplicate column name" would not say so.
 */
function migrate(db: Database, path: string, recorded: number, v: number): void {
  try {
    db.exec(MIGRATIONS[v]!);
  } catch (error) {
    const message = thrownMessage(error);
    if (!/duplicate column name|already exists/.test(message)) throw error;
    throw new StoreUnavailableError('store_failure',
      `${path} records schema version ${recorded}, but its tables do not match that version: the upgrade to version ${v + 1} ` +
      `found what it adds already there (${message}). The file was edited or damaged; restore it from a backup`, { cause: error });
  }
}

/** Whether the journal is at this code's schema version and holds its id (JOURNAL_ID_TABLE): read, no lock taken. */
function isCurrent(db: Database): boolean {
  if (schemaState(db).version !== SQLITE_SCHEMA_VERSION) return false;
  try {
    const id: unknown = db.prepare('SELECT id FROM jw_journal WHERE singleton = 1').pluck().get();
    return typeof id === 'string' && id !== '';
  } catch {
    return false;
  }
}

/**
 * Computes the attention index again from every session's journal, in the upgrade's transaction, so the queue and
 * the in-doubt guard know the operations recorded before the upgrade, by this release's rules: an index the upgrade
 * has just created is empty, and rows an older release kept may follow rules since corrected
 * (docs/design.md#an-upgrade-computes-the-attention-index). A session whose journal does not verify keeps the rows its
 * commits kept (attentionOfStoredJournal).
 */
function fillAttention(db: Database): void {
  const sessions = db.prepare(`SELECT ${SESSION_COLUMNS} FROM jw_sessions ORDER BY session_id`).all() as SessionRecord[];
  const events = db.prepare<[string], [number, string, number, string, string]>('SELECT seq, event_id, epoch, body, hash FROM jw_events WHERE session_id = ? ORDER BY seq').raw();
  const kept = db.prepare<[string], number>('SELECT count(*) FROM jw_attention WHERE session_id = ?').pluck();
  const clear = db.prepare('DELETE FROM jw_attention WHERE session_id = ?');
  const insert = db.prepare(`INSERT INTO jw_attention (${ATTENTION_COLUMNS}) VALUES (${ATTENTION_COLUMNS.split(', ').map(() => '?').join(', ')})`);
  for (const record of sessions) {
    const id = record.session_id as SessionId;
    const rows: EventRow[] = events.all(id).map(([seq, eventId, epoch, body, hash]) => ({ sessionId: id, seq, eventId, epoch, body, hash }));
    const verified = attentionOfStoredJournal(id, () => toSession(record), () => rows);
    if (verified === null && (kept.get(id) ?? 0) > 0) continue;
    clear.run(id);
    for (const row of verified ?? attentionOfJournal(id, rows.map((r) => r.body))) insert.run(...attentionValues(row, (b) => (b ? 1 : 0)));
  }
}

/** Whether the file holds the journal's own tables: with no schema version, a journal set back to 0, not a foreign file. */
const holdsJournalTables = (db: Database): boolean =>
  (db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE type = 'table' AND name IN ('jw_sessions', 'jw_events')").get() as { n: number }).n > 0;

/** A journal whose version was set back to 0 (an edit, a tool): damaged, not another application's file. */
const lostVersion = (path: string): StoreUnavailableError =>
  new StoreUnavailableError('store_failure',
    `${path} holds a jingwei journal's tables (jw_sessions, jw_events) but no schema version (its user_version is 0: set back by an edit or a tool). ` +
    'It is a damaged journal, not another application\'s file, and is not opened: do not start a new journal in its place; restore it from a backup (docs/operator-guide.md, "Restoring a backup"), or set user_version back by hand');

/**
 * Why a file with tables but no schema version is not opened: another application's database, or a journal whose
 * version was set back to 0, which "give the journal its own file" would have an operator start over beside.
 */
function foreignOrDamaged(db: Database, path: string): StoreUnavailableError {
  if (holdsJournalTables(db)) return lostVersion(path);
  return new StoreUnavailableError('store_failure', `${path} already holds other tables and is not a jingwei journal; give the journal its own file`);
}

function refuseForeign(db: Database, path: string, options: SqliteStoreOptions): void {
  const { version, tables } = schemaState(db);
  if (version !== 0) return;
  if (tables > 0) throw foreignOrDamaged(db, path);
  if (options.mustExist) throw new StorePathError('store_not_journal', path, 'holds no jingwei journal (it is an empty database)');
}

function prepareReadonly(db: Database, path: string, options: SqliteStoreOptions): void {
  db.pragma('trusted_schema = OFF');
  quickCheck(db, options);
  const { version, tables } = schemaState(db);
  if (version > SQLITE_SCHEMA_VERSION) {
    throw schemaTooNew(path, version, SQLITE_SCHEMA_VERSION);
  }
  if (version === 0) {
    if (tables > 0 && holdsJournalTables(db)) throw lostVersion(path);
    throw new StorePathError('store_not_journal', path, tables === 0
      ? 'holds no jingwei journal (it is an empty database)'
      : 'is a SQLite database but not a jingwei journal (it has no jw_sessions table)');
  }
  if (version !== SQLITE_SCHEMA_VERSION) {
    throw new StoreUnavailableError('store_failure', `${path} is at schema version ${version}; open it once writable to upgrade it to ${SQLITE_SCHEMA_VERSION}`);
  }
}

function quickCheck(db: Database, options: SqliteStoreOptions): void {
  if (!options.verifyOnOpen) return;
  const result = db.pragma('quick_check', { simple: true });
  if (result !== 'ok') throw new JournalCorruptError('*', -1, 'storage', `quick_check failed: ${String(result)}`);
}
