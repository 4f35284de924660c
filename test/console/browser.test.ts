/**
 * The review console in a real headless Chromium (Debian's chromium, driven by playwright-core). An operator opens
 * the link the console printed, sees an uncertain call appear live in the queue after a SIGKILLed host (killed after
 * the body's side effect), opens the session's timeline and the call, records a `not_executed` review; a recovering
 * host then runs the retry exactly once (the side effects are counted). The operator also approves one pending
 * approval and denies another. With JINGWEI_CONSOLE_SCREENSHOTS=<dir> (scripts/console-screenshots.mjs) the pages
 * are saved there as PNG.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { Browser, Locator, Page } from 'playwright-core';
import { decisionInbox } from '../../src/decisions.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { chromiumMissing, crashAfterEffect, launchChromium, leaseExpired, pendingApprovals, recoverHost, startConsoleProcess, type ConsoleProcess } from './support.js';

const skip = chromiumMissing();
const shots = process.env.JINGWEI_CONSOLE_SCREENSHOTS;

async function shot(page: Page, name: string): Promise<void> {
  if (shots) await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

/** The text an element shows (its text content). */
async function textOf(locator: Locator): Promise<string> {
  return (await locator.textContent()) ?? '';
}

/** The page's notice after a form was sent; its kind must be `kind` (the text is in the failure message otherwise). */
async function noticeOf(page: Page, kind: 'done' | 'error'): Promise<string> {
  const box = page.locator('[data-notice]').first();
  await box.waitFor();
  const text = await textOf(box);
  assert.equal(await box.getAttribute('data-notice'), kind, text);
  return text;
}

const effectsOf = (path: string): { callId: string }[] =>
  readFileSync(path, 'utf8').split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l) as { callId: string });

describe('jingwei console in a browser', { skip: skip ?? false }, () => {
  let browser: Browser | undefined;
  let consoleProcess: ConsoleProcess | undefined;
  after(async () => {
    await browser?.close();
    await consoleProcess?.stop();
  });

  it('shows an uncertain call live, records a not_executed review the recovering host retries once, approves and denies', async () => {
    const dir = tempDir('jingwei-console-');
    const db = tempDbPath(dir, 'console');
    const effects = join(dir, 'effects.jsonl');
    const [toApprove, toDeny] = await pendingApprovals(db, ['refund-7f3a', 'refund-91c2']) as [{ session: string; requestId: string; callId: string }, { session: string; requestId: string; callId: string }];

    consoleProcess = await startConsoleProcess(db, ['--actor', 'alice']);
    browser = await launchChromium();
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    await page.goto(consoleProcess.link);
    assert.equal(new URL(page.url()).search, '', 'the token leaves the address bar once it is exchanged for the cookie');
    assert.match(await textOf(page.locator('header')), /deciding as alice/);
    await page.locator('#live-state b').waitFor();
    assert.equal(await page.locator(`#approval-rows tr[data-request="${toApprove.requestId}"]`).count(), 1);
    assert.equal(await page.locator('#queue-rows tr[data-call]').count(), 0, 'nothing is in doubt yet');

    // A host runs the invoice tool and is SIGKILLed after the body's side effect: the page shows it without a reload.
    const callId = await crashAfterEffect(db, effects, 'invoices-2c81');
    assert.equal(effectsOf(effects).length, 1);
    const row = page.locator(`#queue-rows tr[data-call="${callId}"]`);
    await row.waitFor({ timeout: 20_000 });
    assert.match(await textOf(row), /send_invoice[\s\S]*non_idempotent[\s\S]*IN DOUBT/);
    await shot(page, 'queue');

    // Its session: the timeline, the budget and the lease.
    await row.locator('a', { hasText: 'invoices-2c81' }).click();
    await page.locator('#timeline svg').waitFor();
    assert.equal(await page.locator(`#timeline a[data-call="${callId}"]`).count(), 1, 'the attempt is drawn on the timeline');
    assert.match(await textOf(page.locator('#budgets')), /invoices[\s\S]*1 of/);
    assert.match(await textOf(page.locator('dl.fields')), /held by host-a/);

    // The call: its evidence, the rule, and the review form. While the killed host's lease is live the call may
    // still be running, and its page offers no form (console/decisions.test.ts); it is offered once the lease ran out.
    await leaseExpired(db, 'invoices-2c81');
    await page.locator(`#timeline a[data-call="${callId}"]`).click();
    await page.locator('#evidence').waitFor();
    assert.equal(await textOf(page.locator('#call-status')), 'outcome_unknown');
    assert.match(await textOf(page.locator('#evidence')), /ACME <b>&<\/b> Co/, 'journal text is shown as text, never as markup');
    assert.match(await textOf(page.locator('#rules')), /evidence\/[\s\S]*retry\//);
    await page.locator('#r-outcome').selectOption('not_executed');
    await page.locator('#r-evidence').fill('No invoice INV-2c81 in the billing system; the mail server shows nothing sent.');
    await shot(page, 'call');
    await page.locator('#review-form button[type=submit]').click();
    assert.match(await noticeOf(page, 'done'), /Recorded review review_\S+: not_executed by alice/);

    // Approve one pending approval and deny the other, from their call pages.
    await page.goto(`${consoleProcess.base}/`);
    await page.locator(`#approval-rows tr[data-request="${toApprove.requestId}"] a`).first().click();
    await page.locator('#a-reason').fill('customer confirmed the refund by phone');
    await page.locator('#approval-form button[value=approve]').click();
    assert.match(await noticeOf(page, 'done'), new RegExp(`Approved ${toApprove.requestId} as alice`));
    await page.goto(`${consoleProcess.base}/session/${toDeny.session}/call/${toDeny.callId}`);
    await page.locator('#a-reason').fill('duplicate refund request');
    await page.locator('#approval-form button[value=deny]').click();
    assert.match(await noticeOf(page, 'done'), new RegExp(`Denied ${toDeny.requestId} as alice`));

    const store = openSqliteStore(db);
    try {
      const inbox = decisionInbox(store);
      const approved = await inbox.get(toApprove.requestId);
      const denied = await inbox.get(toDeny.requestId);
      assert.deepEqual([approved?.state, approved?.decision, approved?.actor, approved?.reason], ['decided', 'approved', 'alice', 'customer confirmed the refund by phone']);
      assert.deepEqual([denied?.state, denied?.decision, denied?.actor], ['decided', 'denied', 'alice']);
    } finally {
      await store.close();
    }

    // A recovering host journals the review and retries exactly once.
    const report = await recoverHost(db, effects);
    const recovered = report.sessions.find((s) => s.sessionId === 'invoices-2c81');
    assert.ok(recovered, JSON.stringify(report));
    assert.deepEqual(recovered.retried.map((r) => [r.callId, r.outcome]), [[callId, 'succeeded']], JSON.stringify(report));
    const lines = effectsOf(effects);
    assert.equal(lines.length, 2, 'one side effect before the crash, one by the retry: the retry ran exactly once');
    assert.equal(lines[0]!.callId, callId);
    assert.equal(lines[1]!.callId, recovered.retried[0]!.retryCallId);

    const again = await recoverHost(db, effects);
    assert.equal(again.sessions.length, 0, 'nothing is left to recover');
    assert.equal(effectsOf(effects).length, 2);

    const check = openSqliteStore(db);
    try {
      const history = await check.loadHistory('invoices-2c81');
      const reviews = history.flatMap((e) => (e.kind.type === 'tool_review' ? [e.kind.review] : []));
      assert.deepEqual(reviews.map((r) => [r.callId, r.outcome, r.actor, r.source]), [[callId, 'not_executed', 'alice', 'human']]);
    } finally {
      await check.close();
    }

    // The session's timeline now shows both attempts of the operation, the review and the retry's success.
    await page.goto(`${consoleProcess.base}/session/invoices-2c81`);
    assert.match(await textOf(page.locator('#timeline')), /send_invoice · 2 attempts/);
    assert.equal(await page.locator(`#timeline a[data-call="${recovered.retried[0]!.retryCallId}"]`).count(), 1);
    assert.match(await textOf(page.locator('dl.fields')), /released \(last owner host-b\)/);
    await shot(page, 'timeline');

    // The queue no longer lists the call; the page of the resolved call refuses a new review, with the reason.
    await page.goto(`${consoleProcess.base}/`);
    await page.locator('#live-state b').waitFor();
    assert.equal(await page.locator(`#queue-rows tr[data-call="${callId}"]`).count(), 0);
    await page.goto(`${consoleProcess.base}/session/invoices-2c81/call/${callId}`);
    assert.match(await textOf(page.locator('#no-review')), /No review can be recorded: the call is resolved: .*attempt 2 .* succeeded/);
  });
});
