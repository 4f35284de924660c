/**
 * The console's cookie and forms in a real headless Chromium (Debian's chromium, driven by playwright-core). Two
 * consoles and an unrelated web server run on 127.0.0.1 at once, as on an operator's machine: each console's cookie
 * goes to its own random path only, so logging into one keeps the other logged in, and the other server (cookies
 * ignore ports) never receives a token. A form over 64 KiB shows the 413 page with the reason; multi-line evidence
 * that comes back after an error is in the textarea exactly as typed, and is recorded so.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Browser, BrowserContext } from 'playwright-core';
import { decisionInbox } from '../../src/decisions.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { chromiumMissing, crashAfterEffect, leaseExpired, launchChromium, pendingApprovals, startConsoleProcess, type ConsoleProcess } from './support.js';

const skip = chromiumMissing();

describe('jingwei console in a browser: its cookie and its forms', { skip: skip ?? false }, () => {
  const dir = tempDir('jingwei-console-forms-');
  const db = tempDbPath(dir, 'forms');
  let approval = { session: '', requestId: '', callId: '' };
  let doubtCall = '';
  let alice: ConsoleProcess;
  let bob: ConsoleProcess;
  let browser: Browser;
  let context: BrowserContext;
  /** Another web server on 127.0.0.1, on its own port: the Cookie headers it received. */
  let other: Server;
  const otherSaw: string[] = [];

  before(async () => {
    [approval] = await pendingApprovals(db, ['refund-forms']) as [typeof approval];
    doubtCall = await crashAfterEffect(db, join(dir, 'effects.jsonl'), 'invoices-forms');
    await leaseExpired(db, 'invoices-forms');
    alice = await startConsoleProcess(db, ['--actor', 'alice']);
    bob = await startConsoleProcess(db, ['--actor', 'bob']);
    other = createServer((req, res) => {
      otherSaw.push(req.headers.cookie ?? '');
      res.end('<h1>an unrelated local page</h1>');
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    browser = await launchChromium();
    context = await browser.newContext();
  });
  after(async () => {
    await browser?.close();
    other?.close();
    await alice?.stop();
    await bob?.stop();
  });

  it('its cookie goes to its own path only: another local server gets no token, two consoles stay logged in', async () => {
    const page = await context.newPage();
    assert.equal((await page.goto(alice.link))?.status(), 200);
    // The operator, logged in, opens a page of another web server on 127.0.0.1 (cookies ignore ports).
    const port = (other.address() as AddressInfo).port;
    await page.goto(`http://127.0.0.1:${port}/`);
    await page.goto(`http://127.0.0.1:${port}/session/x`);
    assert.ok(otherSaw.length >= 2, String(otherSaw.length)); // the pages, and the favicon
    for (const header of otherSaw) assert.ok(!header.includes(alice.token), `another server on 127.0.0.1 received the console's token: ${header}`);

    assert.equal((await page.goto(bob.link))?.status(), 200);
    const again = await page.goto(`${alice.base}/`);
    assert.equal(again?.status(), 200, 'logging into the second console did not log the first out');
    assert.match((await page.textContent('header')) ?? '', /deciding as alice/);
    assert.equal((await page.goto(`${bob.base}/`))?.status(), 200);
    assert.match((await page.textContent('header')) ?? '', /deciding as bob/);
    await page.goto(`http://127.0.0.1:${port}/`);
    for (const header of otherSaw) assert.ok(!header.includes(alice.token) && !header.includes(bob.token), `another server on 127.0.0.1 received a console token: ${header}`);
    const cookies = await context.cookies();
    assert.deepEqual(cookies.map((c) => [c.name, c.path, c.httpOnly, c.sameSite]).sort(), [['jingwei_console', alice.prefix, true, 'Strict'], ['jingwei_console', bob.prefix, true, 'Strict']].sort());
    await page.close();
  });

  it('a form over 64 KiB shows the 413 page with the reason', async () => {
    const page = await context.newPage();
    await page.goto(`${alice.base}/session/${approval.session}/call/${approval.callId}`);
    await page.fill('#a-reason', 'x'.repeat(70_000));
    const [response] = await Promise.all([page.waitForNavigation(), page.click('#approval-form button[value=approve]')]);
    assert.equal(response?.status(), 413);
    assert.match((await page.textContent('[data-notice]')) ?? '', /the form is larger than 65536 bytes, so it was not read .* Nothing was recorded\. Go back, shorten the text/);
    const store = openSqliteStore(db);
    try {
      assert.equal((await decisionInbox(store).get(approval.requestId))?.state, 'open');
    } finally {
      await store.close();
    }
    await page.close();
  });

  it('multi-line evidence comes back into the form as typed after an error, and is recorded as typed', async () => {
    const page = await context.newPage();
    await page.goto(`${alice.base}/session/invoices-forms/call/${doubtCall}`);
    const typed = '\nChecked Stripe:\n- no charge for ch_123 <b>&amp;</b>\n- no refund\n';
    await page.fill('#r-evidence', typed);
    await Promise.all([page.waitForNavigation(), page.click('#review-form button[type=submit]')]);
    assert.match((await page.textContent('[data-notice]')) ?? '', /Nothing was recorded: choose an outcome/);
    assert.equal(await page.inputValue('#r-evidence'), typed);
    await page.selectOption('#r-outcome', 'not_executed');
    await Promise.all([page.waitForNavigation(), page.click('#review-form button[type=submit]')]);
    assert.match((await page.textContent('[data-notice]')) ?? '', /Recorded review review_\S+: not_executed by alice/);
    const store = openSqliteStore(db);
    try {
      const reviews = (await decisionInbox(store).list({ kind: 'review', sessionId: 'invoices-forms' })).items;
      assert.deepEqual(reviews.map((r) => r.reason), [typed]);
    } finally {
      await store.close();
    }
    await page.close();
  });
});
