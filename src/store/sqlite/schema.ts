import { JournalCorruptError, StorePathError, StoreUnavailableError } from '../../errors.js';
import type { Database } from './driver.js';
import { SQLITE_SCHEMA_VERSION, type SqliteStoreOptions } from './options.js';

export { SQLITE_SCHEMA_VERSION };


const SCHEMA = `
CREATE TABLE jw_sessions (
  session_id TEXT PRIMARY KEY, owner TEXT, held INTEGER NOT NULL, epoch INTEGER NOT NULL,
  last_seq INTEGER NOT NULL, head_hash TEXT NOT NULL, body_bytes INTEGER NOT NULL, lease_expires_at INTEGER
) STRICT;
CREATE TABLE jw_events (
  session_id TEXT NOT NULL, seq INTEGER NOT NULL, event_id TEXT NOT NULL, epoch INTEGER NOT NULL,
  body TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (session_id, seq)
) STRICT;
CREATE TABLE jw_tasks (
  task_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, state TEXT NOT NULL,
  limit_tool_calls INTEGER NOT NULL, limit_output_bytes INTEGER NOT NULL,
  charged_tool_calls INTEGER NOT NULL, charged_output_bytes INTEGER NOT NULL,
  reserved_output_bytes INTEGER NOT NULL, stop_reason TEXT, reservations TEXT NOT NULL DEFAULT '[]'
) STRICT;
CREATE TABLE jw_operations (
  task_id TEXT NOT NULL, key TEXT NOT NULL, session_id TEXT NOT NULL, call_id TEXT NOT NULL, event_id TEXT NOT NULL,
  PRIMARY KEY (task_id, key)
) STRICT;
`;

/** Version 1 → 2: each outstanding output reservation, so one left by a fenced owner can be settled. */
const MIGRATE_1_TO_2 = "ALTER TABLE jw_tasks ADD COLUMN reservations TEXT NOT NULL DEFAULT '[]'";

/** Version 2 → 3: when the holder's lease runs out (docs/design.md#leases); null for sessions held before it. */
const MIGRATE_LEASES = 'ALTER TABLE jw_sessions ADD COLUMN lease_expires_at INTEGER';

const tableCount = (db: Database): number =>
  (db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE type = 'table'").get() as { n: number }).n;

/** Sets the connection up (WAL, synchronous=FULL), then creates or upgrades the journal's tables in one transaction. */
export function prepareDatabase(db: Database, path: string, options: SqliteStoreOptions): void {
  if (options.readonly) {
    prepareReadonly(db, path, options);
    return;
  }
  // Before anything writes (even the switch to WAL rewrites the header): never touch somebody else's database.
  refuseForeign(db, path, options);
  const mode = db.pragma('journal_mode = WAL', { simple: true });
  if (path !== ':memory:' && mode !== 'wal') {
    throw new StoreUnavailableError('store_failure', `SQLite refused WAL mode (got ${String(mode)}); is ${path} on a network filesystem?`);
  }
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  db.pragma('trusted_schema = OFF');
  quickCheck(db, options);
  db.transaction(() => {
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > SQLITE_SCHEMA_VERSION) {
      throw new StoreUnavailableError('schema_too_new', `${path} has schema version ${version}; this code understands up to ${SQLITE_SCHEMA_VERSION}`);
    }
    if (version === 0) {
      const tables = tableCount(db);
      if (tables > 0) {
        throw new StoreUnavailableError('store_failure', `${path} already holds other tables and is not a jingwei journal; give the journal its own file`);
      }
      if (options.mustExist) throw new StorePathError('store_not_journal', path, 'holds no jingwei journal (it is an empty database)');
      db.exec(SCHEMA);
    } else {
      if (version < 2) db.exec(MIGRATE_1_TO_2);
      if (version < 3) db.exec(MIGRATE_LEASES);
    }
    if (version !== SQLITE_SCHEMA_VERSION) db.pragma(`user_version = ${SQLITE_SCHEMA_VERSION}`);
  }).immediate();
}

function refuseForeign(db: Database, path: string, options: SqliteStoreOptions): void {
  if ((db.pragma('user_version', { simple: true }) as number) !== 0) return;
  if (tableCount(db) > 0) {
    throw new StoreUnavailableError('store_failure', `${path} already holds other tables and is not a jingwei journal; give the journal its own file`);
  }
  if (options.mustExist) throw new StorePathError('store_not_journal', path, 'holds no jingwei journal (it is an empty database)');
}

function prepareReadonly(db: Database, path: string, options: SqliteStoreOptions): void {
  db.pragma('trusted_schema = OFF');
  quickCheck(db, options);
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > SQLITE_SCHEMA_VERSION) {
    throw new StoreUnavailableError('schema_too_new', `${path} has schema version ${version}; this code understands up to ${SQLITE_SCHEMA_VERSION}`);
  }
  if (version === 0) {
    const tables = tableCount(db);
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
