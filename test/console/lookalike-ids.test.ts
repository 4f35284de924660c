/**
 * The console shows ids as the CLI prints them: two session ids that differ only by the kind of space, or by Unicode
 * normalization, never look alike on a page (r78 C #1). Before, the queue showed `ops a` for `ops a` and for
 * `ops<U+00A0>a`, and `café` for both forms of it, where `jingwei queue` printed four distinct ids: an operator who read
 * the CLI and decided in the console could open the wrong session's call. Arguments keep their runs of spaces
 * (r78 C #2): two approval requests differing only there must not look the same.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createToolRuntime, ToolMetadata } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { chromiumMissing, http, launchChromium, login, startConsoleProcess, type ConsoleProcess } from './support.js';

const SESSIONS = ['ops a', 'ops\u00A0a', 'caf\u00e9', 'cafe\u0301'];
const PRINTED = ['ops\\u0020a', 'ops\\u00A0a', 'caf\u00e9', 'cafe\\u0301'];

describe('the console prints ids as the CLI does', () => {
  const db = tempDbPath(tempDir('jingwei-console-ids-'), 'ids');
  let c: ConsoleProcess;
  let cookie = '';

  before(async () => {
    const store = openSqliteStore(db);
    try {
      const runtime = createToolRuntime({
        tools: [{ name: 'mail', metadata: new ToolMetadata('mail', { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('h'), execute: async () => 'ok' }],
        grants: { a: '*' },
        approvers: { h: async () => ({ decision: 'pending' as const }) },
      });
      for (const session of SESSIONS) {
        const owner = await store.acquire(session, { owner: 'host' });
        await owner.startTask('t');
        await runtime.bind({ owner, taskId: 't', caller: 'a' }).call('mail', { to: 'ann@example.com      bob@example.com' });
        await owner.release();
      }
    } finally {
      await store.close();
    }
    c = await startConsoleProcess(db, ['--actor', 'alice']);
    cookie = await login(c);
  });
  after(async () => {
    await c?.stop();
  });

  it('the queue names each session unlike the others, as `jingwei queue` does', async () => {
    const page = await http(c.port, 'GET', c.path('/'), { cookie });
    assert.equal(page.status, 200);
    const shown = [...page.body.matchAll(/<tr data-request="[^"]*">[\s\S]*?<td><a href="[^"]*">([^<]*)<\/a><\/td>/g)].map((m) => m[1]!);
    assert.deepEqual(shown.sort(), [...PRINTED].sort());
  });

  it('a session page and a call page name their session as the CLI prints it', async () => {
    for (const [i, session] of SESSIONS.entries()) {
      const page = await http(c.port, 'GET', c.path(`/session/${encodeURIComponent(session)}`), { cookie });
      assert.equal(page.status, 200, page.body);
      assert.ok(page.body.includes(`<h1>Session <span class="mono">${PRINTED[i]}</span></h1>`), `${PRINTED[i]}: ${/<h1>.*<\/h1>/.exec(page.body)?.[0]}`);
    }
  });

  it('a call page shows its arguments with their runs of spaces, in a real browser', { skip: chromiumMissing() ?? false }, async () => {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      await page.goto(c.link);
      await page.goto(`${c.base}/session/${encodeURIComponent('ops a')}`);
      await page.locator('tr[data-call] a').first().click();
      // The text as rendered, which is what an operator reads: CSS decides whether spaces collapse.
      // biome-ignore lint/performance/useDomNodeTextContent: textContent would show the spaces whatever the page's style
      const shown = await page.locator('.mono', { hasText: 'ann@example.com' }).first().innerText();
      assert.ok(shown.includes('ann@example.com      bob@example.com'), `the six spaces are shown as six: ${JSON.stringify(shown)}`);
    } finally {
      await browser.close();
    }
  });
});
