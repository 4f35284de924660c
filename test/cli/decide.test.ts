/**
 * `jingwei approve`, `deny` and `review` on a real SQLite journal: they write to the decision inbox only, refuse
 * what they must (usage errors exit 2, a request decided twice exits 1, nothing written), and escape journal text.
 */
import assert from 'node:assert/strict';
import { it, describe } from 'node:test';
import { ToolBodyError } from '../../src/errors.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { decisionInbox } from '../../src/store/inbox.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/recovery.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { cli, pendingPayments } from './helpers.js';

const dir = tempDir();

/** A journal with one call left pending (its request id) and one call that ran (its call id). */
async function journal(): Promise<{ path: string; requestId: string; ranCallId: string }> {
  const path = tempDbPath(dir, 'decide');
  const store = openSqliteStore(path);
  const owner = await store.acquire('s-1', { owner: 'host' });
  await owner.startTask('t');
  const answers = [{ decision: 'pending' as const }, { decision: 'approved' as const }];
  const runtime = createToolRuntime({
    tools: [{ name: 'mail', metadata: new ToolMetadata('mail', { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('ops'), execute: async () => { throw new ToolBodyError('connection_reset', 'the provider hung up'); } }],
    grants: { agent: '*' },
    approvers: { ops: async () => answers.shift()! },
  });
  const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent' });
  const pending = await gateway.call('mail', { to: 'a' });
  // Runs, and the provider hangs up: its outcome is unknown, a call to review.
  const ran = await gateway.call('mail', { to: 'b' });
  await store.close();
  return { path, requestId: pending.result.approval!.requestId, ranCallId: ran.call.id };
}

describe('jingwei approve, deny and review', () => {
  it('approve writes one decision; a second decision is refused with exit 1 and nothing written', async () => {
    const { path, requestId } = await journal();
    const run = cli(['approve', path, requestId, '--actor', 'alice', '--reason', 'ok\u001b[2J']);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^Approved approval_/);
    assert.match(run.stdout, /by alice: ok\\u001B\[2J/, 'journal text is escaped');
    const again = cli(['deny', path, requestId, '--actor', 'bob', '--json']);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /decision_stale/);
    assert.match(again.stdout, /is decided \(approved by alice\); it takes one decision/);
    // --json: the failure as a document, never a decision row.
    assert.deepEqual({ ...(JSON.parse(again.stdout) as { ok: boolean; error: object }), error: undefined }, { ok: false, error: undefined });
    assert.deepEqual([(JSON.parse(again.stdout) as { error: { code: string; exit_code: number } }).error.code, (JSON.parse(again.stdout) as { error: { exit_code: number } }).error.exit_code], ['decision_stale', 1]);
    const store = openSqliteStore(path);
    const row = await decisionInbox(store).get(requestId);
    assert.equal(row?.decision, 'approved');
    assert.equal(row?.actor, 'alice');
    await store.close();
  });

  it('approve refuses a request identical to one already approved in its session (exit 1, nothing written); --allow-identical approves it (r106 #3)', async () => {
    const path = tempDbPath(dir, 'identical');
    const [first, repeat] = (await pendingPayments(path, [{ to: 'ann' }, { to: 'ann' }])) as [string, string];
    assert.equal(cli(['approve', path, first, '--actor', 'alice']).code, 0);
    const refused = cli(['approve', path, repeat, '--actor', 'bob']);
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(refused.stderr, new RegExp(`decision_identical: approval request ${repeat} .*already approved in session s-1: ${first}`));
    assert.match(refused.stderr, /--allow-identical/);
    const reopened = openSqliteStore(path);
    assert.equal((await decisionInbox(reopened).get(repeat))?.state, 'open', 'nothing was written');
    await reopened.close();
    const meant = cli(['approve', path, repeat, '--actor', 'bob', '--allow-identical']);
    assert.equal(meant.code, 0, meant.stderr);
    assert.match(meant.stdout, /^Approved approval_/);
    assert.match(cli(['approve', '--help']).stdout, /--allow-identical/);
    assert.doesNotMatch(cli(['deny', '--help']).stdout, /--allow-identical/);
  });

  it('usage errors exit 2: no actor, an unknown request, a bad outcome, a call not in the session, an actor name the library reserves', async () => {
    const { path, requestId, ranCallId } = await journal();
    assert.equal(cli(['approve', path, requestId]).code, 2);
    const unknown = cli(['deny', path, 'approval_unknown', '--actor', 'bob']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /decision_not_found/);
    assert.equal(cli(['review', path, ranCallId, '--session', 's-1', '--outcome', 'done', '--evidence', 'x', '--actor', 'a']).code, 2);
    assert.equal(cli(['review', path, 'toolcall_nope', '--session', 's-1', '--outcome', 'completed', '--evidence', 'x', '--actor', 'a']).code, 2);
    // The names the library gives its own decisions: the views would show a person's answer as a reconciler's or a policy's.
    // Also what reads as one: a leading space, a fullwidth colon, a zero-width space, a space before the colon.
    for (const actor of ['reconciler:mail@v1', 'Policy:retry_safe', ' policy:retry_safe', 'policy\uFF1Aretry_safe', '\u200Bpolicy:retry_safe', 'reconciler :mail@v1']) {
      const review = cli(['review', path, ranCallId, '--session', 's-1', '--outcome', 'not_executed', '--evidence', 'x', '--actor', actor]);
      assert.equal(review.code, 2);
      assert.match(review.stderr, /invalid_input: actor: names starting with (reconciler|policy): are the library's own/);
      assert.equal(cli(['approve', path, requestId, '--actor', actor]).code, 2);
    }
    // A name or evidence of invisible characters alone is refused as empty (r88): it would be journaled saying nothing.
    for (const blank of ['\u200B', '\u2060\u00AD', ' \u3164 ']) {
      const byNobody = cli(['review', path, ranCallId, '--session', 's-1', '--outcome', 'not_executed', '--evidence', 'x', '--actor', blank]);
      assert.equal(byNobody.code, 2, byNobody.stderr);
      assert.match(byNobody.stderr, /invalid_input: actor: must be non-empty text: a character a reader sees/);
      const saysNothing = cli(['review', path, ranCallId, '--session', 's-1', '--outcome', 'not_executed', '--evidence', blank, '--actor', 'alice']);
      assert.equal(saysNothing.code, 2, saysNothing.stderr);
      assert.match(saysNothing.stderr, /evidence: must be non-empty text/);
      assert.equal(cli(['approve', path, requestId, '--actor', blank]).code, 2);
    }
    const store = openSqliteStore(path);
    assert.equal((await decisionInbox(store).get(requestId))?.state, 'open');
    assert.deepEqual((await decisionInbox(store).list({ kind: 'review' })).items, []);
    await store.close();
  });

  it('review records a decision with an id for the host to journal; --json prints it', async () => {
    const { path, ranCallId } = await journal();
    const run = cli(['review', path, ranCallId, '--session', 's-1', '--outcome', 'completed', '--evidence', 'in the outbox', '--actor', 'alice', '--json']);
    assert.equal(run.code, 0, run.stderr);
    const row = JSON.parse(run.stdout) as Record<string, unknown>;
    assert.match(row.id as string, /^review_/);
    assert.deepEqual([row.kind, row.call_id, row.session_id, row.decision, row.state, row.tool, row.actor, row.reason, row.binding], ['review', ranCallId, 's-1', 'completed', 'decided', 'mail', 'alice', 'in the outbox', null]);
    assert.deepEqual(Object.keys(row).filter((k) => /[A-Z]/.test(k)), [], 'keys are snake_case, as every command\'s JSON');
    const store = openSqliteStore(path);
    assert.deepEqual((await decisionInbox(store).list({ sessionId: 's-1', kind: 'review' })).items.map((d) => d.id), [row.id]);
    // The task's start, then the pending call (call, result) and the call that ran (call, marker, result).
    assert.equal((await store.loadHistory('s-1')).length, 6, 'the journal is untouched');
    await store.close();
  });
});

describe('a superseded approval request says why', () => {
  it('inspect <request> and a refused approve name what superseded it (r70 F3)', async () => {
    const path = tempDbPath(dir, 'superseded');
    const store = openSqliteStore(path);
    const owner = await store.acquire('s-2', { owner: 'host' });
    await owner.startTask('t');
    const answers = [{ decision: 'pending' as const }, { decision: 'pending' as const }];
    const gateway = createToolRuntime({
      tools: [{ name: 'mail', metadata: new ToolMetadata('mail', { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('ops'), execute: async () => 'sent' }],
      grants: { agent: '*' },
      approvers: { ops: async () => answers.shift()! },
    }).bind({ owner, taskId: 't', caller: 'agent' });
    const first = await gateway.call('mail', { to: 'ann' });
    const second = await gateway.callWithOptions('mail', { to: 'ann' }, { retry: prepareToolRetry(await store.loadHistory('s-2'), first.call.id) });
    await owner.release();
    await store.close();
    const requestId = first.result.approval!.requestId;
    const seen = cli(['inspect', path, requestId]);
    assert.match(seen.stdout, new RegExp(`^Approval request ${requestId} \\(superseded, asked of approver ops: attempt ${second.call.id} of the operation asked again\\) is about this call:`, 'm'));
    const approve = cli(['approve', path, requestId, '--actor', 'alice']);
    assert.equal(approve.code, 1);
    assert.match(approve.stderr, new RegExp(`is superseded \\(attempt ${second.call.id} of the operation asked again\\); it takes one decision`));
  });
});
