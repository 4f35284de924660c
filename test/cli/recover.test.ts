/**
 * `jingwei recover`: a dry run of the startup routine over a real SQLite journal whose host was SIGKILLed. It lists
 * the abandoned session, its open calls and what each policy would do, changes nothing, and exits 1 while a session
 * is abandoned, 0 when none is, 2 for a bad policy. No assertion depends on how long anything took.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { copyFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import Database from 'better-sqlite3';
import { fileAnchorSink } from '../../src/store/anchors.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { decisionInbox } from '../../src/decisions.js';
import { assessSession } from '../../src/tool/assess.js';
import { ChildProcess } from '../support/child.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { cli, pendingPayGateway, tamper } from './helpers.js';

const crashing = fileURLToPath(new URL('../tool/children/recover-host.js', import.meta.url));
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface Planned {
  dry_run: boolean;
  policy: string;
  sessions: Array<{ session_id: string; owner: string; calls: Array<{ tool: string; would: string; reconciler_first: boolean; reason: string; inbox_review: { decision: string } | null }> }>;
}

it('plans the recovery of a SIGKILLed host\'s session without changing anything', async () => {
  const dir = tempDir();
  const path = tempDbPath(dir, 'journal');
  const empty = cli(['recover', path]);
  assert.equal(empty.code, 3, 'a missing store is a store error');

  // A lease the live child keeps on a loaded machine (a host whose lease ran out stops its calls).
  const child = new ChildProcess(crashing, [path, 's-crash', tempDbPath(dir, 'business'), '1000']);
  assert.deepEqual(await child.next(), { ready: true }, child.stderr);
  assert.deepEqual(await child.next(), { calling: 'send_mail' }, child.stderr);
  assert.equal((await child.exited).signal, 'SIGKILL');

  let run = cli(['recover', path, '--policy', 'retry_safe', '--json']);
  while (run.code === 0) {
    await pause(50);
    run = cli(['recover', path, '--policy', 'retry_safe', '--json']);
  }
  assert.equal(run.code, 1, run.stderr);
  const planned = JSON.parse(run.stdout) as Planned;
  assert.equal(planned.dry_run, true);
  assert.equal(planned.policy, 'retry_safe');
  assert.equal(planned.sessions.length, 1);
  assert.equal(planned.sessions[0]!.owner, 'crashing-host');
  // The same field name as 'jingwei sessions --json': when the lease runs (ran) out.
  assert.match(String((planned.sessions[0] as Record<string, unknown>).lease_expires_at), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.equal('lease_expired_at' in planned.sessions[0]!, false);
  assert.deepEqual(planned.sessions[0]!.calls.map((c) => [c.tool, c.reconciler_first, c.would]), [
    ['place_order', true, 'leave'],
    ['lookup', true, 'retry'],
    ['send_mail', true, 'leave'],
  ]);

  const suspended = cli(['recover', path]);
  assert.equal(suspended.code, 1);
  assert.match(suspended.stdout, /Dry run, policy suspend: 1 abandoned session\. Nothing was changed\./);
  assert.match(suspended.stdout, /Session s-crash/);
  assert.match(suspended.stdout, /reconciler first, then leave for a person/);
  assert.doesNotMatch(suspended.stdout, /then retry/);
  assert.match(suspended.stdout, /recoverAbandoned/);

  const bad = cli(['recover', path, '--policy', 'retry_all']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--policy "retry_all" is not one of suspend, retry_safe/);

  const store = await openSqliteStore(path);
  // Operators' review decisions waiting in the inbox: the routine journals them first and decides on them, and so
  // does the dry run (pass r63 #1b: it said "leave" for a call the routine then retried on a person's review).
  const callOf = (name: string) => assessSession(history).calls.find((c) => c.name === name)!.callId;
  const history = await store.loadHistory('s-crash');
  await decisionInbox(store).recordReview({ sessionId: 's-crash', callId: callOf('send_mail'), outcome: 'not_executed', evidence: 'no mail in the outbox', actor: 'alice' });
  await decisionInbox(store).recordReview({ sessionId: 's-crash', callId: callOf('place_order'), outcome: 'completed', evidence: 'the order is in the shop', actor: 'bob' });
  const reviewed = JSON.parse(cli(['recover', path, '--policy', 'retry_safe', '--json']).stdout) as Planned;
  assert.deepEqual(reviewed.sessions[0]!.calls.map((c) => [c.tool, c.would, c.inbox_review?.decision ?? null]), [
    ['place_order', 'settled', 'completed'],
    ['lookup', 'retry', null],
    ['send_mail', 'retry', 'not_executed'],
  ]);
  assert.match(cli(['recover', path, '--policy', 'retry_safe']).stdout, /journal alice's not_executed review, then reconciler first, then retry/);
  const [summary] = await store.listSessions();
  assert.equal(summary!.epoch, 1, 'the dry run took nothing over');
  assert.equal(summary!.owner, 'crashing-host');
  const owner = await store.acquire('s-crash', { owner: 'host', takeover: 'expired' });
  await owner.release();
  await store.close();
  const clear = cli(['recover', path]);
  assert.equal(clear.code, 0);
  assert.match(clear.stdout, /No abandoned sessions/);
});

it('names the held sessions that have no lease to run out (held before leases were recorded) instead of calling every lease live', async () => {
  const path = tempDbPath(tempDir(), 'unleased');
  const store = openSqliteStore(path);
  await store.acquire('s-old', { owner: 'old-host', heartbeat: false });
  await store.close();
  tamper(path, "UPDATE jw_sessions SET lease_expires_at = NULL WHERE session_id = 's-old'");
  const r = cli(['recover', path]);
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(r.stdout, /every held session's lease is live/);
  assert.match(r.stdout, /1 held session has no lease \(held before leases were recorded\), so it never expires by itself: s-old\./);
  assert.match(r.stdout, /takeover: true/);
});

it('--help says it is a dry run and that the host recovers with the library', () => {
  const help = cli(['recover', '--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /A dry run: changes nothing and takes over nothing/);
  assert.match(help.stdout, /holds no tools/);
  assert.match(help.stdout, /recoverAbandoned/);
});

it('prints abandoned sessions\' ids as every other command does: `ops a` and `ops<U+00A0>a` never print alike (r78 C #3)', async () => {
  const path = tempDbPath(tempDir(), 'lookalike');
  const store = openSqliteStore(path);
  for (const id of ['ops a', 'ops\u00A0a']) await store.acquire(id, { owner: 'gone-host', leaseMs: 100, heartbeat: false });
  await store.close();
  await pause(150);
  const r = cli(['recover', path]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stdout, /^Session ops\\u0020a owner/m);
  assert.match(r.stdout, /^Session ops\\u00A0a owner/m);
  const missing = cli(['inspect', path, 'ops\u00A0b']);
  assert.doesNotMatch(missing.stdout + missing.stderr, /ops\u00A0b/, 'an id the store does not hold is escaped too');
});

it('a host that died waiting for approvals: the dry run retries the one a person approved under retry_safe and says so, leaves the undecided one; inspect names it (u118 #1)', async () => {
  const dir = tempDir();
  const path = tempDbPath(dir, 'journal');
  const store = openSqliteStore(path);
  const owner = await store.acquire('s-pay', { owner: 'gone', leaseMs: 100, heartbeat: false });
  await owner.startTask('t');
  const gateway = pendingPayGateway(owner, 't');
  const approved = await gateway.call('pay', { to: 'alice', amount: 4900 });
  const undecided = await gateway.call('pay', { to: 'bob', amount: 10 });
  await decisionInbox(store).approve(approved.result.approval!.requestId, { actor: 'alice' });
  await store.close();

  let run = cli(['recover', path, '--policy', 'retry_safe', '--json']);
  while (run.code === 0) {
    await pause(50);
    run = cli(['recover', path, '--policy', 'retry_safe', '--json']);
  }
  assert.equal(run.code, 1, run.stderr);
  const calls = (JSON.parse(run.stdout) as { sessions: { calls: { call_id: string; would: string; reason: string; inbox_approval: { id: string; decision: string; actor: string } | null }[] }[] }).sessions[0]!.calls;
  assert.deepEqual(calls.map((c) => [c.call_id, c.would, c.inbox_approval?.decision ?? null]), [[approved.call.id, 'retry', 'approved'], [undecided.call.id, 'leave', null]]);
  assert.match(calls[0]!.reason, /was approved by alice, and no attempt has used the decision yet/);
  assert.match(calls[1]!.reason, /waits for a person's decision on its approval request/);
  const text = cli(['recover', path, '--policy', 'retry_safe']);
  assert.match(text.stdout, /use alice's approval: retry/);
  assert.doesNotMatch(text.stdout, /No open calls/);
  const suspended = JSON.parse(cli(['recover', path, '--json']).stdout) as { sessions: { calls: { would: string }[] }[] };
  assert.deepEqual(suspended.sessions[0]!.calls.map((c) => c.would), ['leave', 'leave']);
  const inspect = cli(['inspect', path, 's-pay']);
  assert.match(inspect.stdout, /1 call waits for a host to use the decision made on its approval request: approved by alice/);
  const inspectJson = JSON.parse(cli(['inspect', path, 's-pay', '--json']).stdout) as { decided_approvals: { call_id: string; actor: string }[] };
  assert.deepEqual(inspectJson.decided_approvals.map((a) => [a.call_id, a.actor]), [[approved.call.id, 'alice']]);
});

it('a session nobody holds whose approval a person decided after its host let it go: the retry_safe dry run lists it as the routine will use it, suspend does not (u121)', async () => {
  const dir = tempDir();
  const path = tempDbPath(dir, 'journal');
  const store = openSqliteStore(path);
  const owner = await store.acquire('s-released', { owner: 'host-a' });
  await owner.startTask('t');
  const gateway = pendingPayGateway(owner, 't');
  const approved = await gateway.call('pay', { to: 'alice' });
  const undecided = await gateway.call('pay', { to: 'bob' });
  await owner.release();
  await decisionInbox(store).approve(approved.result.approval!.requestId, { actor: 'alice' });
  await store.close();

  const run = cli(['recover', path, '--policy', 'retry_safe', '--json']);
  assert.equal(run.code, 1, 'a host should run the routine');
  const sessions = (JSON.parse(run.stdout) as { sessions: { session_id: string; released: boolean; owner: string; calls: { call_id: string; would: string }[] }[] }).sessions;
  assert.deepEqual(sessions.map((x) => [x.session_id, x.released, x.owner]), [['s-released', true, 'host-a']]);
  assert.deepEqual(sessions[0]!.calls.map((c) => [c.call_id, c.would]), [[approved.call.id, 'retry'], [undecided.call.id, 'leave']]);
  const text = cli(['recover', path, '--policy', 'retry_safe']);
  assert.match(text.stdout, /Dry run, policy retry_safe: 0 abandoned sessions, and 1 session nobody holds with approvals to use\. Nothing was changed\./);
  assert.match(text.stdout, /Session s-released, nobody holds it \(released by host-a, epoch 1\): the routine acquires it to use the decisions/);
  const suspended = cli(['recover', path, '--json']);
  assert.equal(suspended.code, 0);
  assert.deepEqual((JSON.parse(suspended.stdout) as { sessions: unknown[] }).sessions, []);
});

// u126: the dry run could not say that the routine, given the hosts' anchor, refuses a journal put back from a backup.
it('with --key and --anchors: a journal restored from a backup is shown as refused, as the routine given the anchor refuses it', async () => {
  const dir = tempDir();
  const path = tempDbPath(dir, 'journal');
  const anchors = join(dir, 'anchors.jsonl');
  const backup = join(dir, 'backup.db');
  const pub = join(dir, 'anchor.pub.pem');
  const keys = generateKeyPairSync('ed25519');
  writeFileSync(pub, keys.publicKey.export({ type: 'spki', format: 'pem' }));
  const store = openSqliteStore(path);
  const owner = await store.acquire('s-restored', { owner: 'host-a', anchor: { privateKey: keys.privateKey, sink: fileAnchorSink(anchors) }, leaseMs: 500 });
  await owner.startTask('t');
  const raw = new Database(path, { readonly: true });
  await raw.backup(backup);
  raw.close();
  await owner.append([{ turnId: 'turn-1', kind: { type: 'user_message', text: 'pay order o-1' } }]);
  // The host dies holding the session; the operator puts the backup back, and the lease it holds there runs out.
  await store.close();
  for (const suffix of ['-wal', '-shm']) rmSync(path + suffix, { force: true });
  copyFileSync(backup, path);
  await pause(600);

  const plain = JSON.parse(cli(['recover', path, '--json']).stdout) as { sessions: { session_id: string; problem: unknown }[] };
  assert.deepEqual(plain.sessions.map((x) => [x.session_id, x.problem]), [['s-restored', null]], 'without the anchor nothing tells');
  const run = cli(['recover', path, '--key', pub, '--anchors', anchors, '--json']);
  assert.equal(run.code, 1, run.stderr);
  const [session] = (JSON.parse(run.stdout) as { sessions: { calls: unknown[]; problem: { code: string; message: string } }[] }).sessions;
  assert.equal(session!.problem.code, 'anchor_mismatch');
  assert.match(session!.problem.message, /\(truncated\).*The routine given this anchor reports the session failed and takes nothing over\./);
  assert.deepEqual(session!.calls, []);
  const text = cli(['recover', path, '--key', pub, '--anchors', anchors]);
  assert.match(text.stdout, /anchor_mismatch: session s-restored at seq 1 \(truncated\)/);
  assert.equal(cli(['recover', path, '--key', pub]).code, 2, '--key needs --anchors');
  assert.equal(cli(['recover', path, '--anchors', anchors]).code, 2, '--anchors needs --key');
});
