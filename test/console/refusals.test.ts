/**
 * What the console refuses, tried with plain HTTP requests against the real program: an --actor the decision inbox
 * would refuse, a path outside the console's random path, no token, a wrong token, another console's cookie, a
 * wrong CSRF token, a Host header that is not the console's (DNS rebinding), a peer that is not loopback, a
 * read-only console, bad input and a stale decision. Each refusal says why with its status code and changes nothing:
 * the decision inbox and the journal are compared before and after.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { checkActor, isLoopbackAddress, networkRefusal, startConsole } from '../../src/cli/console/server.js';
import { decisionInbox } from '../../src/decisions.js';
import { InvalidInputError } from '../../src/errors.js';
import { createMemoryStore } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { cli, MAIN } from '../cli/helpers.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { crashAfterEffect, hidden, http, leaseExpired, login, pendingApprovals, said, startConsoleProcess, type ConsoleProcess } from './support.js';

describe('jingwei console refuses, changes nothing and says why', () => {
  const dir = tempDir('jingwei-console-refusals-');
  const db = tempDbPath(dir, 'refusals');
  const session = 'invoices-refusals';
  let callId = '';
  let approval = { session: '', requestId: '', callId: '' };
  let writer: ConsoleProcess;
  let reader: ConsoleProcess;

  /** The inbox and the journals as they are, to compare before and after the refused requests. */
  async function state(): Promise<string> {
    const store = openSqliteStore(db);
    try {
      const decisions = await decisionInbox(store).list({ limit: 1000 });
      const journals = await Promise.all([session, approval.session].map(async (s) => (await store.loadHistory(s)).map((e) => e.eventId)));
      return JSON.stringify({ decisions: decisions.items, journals });
    } finally {
      await store.close();
    }
  }

  before(async () => {
    [approval] = await pendingApprovals(db, ['refund-refusals']) as [typeof approval];
    callId = await crashAfterEffect(db, join(dir, 'effects.jsonl'), session);
    // Its reviews below are taken once the killed host's lease ran out, as in the other console tests.
    await leaseExpired(db, session);
    writer = await startConsoleProcess(db, ['--actor', 'bob']);
    reader = await startConsoleProcess(db, ['--read-only']);
  });
  after(async () => {
    await writer?.stop();
    await reader?.stop();
  });

  it('the command does not start without --actor (unless --read-only), on a port in use, or on a missing store', () => {
    const noActor = cli(['console', db]);
    assert.equal(noActor.code, 2);
    assert.match(noActor.stderr, /--actor is required \(the name recorded on every decision\), or give --read-only/);
    const busy = cli(['console', db, '--actor', 'bob', '--port', String(writer.port)]);
    assert.equal(busy.code, 2);
    assert.match(busy.stderr, new RegExp(`port ${writer.port} on 127\\.0\\.0\\.1 is in use`));
    const missing = cli(['console', join(dir, 'nothing.db'), '--read-only']);
    assert.equal(missing.code, 3);
    assert.match(missing.stderr, /no such file/);
  });

  it('the command refuses at start an --actor the decision inbox would refuse, by the inbox\'s own rule', async () => {
    for (const [actor, bytes] of [['a'.repeat(1025), 1025], ['é'.repeat(513), 1026]] as const) {
      // Bounded: a console that (wrongly) took the actor would serve until killed.
      const run = spawnSync(process.execPath, [MAIN, 'console', db, '--actor', actor], { encoding: 'utf8', input: '', timeout: 20_000, env: { ...process.env, NO_COLOR: '1' } });
      assert.equal(run.status, 2, run.stderr);
      assert.equal(run.stderr.split('\n')[0], `error: jingwei console: --actor is ${bytes} bytes, at most 1024 allowed: the decision inbox would refuse every decision made with it`);
      assert.doesNotMatch(run.stdout, /Open:/);
    }
    // The console's verdict is the inbox's, value by value (the inbox answers decision_not_found to an actor it takes).
    const memory = createMemoryStore();
    const verdict = (check: () => unknown): Promise<string> =>
      Promise.resolve().then(check).then(() => 'taken', (error: unknown) => (error instanceof InvalidInputError ? `refused: ${error.message}` : 'taken'));
    for (const actor of ['bob', ' ', '\u00a0', '\u200B', '\u2060\u00AD', 'a'.repeat(1024), 'a'.repeat(1025), 'é'.repeat(512), 'é'.repeat(513), 'x\u0000y', 'x\ud800y']) {
      const byInbox = await verdict(() => decisionInbox(memory).approve('approval_01a237a5-dfbc-7339-b97d-73f405e7f42d', { actor }));
      assert.equal(await verdict(() => checkActor(actor)), byInbox, JSON.stringify(actor));
    }
    await assert.rejects(startConsole({ store: memory, actor: 'a'.repeat(1025), readOnly: false }), /actor: is 1025 bytes, at most 1024 allowed/);
    await assert.rejects(startConsole({ store: memory, actor: '\u200B', readOnly: false }), /actor: is required unless the console is read-only/);
  });

  it('answers only under its random path, the one path its cookie is sent to', async () => {
    const before = await state();
    const cookie = await login(writer);
    const csrf = hidden((await http(writer.port, 'GET', writer.path(`/session/${session}/call/${callId}`), { cookie })).body, 'csrf');
    const elsewhere = [['GET', '/'], ['GET', `/session/${session}/call/${callId}`], ['GET', '/events'], ['POST', `/approval/${approval.requestId}`], ['GET', `${writer.prefix.slice(0, -1)}/`], ['GET', reader.path('/')]] as const;
    for (const [method, path] of elsewhere) {
      const reply = await http(writer.port, method, path, { cookie, ...(method === 'POST' ? { form: { csrf, decision: 'approve' } } : {}) });
      assert.equal(reply.status, 404, path);
      assert.match(said(reply), /there is no page at this address\. .* open that link\. Nothing was changed/);
      assert.ok(!reply.body.includes(writer.prefix), 'a page answered outside the console\'s path does not name it');
    }
    const tokenElsewhere = await http(writer.port, 'GET', `/?token=${writer.token}`);
    assert.equal(tokenElsewhere.status, 404);
    assert.equal(tokenElsewhere.headers['set-cookie'], undefined, 'the token obtains a cookie only under the console\'s path');
    const readerCookie = await login(reader);
    assert.equal((await http(writer.port, 'GET', writer.path('/'), { cookie: readerCookie })).status, 401, 'one console\'s cookie does not open another');
    const tossed = await http(writer.port, 'GET', writer.path('/'), { cookie: `jingwei_console=tossed-by-another-server; ${cookie}` });
    assert.equal(tossed.status, 200, 'a cookie of the same name set by another server beside the console\'s does not lock the operator out');
    assert.equal(await state(), before);
  });

  it('refuses every request without the token, or with a wrong one', async () => {
    const before = await state();
    const callPath = `/session/${session}/call/${callId}`;
    for (const [method, path] of [['GET', '/'], ['GET', callPath], ['GET', '/events'], ['POST', `${callPath}/review`], ['POST', `/approval/${approval.requestId}`]] as const) {
      const reply = await http(writer.port, method, writer.path(path), method === 'POST' ? { form: { csrf: 'x', outcome: 'not_executed', evidence: 'e', decision: 'approve' } } : {});
      assert.equal(reply.status, 401, `${method} ${path}`);
      assert.match(said(reply), /no valid console token\. Open the link the console printed/);
      assert.doesNotMatch(reply.body, /send_invoice/, 'nothing of the journal is shown');
    }
    const wrong = await http(writer.port, 'GET', writer.path('/?token=not-the-token'));
    assert.equal(wrong.status, 401);
    assert.match(said(wrong), /wrong token/);
    assert.equal(wrong.headers['set-cookie'], undefined);
    const forged = await http(writer.port, 'GET', writer.path('/'), { cookie: 'jingwei_console=forged' });
    assert.equal(forged.status, 401);
    assert.equal(await state(), before);
  });

  it('refuses a Host header that is not the console (DNS rebinding) and a peer that is not loopback', async () => {
    const before = await state();
    const cookie = await login(writer);
    const page = await http(writer.port, 'GET', writer.path(`/session/${session}/call/${callId}`), { cookie });
    assert.equal(page.status, 200);
    const csrf = hidden(page.body, 'csrf');
    const basis = hidden(page.body, 'basis');
    for (const host of ['evil.example', `evil.example:${writer.port}`, `127.0.0.1:${writer.port + 1}`, `192.168.1.20:${writer.port}`]) {
      const get = await http(writer.port, 'GET', writer.path('/'), { cookie, host });
      assert.equal(get.status, 421, host);
      assert.match(said(get), /is not this console .*\(DNS rebinding\)/);
      assert.ok(!get.body.includes(writer.prefix), 'a page another site may read does not name the console\'s path');
      const post = await http(writer.port, 'POST', writer.path(`/session/${session}/call/${callId}/review`), { cookie, host, form: { csrf, basis, outcome: 'not_executed', evidence: 'checked' } });
      assert.equal(post.status, 421, host);
    }
    assert.equal((await http(writer.port, 'GET', writer.path('/'), { cookie, host: `localhost:${writer.port}` })).status, 200, 'localhost names this console too');
    // The server listens on 127.0.0.1 only, so no other peer can connect; the gate checks the socket's peer all the same.
    assert.deepEqual(networkRefusal('10.0.0.7', `127.0.0.1:${writer.port}`, writer.port)?.status, 403);
    assert.match(networkRefusal('10.0.0.7', `127.0.0.1:${writer.port}`, writer.port)!.message, /only this machine \(loopback\), not 10\.0\.0\.7/);
    assert.equal(networkRefusal('::ffff:192.168.0.2', `127.0.0.1:${writer.port}`, writer.port)?.status, 403);
    assert.equal(networkRefusal(undefined, `127.0.0.1:${writer.port}`, writer.port)?.status, 403);
    assert.equal(networkRefusal('127.0.0.1', `127.0.0.1:${writer.port}`, writer.port), null);
    assert.deepEqual(['127.0.0.1', '127.8.9.10', '::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', '0.0.0.0', '1127.0.0.1'].map(isLoopbackAddress), [true, true, true, true, false, false, false]);
    assert.equal(await state(), before);
  });

  it('refuses a form without the CSRF token, with a wrong one, or from another origin', async () => {
    const before = await state();
    const cookie = await login(writer);
    const page = await http(writer.port, 'GET', writer.path(`/session/${session}/call/${callId}`), { cookie });
    const basis = hidden(page.body, 'basis');
    const csrf = hidden(page.body, 'csrf');
    const review = `/session/${session}/call/${callId}/review`;
    for (const form of [{ basis, outcome: 'not_executed', evidence: 'checked' }, { csrf: 'wrong', basis, outcome: 'not_executed', evidence: 'checked' }]) {
      const reply = await http(writer.port, 'POST', writer.path(review), { cookie, form });
      assert.equal(reply.status, 403);
      assert.match(said(reply), /CSRF token is missing or wrong .* Nothing was recorded/);
    }
    const decide = await http(writer.port, 'POST', writer.path(`/approval/${approval.requestId}`), { cookie, form: { csrf: `${csrf}x`, decision: 'approve' } });
    assert.equal(decide.status, 403);
    const cross = await http(writer.port, 'POST', writer.path(review), { cookie, origin: 'http://evil.example', form: { csrf, basis, outcome: 'not_executed', evidence: 'checked' } });
    assert.equal(cross.status, 403);
    assert.match(said(cross), /sent from http:\/\/evil\.example, not from this console/);
    // u145 F3: a client that sends no Origin was let through whatever its other headers said of where it came from.
    for (const [headers, from] of [[{ Referer: 'http://evil.example/x' }, /sent from http:\/\/evil\.example, not/], [{ 'Sec-Fetch-Site': 'cross-site' }, /sent from a cross-site page, not/], [{ Referer: '::' }, /sent from "::", not/]] as const) {
      const reply = await http(writer.port, 'POST', writer.path(review), { cookie, headers, form: { csrf, basis, outcome: 'not_executed', evidence: 'checked' } });
      assert.equal(reply.status, 403);
      assert.match(said(reply), from);
    }
    assert.equal(await state(), before);
  });

  it('a read-only console shows the pages, no forms, and refuses every decision', async () => {
    const before = await state();
    const cookie = await login(reader);
    const page = await http(reader.port, 'GET', reader.path(`/session/${session}/call/${callId}`), { cookie });
    assert.equal(page.status, 200);
    assert.match(page.body, /This console is read-only/);
    assert.doesNotMatch(page.body, /<form class="card"/);
    const writerCookie = await login(writer);
    const csrf = hidden((await http(writer.port, 'GET', writer.path(`/session/${session}/call/${callId}`), { cookie: writerCookie })).body, 'csrf');
    for (const path of [`/session/${session}/call/${callId}/review`, `/approval/${approval.requestId}`]) {
      const reply = await http(reader.port, 'POST', reader.path(path), { cookie, form: { csrf, outcome: 'not_executed', evidence: 'checked', decision: 'approve' } });
      assert.equal(reply.status, 403);
      assert.match(said(reply), /read-only \(--read-only\)\. Nothing was recorded/);
    }
    assert.equal(await state(), before);
  });

  it('bad input gets a clear message on the page; a stale decision is refused with the reason', async () => {
    const before = await state();
    const cookie = await login(writer);
    const path = `/session/${session}/call/${callId}`;
    const page = await http(writer.port, 'GET', writer.path(path), { cookie });
    const csrf = hidden(page.body, 'csrf');
    const basis = hidden(page.body, 'basis');
    const noOutcome = await http(writer.port, 'POST', writer.path(`${path}/review`), { cookie, form: { csrf, basis, outcome: 'maybe', evidence: 'checked' } });
    assert.equal(noOutcome.status, 400);
    assert.match(said(noOutcome), /Nothing was recorded: choose an outcome \(not_executed, completed, uncertain\)/);
    const noEvidence = await http(writer.port, 'POST', writer.path(`${path}/review`), { cookie, form: { csrf, basis, outcome: 'completed', evidence: '   ' } });
    assert.equal(noEvidence.status, 400);
    assert.match(said(noEvidence), /say what you checked/);
    const invisible = await http(writer.port, 'POST', writer.path(`${path}/review`), { cookie, form: { csrf, basis, outcome: 'completed', evidence: '\u200B\u2060\u00AD' } });
    assert.equal(invisible.status, 400, 'evidence of invisible characters alone says nothing (r88)');
    assert.match(said(invisible), /say what you checked/);
    const noDecision = await http(writer.port, 'POST', writer.path(`/approval/${approval.requestId}`), { cookie, form: { csrf, decision: 'later' } });
    assert.equal(noDecision.status, 400);
    assert.match(said(noDecision), /choose Approve or Deny/);
    const unknown = await http(writer.port, 'POST', writer.path('/approval/approval_nope'), { cookie, form: { csrf, decision: 'approve' } });
    assert.equal(unknown.status, 404);
    assert.match(said(unknown), /there is no approval request approval_nope/);
    for (const evidence of ['%ZZ', '%E0%A4%A', '%ED%A0%80']) {
      const lossy = await http(writer.port, 'POST', writer.path(`${path}/review`), {
        cookie, rawForm: `csrf=${encodeURIComponent(csrf)}&basis=${encodeURIComponent(basis)}&outcome=completed&evidence=${evidence}`,
      });
      assert.equal(lossy.status, 400, `evidence ${evidence}`);
      assert.match(said(lossy), /the form is not valid application\/x-www-form-urlencoded \(a malformed %-escape, or text that is not UTF-8\)\. Nothing was recorded/);
    }
    const otherCall = await http(writer.port, 'GET', writer.path(`/session/${session}/call/toolcall_nope`), { cookie });
    assert.equal(otherCall.status, 404);
    assert.equal(await state(), before, 'bad input recorded nothing');

    // A review that is accepted (the positive control), then the same form again: the call changed meanwhile.
    const ok = await http(writer.port, 'POST', writer.path(`${path}/review`), { cookie, form: { csrf, basis, outcome: 'uncertain', evidence: 'billing system <script>alert(1)</script> is down' } });
    assert.equal(ok.status, 200);
    assert.match(said(ok), /Recorded review review_\S+: uncertain by bob/);
    assert.match(ok.body, /billing system &lt;script&gt;alert\(1\)&lt;\/script&gt; is down/, 'the evidence is shown escaped');
    const stale = await http(writer.port, 'POST', writer.path(`${path}/review`), { cookie, form: { csrf, basis, outcome: 'not_executed', evidence: 'checked again' } });
    assert.equal(stale.status, 409);
    assert.match(said(stale), /Refused, nothing was recorded: the call changed since you opened this page/);

    // Two tabs answer the page drawn now at the same moment: the page showed bob's review waiting, and only one
    // answer replaces it; the other is refused, however the two requests interleave.
    const fresh = await http(writer.port, 'GET', writer.path(path), { cookie });
    assert.match(fresh.body, /It replaces the inbox review above \(review_/);
    const basisNow = hidden(fresh.body, 'basis');
    const both = await Promise.all(['not_executed', 'completed'].map((outcome) =>
      http(writer.port, 'POST', writer.path(`${path}/review`), { cookie, form: { csrf, basis: basisNow, outcome, evidence: `tab answering ${outcome}` } })));
    assert.deepEqual(both.map((r) => r.status).sort(), [200, 409], 'one answer at a time: exactly one tab is told Recorded');
    const winner = both.find((r) => r.status === 200)!;
    const loser = both.find((r) => r.status === 409)!;
    assert.match(said(loser), /Refused, nothing was recorded: (the call changed since you opened this page|review review_\S+ of call \S+ is no longer waiting)/);
    const won = /Recorded review (review_\S+): (\w+) by bob/.exec(said(winner));
    assert.ok(won);

    // An approval decided once is stale for a second decision.
    const approved = await http(writer.port, 'POST', writer.path(`/approval/${approval.requestId}`), { cookie, form: { csrf, decision: 'approve' } });
    assert.equal(approved.status, 200);
    const again = await http(writer.port, 'POST', writer.path(`/approval/${approval.requestId}`), { cookie, form: { csrf, decision: 'deny' } });
    assert.equal(again.status, 409);
    assert.match(said(again), /the decision is stale: approval request \S+ is decided \(approved by bob\); it takes one decision/);

    const store = openSqliteStore(db);
    try {
      const rows = (await decisionInbox(store).list({ limit: 1000 })).items;
      assert.deepEqual(rows.map((r) => [r.kind, r.decision, r.actor]).sort(), [['approval', 'approved', 'bob'], ['review', won[2], 'bob']], 'one review waits: the answer that won');
      const all = (await decisionInbox(store).list({ kind: 'review', states: ['superseded'] })).items;
      assert.deepEqual(all.map((r) => [r.decision, r.note]), [['uncertain', `replaced by review ${won[1]} (${won[2]} by bob) before it was journaled`]]);
      assert.equal(JSON.stringify(JSON.parse(await state()).journals), JSON.stringify(JSON.parse(before).journals), 'the console never writes a journal');
    } finally {
      await store.close();
    }
  });
});
