/**
 * `jingwei verify` against real SQLite journals, intact and tampered with through a raw better-sqlite3 connection
 * after the store is closed (as test/store/sqlite-corruption.test.ts does).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HistoryBuilder, succeeded } from '../support/history.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { alphaHistory, cli, forgeStore, quietHistory, tamper, writeStore } from './helpers.js';

const dir = tempDir('jingwei-cli-verify-');

async function journal(): Promise<string> {
  const path = tempDbPath(dir, 'journal');
  await writeStore(path, { alpha: alphaHistory(), quiet: quietHistory() });
  return path;
}

interface Corruption { session_id: string; ok: false; corruption: { seq: number; reason: string; message: string } }

function expectCorrupt(path: string, session: string, seq: number, reason: string): void {
  const r = cli(['verify', path, session]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stdout, new RegExp(`^CORRUPT {2}${session}: seq ${seq}, reason ${reason}\\n`));
  assert.match(r.stdout, new RegExp(`journal of session ${session} is corrupt at seq ${seq} \\(${reason}\\)`));
  assert.match(r.stdout, /Nothing was repaired/);
  const json = JSON.parse(cli(['verify', path, session, '--json']).stdout) as Corruption;
  assert.equal(json.ok, false);
  assert.equal(json.session_id, session);
  assert.equal(json.corruption.seq, seq);
  assert.equal(json.corruption.reason, reason);
}

describe('jingwei verify', () => {
  it('an intact journal: what was checked, exit 0', async () => {
    const path = await journal();
    const r = cli(['verify', path, 'alpha']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    assert.match(r.stdout, /^ok {7}alpha: journal intact\n/);
    assert.match(r.stdout, /10 events \(seq 0\.\.9 contiguous, event ids unique\); hash chain verified up to the head on the owner row/);
    assert.match(r.stdout, /ownership epoch 1, released \(last owner test-host\)/);
    assert.match(r.stdout, /tool evidence valid: 4 tool calls/);
    // An imported journal written with no task changes: its task's row cannot be checked against the chain, and
    // verify says so rather than calling it matching (docs/design.md#the-task-ledger-in-the-chain).
    assert.match(r.stdout, /task ledger not covered \(no row of it was stored, as in an imported session, or the journal holds none of its changes, as one written before tasks were journaled\): retry-task\n/);
    assert.doesNotMatch(r.stdout, /task ledger matches/);
    assert.match(r.stdout, /lookup rows match the chain: 4 attention rows, 4 operation rows\n/);
    assert.deepEqual(JSON.parse(cli(['verify', path, 'alpha', '--json']).stdout), {
      session_id: 'alpha', ok: true, events: 10, epoch: 1, owner: 'test-host', held: false, tool_calls: 4, checked: 'integrity_only',
      task_ledger: { covered: [], not_covered: ['retry-task'] },
      lookup_rows: { checked: true, attention_rows: 4, operation_rows: 4 },
    });
  });

  it('one changed payload byte: hash_mismatch at that seq, exit 1', async () => {
    const path = await journal();
    tamper(path, `UPDATE jw_events SET body = replace(body, 'charge_card', 'charge_cars') WHERE session_id = 'alpha' AND seq = 7`);
    expectCorrupt(path, 'alpha', 7, 'hash_mismatch');
  });

  it('a deleted middle row: seq_gap', async () => {
    const path = await journal();
    tamper(path, `DELETE FROM jw_events WHERE session_id = 'alpha' AND seq = 4`);
    expectCorrupt(path, 'alpha', 4, 'seq_gap');
  });

  it('a deleted last row: head_mismatch', async () => {
    const path = await journal();
    tamper(path, `DELETE FROM jw_events WHERE session_id = 'alpha' AND seq = 9`);
    expectCorrupt(path, 'alpha', 9, 'head_mismatch');
  });

  it('truncated JSON: malformed_event; a re-stamped epoch: epoch', async () => {
    const a = await journal();
    tamper(a, `UPDATE jw_events SET body = substr(body, 1, length(body) - 5) WHERE session_id = 'quiet' AND seq = 2`);
    expectCorrupt(a, 'quiet', 2, 'malformed_event');
    const b = await journal();
    tamper(b, `UPDATE jw_events SET epoch = 9 WHERE session_id = 'quiet' AND seq = 1`);
    expectCorrupt(b, 'quiet', 1, 'epoch');
  });

  it('events whose owner row was deleted: reported as damage, not as a missing session', async () => {
    const path = await journal();
    tamper(path, `DELETE FROM jw_sessions WHERE session_id = 'quiet'`);
    expectCorrupt(path, 'quiet', 0, 'head_mismatch');
  });

  it('without a session: every session, exit 1 if any is damaged', async () => {
    const path = await journal();
    const clean = cli(['verify', path]);
    assert.equal(clean.code, 0, clean.stderr);
    assert.match(clean.stdout, /2 sessions verified, all intact\./);
    tamper(path, `UPDATE jw_sessions SET head_hash = '${'f'.repeat(64)}' WHERE session_id = 'quiet'`);
    const r = cli(['verify', path]);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /^ok {7}alpha: journal intact$/m);
    assert.match(r.stdout, /^CORRUPT {2}quiet: seq 3, reason head_mismatch$/m);
    assert.match(r.stdout, /2 sessions verified, 1 with problems\./);
  });

  it('an intact chain holding impossible tool evidence: INVALID, exit 1', async () => {
    const h = new HistoryBuilder('orphan', 'turn-o');
    h.message('hi');
    h.result('never-called', succeeded());
    const path = tempDbPath(dir, 'orphan');
    // Import refuses this evidence; it is written the way only a forger with database access could.
    await forgeStore(path, { orphan: h.build() });
    const r = cli(['verify', path, 'orphan']);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /^INVALID {2}orphan: tool evidence invalid_evidence\n/);
    assert.match(r.stdout, /event 1: result for never-called, which has no earlier call/);
  });

  it('an unknown session: exit 2', async () => {
    const path = await journal();
    const r = cli(['verify', path, 'nobody']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /no session "nobody"/);
  });
});
