/**
 * The task ledger joins the hash chain (docs/design.md#the-task-ledger-in-the-chain): a task row changed in the
 * database behind the store's back (charges reset, limits raised, a stopped task running again) is named by
 * `checkTaskLedger` and by `jingwei verify`, on SQLite and PostgreSQL; an untampered store, a takeover that settled
 * an abandoned reservation and an imported session verify clean.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { EventDraft } from '../../src/event/types.js';
import { newCallId, newOperationKey, newTurnId, type TaskId } from '../../src/ids.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { createJournalStore } from '../../src/backend.js';
import type { JournalBackend } from '../../src/store/rows.js';
import { fileAnchorSink } from '../../src/store/anchors.js';
import { exportRustJournal } from '../../src/store/rust-format.js';
import { commitAs } from '../../src/store/owner-commit.js';
import type { SessionOwner, SessionStore } from '../../src/store/types.js';
import { cli, cliAsync, tamper } from '../cli/helpers.js';
import { adminPool, describePostgres, freshSchema, openPostgresStore } from '../support/postgres.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir('jingwei-task-ledger-');
const turn = newTurnId();
const keys = generateKeyPairSync('ed25519');
const PUBLIC = join(dir, 'anchor.pub.pem');
writeFileSync(PUBLIC, keys.publicKey.export({ type: 'spki', format: 'pem' }) as string);

function call(task: string, id: string): EventDraft {
  return {
    turnId: turn,
    kind: { type: 'tool_call', call: { id: id as never, name: 'work', arguments: {}, operation: { taskId: task as TaskId, key: newOperationKey(), contract: { effect: 'idempotent', revision: 'r1' }, retry: null, startMarker: true } } },
  };
}

/** Runs one call of `task` through admission, its start marker and (unless `open`) its result, as the runtime does. */
async function runCall(owner: SessionOwner, task: string, open = false): Promise<void> {
  const id = newCallId();
  await commitAs(owner, { events: [call(task, id), { turnId: turn, kind: { type: 'tool_started', callId: id } }], budget: { taskId: task as TaskId, admit: { maxOutputBytes: 40 } } });
  if (open) return;
  await commitAs(owner, { events: [{ turnId: turn, kind: { type: 'tool_result', result: { callId: id, outcome: { status: 'succeeded', output: 'ok' } } } }], budget: { taskId: task as TaskId, settle: { chargeOutputBytes: 2 } } });
}

/**
 * `s-ledger`: task t1 (two calls, the second abandoned mid-body by a fenced owner; the next owner stops the task,
 * charging the abandoned reservation), t2 started and completed, t3 left running with one call. `s-copy`: its
 * export imported under another id, then t1 started again there.
 */
async function build(store: SessionStore, anchors?: string): Promise<void> {
  const anchor = anchors ? { anchor: { privateKey: keys.privateKey, sink: fileAnchorSink(anchors) } } : {};
  const a = await store.acquire('s-ledger', { owner: 'host-a', ...anchor });
  await a.startTask('t1', { limits: { toolCalls: 5, toolOutputBytes: 100 } });
  await runCall(a, 't1');
  await runCall(a, 't1', true);
  const b = await store.acquire('s-ledger', { owner: 'host-b', takeover: true, ...anchor });
  const stopped = await b.stopTask('t1', 'operator stop');
  assert.deepEqual(stopped.charged, { toolCalls: 2, toolOutputBytes: 42, journalBytes: stopped.charged.journalBytes }, 'the abandoned reservation is charged in full');
  await b.startTask('t2');
  await b.completeTask('t2');
  await b.startTask('t3');
  await runCall(b, 't3');
  await b.release();
  const copy = (await store.exportJsonl('s-ledger')).replaceAll('"session_id":"s-ledger"', '"session_id":"s-copy"');
  await store.importJsonl(copy, { owner: 'importer' });
  const c = await store.acquire('s-copy', { owner: 'host-c' });
  assert.equal((await c.startTask('t1')).charged.toolCalls, 0, 'the imported session has no task rows: t1 starts anew');
  await c.release();
}

async function assertLedgerBroken(store: SessionStore, task: string, pattern: RegExp): Promise<void> {
  await assert.rejects(store.checkTaskLedger!('s-ledger'), (e: unknown) => {
    const error = e as { code?: string; reason?: string; message: string };
    assert.equal(error.code, 'journal_corrupt', error.message);
    assert.equal(error.reason, 'task_ledger');
    assert.match(error.message, new RegExp(`task "${task}"`));
    assert.match(error.message, pattern);
    return true;
  });
}

/** The tamperings, each against a fresh build; `sql` runs them against the store's own tables. */
const TAMPERINGS: readonly { name: string; sql: (t: string) => string; task: string; pattern: RegExp }[] = [
  { name: 'tool-call charges reset', sql: (t) => `UPDATE ${t} SET charged_tool_calls = 0 WHERE session_id = 's-ledger' AND task_id = 't3'`, task: 't3', pattern: /charged 0 tool calls, the chain records 1/ },
  { name: 'output charges reset', sql: (t) => `UPDATE ${t} SET charged_output_bytes = 0 WHERE session_id = 's-ledger' AND task_id = 't1'`, task: 't1', pattern: /charged 0 output bytes, the chain records at least 42/ },
  { name: 'journal charges reset', sql: (t) => `UPDATE ${t} SET charged_journal_bytes = 0 WHERE session_id = 's-ledger' AND task_id = 't3'`, task: 't3', pattern: /charged 0 journal bytes/ },
  { name: 'limits raised', sql: (t) => `UPDATE ${t} SET limit_tool_calls = 1000 WHERE session_id = 's-ledger' AND task_id = 't1'`, task: 't1', pattern: /limit toolCalls 1000, the chain records 5/ },
  { name: 'stopped task running again', sql: (t) => `UPDATE ${t} SET state = 'running', stop_reason = NULL WHERE session_id = 's-ledger' AND task_id = 't1'`, task: 't1', pattern: /says running, the chain records stopped/ },
  { name: 'completed task running again', sql: (t) => `UPDATE ${t} SET state = 'running' WHERE session_id = 's-ledger' AND task_id = 't2'`, task: 't2', pattern: /says running, the chain records completed/ },
];

describe('task ledger in the chain: SQLite', () => {
  it('a deleted task row cannot be told from an imported session\'s task: listed as not covered, never as matching', async () => {
    const path = tempDbPath(dir, 'deleted');
    const store = openSqliteStore(path);
    await build(store);
    await store.close();
    tamper(path, `DELETE FROM jw_tasks WHERE session_id = 's-ledger' AND task_id = 't2'`);
    const reopened = openSqliteStore(path);
    assert.deepEqual(await reopened.checkTaskLedger!('s-ledger'), { covered: ['t1', 't3'], notCovered: ['t2'] });
    await reopened.close();
  });

  it('an untampered store verifies clean, after a takeover that settled an abandoned reservation and with an imported session', async () => {
    const path = tempDbPath(dir, 'clean');
    const store = openSqliteStore(path);
    await build(store);
    assert.deepEqual(await store.checkTaskLedger!('s-ledger'), { covered: ['t1', 't2', 't3'], notCovered: [] });
    assert.deepEqual(await store.checkTaskLedger!('s-copy'), { covered: ['t1'], notCovered: ['t2', 't3'] });
    // The original's format has no such event: the export drops the task changes.
    const rust = exportRustJournal(await store.loadHistory('s-ledger'));
    assert.doesNotMatch(rust, /task_ledger/);
    await store.close();
    const r = cli(['verify', path]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /ok {7}s-ledger: journal intact/);
    assert.match(r.stdout, /task ledger matches the chain: t1, t2, t3/);
    assert.match(r.stdout, /task ledger not covered \(no row of it was stored, as in an imported session, or the journal holds none of its changes, as one written before tasks were journaled\): t2, t3/);
    const json = JSON.parse(cli(['verify', path, 's-ledger', '--json']).stdout) as { task_ledger: unknown };
    assert.deepEqual(json.task_ledger, { covered: ['t1', 't2', 't3'], not_covered: [] });
    const events = cli(['events', path, 's-ledger']);
    assert.equal(events.code, 0, events.stderr);
    assert.match(events.stdout, /task t1 {2}stopped \(operator stop\) {2}calls 2\/5 {2}output 42\/100 B/);
  });

  it('a session written to while it is checked is not called corrupt, and a row tampered with on it still is', async () => {
    const path = tempDbPath(dir, 'live');
    const store = openSqliteStore(path);
    await build(store);
    const host = await store.acquire('s-ledger', { owner: 'host-live', takeover: true });
    // A reader over the same backend whose task reads let the host commit first, as a live session does between reads.
    const backend = (store as unknown as { backend: JournalBackend }).backend;
    let commitsBeforeRead = 0;
    const racing: JournalBackend = Object.create(backend, {
      readTask: {
        value: async (sessionId: never, taskId: string) => {
          if (commitsBeforeRead > 0 && taskId === 't3') {
            commitsBeforeRead--;
            await runCall(host, 't3');
          }
          return backend.readTask(sessionId, taskId);
        },
      },
    });
    const reader = createJournalStore(racing);
    commitsBeforeRead = 2;
    assert.deepEqual(await reader.checkTaskLedger!('s-ledger'), { covered: ['t1', 't2', 't3'], notCovered: [] });
    assert.deepEqual(await reader.checkTaskLedger!('s-ledger'), { covered: ['t1', 't2', 't3'], notCovered: [] });
    assert.equal(commitsBeforeRead, 0, 'both checks met a commit between their reads');
    // Another task's row reset behind the store's back, while the session moves: named all the same.
    tamper(path, `UPDATE jw_tasks SET charged_tool_calls = 0 WHERE session_id = 's-ledger' AND task_id = 't1'`);
    commitsBeforeRead = 1;
    await assertLedgerBroken(reader, 't1', /charged 0 tool calls/);
    assert.equal(commitsBeforeRead, 0);
    // And on a session that does not move.
    await host.release();
    await assertLedgerBroken(reader, 't1', /charged 0 tool calls/);
    await store.close();
  });

  for (const t of TAMPERINGS) {
    it(`${t.name}: named by checkTaskLedger and by jingwei verify, with and without --key/--anchors`, async () => {
      const path = tempDbPath(dir, 'tampered');
      const anchors = join(dir, `anchors-${t.name.replaceAll(' ', '-')}.jsonl`);
      const store = openSqliteStore(path);
      await build(store, anchors);
      await store.close();
      assert.equal(cli(['verify', path, 's-ledger', '--key', PUBLIC, '--anchors', anchors]).code, 0);
      tamper(path, t.sql('jw_tasks'));
      const reopened = openSqliteStore(path);
      await assertLedgerBroken(reopened, t.task, t.pattern);
      await reopened.close();
      for (const extra of [[], ['--key', PUBLIC, '--anchors', anchors]]) {
        const r = cli(['verify', path, 's-ledger', ...extra]);
        assert.equal(r.code, 1, r.stdout + r.stderr);
        assert.match(r.stdout, /^CORRUPT {2}s-ledger: seq \d+, reason task_ledger\n/);
        assert.match(r.stdout, new RegExp(`task \\\\"${t.task}\\\\"|task "${t.task}"`));
      }
    });
  }
});

describePostgres('task ledger in the chain: PostgreSQL', (url) => {
  it('an untampered store verifies clean; every tampering of a task row is named', async () => {
    const schema = freshSchema();
    const store = await openPostgresStore(url, { schema });
    await build(store);
    assert.deepEqual(await store.checkTaskLedger!('s-ledger'), { covered: ['t1', 't2', 't3'], notCovered: [] });
    assert.deepEqual(await store.checkTaskLedger!('s-copy'), { covered: ['t1'], notCovered: ['t2', 't3'] });
    await store.close();
    for (const t of TAMPERINGS) {
      const fresh = freshSchema();
      const s = await openPostgresStore(url, { schema: fresh });
      await build(s);
      await adminPool(url).query(t.sql(`"${fresh}".jw_tasks`));
      await assertLedgerBroken(s, t.task, t.pattern);
      await s.close();
    }
  });

  it('a reset of a task\'s charges is named by jingwei verify --key --anchors through a postgres:// URL', async () => {
    const schema = freshSchema();
    const anchors = join(dir, `anchors-pg-${schema}.jsonl`);
    const store = await openPostgresStore(url, { schema });
    await build(store, anchors);
    await store.close();
    const target = new URL(url);
    target.searchParams.set('schema', schema);
    const verify = (...extra: string[]) => cliAsync(['verify', target.toString(), 's-ledger', ...extra]);
    const clean = await verify('--key', PUBLIC, '--anchors', anchors);
    assert.equal(clean.code, 0, clean.stdout + clean.stderr);
    assert.match(clean.stdout, /task ledger matches the chain: t1, t2, t3/);
    assert.match(clean.stdout, /anchors verified: /);
    // Charges reset in the database: the hash chain and the anchors still verify, the ledger does not.
    await adminPool(url).query(TAMPERINGS[0]!.sql(`"${schema}".jw_tasks`));
    for (const extra of [[], ['--key', PUBLIC, '--anchors', anchors]]) {
      const r = await verify(...extra);
      assert.equal(r.code, 1, r.stdout + r.stderr);
      assert.match(r.stdout, /^CORRUPT {2}s-ledger: seq \d+, reason task_ledger\n/);
      assert.match(r.stdout, /task \\?"t3\\?": the stored row has charged 0 tool calls, the chain records 1/);
    }
  });
});
