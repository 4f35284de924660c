import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir();

/** The version-1 schema as released, with one task that has a reservation outstanding. */
function versionOneFile(): string {
  const path = tempDbPath(dir, 'v1');
  const db = new Database(path);
  db.exec(`
    CREATE TABLE jw_sessions (session_id TEXT PRIMARY KEY, owner TEXT, held INTEGER NOT NULL, epoch INTEGER NOT NULL,
      last_seq INTEGER NOT NULL, head_hash TEXT NOT NULL, body_bytes INTEGER NOT NULL) STRICT;
    CREATE TABLE jw_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, event_id TEXT NOT NULL, epoch INTEGER NOT NULL,
      body TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (session_id, seq)) STRICT;
    CREATE TABLE jw_tasks (task_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, state TEXT NOT NULL,
      limit_tool_calls INTEGER NOT NULL, limit_output_bytes INTEGER NOT NULL, charged_tool_calls INTEGER NOT NULL,
      charged_output_bytes INTEGER NOT NULL, reserved_output_bytes INTEGER NOT NULL, stop_reason TEXT) STRICT;
    CREATE TABLE jw_operations (task_id TEXT NOT NULL, key TEXT NOT NULL, session_id TEXT NOT NULL, call_id TEXT NOT NULL,
      event_id TEXT NOT NULL, PRIMARY KEY (task_id, key)) STRICT;
    INSERT INTO jw_sessions VALUES ('s', 'old-host', 0, 1, -1, '${'0'.repeat(64)}', 0);
    INSERT INTO jw_tasks VALUES ('t', 's', 'running', 128, 1000, 1, 0, 0, NULL);
    PRAGMA user_version = 1;`);
  db.close();
  return path;
}

describe('SQLite schema versions', () => {
  it('migrates a version-1 journal in place, keeping its tasks', async () => {
    const path = versionOneFile();
    const store = openSqliteStore(path);
    const owner = await store.acquire('s', { owner: 'new-host' });
    const task = await owner.task('t');
    assert.deepEqual(task.charged, { toolCalls: 1, toolOutputBytes: 0 });
    assert.equal(task.reservedOutputBytes, 0);
    await store.close();
    const raw = new Database(path, { readonly: true });
    assert.equal(raw.pragma('user_version', { simple: true }), 3);
    raw.close();
  });

  it('refuses a database that holds other tables, and leaves it untouched', () => {
    const path = tempDbPath(dir, 'foreign');
    const db = new Database(path);
    db.exec('CREATE TABLE customers (id INTEGER PRIMARY KEY)');
    db.close();
    assert.throws(() => openSqliteStore(path), { code: 'store_failure' });
    const raw = new Database(path, { readonly: true });
    const tables = raw.prepare("SELECT name FROM sqlite_schema WHERE type = 'table'").all();
    raw.close();
    assert.deepEqual(tables, [{ name: 'customers' }]);
  });

  it('refuses a newer schema than this code understands', () => {
    const path = tempDbPath(dir, 'newer');
    const db = new Database(path);
    db.pragma('user_version = 99');
    db.close();
    assert.throws(() => openSqliteStore(path), { code: 'schema_too_new' });
  });
});
