/** `jingwei sessions` against real SQLite stores, run as the compiled program. */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { alphaHistory, cli, pendingPayments, quietHistory, tamper, writeStore } from './helpers.js';

const dir = tempDir('jingwei-cli-sessions-');

describe('jingwei sessions', () => {
  let path: string;
  before(async () => {
    path = tempDbPath(dir, 'journal');
    await writeStore(path, { alpha: alphaHistory(), quiet: quietHistory(), empty: [] });
  });

  it('lists every session with its events, epoch, owner and the calls needing attention; exit 0', () => {
    const r = cli(['sessions', path]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    const lines = r.stdout.split('\n');
    assert.match(lines[0]!, /^SESSION\s+EVENTS\s+EPOCH\s+OWNER\s+STATE\s+NEEDS ATTENTION$/);
    assert.match(r.stdout, /^alpha\s+10\s+1\s+test-host\s+released\s+3 \(1 needs_review, 2 retry_allowed\)$/m);
    assert.match(r.stdout, /^quiet\s+4\s+1\s+test-host\s+released\s+0$/m);
    assert.match(r.stdout, /^empty\s+0\s+1\s+test-host\s+released\s+0$/m);
    assert.match(r.stdout, /3 sessions, 14 events; 1 session with calls needing attention/);
  });

  it('--json gives the same facts to scripts', () => {
    const r = cli(['sessions', path, '--json']);
    assert.equal(r.code, 0, r.stderr);
    const doc = JSON.parse(r.stdout) as { sessions: Array<Record<string, unknown>> };
    const alpha = doc.sessions.find((s) => s.session_id === 'alpha')!;
    assert.deepEqual(alpha, {
      session_id: 'alpha', events: 10, epoch: 1, owner: 'test-host', held: false, lease_expires_at: null, lease_expired: false,
      needs_attention: 3, needs_review: 1, retry_allowed: 2, handled_failures: 0, reviews_waiting: 0, reviews_overtaken: 0, awaiting_approval: 0, problem: null,
    });
  });

  // u124 LOW 1: a session whose calls waited for a person's approval showed 0, as if nothing were waiting.
  it('counts the calls waiting for approval apart, in the table, the summary and --json', async () => {
    const approvals = tempDbPath(dir, 'approvals');
    await pendingPayments(approvals, [{ to: 'acme' }, { to: 'globex' }]);
    const r = cli(['sessions', approvals]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^s-1\s+\d+\s+1\s+host\s+released\s+0; 2 calls waiting for approval$/m);
    assert.match(r.stdout, /1 session with calls waiting for approval \('jingwei queue' lists the requests\)/);
    const json = JSON.parse(cli(['sessions', approvals, '--json']).stdout) as { sessions: { needs_attention: number; awaiting_approval: number }[] };
    assert.deepEqual(json.sessions.map((x) => [x.needs_attention, x.awaiting_approval]), [[0, 2]]);
  });

  it('shows a held session as held', async () => {
    const held = tempDbPath(dir, 'held');
    await writeStore(held, { busy: quietHistory() }, { release: false });
    const r = cli(['sessions', held]);
    assert.equal(r.code, 0, r.stderr);
    // Imported at epoch 1, then acquired (epoch 2) and kept.
    assert.match(r.stdout, /^busy\s+4\s+2\s+test-host\s+held\s+0$/m);
  });

  it('flags a held session whose lease ran out, in the table and in --json', async () => {
    const abandoned = tempDbPath(dir, 'abandoned');
    const store = openSqliteStore(abandoned);
    await store.acquire('gone', { owner: 'crashed-host', leaseMs: 100 });
    await store.close(); // stops the heartbeat without releasing: what a crash leaves behind
    const reader = openSqliteStore(abandoned);
    while ((await reader.listExpiredSessions()).length === 0) await new Promise((r) => setTimeout(r, 20));
    await reader.close();
    const r = cli(['sessions', abandoned]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^gone\s+0\s+1\s+crashed-host\s+held, lease expired\s+0$/m);
    const doc = JSON.parse(cli(['sessions', abandoned, '--json']).stdout) as { sessions: Array<Record<string, unknown>> };
    assert.equal(doc.sessions[0]!.lease_expired, true);
    assert.equal(doc.sessions[0]!.held, true);
    assert.match(String(doc.sessions[0]!.lease_expires_at), /^\d{4}-\d\d-\d\dT/);
  });

  it('reports a damaged journal with its seq and reason, and exits 1', async () => {
    const damaged = tempDbPath(dir, 'damaged');
    await writeStore(damaged, { alpha: alphaHistory(), quiet: quietHistory() });
    tamper(damaged, `UPDATE jw_events SET body = replace(body, 'hello', 'HELLO') WHERE session_id = 'quiet' AND seq = 0`);
    const r = cli(['sessions', damaged]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /^quiet\s+4\s+1\s+test-host\s+released\s+CORRUPT at seq 0 \(hash_mismatch\)$/m);
    assert.match(r.stdout, /^alpha\s.*3 \(1 needs_review, 2 retry_allowed\)$/m);
    assert.match(r.stdout, /1 damaged journal/);
    const json = JSON.parse(cli(['sessions', damaged, '--json']).stdout) as { sessions: Array<{ session_id: string; problem: unknown }> };
    assert.deepEqual(
      (json.sessions.find((s) => s.session_id === 'quiet')!.problem as { kind: string; seq: number; reason: string }),
      { ...(json.sessions.find((s) => s.session_id === 'quiet')!.problem as object), kind: 'journal_corrupt', seq: 0, reason: 'hash_mismatch' },
    );
  });

  it('an empty store: says so, exit 0', async () => {
    const empty = tempDbPath(dir, 'nothing');
    await writeStore(empty, {});
    const r = cli(['sessions', empty]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'No sessions in this store.\n');
  });

  it('a missing file: exit 3, and no file is created', () => {
    const missing = tempDbPath(dir, 'missing');
    const r = cli(['sessions', missing]);
    assert.equal(r.code, 3);
    assert.match(r.stderr, /no such file/);
    assert.equal(existsSync(missing), false);
  });

  it("somebody else's SQLite database or a text file: exit 3, and the file is left exactly as it was", () => {
    const other = tempDbPath(dir, 'other');
    const raw = new Database(other);
    raw.exec('CREATE TABLE customers (id INTEGER PRIMARY KEY)');
    raw.close();
    const bytes = readFileSync(other);
    const r = cli(['sessions', other]);
    assert.equal(r.code, 3);
    assert.match(r.stderr, /not a jingwei journal/);
    assert.deepEqual(readFileSync(other), bytes);

    const text = tempDbPath(dir, 'text');
    writeFileSync(text, 'this is not a database, just some words that are long enough to look like a header\n');
    const t = cli(['sessions', text]);
    assert.equal(t.code, 3);
    assert.match(t.stderr, /not a SQLite database/);
  });

  it('a directory: exit 3', () => {
    const r = cli(['sessions', dir]);
    assert.equal(r.code, 3);
    assert.match(r.stderr, /is a directory/);
  });
});
