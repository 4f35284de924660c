/**
 * `jingwei queue` lists the open approval requests (attempts recorded approval_pending) with their request id,
 * session, tool and since when they wait, in text and JSON, on a real SQLite journal; a decided one moves to the
 * decided requests, which wait for the session's host, and leaves the queue when an attempt uses it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openSqliteStore } from '../../src/sqlite.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { cli, pendingPayments } from './helpers.js';

const dir = tempDir();

async function pendingRequests(path: string): Promise<string[]> {
  const store = openSqliteStore(path);
  const ids: string[] = [];
  for (const session of ['s-a', 's-b']) {
    const owner = await store.acquire(session, { owner: 'host' });
    await owner.startTask('t');
    const runtime = createToolRuntime({
      tools: [{ name: 'mail', metadata: new ToolMetadata('mail', { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('ops'), execute: async () => 'sent' }],
      grants: { agent: '*' },
      approvers: { ops: async () => ({ decision: 'pending' as const, note: 'ask the finance team' }) },
    });
    const outcome = await runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('mail', { to: session });
    ids.push(outcome.result.approval!.requestId);
    await owner.release();
  }
  await store.close();
  return ids;
}

/** Each session's host again: one retry of its pending call, which the operator's decision answers for. */
async function retryEach(path: string): Promise<string[]> {
  const store = openSqliteStore(path);
  const outcomes: string[] = [];
  for (const session of ['s-a', 's-b']) {
    const owner = await store.acquire(session, { owner: 'host' });
    const runtime = createToolRuntime({
      tools: [{ name: 'mail', metadata: new ToolMetadata('mail', { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('ops'), execute: async () => 'sent' }],
      grants: { agent: '*' },
      approvers: { ops: async () => ({ decision: 'pending' as const }) },
    });
    const history = await store.loadHistory(session);
    const call = history.find((e) => e.kind.type === 'tool_call')!;
    const plan = prepareToolRetry(history, call.kind.type === 'tool_call' ? call.kind.call.id : '');
    const outcome = (await runtime.bind({ owner, taskId: 't', caller: 'agent' }).callWithOptions('mail', { to: session }, { retry: plan })).result.outcome;
    outcomes.push(outcome.status === 'succeeded' ? 'succeeded' : outcome.category);
    await owner.release();
  }
  await store.close();
  return outcomes;
}

interface QueueJson {
  items: unknown[];
  approvals: { request_id: string; session_id: string; call_id: string; tool: string; since: string; note: string | null }[];
  approvals_next: string | null;
}

describe('jingwei queue: approval requests waiting for a person', () => {
  it('lists each open request with its id, session, tool and since when; pages; a decided one leaves the list', async () => {
    const path = tempDbPath(dir, 'approvals');
    const [a, b] = (await pendingRequests(path)) as [string, string];

    const text = cli(['queue', path]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /Approval requests waiting for a person \(2\):/);
    assert.match(text.stdout, new RegExp(`${a}\\s+s-a\\s+…\\S{8}\\s+mail\\s+\\S`), 'each request names its call: two requests of one tool are told apart');
    assert.match(text.stdout, new RegExp(`${b}\\s+s-b\\s+…\\S{8}\\s+mail`));
    assert.match(text.stdout, /the call and its arguments in full\): jingwei inspect .* <request>/);
    assert.match(text.stdout, /ask the finance team/);
    assert.match(text.stdout, /jingwei approve .* <request> --actor <name>/);

    const json = JSON.parse(cli(['queue', path, '--json']).stdout) as QueueJson;
    assert.deepEqual(json.items, [], 'an approval_pending attempt never started: it is not an operation in doubt');
    assert.deepEqual(json.approvals.map((r) => [r.request_id, r.session_id, r.tool]), [[a, 's-a', 'mail'], [b, 's-b', 'mail']]);
    assert.ok(json.approvals.every((r) => !Number.isNaN(Date.parse(r.since)) && r.call_id.startsWith('toolcall_')));

    const first = JSON.parse(cli(['queue', path, '--json', '--limit', '1']).stdout) as QueueJson;
    assert.deepEqual([first.approvals.map((r) => r.request_id), first.approvals_next], [[a], a]);
    const second = JSON.parse(cli(['queue', path, '--json', '--limit', '1', '--approvals-after', a]).stdout) as QueueJson;
    assert.deepEqual([second.approvals.map((r) => r.request_id), second.approvals_next], [[b], null]);
    // Pages go by id, so text that is not a request id ('garbage' sorts after them all) used to hide every approval.
    for (const bad of ['garbage', 'review_01a2371f-a722-70c6-829e-c4766e7fbe08', `${a}x`]) {
      const refused = cli(['queue', path, '--approvals-after', bad]);
      assert.equal(refused.code, 2, `${bad}: ${refused.stdout}`);
      assert.match(refused.stderr, /--approvals-after must be the id of an approval request/);
    }
    assert.deepEqual((JSON.parse(cli(['queue', path, '--json', '--session', 's-b']).stdout) as QueueJson).approvals.map((r) => r.request_id), [b]);
    assert.deepEqual((JSON.parse(cli(['queue', path, '--json', '--tool', 'other']).stdout) as QueueJson).approvals, []);
    assert.deepEqual((JSON.parse(cli(['queue', path, '--json', '--older-than', '1d']).stdout) as QueueJson).approvals, [], 'nothing waits a day');

    assert.equal(cli(['approve', path, a, '--actor', 'alice']).code, 0);
    assert.equal(cli(['deny', path, b, '--actor', 'bob']).code, 0);
    // Decided, not used: the hosts are gone, and the operator sees that the decisions wait for them.
    const decided = cli(['queue', path]);
    assert.equal(decided.code, 0);
    assert.doesNotMatch(decided.stdout, /Nothing needs attention|Approval requests waiting for a person/);
    assert.match(decided.stdout, /Decided, waiting for the session's host to use the decision \(2\):/);
    assert.match(decided.stdout, new RegExp(`${a}\\s+s-a\\s+mail\\s+approved by alice`));
    assert.match(decided.stdout, new RegExp(`${b}\\s+s-b\\s+mail\\s+denied by bob`));
    const decidedJson = JSON.parse(cli(['queue', path, '--json']).stdout) as QueueJson & { decided: { request_id: string; decision: string; actor: string; decided_at: string }[]; decided_next: string | null };
    assert.deepEqual(decidedJson.approvals, []);
    assert.deepEqual(decidedJson.decided.map((r) => [r.request_id, r.decision, r.actor]), [[a, 'approved', 'alice'], [b, 'denied', 'bob']]);
    assert.ok(decidedJson.decided.every((r) => !Number.isNaN(Date.parse(r.decided_at))));
    const firstDecided = JSON.parse(cli(['queue', path, '--json', '--limit', '1']).stdout) as typeof decidedJson;
    assert.deepEqual([firstDecided.decided.map((r) => r.request_id), firstDecided.decided_next], [[a], a]);
    const nextDecided = JSON.parse(cli(['queue', path, '--json', '--limit', '1', '--decided-after', a]).stdout) as typeof decidedJson;
    assert.deepEqual(nextDecided.decided.map((r) => r.request_id), [b]);
    assert.equal(cli(['queue', path, '--decided-after', 'garbage']).code, 2);

    // Each host comes back and makes its next attempt, which uses the decision: nothing is left waiting.
    const outcomes = await retryEach(path);
    assert.deepEqual(outcomes, ['succeeded', 'approval_denied']);
    const after = cli(['queue', path]);
    assert.equal(after.code, 0);
    assert.match(after.stdout, /Nothing needs attention\./);
    // The journal names who approved the start, and who denied the other.
    assert.match(cli(['events', path, 's-a']).stdout, new RegExp(`tool_started\\s+call \\S+\\s+body starting  approved by alice \\(request …${a.slice(-8)}\\)`));
    assert.match(cli(['events', path, 's-b']).stdout, /tool_result\s+call \S+\s+failed approval_denied tool_approval_denied_by_operator: denied by bob/);
  });

  it('names a request for the same call as another of its session, waiting or approved, and no other (r108 F1)', async () => {
    const path = tempDbPath(dir, 'identical');
    const [first, repeat, other] = (await pendingPayments(path, [{ to: 'ann' }, { to: 'ann' }, { to: 'bob' }])) as [string, string, string];
    const json = () => (JSON.parse(cli(['queue', path, '--json']).stdout) as { approvals: { request_id: string; identical_to: string[] }[] }).approvals
      .map((r) => [r.request_id, r.identical_to]);
    assert.deepEqual(json(), [[first, [repeat]], [repeat, [first]], [other, []]]);
    const text = cli(['queue', path]).stdout;
    assert.match(text, new RegExp(`${first} asks for the same call \\(tool and arguments\\) as ${repeat} \\(waiting\\): approving both makes the write twice`));
    assert.doesNotMatch(text, new RegExp(`${other} asks for the same call`));
    assert.equal(cli(['approve', path, first, '--actor', 'alice']).code, 0);
    assert.deepEqual(json(), [[repeat, [first]], [other, []]], 'an approved one is named too');
    assert.match(cli(['queue', path]).stdout, new RegExp(`${repeat} asks for the same call \\(tool and arguments\\) as ${first} \\(approved\\)`));
    assert.equal(cli(['deny', path, repeat, '--actor', 'alice']).code, 0);
    assert.deepEqual(json(), [[other, []]]);
  });

  it('names a request for the same tool and arguments in another task of its session, or in another session, apart from identical ones (r110 F1)', async () => {
    const path = tempDbPath(dir, 'same-arguments');
    const [first] = (await pendingPayments(path, [{ to: 'ann' }])) as [string];
    // The host gave up waiting and started the task again under a new task id; a user started over in a new session.
    const [again] = (await pendingPayments(path, [{ to: 'ann' }], { sessionId: 's-1', taskId: 't2' })) as [string];
    const [anew, other] = (await pendingPayments(path, [{ to: 'ann' }, { to: 'bob' }], { sessionId: 's-2', taskId: 't' })) as [string, string];
    type Row = { request_id: string; identical_to: string[]; same_arguments_as: { request_id: string; session_id: string; task_id: string; state: string }[] };
    const json = () => (JSON.parse(cli(['queue', path, '--json']).stdout) as { approvals: Row[] }).approvals
      .map((r) => [r.request_id, r.identical_to, r.same_arguments_as.map((t) => [t.request_id, t.session_id, t.task_id, t.state])]);
    assert.deepEqual(json(), [
      [first, [], [[again, 's-1', 't2', 'open'], [anew, 's-2', 't', 'open']]],
      [again, [], [[first, 's-1', 't', 'open'], [anew, 's-2', 't', 'open']]],
      [anew, [], [[first, 's-1', 't', 'open'], [again, 's-1', 't2', 'open']]],
      [other, [], []],
    ]);
    assert.equal(cli(['approve', path, first, '--actor', 'alice']).code, 0);
    const text = cli(['queue', path]).stdout;
    assert.match(text, new RegExp(`${again} asks for the same tool and arguments as ${first} \\(task t, approved\\), ${anew} \\(session s-2, waiting\\): if it is the same request started again, approving both makes the write twice`));
    assert.doesNotMatch(text, new RegExp(`${other} asks for the same`));
    // Not refused: another task is an intent of its own, and the operator was told.
    assert.equal(cli(['approve', path, again, '--actor', 'alice']).code, 0);
  });

  it('inspect given a request id shows the call it would let run, its arguments in full (pass r50: approvals were decided blind)', async () => {
    const path = tempDbPath(dir, 'inspect-request');
    const [a] = (await pendingRequests(path)) as [string, string];
    const r = cli(['inspect', path, a]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^Approval request ${a} \\(open, asked of approver ops\\) is about this call:$`, 'm'));
    assert.match(r.stdout, /^Call toolcall_\S+ in session s-a$/m);
    assert.match(r.stdout, /^ {2}arguments {3}\{"to":"s-a"\}$/m);
    const json = JSON.parse(cli(['inspect', path, a, '--json']).stdout) as { session_id: string; call: { id: string } };
    assert.equal(json.session_id, 's-a');
    assert.equal((JSON.parse(cli(['queue', path, '--json']).stdout) as { approvals: { approver: string }[] }).approvals[0]!.approver, 'ops');
    assert.match(cli(['events', path, 's-a']).stdout, new RegExp(`failed approval_pending .*\\(retryable, request ${a}\\)`), 'events names the request, whole, that a long message would cut off: what approve takes');
    const short = cli(['approve', path, `…${a.slice(-8)}`, '--actor', 'alice']);
    assert.equal(short.code, 2);
    assert.match(short.stderr, /takes the request's whole id, approval_ and 36 characters/, 'a shortened id is named as such, not as a journal moved from another store');
    const unknown = cli(['inspect', path, 'approval_01a2371f-a722-70c6-829e-c4766e7fbe08']);
    assert.equal(unknown.code, 2, 'an id that names no request and no session is refused');
    // u144: it was refused as "no session", as if the id had been read as one.
    assert.match(unknown.stderr, /no approval request \(nor session\) "approval_01a2371f-a722-70c6-829e-c4766e7fbe08" in this store/);
    assert.match(unknown.stderr, /whole id, approval_ and 36 characters/);
  });

  it('filters by tool before the limit: a request of another tool behind more than a page of others is found', async () => {
    const path = tempDbPath(dir, 'approvals-tools');
    const store = openSqliteStore(path);
    const owner = await store.acquire('s-many', { owner: 'host' });
    await owner.startTask('t', { limits: { toolCalls: 100 } });
    const tool = (name: string) => ({ name, metadata: new ToolMetadata(name, { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('ops'), execute: async () => 'sent' });
    const gateway = createToolRuntime({ tools: [tool('mail'), tool('fax')], grants: { agent: '*' }, approvers: { ops: async () => ({ decision: 'pending' as const }) } })
      .bind({ owner, taskId: 't', caller: 'agent' });
    for (let i = 0; i < 5; i++) await gateway.call('mail', { n: i });
    const fax = (await gateway.call('fax', { n: 0 })).result.approval!.requestId;
    await owner.release();
    await store.close();
    // Before, the limit cut the inbox first and the tool filter ran on what was left: nothing, and no next page.
    const json = JSON.parse(cli(['queue', path, '--json', '--tool', 'fax', '--limit', '2']).stdout) as QueueJson & { approvals_next: string | null };
    assert.deepEqual([json.approvals.map((r) => r.request_id), json.approvals_next], [[fax], null]);
    const mail = JSON.parse(cli(['queue', path, '--json', '--tool', 'mail', '--limit', '2']).stdout) as QueueJson & { approvals_next: string | null };
    assert.equal(mail.approvals.length, 2);
    assert.equal(mail.approvals_next, mail.approvals[1]!.request_id, 'the next page starts after the last one shown');
  });
});
