/**
 * The queue page's lists are filtered before they are cut, say when they are cut, and page: 520 approval requests
 * for tool mail_a, then 3 for mail_b (more than one page of QUEUE_MAX = 500). The tool filter finds the 3 however
 * many come first; the unfiltered page lists 500 and links to the next, which lists the other 23; the operations
 * list pages the same way (by the store's cursor). A bad page address is a 400 with the reason, not a 500.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createToolRuntime, ToolMetadata } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { http, login, said, startConsoleProcess, type ConsoleProcess, type Reply } from './support.js';

/** The href of the element with `data-more="<which>"`, entities decoded. */
function moreLink(reply: Reply, which: string): string | null {
  const m = new RegExp(`<a href="([^"]+)" data-more="${which}">`).exec(reply.body);
  return m ? m[1]!.replace(/&amp;/g, '&') : null;
}

/** How many rows of a table body carry this data attribute. */
const rows = (reply: Reply, attribute: 'data-request' | 'data-call' | 'data-decided') => (reply.body.match(new RegExp(`<tr ${attribute}="`, 'g')) ?? []).length;

const section = (reply: Reply, id: string): string => {
  const m = new RegExp(`<p class="muted" id="${id}">([\\s\\S]*?)</p>`).exec(reply.body);
  assert.ok(m, `no #${id}`);
  return m[1]!;
};

describe('the console queue filters before it cuts, and pages', () => {
  const dir = tempDir('jingwei-console-pages-');
  const db = tempDbPath(dir, 'pages');
  let c: ConsoleProcess;
  let cookie = '';

  before(async () => {
    const store = openSqliteStore(db);
    try {
      const tool = (name: string) => ({
        name,
        metadata: new ToolMetadata(name, { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('h'),
        execute: async () => 'ok',
      });
      const runtime = createToolRuntime({ tools: [tool('mail_a'), tool('mail_b')], grants: { a: '*' }, approvers: { h: async () => ({ decision: 'pending' as const }) } });
      const owner = await store.acquire('s-pages', { owner: 'host' });
      await owner.startTask('t', { limits: { toolCalls: 10_000 } });
      const gateway = runtime.bind({ owner, taskId: 't', caller: 'a' });
      for (let i = 0; i < 520; i++) await gateway.call('mail_a', { i });
      for (let i = 0; i < 3; i++) await gateway.call('mail_b', { i });
      await owner.release();
    } finally {
      await store.close();
    }
    c = await startConsoleProcess(db, ['--actor', 'alice']);
    cookie = await login(c);
  });
  after(async () => {
    await c?.stop();
  });

  it('the tool filter finds requests past the first 500', async () => {
    const filtered = await http(c.port, 'GET', c.path('/?tool=mail_b'), { cookie });
    assert.equal(filtered.status, 200);
    assert.equal(rows(filtered, 'data-request'), 3, 'the 3 requests of mail_b, though 520 of mail_a come first');
    assert.match(section(filtered, 'queue-count'), /3 approval requests waiting/);
    assert.equal(moreLink(filtered, 'approvalsAfter'), null);
  });

  it('an effect filter, which selects operations, says the decisions are not listed rather than that none wait', async () => {
    const filtered = await http(c.port, 'GET', c.path('/?effect=non_idempotent'), { cookie });
    assert.equal(filtered.status, 200);
    assert.equal(rows(filtered, 'data-request'), 0);
    assert.match(section(filtered, 'queue-count'), /decisions not listed with an effect or status filter/);
    assert.doesNotMatch(filtered.body, /No approval request is waiting/);
    assert.match(filtered.body, /Approval requests are not listed with an effect or status filter/);
  });

  it('the unfiltered page says it is cut, links to the next page and names the command', async () => {
    const first = await http(c.port, 'GET', c.path('/'), { cookie });
    assert.equal(rows(first, 'data-request'), 500);
    assert.match(section(first, 'queue-count'), /500\+ approval requests waiting/);
    const more = section(first, 'approvals-more');
    assert.match(more, /More approval requests than this page lists \(at most 500, after filtering\)/);
    assert.match(more, /jingwei queue &lt;store&gt; --approvals-after approval_\S+/);
    const next = moreLink(first, 'approvalsAfter');
    assert.ok(next?.startsWith(`${c.prefix}/?approvals_after=approval_`), String(next));
    const second = await http(c.port, 'GET', next!, { cookie });
    assert.equal(second.status, 200);
    assert.equal(rows(second, 'data-request'), 23, '20 of mail_a and 3 of mail_b');
    assert.equal(moreLink(second, 'approvalsAfter'), null);
    assert.match(section(second, 'approvals-more'), /Back to the first page/);
    const ids = (reply: Reply) => [...reply.body.matchAll(/<tr data-request="([^"]+)"/g)].map((m) => m[1]!);
    assert.equal(new Set([...ids(first), ...ids(second)]).size, 523, 'the two pages hold every request once');
  });

  it('the operations list pages by the store cursor, and the tool filter goes to the store', async () => {
    const first = await http(c.port, 'GET', c.path('/?status=not_executed'), { cookie });
    assert.equal(first.status, 200);
    assert.equal(rows(first, 'data-call'), 500);
    assert.match(section(first, 'queue-count'), /^500\+ items/);
    assert.match(section(first, 'queue-more'), /jingwei queue &lt;store&gt; --cursor \S+/);
    const next = moreLink(first, 'cursor');
    assert.ok(next?.includes('status=not_executed') && next.includes('cursor='), String(next));
    const second = await http(c.port, 'GET', next!, { cookie });
    assert.equal(rows(second, 'data-call'), 23);
    assert.equal(moreLink(second, 'cursor'), null);
    const filtered = await http(c.port, 'GET', c.path('/?status=not_executed&tool=mail_b'), { cookie });
    assert.equal(rows(filtered, 'data-call'), 3);
  });

  it('a page address that is not one is refused with the reason', async () => {
    const bad = await http(c.port, 'GET', c.path('/?approvals_after=garbage'), { cookie });
    assert.equal(bad.status, 400);
    assert.match(said(bad), /This page of the queue cannot be listed: after: must be the id of an approval request/);
    const cursor = await http(c.port, 'GET', c.path('/?cursor=garbage'), { cookie });
    assert.equal(cursor.status, 400);
    assert.match(said(cursor), /This page of the queue cannot be listed: cursor: is not a cursor this store handed out/);
  });
});
