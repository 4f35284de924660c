/**
 * The console's forms and what it says after them, against the real program over plain HTTP: what the operator
 * typed comes back into the form exactly and is recorded as typed; multi-line blocks keep their line breaks while
 * journal text's control and bidi characters stay visible; a failure after a decision was written says it was
 * recorded, and a write the store refuses is reported as a failed write; a form over 64 KiB gets the 413 page; an
 * approval decided but not yet used is shown on the queue and on its call page.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decisionInbox } from '../../src/decisions.js';
import { createToolRuntime, ToolBodyError, ToolMetadata } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite.js';
import fc from 'fast-check';
import { callHref, seg, segValue, sessionHref } from '../../src/cli/console/html.js';
import { tamper } from '../cli/helpers.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { untilBodyEnded } from '../support/body-ended.js';
import { crashAfterEffect, leaseExpired, hidden, http, login, said, startConsoleProcess, type ConsoleProcess, type Reply } from './support.js';

const decode = (html: string): string => html.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&');

/** What a browser's textarea holds: the element's text, entities decoded, less the one newline after the tag. */
function textareaValue(reply: Reply, id: string): string {
  const m = new RegExp(`<textarea id="${id}" name="\\w+">([\\s\\S]*?)</textarea>`).exec(reply.body);
  assert.ok(m, `no textarea #${id}`);
  return decode(m[1]!).replace(/^\n/, '');
}

/** The first event the live queue's stream sends. */
function firstEvent(port: number, path: string, cookie: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let done = false;
    const req = request({ host: '127.0.0.1', port, path, headers: { Host: `127.0.0.1:${port}`, Cookie: cookie } }, (res) => {
      let buffer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        const end = buffer.indexOf('\n\n');
        if (end >= 0 && !done) {
          done = true;
          resolve(buffer.slice(0, end));
          req.destroy();
        }
      });
    });
    req.on('error', (error) => { if (!done) reject(error); });
    req.end();
  });
}

const RLO = '\u202E';

/** A transfer whose deadline was recorded while its body, ignoring it, went on and returned; its host then let go. */
async function lateReturn(db: string, sessionId: string): Promise<string> {
  const store = openSqliteStore(db);
  try {
    let finish = () => {};
    const transfer = {
      name: 'transfer',
      metadata: new ToolMetadata('moves money', { type: 'object' }).withEffect('non_idempotent', 't1').withTimeoutCeiling(100),
      execute: () => new Promise<string>((resolve) => { finish = () => resolve('sent late'); }),
    };
    const owner = await store.acquire(sessionId, { owner: 'host-late' });
    await owner.startTask('t');
    const call = await createToolRuntime({ tools: [transfer], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' }).call('transfer', { to: 'acme' });
    finish();
    await untilBodyEnded(store, sessionId, call.call.id);
    await owner.release();
    return call.call.id;
  } finally {
    await store.close();
  }
}

describe('jingwei console forms and what it says after them', () => {
  const dir = tempDir('jingwei-console-decisions-');
  const db = tempDbPath(dir, 'decisions');
  const requests: { session: string; requestId: string; callId: string }[] = [];
  const twice: { session: string; requestId: string; callId: string }[] = [];
  let failedCall = '';
  let doubtCall = '';
  let lateCall = '';
  const dotCalls = new Map<string, string>();
  let c: ConsoleProcess;
  let cookie = '';

  before(async () => {
    const store = openSqliteStore(db);
    try {
      const runtime = createToolRuntime({
        tools: [
          { name: 'refund', metadata: new ToolMetadata('refunds', { type: 'object' }).withEffect('non_idempotent', 'r1').withApproval('finance'), execute: async () => 'refunded' },
          { name: 'lookup', metadata: new ToolMetadata('fails', { type: 'object' }).withEffect('idempotent', 'l1'), execute: async () => { throw new ToolBodyError('bad_thing', `failure ${RLO}evil\u202C`); } },
        ],
        grants: { agent: '*' },
        approvers: { finance: async () => ({ decision: 'pending' as const, note: 'a person decides' }) },
      });
      for (const session of ['refunds-forms', 'refunds-damaged', 'refunds-decided', 'refunds-readonly', 'refunds-reload']) {
        const owner = await store.acquire(session, { owner: 'host-d' });
        await owner.startTask('t');
        const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent' });
        const outcome = await gateway.call('refund', { order: session, amount: 740 });
        requests.push({ session, requestId: outcome.result.approval!.requestId, callId: outcome.result.callId });
        if (session === 'refunds-forms') failedCall = (await gateway.call('lookup', { q: 1 })).result.callId;
        await owner.release();
      }
      // A model that asked for the same refund again while the first waited: two requests for one write.
      const owner = await store.acquire('refunds-twice', { owner: 'host-d' });
      await owner.startTask('t');
      const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent' });
      for (let i = 0; i < 2; i++) {
        const outcome = await gateway.call('refund', { order: 'twice', amount: 740 });
        twice.push({ session: 'refunds-twice', requestId: outcome.result.approval!.requestId, callId: outcome.result.callId });
      }
      await owner.release();
    } finally {
      await store.close();
    }
    lateCall = await lateReturn(db, 'transfers-late');
    doubtCall = await crashAfterEffect(db, join(dir, 'effects.jsonl'), 'invoices-forms');
    await leaseExpired(db, 'invoices-forms');
    for (const id of ['.', '..']) {
      dotCalls.set(id, await crashAfterEffect(db, join(dir, 'effects.jsonl'), id));
      await leaseExpired(db, id);
    }
    c = await startConsoleProcess(db, ['--actor', 'bob']);
    cookie = await login(c);
  });
  after(async () => {
    await c?.stop();
  });

  it('a call whose host holds the session with a live lease says it may still be running, and offers no review form', async () => {
    // A host alive in this process, its transfer's body running, its lease long.
    const store = openSqliteStore(db);
    const owner = await store.acquire('invoices-live', { owner: 'host-live', leaseMs: 600_000 });
    await owner.startTask('t');
    let finish: () => void = () => {};
    let started = false;
    const gateway = createToolRuntime({
      tools: [{
        name: 'transfer',
        metadata: new ToolMetadata('moves money', { type: 'object' }).withEffect('non_idempotent', 'v1'),
        execute: () => new Promise<string>((resolve) => { started = true; finish = () => resolve('sent'); }),
      }],
      grants: { agent: '*' },
    }).bind({ owner, taskId: 't', caller: 'agent' });
    const running = gateway.call('transfer', { to: 'acme' });
    while (!started) await new Promise((r) => setTimeout(r, 5));
    const liveCall = (await store.loadHistory('invoices-live')).flatMap((e) => (e.kind.type === 'tool_started' ? [e.kind.callId] : []))[0]!;
    try {
      await checkLive(liveCall);
    } finally {
      finish();
      await running;
      await owner.release();
      await store.close();
    }
  });

  async function checkLive(liveCall: string): Promise<void> {
    const path = c.path(`/session/invoices-live/call/${liveCall}`);
    const page = await http(c.port, 'GET', path, { cookie });
    assert.equal(page.status, 200);
    const running = /<div id="call-running">([\s\S]*?)<\/div>/.exec(page.body);
    assert.ok(running, 'the page says the call may still be running');
    assert.match(decode(running[1]!), /Not to be reviewed yet: the call may still be running: the host that made it holds the session with a live lease and no result is journaled/);
    assert.match(decode(page.body), /id="no-review">No review can be recorded: the call may still be running/);
    assert.doesNotMatch(page.body, /name="outcome"/, 'no review form');
    // A form sent anyway (drawn before, or typed by hand) is refused with the same reason, nothing recorded.
    const csrf = hidden((await http(c.port, 'GET', c.path(`/session/invoices-forms/call/${doubtCall}`), { cookie })).body, 'csrf');
    const sent = await http(c.port, 'POST', `${path}/review`, { cookie, form: { csrf, basis: 'x', outcome: 'not_executed', evidence: 'nothing in the bank' } });
    assert.equal(sent.status, 409);
    assert.match(said(sent), /Refused, nothing was recorded: the decision is stale: the call may still be running/);
  }

  it('sessions named "." and ".." open from the queue\'s links as a browser resolves them, and their calls can be reviewed', async () => {
    const queue = await http(c.port, 'GET', c.path('/'), { cookie });
    for (const [id, callId] of dotCalls) {
      for (const [href, heading] of [[sessionHref(c.prefix, id), `Session`], [callHref(c.prefix, id, callId), `Call`]] as const) {
        assert.ok(queue.body.includes(`href="${href}"`), `the queue links ${href}`);
        // What a browser sends for the link: dot segments resolved by the WHATWG URL rules.
        const sentPath = new URL(href, `http://127.0.0.1:${c.port}`).pathname;
        const reply = await http(c.port, 'GET', sentPath, { cookie });
        assert.equal(reply.status, 200, `${href} → ${sentPath}: ${said(reply)}`);
        assert.match(reply.body, new RegExp(`<h1>${heading} `));
        if (heading === 'Call') assert.match(reply.body, /name="outcome"/, 'the call can be reviewed');
        else assert.ok(reply.body.includes(`<h1>Session <span class="mono">${id}</span>`), 'the page is that session\'s');
      }
    }
    fc.assert(fc.property(fc.string({ minLength: 1, maxLength: 12, unit: 'grapheme' }), fc.constantFrom('.', '..', '!', '!.', '%2E', '%2e%2e'), (tail, head) => {
      for (const id of [head, tail, head + tail]) {
        const written = seg(id);
        assert.equal(new URL(`/p/${written}/x`, 'http://h').pathname, `/p/${written}/x`, 'no segment a browser would resolve');
        assert.equal(segValue(written), id);
      }
    }));
  });

  it('a form that comes back with an error holds exactly what was typed, and sends it again unchanged', async () => {
    const path = c.path(`/session/invoices-forms/call/${doubtCall}`);
    const page = await http(c.port, 'GET', path, { cookie });
    const csrf = hidden(page.body, 'csrf');
    const basis = hidden(page.body, 'basis');
    // What a browser sends for a textarea: its line breaks as CRLF.
    const typed = `Checked Stripe:\r\n- no charge for <b>ch_123</b> & "nothing" 'else'\r\n- ${RLO}no refund\r\n\r\n  indented`;
    const asShown = typed.replace(/\r\n/g, '\n');
    const noOutcome = await http(c.port, 'POST', `${path}/review`, { cookie, form: { csrf, basis, outcome: '', evidence: `\r\n${typed}` } });
    assert.equal(noOutcome.status, 400);
    assert.match(said(noOutcome), /Nothing was recorded: choose an outcome/);
    assert.equal(textareaValue(noOutcome, 'r-evidence'), `\n${asShown}`, 'the textarea holds the text as typed, leading newline included');
    assert.doesNotMatch(noOutcome.body, /\\u000D|\\u000A/);

    const sent = await http(c.port, 'POST', `${path}/review`, { cookie, form: { csrf, basis, outcome: 'not_executed', evidence: textareaValue(noOutcome, 'r-evidence').replace(/\n/g, '\r\n') } });
    assert.equal(sent.status, 200, said(sent));
    const store = openSqliteStore(db);
    try {
      const reviews = (await decisionInbox(store).list({ kind: 'review', sessionId: 'invoices-forms' })).items;
      assert.deepEqual(reviews.map((r) => r.reason), [`\n${asShown}`], 'recorded as typed, with line breaks, not escape text');
    } finally {
      await store.close();
    }
    // The evidence is shown with its line breaks; its bidi override stays visible, as journal text does.
    const shown = /<dt>inbox review<\/dt><dd>[^<]*<span class="lines">([\s\S]*?)<\/span>/.exec(sent.body);
    assert.ok(shown, 'the inbox review is shown');
    assert.match(shown[1]!, /Checked Stripe:\n- no charge for &lt;b&gt;ch_123&lt;\/b&gt;/);
    assert.match(shown[1]!, /- \\u202Eno refund/);
    assert.ok(!sent.body.includes(RLO), 'no raw bidi override in a page of journal text');

    const [forms] = requests;
    const reason = `line one\r\nline "two" <i>${RLO}</i>`;
    const noDecision = await http(c.port, 'POST', c.path(`/approval/${forms!.requestId}`), { cookie, form: { csrf, decision: 'later', reason } });
    assert.equal(noDecision.status, 400);
    assert.equal(textareaValue(noDecision, 'a-reason'), reason.replace(/\r\n/g, '\n'));

    const tool = `mail${RLO}"<b>\t&`;
    const queue = await http(c.port, 'GET', c.path(`/?tool=${encodeURIComponent(tool)}`), { cookie });
    const value = /<input id="f-tool" name="tool" value="([^"]*)"/.exec(queue.body);
    assert.equal(decode(value![1]!), tool, 'the tool filter comes back as typed');
  });

  it('the review form of a call whose body started and left no result says to make sure its process has stopped first (r69 #5)', async () => {
    const doubt = await http(c.port, 'GET', c.path(`/session/invoices-forms/call/${doubtCall}`), { cookie });
    assert.match(doubt.body, /id="review-form"/);
    assert.match(doubt.body, /id="stopped-first">Its body started and no result is journaled\. A takeover fences the old host's writes, not its body/);
    const failed = await http(c.port, 'GET', c.path(`/session/refunds-forms/call/${failedCall}`), { cookie });
    assert.doesNotMatch(failed.body, /id="stopped-first"/, 'a call with a result has nothing running');
  });

  it('not_executed on a call whose body returned after its timeout needs the box saying the outside system was checked', async () => {
    const path = c.path(`/session/transfers-late/call/${lateCall}`);
    const page = await http(c.port, 'GET', path, { cookie });
    assert.match(page.body, /body started [^;]*; result [^(]*\(interrupted after [^;]*; its body may have gone on\); body ended /, 'not "body ran"');
    assert.match(page.body, /tool_result at seq \d+; body_ended at seq \d+: after its result its body returned \(its output was not recorded: it most likely made its write\)/, 'the journal row lists the late end');
    assert.match(page.body, /id="late-return".*name="despite_late_return"/);
    const form = { csrf: hidden(page.body, 'csrf'), basis: hidden(page.body, 'basis'), outcome: 'not_executed', evidence: 'the bank shows nothing' };
    const refused = await http(c.port, 'POST', `${path}/review`, { cookie, form });
    assert.equal(refused.status, 409, said(refused));
    assert.match(said(refused), /Refused, nothing was recorded: the journal records that the body of call \S+ went on after its result and returned/);
    const store = openSqliteStore(db);
    try {
      assert.deepEqual((await decisionInbox(store).list({ kind: 'review', sessionId: 'transfers-late' })).items, []);
      const sent = await http(c.port, 'POST', `${path}/review`, { cookie, form: { ...form, despite_late_return: 'yes' } });
      assert.equal(sent.status, 200, said(sent));
      assert.deepEqual((await decisionInbox(store).list({ kind: 'review', sessionId: 'transfers-late' })).items.map((r) => r.decision), ['not_executed']);
    } finally {
      await store.close();
    }
  });

  it('the recorded result keeps its line breaks; its bidi override stays visible', async () => {
    const page = await http(c.port, 'GET', c.path(`/session/refunds-forms/call/${failedCall}`), { cookie });
    assert.equal(page.status, 200);
    const pre = /<pre class="card mono" id="recorded-result">([\s\S]*?)<\/pre>/.exec(page.body);
    assert.ok(pre, 'the recorded result is shown');
    assert.match(pre[1]!, /^\{\n {2}&quot;call_id&quot;: /, 'one JSON member a line');
    assert.ok(pre[1]!.split('\n').length > 5);
    assert.doesNotMatch(pre[1]!, /\\u000A/);
    assert.match(pre[1]!, /failure \\u202Eevil\\u202C/);
  });

  it('a form over 64 KiB gets the 413 page with the reason, then the connection closes', async () => {
    const path = c.path(`/session/invoices-forms/call/${doubtCall}`);
    const csrf = hidden((await http(c.port, 'GET', path, { cookie })).body, 'csrf');
    const big = await http(c.port, 'POST', `${path}/review`, { cookie, form: { csrf, basis: 'x', outcome: 'completed', evidence: 'x'.repeat(70_000) } });
    assert.equal(big.status, 413);
    assert.match(said(big), /the form is larger than 65536 bytes, so it was not read \(the evidence and the reason hold at most 1024 bytes each\)\. Nothing was recorded\. Go back, shorten the text/);
    assert.equal(big.headers.connection, 'close');
  });

  it('a decision written before the page fails to draw again says it was recorded', async () => {
    const damaged = requests[1]!;
    const page = await http(c.port, 'GET', c.path(`/session/${damaged.session}/call/${damaged.callId}`), { cookie });
    const csrf = hidden(page.body, 'csrf');
    tamper(db, `UPDATE jw_events SET body = replace(body, 'refund', 'refunx') WHERE session_id = '${damaged.session}' AND seq = 1`);
    const reply = await http(c.port, 'POST', c.path(`/approval/${damaged.requestId}`), { cookie, form: { csrf, decision: 'approve' } });
    assert.equal(reply.status, 200);
    assert.match(said(reply), new RegExp(`^Approved ${damaged.requestId} as bob`));
    assert.match(reply.body, /The call&#39;s page could not be read again to show it: .+\. The decision is recorded all the same; do not send it again\./);
    assert.doesNotMatch(reply.body, /Nothing was recorded/);
    // The damaged session's pages say what to do, and a page address naming nothing a store could hold is bad input.
    const sessionPage = await http(c.port, 'GET', c.path(`/session/${damaged.session}`), { cookie });
    assert.equal(sessionPage.status, 500);
    assert.match(sessionPage.body, /<h1>A damaged journal<\/h1>/);
    assert.match(said(sessionPage), /Decide nothing about this session .* Run `jingwei verify` on the store/);
    for (const bad of ['%00', 'x'.repeat(5000)]) {
      const reply = await http(c.port, 'GET', c.path(`/session/${bad}`), { cookie });
      assert.equal(reply.status, 400, said(reply));
      assert.match(said(reply), /This address names nothing the store could hold: /);
    }
    const store = openSqliteStore(db);
    try {
      const row = await decisionInbox(store).get(damaged.requestId);
      assert.deepEqual([row?.state, row?.decision, row?.actor], ['decided', 'approved', 'bob']);
    } finally {
      await store.close();
    }
  });

  it('approving a request identical to one approved is refused, saying which and how to mean it; the box approves it (r106 #3)', async () => {
    const decide = async (at: { session: string; requestId: string; callId: string }, extra: Record<string, string> = {}) => {
      const page = await http(c.port, 'GET', c.path(`/session/${at.session}/call/${at.callId}`), { cookie });
      assert.match(page.body, /<input type="checkbox" name="allow-identical" value="yes"> A second identical write is meant/);
      return http(c.port, 'POST', c.path(`/approval/${at.requestId}`), { cookie, form: { csrf: hidden(page.body, 'csrf'), decision: 'approve', ...extra } });
    };
    assert.equal((await decide(twice[0]!)).status, 200);
    const refused = await decide(twice[1]!);
    assert.equal(refused.status, 409);
    assert.match(said(refused), new RegExp(`^Refused: approval request ${twice[1]!.requestId} \\(call ${twice[1]!.callId}\\) asks for a call identical to one already approved in session refunds-twice: ${twice[0]!.requestId}`));
    assert.match(said(refused), /approve it with the box "a second identical write is meant" ticked only if a second identical write is meant\. Nothing was recorded\.$/);
    const meant = await decide(twice[1]!, { 'allow-identical': 'yes' });
    assert.equal(meant.status, 200, said(meant));
    assert.match(said(meant), new RegExp(`^Approved ${twice[1]!.requestId} as bob`));
  });

  // u124 LOW 2: the page a decision was answered with was the POST's, so a reload sent the decision again and showed
  // "Refused, nothing was recorded: the decision is stale" right after the operator's own decision.
  it('a decision sends the browser to the call\'s page (303), so a reload reads the call again instead of sending the decision twice', async () => {
    const target = requests[4]!;
    const callPath = c.path(`/session/${target.session}/call/${target.callId}`);
    const csrf = hidden((await http(c.port, 'GET', callPath, { cookie })).body, 'csrf');
    const sent = await http(c.port, 'POST', c.path(`/approval/${target.requestId}`), { cookie, form: { csrf, decision: 'approve', reason: 'checked' } });
    assert.equal(sent.redirectedTo, `${callPath}?recorded=${encodeURIComponent(target.requestId)}`);
    assert.match(said(sent), new RegExp(`^Approved ${target.requestId} as bob`));
    const reloaded = await http(c.port, 'GET', sent.redirectedTo!, { cookie });
    assert.equal(reloaded.status, 200);
    assert.match(said(reloaded), new RegExp(`^Approved ${target.requestId} as bob`));
    assert.doesNotMatch(reloaded.body, /Refused|Nothing was recorded/);
    // An id that names no decision of this call (another call's, or none) adds nothing to the page.
    for (const id of [requests[0]!.requestId, 'approval_nothing', '']) {
      const other = await http(c.port, 'GET', `${callPath}?recorded=${encodeURIComponent(id)}`, { cookie });
      assert.equal(other.status, 200);
      assert.doesNotMatch(other.body, /data-notice="done"/);
    }
  });

  it('a write the store refuses is reported as a failed write', async () => {
    const target = requests[3]!;
    const csrf = hidden((await http(c.port, 'GET', c.path(`/session/${target.session}/call/${target.callId}`), { cookie })).body, 'csrf');
    tamper(db, `CREATE TRIGGER refuse_decisions BEFORE UPDATE ON jw_decisions BEGIN SELECT RAISE(ABORT, 'attempt to write a readonly database'); END`);
    try {
      const reply = await http(c.port, 'POST', c.path(`/approval/${target.requestId}`), { cookie, form: { csrf, decision: 'deny', reason: 'no' } });
      assert.equal(reply.status, 500);
      assert.match(reply.body, /<h1>The decision could not be written<\/h1>/);
      assert.match(said(reply), /^Writing it to the store's decision inbox failed: .*readonly database.*Open the call's page again to see what is recorded/);
      assert.doesNotMatch(reply.body, /could not be read/);
    } finally {
      tamper(db, 'DROP TRIGGER refuse_decisions');
    }
    const store = openSqliteStore(db);
    try {
      assert.equal((await decisionInbox(store).get(target.requestId))?.state, 'open');
    } finally {
      await store.close();
    }
  });

  it('a review decision waiting to be journaled is on the queue until the session\'s host journals it', async () => {
    const callId = await crashAfterEffect(db, join(dir, 'effects.jsonl'), 'invoices-queue');
    await leaseExpired(db, 'invoices-queue');
    const store = openSqliteStore(db);
    let decisionId: string;
    try {
      decisionId = (await decisionInbox(store).recordReview({ sessionId: 'invoices-queue', callId, outcome: 'completed', evidence: 'the invoice is in the ledger', actor: 'dana' })).id;
    } finally {
      await store.close();
    }
    const queue = await http(c.port, 'GET', c.path('/'), { cookie });
    const row = new RegExp(`<tr data-review="${decisionId}">([\\s\\S]*?)</tr>`).exec(queue.body);
    assert.ok(row, 'listed with the review decisions waiting');
    assert.match(row[1]!, /completed by dana<\/td>/);
    assert.match(queue.body, /id="queue-count">[^<]*, \d+ review decisions? not yet journaled</);
    const event = await firstEvent(c.port, c.path('/events'), cookie);
    assert.ok((JSON.parse(event.split('\ndata: ')[1]!) as { parts: Record<string, string> }).parts['review-rows']!.includes(decisionId), 'the live stream sends it too');
  });

  it('a completed review clicked by mistake, still waiting in the inbox, can be replaced from its call page as from the CLI (pass r50 #6)', async () => {
    const callId = await crashAfterEffect(db, join(dir, 'effects.jsonl'), 'invoices-misclick');
    await leaseExpired(db, 'invoices-misclick');
    const store = openSqliteStore(db);
    let misclick: string;
    try {
      misclick = (await decisionInbox(store).recordReview({ sessionId: 'invoices-misclick', callId, outcome: 'completed', evidence: 'misclick', actor: 'dana' })).id;
    } finally {
      await store.close();
    }
    const path = c.path(`/session/invoices-misclick/call/${callId}`);
    const page = await http(c.port, 'GET', path, { cookie });
    assert.match(page.body, /name="outcome"/, 'the review form is offered');
    assert.ok(page.body.includes(`It replaces the inbox review above (${misclick})`));
    const sent = await http(c.port, 'POST', `${path}/review`, {
      cookie, form: { csrf: hidden(page.body, 'csrf'), basis: hidden(page.body, 'basis'), outcome: 'uncertain', evidence: 'checked the ledger again: not sure' },
    });
    assert.equal(sent.status, 200, said(sent));
    const after = openSqliteStore(db);
    try {
      const inbox = decisionInbox(after);
      assert.equal((await inbox.get(misclick))!.state, 'superseded', 'the misclick will never be journaled');
      const waiting = (await inbox.list({ sessionId: 'invoices-misclick', kind: 'review' })).items;
      assert.deepEqual(waiting.map((r) => [r.decision, r.actor]), [['uncertain', 'bob']]);
    } finally {
      await after.close();
    }
  });

  it('an approval decided but not yet used is on the queue and on its call page, not as a pending one', async () => {
    const decided = requests[2]!;
    const store = openSqliteStore(db);
    try {
      await decisionInbox(store).approve(decided.requestId, { actor: 'carol', reason: 'checked by phone' });
    } finally {
      await store.close();
    }
    const queue = await http(c.port, 'GET', c.path('/'), { cookie });
    const row = new RegExp(`<tr data-decided="${decided.requestId}">([\\s\\S]*?)</tr>`).exec(queue.body);
    assert.ok(row, 'listed with the decided requests');
    assert.match(row[1]!, /refund<\/td><td>approved by carol<\/td>/);
    assert.doesNotMatch(queue.body, new RegExp(`data-request="${decided.requestId}"`), 'not with the requests waiting for a person');
    const event = await firstEvent(c.port, c.path('/events'), cookie);
    assert.ok((JSON.parse(event.split('\ndata: ')[1]!) as { parts: Record<string, string> }).parts['decided-rows']!.includes(decided.requestId), 'the live stream sends it too');

    const page = await http(c.port, 'GET', c.path(`/session/${decided.session}/call/${decided.callId}`), { cookie });
    assert.match(page.body, /<dt>decided since<\/dt><dd><b>approved<\/b> by carol: <span class="lines">checked by phone<\/span> \([^)]+\), not yet used: the session's host uses it on its next attempt/);
    assert.match(page.body, /This result was journaled while the request waited; a person has decided it since/);
    assert.match(page.body, new RegExp(`id="decided-approval">Approval request <span class="mono">${decided.requestId}</span> is decided`));
    assert.doesNotMatch(page.body, /id="approval-form"/);
    const session = await http(c.port, 'GET', c.path(`/session/${decided.session}`), { cookie });
    assert.match(session.body, /approval_pending, approved, waiting for the host/);
  });
});
