import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { openSqliteStore, SQLITE_SCHEMA_VERSION } from '../../src/sqlite.js';
import type { CallId, OperationKey, TaskId } from '../../src/ids.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { commitAs } from '../../src/store/owner-commit.js';
import { JOURNAL_PAGE_SIZE } from '../../src/store/sqlite/schema.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { checkIndexFilled, checkReviewedListed, MAIL_SESSION, reviewNotExecuted, sqliteBackToVersion, writeMails } from '../support/pre-index-journal.js';

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
    assert.deepEqual(task.charged, { toolCalls: 1, toolOutputBytes: 0, journalBytes: 0 });
    assert.equal(task.reservedOutputBytes, 0);
    await store.close();
    const raw = new Database(path, { readonly: true });
    assert.equal(raw.pragma('user_version', { simple: true }), SQLITE_SCHEMA_VERSION);
    const tables = raw.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").all() as Array<{ name: string }>;
    assert.ok(tables.some((t) => t.name === 'jw_attention'), 'the attention index is created by the upgrade');
    assert.ok(tables.some((t) => t.name === 'jw_decisions'), 'the decision inbox is created by the upgrade');
    raw.close();
  });

  it('migrates a version-2 journal (tasks and operations keyed store-wide) to per-session keys, keeping every row', async () => {
    const path = tempDbPath(dir, 'v2');
    const db = new Database(path);
    db.exec(`
      CREATE TABLE jw_sessions (session_id TEXT PRIMARY KEY, owner TEXT, held INTEGER NOT NULL, epoch INTEGER NOT NULL,
        last_seq INTEGER NOT NULL, head_hash TEXT NOT NULL, body_bytes INTEGER NOT NULL) STRICT;
      CREATE TABLE jw_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, event_id TEXT NOT NULL, epoch INTEGER NOT NULL,
        body TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (session_id, seq)) STRICT;
      CREATE TABLE jw_tasks (task_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, state TEXT NOT NULL,
        limit_tool_calls INTEGER NOT NULL, limit_output_bytes INTEGER NOT NULL, charged_tool_calls INTEGER NOT NULL,
        charged_output_bytes INTEGER NOT NULL, reserved_output_bytes INTEGER NOT NULL, stop_reason TEXT,
        reservations TEXT NOT NULL DEFAULT '[]') STRICT;
      CREATE TABLE jw_operations (task_id TEXT NOT NULL, key TEXT NOT NULL, session_id TEXT NOT NULL, call_id TEXT NOT NULL,
        event_id TEXT NOT NULL, PRIMARY KEY (task_id, key)) STRICT;
      INSERT INTO jw_sessions VALUES ('s', 'old-host', 0, 1, -1, '${'0'.repeat(64)}', 0);
      INSERT INTO jw_tasks VALUES ('t', 's', 'running', 128, 1000, 2, 10, 0, NULL, '[]');
      INSERT INTO jw_operations VALUES ('t', 'op-k', 's', 'call-old', 'evt-old');
      PRAGMA user_version = 2;`);
    db.close();
    const store = openSqliteStore(path);
    const owner = await store.acquire('s', { owner: 'new-host' });
    assert.deepEqual((await owner.task('t')).charged, { toolCalls: 2, toolOutputBytes: 10, journalBytes: 0 });
    assert.equal((await owner.task('t')).limits.journalBytes, 8 * 1024 * 1024, 'an existing task takes the default journal limit');
    // The migrated operation row still conditions a commit on the latest attempt, in its own session.
    const latest = { taskId: 't' as TaskId, key: 'op-k' as OperationKey };
    await commitAs(owner, { events: [], expectLatestAttempt: { ...latest, callId: 'call-old' as CallId } });
    await assert.rejects(commitAs(owner, { events: [], expectLatestAttempt: { ...latest, callId: 'call-new' as CallId } }), { code: 'not_latest_attempt' });
    // Another session may now have a task of the same id; its operation of the same key is not this one's.
    const other = await store.acquire('s-other', { owner: 'new-host' });
    assert.equal((await other.startTask('t')).sessionId, 's-other');
    await assert.rejects(commitAs(other, { events: [], expectLatestAttempt: { ...latest, callId: 'call-old' as CallId } }), { code: 'not_latest_attempt' });
    await store.close();
    const raw = new Database(path, { readonly: true });
    assert.equal(raw.pragma('user_version', { simple: true }), SQLITE_SCHEMA_VERSION);
    assert.deepEqual(raw.prepare('SELECT session_id, task_id, charged_tool_calls FROM jw_tasks ORDER BY session_id').all(), [
      { session_id: 's', task_id: 't', charged_tool_calls: 2 },
      { session_id: 's-other', task_id: 't', charged_tool_calls: 0 },
    ]);
    assert.deepEqual(raw.prepare('SELECT session_id, task_id, key, call_id, event_id FROM jw_operations').all(), [
      { session_id: 's', task_id: 't', key: 'op-k', call_id: 'call-old', event_id: 'evt-old' },
    ]);
    raw.close();
  });

  it('fills the attention index from the journal when it upgrades a version-3 journal: the queue lists, and the guard refuses to repeat, a mail left in doubt', async () => {
    const path = tempDbPath(dir, 'v3');
    const writer = openSqliteStore(path);
    const inDoubt = await writeMails(writer);
    await writer.close();
    // Version 3's layout: no attention index, no inbox, no recorded or lease times, no index of events by id.
    const db = new Database(path);
    db.exec(`DROP TABLE jw_attention; DROP TABLE jw_decisions; DROP INDEX jw_events_event_id;
      ALTER TABLE jw_sessions DROP COLUMN lease_expires_at; ALTER TABLE jw_sessions DROP COLUMN recorded_at;
      PRAGMA user_version = 3;`);
    db.close();
    const store = openSqliteStore(path);
    await checkIndexFilled(store, inDoubt);
    await store.close();
  });

  it('computes the attention index again when it upgrades the previous version: a row an older release kept by rules since corrected is replaced', async () => {
    const path = tempDbPath(dir, 'previous');
    const writer = openSqliteStore(path);
    const inDoubt = await writeMails(writer);
    await writer.close();
    // The previous release, whose rules left this mail's row settled (its index said so; its journal never did).
    const db = new Database(path);
    db.prepare("UPDATE jw_attention SET status = 'resolved' WHERE call_id = ?").run(inDoubt);
    sqliteBackToVersion(db, SQLITE_SCHEMA_VERSION - 1);
    db.close();
    const store = openSqliteStore(path);
    await checkIndexFilled(store, inDoubt);
    await store.close();
    const raw = new Database(path, { readonly: true });
    assert.equal(raw.pragma('user_version', { simple: true }), SQLITE_SCHEMA_VERSION);
    raw.close();
  });

  it('an upgrade from the previous version lists a call a not_executed review left resolved there as reviewed_not_executed', async () => {
    const path = tempDbPath(dir, 'reviewed');
    const writer = openSqliteStore(path);
    const mail = await writeMails(writer);
    await reviewNotExecuted(writer, mail);
    await checkReviewedListed(writer, mail);
    await writer.close();
    // What the last release before the status (schema version 9) kept for that review.
    const db = new Database(path);
    db.prepare("UPDATE jw_attention SET status = 'resolved' WHERE call_id = ?").run(mail);
    sqliteBackToVersion(db, 9);
    db.close();
    const store = openSqliteStore(path);
    await checkReviewedListed(store, mail);
    await store.close();
  });

  it('keeps the rows its commits kept for a journal damaged since, when it computes the index again on an upgrade', async () => {
    const path = tempDbPath(dir, 'damaged');
    const writer = openSqliteStore(path);
    const inDoubt = await writeMails(writer);
    await writer.close();
    // The start marker of the mail in doubt is damaged on disk: computed from what still decodes, its call would read
    // as never started, out of the queue, and the guard would let the mail go again.
    const db = new Database(path);
    const marker = db.prepare("SELECT seq FROM jw_events WHERE body LIKE '%tool_started%' AND body LIKE ? ORDER BY seq LIMIT 1").pluck().get(`%${inDoubt}%`);
    assert.equal(typeof marker, 'number');
    db.prepare("UPDATE jw_events SET body = '{\"damaged\":' WHERE seq = ?").run(marker);
    sqliteBackToVersion(db, SQLITE_SCHEMA_VERSION - 1);
    db.close();
    const store = openSqliteStore(path);
    const queue = await store.attention();
    assert.deepEqual(queue.items.map((i) => [i.callId, i.status, i.inDoubt]), [[inDoubt, 'outcome_unknown', true]], 'still listed, in doubt');
    await assert.rejects(store.loadHistory(MAIL_SESSION), { code: 'journal_corrupt' }, 'and the journal is reported corrupt');
    await store.close();
  });

  it('an upgrade keeps the rows of a session whose owner row is missing or unreadable, and still computes the others', async () => {
    const path = tempDbPath(dir, 'odd-sessions');
    const writer = openSqliteStore(path);
    const inDoubt = await writeMails(writer);
    const other = await writer.acquire('other', { owner: 'h' });
    await other.release();
    await writer.close();
    const db = new Database(path);
    // One session's owner row is gone; another's holds a number no row can (past 2^53): neither journal verifies.
    db.prepare('DELETE FROM jw_sessions WHERE session_id = ?').run(MAIL_SESSION);
    db.prepare("UPDATE jw_sessions SET epoch = 9007199254740993 WHERE session_id = 'other'").run();
    sqliteBackToVersion(db, SQLITE_SCHEMA_VERSION - 1);
    db.close();
    const store = openSqliteStore(path);
    assert.deepEqual((await store.attention()).items.map((i) => [i.callId, i.status]), [[inDoubt, 'outcome_unknown']], 'the mail in doubt is still listed');
    await store.close();
  });

  it('a damaged journal from before the index lists every call it cannot show settled as in doubt', async () => {
    const path = tempDbPath(dir, 'v3-damaged');
    const writer = openSqliteStore(path);
    const inDoubt = await writeMails(writer);
    await writer.close();
    const db = new Database(path);
    const marker = db.prepare("SELECT seq FROM jw_events WHERE body LIKE '%tool_started%' AND body LIKE ? ORDER BY seq LIMIT 1").pluck().get(`%${inDoubt}%`);
    db.prepare("UPDATE jw_events SET body = '{\"damaged\":' WHERE seq = ?").run(marker);
    db.exec(`DROP TABLE jw_attention; DROP TABLE jw_decisions; DROP INDEX jw_events_event_id;
      ALTER TABLE jw_sessions DROP COLUMN lease_expires_at; ALTER TABLE jw_sessions DROP COLUMN recorded_at;
      PRAGMA user_version = 3;`);
    db.close();
    const store = openSqliteStore(path);
    const open = (await store.attention()).items.map((i) => [i.callId, i.status, i.inDoubt]);
    assert.deepEqual(open, [[inDoubt, 'outcome_unknown', true]], 'its start marker unreadable, the mail is in doubt, not never started');
    await store.close();
  });

  it('opens a current journal without its write lock: another process paused inside a write does not keep the queue from being read', async () => {
    const path = tempDbPath(dir, 'paused-writer');
    const writer = openSqliteStore(path);
    const inDoubt = await writeMails(writer);
    await writer.close();
    // A host paused (SIGSTOP, a debugger) inside a write holds the file's write lock for as long as it stays paused.
    const paused = new Database(path);
    paused.prepare('BEGIN IMMEDIATE').run();
    try {
      const reader = openSqliteStore(path, { mustExist: true, busyTimeoutMs: 200 });
      const queue = await reader.attention();
      assert.deepEqual(queue.items.map((i) => i.callId), [inDoubt], 'the call in doubt is in view');
      await reader.close();
    } finally {
      paused.prepare('ROLLBACK').run();
      paused.close();
    }
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

  it('refuses a journal whose recorded schema version was set back below its tables, naming the mismatch', async () => {
    const path = tempDbPath(dir, 'set-back');
    const store = openSqliteStore(path);
    await (await store.acquire('s', { owner: 'h' })).release();
    await store.close();
    for (const version of [1, 2, 3, 4, 5, 6]) {
      const db = new Database(path);
      db.pragma(`user_version = ${version}`);
      db.close();
      assert.throws(() => openSqliteStore(path), (error: unknown) => {
        assert.equal((error as { code?: unknown }).code, 'store_failure', String(error));
        assert.match((error as Error).message, new RegExp(`records schema version ${version}, but its tables do not match that version: the upgrade to version \\d+ found what it adds already there \\(.*\\)\\. The file was edited or damaged`));
        return true;
      });
      const raw = new Database(path, { readonly: true });
      assert.equal(raw.pragma('user_version', { simple: true }), version, 'nothing was changed');
      raw.close();
    }
  });

  // u125 #6: a journal whose version was set back to 0 was called another application's file ("give the journal its
  // own file"), which would have an operator start a new journal beside the one holding every call.
  it('refuses a journal whose version was set back to 0 as a damaged journal, writable or read-only, and changes nothing', async () => {
    const path = tempDbPath(dir, 'version-zero');
    const store = openSqliteStore(path);
    await (await store.acquire('s', { owner: 'h' })).release();
    await store.close();
    const db = new Database(path);
    db.pragma('user_version = 0');
    db.close();
    for (const readonly of [false, true]) {
      assert.throws(() => openSqliteStore(path, { readonly }), (error: unknown) => {
        assert.equal((error as { code?: unknown }).code, 'store_failure', String(error));
        assert.match((error as Error).message, /holds a jingwei journal's tables \(jw_sessions, jw_events\) but no schema version .* It is a damaged journal, not another application's file, and is not opened: do not start a new journal in its place/);
        return true;
      });
    }
    const raw = new Database(path, { readonly: true });
    assert.equal(raw.pragma('user_version', { simple: true }), 0, 'nothing was changed');
    assert.equal((raw.prepare('SELECT count(*) AS n FROM jw_sessions').get() as { n: number }).n, 1);
    raw.close();
  });

  it('refuses a newer schema than this code understands', () => {
    const path = tempDbPath(dir, 'newer');
    const db = new Database(path);
    db.pragma('user_version = 99');
    db.close();
    assert.throws(() => openSqliteStore(path), { code: 'schema_too_new', message: /version 99; this code understands up to \d+: a newer release of jingwei has opened it/ });
    // Refused without taking the write lock: a writer of the newer release holding it does not turn this into store_busy.
    const writer = new Database(path);
    writer.prepare('BEGIN IMMEDIATE').run();
    try {
      assert.throws(() => openSqliteStore(path, { busyTimeoutMs: 100 }), { code: 'schema_too_new' });
    } finally {
      writer.prepare('ROLLBACK').run();
      writer.close();
    }
  });

  it('creates a new journal with small pages, and keeps the pages of one created with other pages', async () => {
    const pageSizeOf = (path: string): number => {
      const raw = new Database(path, { readonly: true });
      try {
        return raw.pragma('page_size', { simple: true }) as number;
      } finally {
        raw.close();
      }
    };
    // Outputs larger than a page make overflow chains; they must read back and verify like small ones.
    const runtime = createToolRuntime({
      tools: [{ name: 'big', metadata: new ToolMetadata('returns a large text', { type: 'object' }).withEffect('read_only', 'r1'), execute: async () => 'x'.repeat(20_000) }],
      grants: { agent: '*' },
    });
    const callsThenRead = async (path: string): Promise<void> => {
      const store = openSqliteStore(path);
      const owner = await store.acquire('s', { owner: 'host' });
      await owner.startTask('t');
      const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent', turnId: 'turn' });
      for (let i = 0; i < 3; i++) assert.equal((await gateway.call('big', {})).result.outcome.status, 'succeeded');
      await store.close();
      const reopened = openSqliteStore(path, { verifyOnOpen: true });
      // loadHistory verifies every row: decode, sequence, ids, epochs, the hash chain and the head.
      const history = await reopened.loadHistory('s');
      assert.equal(history.filter((e) => e.kind.type === 'tool_result').length, 3);
      await reopened.close();
    };
    const fresh = tempDbPath(dir, 'pages-new');
    await callsThenRead(fresh);
    assert.equal(JOURNAL_PAGE_SIZE, 1024);
    assert.equal(pageSizeOf(fresh), JOURNAL_PAGE_SIZE);
    // A journal created with 4 KiB pages, as earlier versions did: opened, written and read, it keeps them.
    const earlier = tempDbPath(dir, 'pages-earlier');
    const db = new Database(earlier);
    db.pragma('page_size = 4096');
    db.pragma('journal_mode = WAL');
    db.close();
    await callsThenRead(earlier);
    assert.equal(pageSizeOf(earlier), 4096);
  });
});
