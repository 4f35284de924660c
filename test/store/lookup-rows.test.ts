/**
 * The lookup rows are checked (docs/design.md#the-lookup-rows-are-checked). An attention row set to `resolved` by
 * hand hid a charge in doubt from `jingwei queue` and turned off the in-doubt guard, so the model's repeat of the
 * charge ran; a deleted operation row let a caller key run its step again. `jingwei verify` (with signed anchors
 * too) said `ok` both times: neither row is in the hash chain. `checkLookupRows` recomputes both from the verified
 * chain and names the first row that disagrees; a session written to while it is checked is not called corrupt.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createJournalStore } from '../../src/backend.js';
import { JournalCorruptError } from '../../src/errors.js';
import { openSqliteStore } from '../../src/sqlite.js';
import type { JournalBackend } from '../../src/store/rows.js';
import type { SessionOwner, SessionStore } from '../../src/store/types.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { ToolGateway } from '../../src/tool/types.js';
import Database from 'better-sqlite3';
import { cli, tamper } from '../cli/helpers.js';
import { adminPool, describePostgres, freshSchema, openPostgresStore } from '../support/postgres.js';
import { endHungBodies, never } from '../support/runtime.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir('jingwei-lookup-rows-');

function gatewayOf(owner: SessionOwner): ToolGateway {
  const effect = (name: string, e: 'idempotent' | 'non_idempotent') => new ToolMetadata(name, { type: 'object' }).withEffect(e, 'v1');
  return createToolRuntime({
    tools: [
      { name: 'lookup', metadata: effect('lookup', 'idempotent'), execute: async () => 'found' },
      { name: 'flaky', metadata: effect('flaky', 'idempotent'), execute: async () => { throw new Error('upstream 502'); } },
      { name: 'charge', metadata: effect('charge', 'non_idempotent'), execute: () => never() },
    ],
    grants: { agent: '*' },
  }).bind({ owner, taskId: 't', caller: 'agent' });
}

/**
 * Session `s`: a success, a failure and its retry, a caller-keyed success, and a charge whose host was fenced in its body
 * (another owner took the session over), the body ending with no result: five operations.
 */
async function build(store: SessionStore): Promise<void> {
  const a = await store.acquire('s', { owner: 'host-a' });
  await a.startTask('t');
  const gateway = gatewayOf(a);
  await gateway.call('lookup', { q: 1 });
  const failed = await gateway.call('flaky', {});
  await gateway.callWithOptions('flaky', {}, { retry: prepareToolRetry(await store.loadHistory('s'), failed.call.id) });
  await gateway.callWithOptions('lookup', { q: 2 }, { operationKey: 'step-2' });
  void gateway.call('charge', { order: 'order-1' }).catch(() => {});
  for (;;) {
    const history = await store.loadHistory('s');
    const charge = history.flatMap((e) => (e.kind.type === 'tool_call' && e.kind.call.name === 'charge' ? [e.kind.call.id] : []))[0];
    if (history.some((e) => e.kind.type === 'tool_started' && e.kind.callId === charge)) break;
    await new Promise((r) => setTimeout(r, 5));
  }
  const b = await store.acquire('s', { owner: 'host-b', takeover: true });
  // The charge's body ends (it throws) with no result written: its owner was fenced. A release here waits for it.
  endHungBodies();
  await b.release();
}

async function assertNamed(store: SessionStore, reason: 'attention_index' | 'operation_index' | 'head_mismatch', pattern: RegExp): Promise<void> {
  await assert.rejects(store.checkLookupRows!('s'), (error: unknown) => {
    assert.ok(error instanceof JournalCorruptError);
    assert.equal(error.reason, reason);
    assert.match(error.message, pattern);
    return true;
  });
}

const TAMPERINGS = [
  { name: 'a charge in doubt marked resolved', sql: (t: string) => `UPDATE ${t.replace('TABLE', 'jw_attention')} SET status = 'resolved' WHERE tool = 'charge'`, reason: 'attention_index', pattern: /status "resolved"; the chain gives "no_result"/ },
  { name: 'the attention row of a charge in doubt deleted', sql: (t: string) => `DELETE FROM ${t.replace('TABLE', 'jw_attention')} WHERE tool = 'charge'`, reason: 'attention_index', pattern: /has no attention row; the chain gives it no_result/ },
  { name: 'an operation row deleted', sql: (t: string) => `DELETE FROM ${t.replace('TABLE', 'jw_operations')} WHERE key = 'step-2'`, reason: 'operation_index', pattern: /operation step-2 of task t has no operation row, or the index over those rows is damaged; its latest attempt is call /u },
  { name: 'an operation row planted for an operation the chain does not hold (pass r64 #4)', sql: (t: string) => `INSERT INTO ${t.replace('TABLE', 'jw_operations')} (task_id, key, session_id, call_id, event_id) VALUES ('t', 'order-9', 's', 'toolcall_ghost', 'evt_ghost')`, reason: 'operation_index', pattern: /an operation row names operation order-9 of task t \(call toolcall_ghost\), which the chain does not hold/ },
  { name: 'the owner row\'s last recorded time set ahead (pass r64 #7)', sql: (t: string) => `UPDATE ${t.replace('TABLE', 'jw_sessions')} SET recorded_at = 4102444800000 WHERE session_id = 's'`, reason: 'head_mismatch', pattern: /the owner row's last recorded time is 2100-01-01T00:00:00.000Z; the journal's last event was recorded at 20/ },
  { name: 'the owner row\'s byte count set low (pass r64 #7)', sql: (t: string) => `UPDATE ${t.replace('TABLE', 'jw_sessions')} SET body_bytes = 0 WHERE session_id = 's'`, reason: 'head_mismatch', pattern: /the owner row counts 0 bytes of events; the journal holds \d+/ },
  { name: 'an operation row pointed at an earlier attempt', sql: (t: string) => `UPDATE ${t.replace('TABLE', 'jw_operations')} SET call_id = 'toolcall_forged' WHERE key = 'step-2'`, reason: 'operation_index', pattern: /names call toolcall_forged/ },
] as const;

describe('the lookup rows are checked against the chain (SQLite)', () => {
  it('an untampered session verifies clean, with what was compared', async () => {
    const path = tempDbPath(dir, 'clean');
    const store = openSqliteStore(path);
    await build(store);
    assert.deepEqual(await store.checkLookupRows!('s'), { checked: true, attentionRows: 4, operationRows: 4 });
    await store.close();
    const r = cli(['verify', path, 's']);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /lookup rows match the chain: 4 attention rows, 4 operation rows\n/);
    assert.deepEqual((JSON.parse(cli(['verify', path, 's', '--json']).stdout) as { lookup_rows: unknown }).lookup_rows, { checked: true, attention_rows: 4, operation_rows: 4 });
  });

  for (const t of TAMPERINGS) {
    it(`${t.name}: named by checkLookupRows and by jingwei verify`, async () => {
      const path = tempDbPath(dir, 'tampered');
      const store = openSqliteStore(path);
      await build(store);
      await store.close();
      tamper(path, t.sql('TABLE'));
      const reopened = openSqliteStore(path);
      await assertNamed(reopened, t.reason, t.pattern);
      await reopened.close();
      const r = cli(['verify', path, 's']);
      assert.equal(r.code, 1, r.stdout + r.stderr);
      assert.match(r.stdout, new RegExp(`^CORRUPT {2}s: seq \\d+, reason ${t.reason}\\n`));
      if (t.reason !== 'head_mismatch') {
        assert.match(r.stdout, /The chain is intact, but a row the queue, the in-doubt guard and caller keys read \(or an index over those rows\) was changed outside the library or damaged, or written by a process of an older release still running after this release upgraded the store/);
      }
    });
  }

  for (const index of [
    { name: 'jw_attention_binding', damaged: 'session_id, task_id, args_digest, tool', stated: 'session_id, task_id, tool, args_digest' },
    { name: 'jw_attention_status', damaged: 'session_id, status, task_id, key', stated: 'status, session_id, task_id, key' },
  ]) {
    it(`${index.name} damaged under rows that are right (the in-doubt guard and the queue read through it): named by checkLookupRows and jingwei verify (pass r64 #2)`, async () => {
      const path = tempDbPath(dir, 'index');
      const store = openSqliteStore(path);
      await build(store);
      await store.close();
      // An index whose entries no longer match its stated columns, as a damaged page leaves it; quick_check passes.
      const raw = new Database(path);
      try {
        raw.exec(`DROP INDEX ${index.name}; CREATE INDEX ${index.name} ON jw_attention (${index.damaged})`);
        raw.unsafeMode(true);
        raw.pragma('writable_schema = ON');
        raw.prepare('UPDATE sqlite_schema SET sql = ? WHERE name = ?').run(`CREATE INDEX ${index.name} ON jw_attention (${index.stated})`, index.name);
        raw.pragma('writable_schema = OFF');
      } finally {
        raw.close();
      }
      const reopened = openSqliteStore(path, { verifyOnOpen: true });
      await assertNamed(reopened, 'attention_index', new RegExp(`rows agree with the chain, but an index over them does not .*${index.name}`));
      await reopened.close();
      const r = cli(['verify', path]);
      assert.equal(r.code, 1, r.stdout + r.stderr);
      assert.match(r.stdout, /^CORRUPT {2}s: seq \d+, reason attention_index\n/);
    });
  }

  it('the primary-key index of jw_operations damaged under a row that is right: the message allows for the index, not only a missing row', async () => {
    const path = tempDbPath(dir, 'operations-index');
    const store = openSqliteStore(path);
    await build(store);
    await store.close();
    // The table rebuilt with its key columns in another order, its schema text then put back: the key's index no
    // longer matches its stated columns, as a damaged page leaves it, while every row is still there.
    const stated = (raw: Database.Database) => raw.prepare("SELECT sql FROM sqlite_schema WHERE name = 'jw_operations'").pluck().get() as string;
    const raw = new Database(path);
    try {
      const original = stated(raw);
      raw.exec(`CREATE TABLE jw_operations_damaged (${original.slice(original.indexOf('(') + 1).replace('PRIMARY KEY (session_id, task_id, key)', 'PRIMARY KEY (key, session_id, task_id)')};
        INSERT INTO jw_operations_damaged SELECT * FROM jw_operations; DROP TABLE jw_operations; ALTER TABLE jw_operations_damaged RENAME TO jw_operations`);
      raw.unsafeMode(true);
      raw.pragma('writable_schema = ON');
      raw.prepare("UPDATE sqlite_schema SET sql = ? WHERE name = 'jw_operations'").run(original);
      raw.pragma('writable_schema = OFF');
      assert.equal((raw.prepare('SELECT count(*) FROM jw_operations').pluck().get() as number), 4, 'every operation row is still there');
    } finally {
      raw.close();
    }
    const r = cli(['verify', path, 's']);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /^CORRUPT {2}s: seq \d+, reason operation_index\n/);
    assert.match(r.stdout, /has no operation row, or the index over those rows is damaged/);
  });

  it('a session whose owner row was deleted is still named by a store-wide verify (pass r64 #5)', async () => {
    const path = tempDbPath(dir, 'orphan');
    const store = openSqliteStore(path);
    await build(store);
    const other = await store.acquire('t-only', { owner: 'h' });
    await other.startTask('t');
    await other.release();
    await store.close();
    tamper(path, "DELETE FROM jw_sessions WHERE session_id = 's'");
    const reopened = openSqliteStore(path);
    assert.deepEqual((await reopened.listSessions()).map((x) => x.sessionId), ['t-only']);
    assert.deepEqual(await reopened.sessionsWithoutOwnerRow!(), ['s']);
    await reopened.close();
    const r = cli(['verify', path]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /^CORRUPT {2}s: seq 0, reason head_mismatch\n/m);
    assert.match(r.stdout, /^ok {7}t-only: journal intact/m);
  });

  it('a session written to while its rows are read is not called corrupt, and a tampered row on it still is', async () => {
    const path = tempDbPath(dir, 'live');
    const store = openSqliteStore(path);
    await build(store);
    const host = await store.acquire('s', { owner: 'host-live', takeover: true });
    await host.startTask('t2');
    const live = createToolRuntime({
      tools: [{ name: 'lookup', metadata: new ToolMetadata('lookup', { type: 'object' }).withEffect('idempotent', 'v1'), execute: async () => 'found' }],
      grants: { agent: '*' },
    }).bind({ owner: host, taskId: 't2', caller: 'agent' });
    // A reader over the same backend whose attention scan lets the host make a call first, as a live session does.
    const backend = (store as unknown as { backend: JournalBackend }).backend;
    let commitsBeforeRead = 0;
    const racing: JournalBackend = Object.create(backend, {
      scanAttention: {
        value: async (scan: Parameters<NonNullable<JournalBackend['scanAttention']>>[0]) => {
          if (commitsBeforeRead > 0) {
            commitsBeforeRead--;
            await live.call('lookup', { q: commitsBeforeRead });
          }
          return backend.scanAttention!(scan);
        },
      },
    });
    const reader = createJournalStore(racing);
    commitsBeforeRead = 2;
    const report = await reader.checkLookupRows!('s');
    assert.equal(report.checked, true);
    assert.equal(commitsBeforeRead, 0, 'the check met two commits between its reads');
    assert.equal(report.attentionRows, 6);
    commitsBeforeRead = 4;
    assert.deepEqual(await reader.checkLookupRows!('s'), { checked: false, attentionRows: 0, operationRows: 0 }, 'a session that never holds still is reported unchecked, not corrupt');
    tamper(path, TAMPERINGS[0].sql('TABLE'));
    commitsBeforeRead = 1;
    await assertNamed(reader, 'attention_index', TAMPERINGS[0].pattern);
    await host.release();
    await store.close();
  });
});

describePostgres('the lookup rows are checked against the chain (PostgreSQL)', (url) => {
  it('an untampered session verifies clean; every tampering is named', async () => {
    const schema = freshSchema();
    const store = await openPostgresStore(url, { schema });
    await build(store);
    assert.deepEqual(await store.checkLookupRows!('s'), { checked: true, attentionRows: 4, operationRows: 4 });
    assert.deepEqual(await store.sessionsWithoutOwnerRow!(), []);
    await store.close();
    const orphaned = freshSchema();
    const o = await openPostgresStore(url, { schema: orphaned });
    await build(o);
    await adminPool(url).query(`DELETE FROM "${orphaned}".jw_sessions WHERE session_id = 's'`);
    assert.deepEqual(await o.sessionsWithoutOwnerRow!(), ['s'], 'a session whose owner row was deleted is named (pass r64 #5)');
    await o.close();
    for (const t of TAMPERINGS) {
      const fresh = freshSchema();
      const s = await openPostgresStore(url, { schema: fresh });
      await build(s);
      await adminPool(url).query(t.sql(`"${fresh}".TABLE`));
      await assertNamed(s, t.reason, t.pattern);
      await s.close();
    }
  });
});
