/**
 * A review recorded with `jingwei review` (the decision inbox) on a real SQLite journal, with real CLI processes:
 * a `completed` one resolves the call in the operator's view at once (`inspect` exits 0), the owner's recovery pass
 * journals it (journalInboxReviews) so no plan can be prepared, and the next pass takes nothing over. A
 * `not_executed` one is what the retry uses; a review the journal no longer admits is marked stale.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decisionInbox } from '../../src/decisions.js';
import { prepareToolRetry } from '../../src/index.js';
import { journalInboxReviews, recordToolReview } from '../../src/review.js';
import { openSqliteStore } from '../../src/sqlite.js';
import type { SessionStore } from '../../src/store/types.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { HistoryBuilder } from '../support/history.js';
import { cli, uncertainCall, writeStore } from './helpers.js';

const dir = tempDir();

/**
 * One pass of the documented routine, as a recovering host runs it: a session is taken over only when it needs
 * attention or has review decisions waiting in the inbox; the owner journals those first. Returns the sessions taken over.
 */
async function recoveryPass(path: string): Promise<string[]> {
  const listed = JSON.parse(cli(['sessions', path, '--json']).stdout) as { sessions: { session_id: string; needs_attention: number; reviews_waiting: number }[] };
  const store: SessionStore = openSqliteStore(path);
  const taken: string[] = [];
  try {
    for (const s of listed.sessions) {
      if (s.needs_attention === 0 && s.reviews_waiting === 0) continue;
      const owner = await store.acquire(s.session_id, { owner: 'recovery', takeover: true });
      taken.push(s.session_id);
      await journalInboxReviews(owner, store, await store.loadHistory(s.session_id));
      await owner.release();
    }
  } finally {
    await store.close();
  }
  return taken;
}

const epochOf = (path: string, sessionId: string): number =>
  (JSON.parse(cli(['sessions', path, '--json']).stdout) as { sessions: { session_id: string; epoch: number }[] }).sessions.find((s) => s.session_id === sessionId)!.epoch;

describe('reviews from the decision inbox, journaled by the owner', () => {
  it('a review repeating the journaled one (same outcome, same actor) is marked stale, not journaled again', async () => {
    const path = tempDbPath(dir);
    const callId = await uncertainCall(path, 's-flood');
    const store = openSqliteStore(path);
    const inbox = decisionInbox(store);
    const owner = await store.acquire('s-flood', { owner: 'host-b', takeover: true });
    // A job re-asserting its answer every few minutes, and the host journaling the inbox in between.
    const answers: ['uncertain' | 'not_executed', string][] = [
      ['uncertain', 'cron'], ['uncertain', 'cron'], ['uncertain', 'cron'], ['uncertain', 'ops:ana'], ['uncertain', 'ops:ana'], ['not_executed', 'cron'], ['not_executed', 'cron'],
    ];
    const journaled: string[][] = [];
    const stale: string[] = [];
    for (const [i, [outcome, actor]] of answers.entries()) {
      await inbox.recordReview({ sessionId: 's-flood', callId, outcome, evidence: `check #${i}: the provider still shows pending`, actor });
      const report = await journalInboxReviews(owner, store, await store.loadHistory('s-flood'));
      journaled.push(...report.journaled.map((j) => [j.actor, j.outcome]));
      stale.push(...report.stale.map((x) => x.reason));
    }
    assert.deepEqual(journaled, [['cron', 'uncertain'], ['ops:ana', 'uncertain'], ['cron', 'not_executed']]);
    assert.equal(stale.length, 4);
    assert.match(stale[0]!, /repeats the uncertain review cron already journaled/);
    const reviews = (await store.loadHistory('s-flood')).filter((e) => e.kind.type === 'tool_review');
    assert.equal(reviews.length, 3, 'the repeats took no room in the journal');
    assert.equal((await inbox.list({ sessionId: 's-flood', kind: 'review', states: ['decided'] })).items.length, 0, 'none is left waiting');
    await owner.release();
    await store.close();
  });
});

describe('a review recorded with jingwei review', () => {
  it('completed: inspect exits 0, the owner journals it, no plan can be prepared, the next pass takes nothing over', async () => {
    const path = tempDbPath(dir, 'completed');
    const call = await uncertainCall(path, 'mail-1');
    assert.equal(cli(['inspect', path, 'mail-1']).code, 1, 'needs_review before the review');

    const recorded = cli(['review', path, call, '--session', 'mail-1', '--outcome', 'completed', '--evidence', 'the provider shows the mail as sent', '--actor', 'ops:maria', '--json']);
    assert.equal(recorded.code, 0, recorded.stderr);
    const decision = JSON.parse(recorded.stdout) as { id: string; state: string };
    assert.equal(decision.state, 'decided');

    const waiting = cli(['inspect', path, 'mail-1']);
    assert.equal(waiting.code, 0, waiting.stdout + waiting.stderr);
    assert.match(waiting.stdout, /Nothing needs attention\./);
    assert.match(waiting.stdout, /1 review decision in the decision inbox waits to be journaled/);
    const json = JSON.parse(cli(['inspect', path, 'mail-1', '--json']).stdout) as { needs_attention: number; calls: { next_step: string; reason: string; inbox_review: { decision_id: string; outcome: string } | null }[] };
    assert.equal(json.needs_attention, 0);
    assert.equal(json.calls[0]?.next_step, 'completed');
    assert.match(json.calls[0]!.reason, /waits to be journaled by the session's owner/);
    assert.deepEqual(json.calls[0]?.inbox_review && [json.calls[0].inbox_review.decision_id, json.calls[0].inbox_review.outcome], [decision.id, 'completed']);
    const one = cli(['inspect', path, 'mail-1', call]);
    assert.equal(one.code, 0);
    assert.match(one.stdout, /inbox\s+completed by ops:maria: the provider shows the mail as sent/);
    // The queue lists the decision until a host journals it: nothing acts on it before.
    const queued = cli(['queue', path]);
    assert.match(queued.stdout, /Review decisions waiting for the session's host to journal them \(1\):/);
    assert.match(queued.stdout, new RegExp(`${decision.id}\\s+mail-1\\s+\\S+\\s+send_mail\\s+completed by ops:maria`));
    const queuedJson = JSON.parse(cli(['queue', path, '--json']).stdout) as { reviews: { decision_id: string; call_id: string; outcome: string }[]; reviews_next: string | null };
    assert.deepEqual([queuedJson.reviews.map((r) => [r.decision_id, r.call_id, r.outcome]), queuedJson.reviews_next], [[[decision.id, call, 'completed']], null]);
    // So does the store's session list: the call needs nothing more, but the session's host still has to journal it.
    const listed = cli(['sessions', path]);
    assert.match(listed.stdout, /mail-1 .* 0; 1 review decision waiting to be journaled/);
    assert.match(listed.stdout, /1 session with review decisions waiting for a host to journal them/);
    const listedJson = JSON.parse(cli(['sessions', path, '--json']).stdout) as { sessions: { needs_attention: number; reviews_waiting: number }[] };
    assert.deepEqual(listedJson.sessions.map((s) => [s.needs_attention, s.reviews_waiting]), [[0, 1]]);

    assert.deepEqual(await recoveryPass(path), ['mail-1'], 'the first pass takes the session over to journal the review');
    assert.match(cli(['queue', path]).stdout, /Nothing needs attention\./, 'journaled, the decision leaves the queue');
    const epoch = epochOf(path, 'mail-1');
    const store = openSqliteStore(path);
    const history = await store.loadHistory('mail-1');
    const review = history.find((e) => e.kind.type === 'tool_review');
    assert.ok(review?.kind.type === 'tool_review');
    assert.deepEqual([review.kind.review.outcome, review.kind.review.actor, review.kind.review.source, review.kind.review.decisionId], ['completed', 'ops:maria', 'human', decision.id]);
    assert.throws(() => prepareToolRetry(history, call), { code: 'completed' });
    const row = await decisionInbox(store).get(decision.id);
    assert.deepEqual([row?.state, row?.consumedBy], ['consumed', review.eventId]);
    assert.deepEqual((await store.attention({ sessionId: 'mail-1' })).items, [], 'the queue no longer lists the call');
    await store.close();

    const after = cli(['inspect', path, 'mail-1', '--json']);
    assert.equal(after.code, 0);
    assert.equal((JSON.parse(after.stdout) as { inbox_reviews: number }).inbox_reviews, 0);
    assert.doesNotMatch(cli(['sessions', path]).stdout, /waiting to be journaled|waiting for a host/);
    assert.deepEqual(await recoveryPass(path), [], 'the next pass takes nothing over');
    assert.equal(epochOf(path, 'mail-1'), epoch);
  });

  it('the operator\'s small print (r69 #7): an uncertain review, a one-event journal, a released store\'s recover, one rule for --limit', async () => {
    const path = tempDbPath(dir, 'small-print');
    const call = await uncertainCall(path, 'mail-u');
    assert.equal(cli(['review', path, call, '--session', 'mail-u', '--outcome', 'uncertain', '--evidence', 'cannot tell', '--actor', 'ops:li']).code, 0);
    assert.match(cli(['inspect', path, 'mail-u']).stdout, /; an uncertain review by ops:li /);
    const recover = cli(['recover', path]);
    assert.equal(recover.code, 0);
    assert.match(recover.stdout, /^No abandoned sessions: no session is held\.\nThe calls of released sessions are not the startup routine's/);
    for (const limit of ['0', '1e3', '1001']) {
      const r = cli(['queue', path, '--limit', limit]);
      assert.equal(r.code, 2);
      assert.match(r.stderr, new RegExp(`--limit must be an integer from 1 to 1000, got "${limit}"`));
    }
    const one = tempDbPath(dir, 'one-event');
    const solo = new HistoryBuilder('solo', 'turn-s');
    solo.message('hi');
    await writeStore(one, { solo: solo.build() });
    assert.match(cli(['events', one, 'solo']).stdout, /^Session solo: 1 event$/m);
  });

  it('not_executed: shown as the review the retry will use; once journaled, the plan carries it', async () => {
    const path = tempDbPath(dir, 'not-executed');
    const call = await uncertainCall(path, 'mail-2');
    assert.equal(cli(['review', path, call, '--session', 'mail-2', '--outcome', 'not_executed', '--evidence', 'no mail in the outbox', '--actor', 'ops:li']).code, 0);
    const waiting = cli(['inspect', path, 'mail-2', '--json']);
    assert.equal(waiting.code, 1, 'the call still needs its retry');
    const json = JSON.parse(waiting.stdout) as { calls: { next_step: string; reason: string }[] };
    assert.equal(json.calls[0]?.next_step, 'needs_review');
    assert.match(json.calls[0]!.reason, /; a not_executed review by ops:li .* the retry will use it once the owner journals it/);

    assert.deepEqual(await recoveryPass(path), ['mail-2']);
    const store = openSqliteStore(path);
    const plan = prepareToolRetry(await store.loadHistory('mail-2'), call);
    assert.equal(plan.sourceCallId, call);
    await store.close();
  });

  // u124 M1: inspect, the console and sessions said "the retry will use it" of a not_executed review the call's own
  // events had overtaken since, which the owner then marked stale and no retry used.
  it('not_executed overtaken by the call\'s own events since: shown as one the owner will mark stale, not as the one the retry will use', async () => {
    const path = tempDbPath(dir, 'overtaken');
    const call = await uncertainCall(path, 'mail-o');
    assert.equal(cli(['review', path, call, '--session', 'mail-o', '--outcome', 'not_executed', '--evidence', 'no mail in the outbox', '--actor', 'ops:li']).code, 0);
    // The call's reconciler journals after the person decided that it cannot tell.
    const store = openSqliteStore(path);
    const owner = await store.acquire('mail-o', { owner: 'host-b', takeover: true });
    await recordToolReview(owner, await store.loadHistory('mail-o'), call, { actor: 'reconciler:send_email@v1', outcome: 'uncertain', evidence: 'the outbox lags', source: 'reconciler' });
    await owner.release();
    await store.close();
    const json = JSON.parse(cli(['inspect', path, 'mail-o', '--json']).stdout) as { calls: { reason: string }[] };
    const reason = json.calls[0]!.reason;
    assert.doesNotMatch(reason, /the retry will use it/);
    assert.match(reason, /a not_executed review by ops:li .* waits in the decision inbox: but the journal has recorded the reconciler's uncertain review \(seq \d+\) of the call since it was made, so the owner will mark it stale and no retry will use it/);
    // u127 LOW 3: the summary lines counted it among the reviews waiting to be journaled.
    const text = cli(['inspect', path, 'mail-o']).stdout;
    assert.doesNotMatch(text, /waits? to be journaled/);
    assert.match(text, /1 review decision in the decision inbox was overtaken by the call's own events since it was made: the session's owner marks it stale/);
    assert.deepEqual([(json as unknown as { inbox_reviews: number }).inbox_reviews, (json as unknown as { inbox_reviews_overtaken: number }).inbox_reviews_overtaken], [1, 1]);
    const listed = cli(['sessions', path]).stdout;
    assert.doesNotMatch(listed, /waiting to be journaled/);
    assert.match(listed, /1 review decision overtaken by the call's own events \(the host marks it stale: review again\)/);
    const listedJson = JSON.parse(cli(['sessions', path, '--json']).stdout) as { sessions: { reviews_waiting: number; reviews_overtaken: number }[] };
    assert.deepEqual(listedJson.sessions.map((s) => [s.reviews_waiting, s.reviews_overtaken]), [[0, 1]]);
  });

  it('a review the journal no longer admits when the owner comes to it is marked stale with the reason, and nothing is journaled', async () => {
    const path = tempDbPath(dir, 'stale');
    const call = await uncertainCall(path, 'mail-3');
    const waiting = JSON.parse(cli(['review', path, call, '--session', 'mail-3', '--outcome', 'not_executed', '--evidence', 'not sent', '--actor', 'b', '--json']).stdout) as { id: string };
    const store = openSqliteStore(path);
    const owner = await store.acquire('mail-3', { owner: 'recovery', takeover: true });
    // Meanwhile the host itself journals what its provider says (a reconciler, or a person through the API).
    await recordToolReview(owner, await store.loadHistory('mail-3'), call, { actor: 'a', outcome: 'completed', evidence: 'sent' });
    const before = await store.loadHistory('mail-3');
    const report = await journalInboxReviews(owner, store, before);
    assert.deepEqual(report.journaled, []);
    assert.deepEqual(report.stale.map((x) => x.decisionId), [waiting.id]);
    assert.match(report.stale[0]!.reason, /^completed: /);
    assert.equal((await store.loadHistory('mail-3')).length, before.length, 'nothing is journaled');
    const row = await decisionInbox(store).get(waiting.id);
    assert.equal(row?.state, 'stale');
    assert.match(row?.note ?? '', /resolved for good/);
    const again = await journalInboxReviews(owner, store, await store.loadHistory('mail-3'));
    assert.deepEqual([again.journaled.length, again.stale.length], [0, 0], 'nothing is left to journal');
    await owner.release();
    await store.close();
    const late = cli(['review', path, call, '--session', 'mail-3', '--outcome', 'not_executed', '--evidence', 'not sent', '--actor', 'c']);
    assert.equal(late.code, 1, 'a review of a resolved call is refused when it is given, not taken and dropped later');
    assert.match(late.stderr, /decision_stale.*nothing was recorded: call \S+ was resolved for good by a completed review from a/);
  });

  it('--replaces naming a review of another call, or one that never existed, is refused for that reason, nothing recorded', async () => {
    const path = tempDbPath(dir, 'replaces-other');
    const a = await uncertainCall(path, 'mail-5');
    const b = await uncertainCall(path, 'mail-6');
    const ofA = JSON.parse(cli(['review', path, a, '--session', 'mail-5', '--outcome', 'not_executed', '--evidence', 'not in the outbox', '--actor', 'alice', '--json']).stdout) as { id: string };
    const other = cli(['review', path, b, '--session', 'mail-6', '--outcome', 'completed', '--evidence', 'sent', '--actor', 'bob', '--replaces', ofA.id]);
    assert.equal(other.code, 2, other.stderr);
    assert.match(other.stderr, new RegExp(`invalid_input: replaces: review ${ofA.id} is of call ${a}, not of call ${b}; nothing was recorded`));
    const never = cli(['review', path, b, '--session', 'mail-6', '--outcome', 'completed', '--evidence', 'sent', '--actor', 'bob', '--replaces', 'review_01a24800-0000-7000-8000-000000000000']);
    assert.equal(never.code, 2, never.stderr);
    assert.match(never.stderr, /decision_not_found: no review decision review_01a24800-0000-7000-8000-000000000000; nothing was recorded/);
    const store = openSqliteStore(path);
    const inbox = decisionInbox(store);
    assert.equal((await inbox.get(ofA.id))?.state, 'decided', "alice's review still waits");
    assert.deepEqual((await inbox.list({ sessionId: 'mail-6', kind: 'review' })).items, [], 'nothing recorded for the other call');
    await store.close();
  });

  it('a call takes one waiting review: a second one is refused until it names the one it replaces, which is then never journaled', async () => {
    const path = tempDbPath(dir, 'completed-second');
    const call = await uncertainCall(path, 'mail-4');
    const first = JSON.parse(cli(['review', path, call, '--session', 'mail-4', '--outcome', 'not_executed', '--evidence', 'not in the outbox', '--actor', 'b', '--json']).stdout) as { id: string };
    const refused = cli(['review', path, call, '--session', 'mail-4', '--outcome', 'completed', '--evidence', 'the provider sent it', '--actor', 'a']);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, new RegExp(`decision_stale.*already has a review waiting for its host to journal it: ${first.id} \\(not_executed by b, .*--replaces ${first.id}`));
    const unknown = cli(['review', path, call, '--session', 'mail-4', '--outcome', 'completed', '--evidence', 'the provider sent it', '--actor', 'a', '--replaces', 'review_0']);
    assert.equal(unknown.code, 2, 'naming a review that does not exist is refused as an unknown id');
    assert.match(unknown.stderr, /decision_not_found: no review decision review_0; nothing was recorded/);
    const replacing = cli(['review', path, call, '--session', 'mail-4', '--outcome', 'completed', '--evidence', 'the provider sent it', '--actor', 'a', '--replaces', first.id]);
    assert.equal(replacing.code, 0, replacing.stderr);
    assert.match(cli(['inspect', path, 'mail-4', call]).stdout, /inbox\s+completed by a:/);
    const store = openSqliteStore(path);
    const replaced = await decisionInbox(store).get(first.id);
    assert.equal(replaced?.state, 'superseded');
    assert.match(replaced?.note ?? '', /^replaced by review review_\S+ \(completed by a\) before it was journaled$/);
    const owner = await store.acquire('mail-4', { owner: 'recovery', takeover: true });
    const report = await journalInboxReviews(owner, store, await store.loadHistory('mail-4'));
    assert.deepEqual(report.journaled.map((j) => [j.outcome, j.actor]), [['completed', 'a']], 'the replaced review is never journaled');
    const history = await store.loadHistory('mail-4');
    assert.throws(() => prepareToolRetry(history, call), { name: 'ToolRetryError', code: 'completed' }, 'the completed review stands: no retry');
    await owner.release();
    await store.close();
  });
});
