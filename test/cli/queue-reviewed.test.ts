/**
 * A call a person reviewed `not_executed` stays in `jingwei queue` until its write is made: the review says the mail
 * was not sent, so it is still due, and under the default `suspend` policy nothing sends it until a host resumes the
 * session's run. Before, the index made the row `resolved`: the queue (and the console) dropped it while `sessions` and
 * `inspect` still counted it as needing attention.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { decisionInbox } from '../../src/decisions.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { recoverAbandoned } from '../../src/tool/recover.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { mailer } from '../support/mailer.js';
import { MAIL_SESSION, writeMails } from '../support/pre-index-journal.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { cli } from './helpers.js';

it('a not_executed review leaves its call in the queue as reviewed_not_executed until a retry makes the write', async () => {
  const path = tempDbPath(tempDir(), 'reviewed');
  const store = openSqliteStore(path);
  const mail = await writeMails(store);
  await decisionInbox(store).recordReview({ sessionId: MAIL_SESSION, callId: mail, outcome: 'not_executed', evidence: 'not in the outbox', actor: 'alice' });
  const { tool, sent } = mailer({ hang: false });
  const host = { runtime: createToolRuntime({ tools: [tool], grants: { agent: '*' } }), tools: [tool], caller: 'agent' };
  // The startup routine journals the waiting review of the released session and, under `suspend`, retries nothing.
  await recoverAbandoned(store, host, 'suspend');
  assert.deepEqual(sent, [], 'nothing sent the mail');
  await store.close();

  const queue = cli(['queue', path]);
  assert.equal(queue.code, 0, queue.stderr);
  assert.match(queue.stdout, new RegExp(`${mail.slice(-8)}\\s+send_mail\\s+non_idempotent\\s+reviewed_not_executed\\s`), 'listed, not in doubt');
  assert.doesNotMatch(queue.stdout, /IN DOUBT/);
  assert.match(queue.stdout, /reviewed: not executed \(body started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z, ended cancelled after \d+ ms\)/);
  assert.doesNotMatch(queue.stdout, / ago|may have gone on/, 'nothing runs, and the review says the body did not write');
  assert.match(queue.stdout, /reviewed_not_executed: a review says the write did not happen, so it is still to be made; nothing makes it until a host retries it: a resumed run, or prepareToolRetry where no run will/);
  const listed = JSON.parse(cli(['queue', path, '--json']).stdout) as { items: Array<{ call_id: string; status: string; in_doubt: boolean }> };
  assert.deepEqual(listed.items.map((i) => [i.call_id, i.status, i.in_doubt]), [[mail, 'reviewed_not_executed', false]]);
  assert.match(cli(['sessions', path]).stdout, /1 \(1 retry_allowed\)/, 'the session view counts the same call');
  assert.equal(JSON.parse(cli(['queue', path, '--status', 'resolved', '--json']).stdout).items.length, 0, 'a not_executed review does not resolve it');
});

it('a retry of a reviewed mail refused before its body keeps the write due in every view: the queue, sessions, inspect', async () => {
  const path = tempDbPath(tempDir(), 'reviewed-refused');
  const writer = openSqliteStore(path);
  // A host whose caller gave up on the mail mid-body, and which then stopped without letting the session go.
  const owner = await writer.acquire('s-mail', { owner: 'old-host', leaseMs: 200 });
  await owner.startTask('t');
  const caller = new AbortController();
  const first = await createToolRuntime({ tools: [mailer({ hang: true, giveUp: () => caller.abort() }).tool], grants: { agent: '*' } })
    .bind({ owner, taskId: 't', caller: 'agent' }).callWithOptions('send_mail', { to: 'ana' }, { signal: caller.signal });
  await writer.close();
  const store = openSqliteStore(path);
  while ((await store.listExpiredSessions()).length === 0) await new Promise((resolve) => setTimeout(resolve, 25));
  await decisionInbox(store).recordReview({ sessionId: 's-mail', callId: first.call.id, outcome: 'not_executed', evidence: 'not in the outbox', actor: 'alice' });
  // The recovering host's caller lost its grant for the tool: the routine's retry is refused before its body.
  const { tool, sent } = mailer({ hang: false });
  const report = await recoverAbandoned(store, { runtime: createToolRuntime({ tools: [tool], grants: { other: '*' } }), tools: [tool], caller: 'agent' }, 'retry_safe');
  const retried = report.sessions[0]?.action === 'taken_over' ? report.sessions[0].retried : [];
  assert.deepEqual(retried.map((r) => r.outcome), ['unavailable']);
  const left = report.sessions[0]?.action === 'taken_over' ? report.sessions[0].left : [];
  assert.match(left[0]?.reason ?? '', /ended unavailable and settled nothing; a host retries it once what refused it is fixed$/,
    'nothing is left to review: the inbox refuses a review of it');
  assert.deepEqual(sent, []);
  const firstEnded = (await store.loadHistory('s-mail')).find((e) => e.kind.type === 'tool_result' && e.kind.result.callId === first.call.id)?.recordedAt;
  await store.close();

  const retryId = retried[0]!.retryCallId!;
  const listed = JSON.parse(cli(['queue', path, '--json']).stdout) as { items: Array<{ call_id: string; status: string; in_doubt: boolean; pending_since: string | null; called_at: string }> };
  assert.deepEqual(listed.items.map((i) => [i.call_id, i.status, i.in_doubt]), [[retryId, 'reviewed_not_executed', false]],
    'nothing made the write and nobody decided against it: the queue keeps it');
  // Its age is the reviewed attempt's, not the refused retry's.
  assert.equal(listed.items[0]!.pending_since, firstEnded, 'pending since the reviewed attempt\'s result');
  assert.match(cli(['queue', path]).stdout, /due since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z, no later attempt ran its body/);
  assert.match(cli(['sessions', path]).stdout, /1 \(1 retry_allowed\)/);
  const inspect = cli(['inspect', path, 's-mail']);
  assert.equal(inspect.code, 1, 'inspect counts it as needing attention');
  assert.match(inspect.stdout, /a review said attempt 1 \(\S+\) before it was not made, and its write is still due/);
});
