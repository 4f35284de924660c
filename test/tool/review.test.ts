/**
 * Reviews are journaled evidence (docs/design.md#reviews-are-journaled-evidence), on SQLite and PostgreSQL: the
 * host records one with recordToolReview, and inspectToolRecovery, assessSession and prepareToolRetry read the
 * latest one; every refusal is typed and writes nothing.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolBodyError } from '../../src/errors.js';
import { exportRustJournal } from '../../src/store/rust-format.js';
import { assessSession, inspectToolRecovery, prepareToolRetry } from '../../src/index.js';
import { recordToolReview } from '../../src/review.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import type { SessionEvent } from '../../src/event/types.js';
import { rig, tool, type Rig } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';
import { commitAs } from '../../src/store/owner-commit.js';

const HUMAN = { actor: 'ops:maria', evidence: 'mail provider log checked: nothing sent for this key' } as const;

/** A non-idempotent tool whose first body fails after it may have had its effect: the call is in doubt. */
function mailer(sent: { count: number }) {
  return tool('send_mail', async (request) => {
    if (request.operation.retry === null) throw new ToolBodyError('connection_reset', 'the provider hung up');
    sent.count += 1;
    return 'sent';
  }, new ToolMetadata('sends a mail', { type: 'object' }).withEffect('non_idempotent', 'mail-v1'));
}

async function uncertainCall(r: Rig): Promise<{ history: SessionEvent[]; callId: string }> {
  const execution = await r.gateway.call('send_mail', { to: 'a@example.com' });
  assert.equal(execution.result.outcome.status, 'failed');
  const history = await r.store.loadHistory(r.sessionId);
  const [listed] = assessSession(history).calls;
  assert.equal(listed?.nextStep, 'needs_review');
  return { history, callId: execution.call.id };
}

const codeOf = (code: string) => ({ code });

forEachStore('journaled reviews', (target) => {
  it('a completed review resolves the call for good: no attention, no plan, no second review', async () => {
    const r = await rig(target, { tools: [mailer({ count: 0 })] });
    const { history, callId } = await uncertainCall(r);
    const event = await recordToolReview(r.owner, history, callId, { ...HUMAN, outcome: 'completed', evidence: 'the provider shows the mail as sent' });
    assert.equal(event.kind.type, 'tool_review');
    const after = await r.store.loadHistory(r.sessionId);
    assert.deepEqual(after[after.length - 1], event);
    assert.deepEqual(event.kind.type === 'tool_review' && event.kind.review, {
      callId, actor: HUMAN.actor, outcome: 'completed', evidence: 'the provider shows the mail as sent', source: 'human',
    });

    const inspected = inspectToolRecovery(after, callId);
    assert.equal(inspected.resolved, true);
    assert.equal(inspected.review?.actor, HUMAN.actor);
    assert.equal(inspected.reviewEvent?.eventId, event.eventId);
    const [listed] = assessSession(after).calls;
    assert.equal(listed?.nextStep, 'completed');
    assert.equal(listed?.rule, 'reviewed_completed');
    assert.equal(listed?.review?.outcome, 'completed');
    assert.equal(assessSession(after).totals.byNextStep.needs_review, 0);

    assert.throws(() => prepareToolRetry(after, callId), codeOf('completed'));
    assert.throws(() => prepareToolRetry(after, callId, { ...HUMAN, outcome: 'not_executed' }), codeOf('completed'), 'a passed review cannot undo it');
    await assert.rejects(recordToolReview(r.owner, after, callId, { ...HUMAN, outcome: 'not_executed' }), codeOf('completed'));
    assert.equal((await r.store.loadHistory(r.sessionId)).length, after.length, 'the refused review wrote nothing');
    await r.store.close();
  });

  it('a not_executed review is used by prepareToolRetry when none is passed, and lands in the retry audit', async () => {
    const sent = { count: 0 };
    const r = await rig(target, { tools: [mailer(sent)] });
    const { history, callId } = await uncertainCall(r);
    assert.throws(() => prepareToolRetry(history, callId), codeOf('needs_review'));
    await recordToolReview(r.owner, history, callId, { ...HUMAN, outcome: 'not_executed', decisionId: 'decision-7' });
    const reviewed = await r.store.loadHistory(r.sessionId);
    assert.equal(assessSession(reviewed).calls[0]?.nextStep, 'retry_allowed');
    const plan = prepareToolRetry(reviewed, callId);
    assert.deepEqual(plan.review, { actor: HUMAN.actor, evidence: HUMAN.evidence, outcome: 'not_executed' });
    const retried = await r.gateway.callWithOptions('send_mail', { to: 'a@example.com' }, { retry: plan });
    assert.equal(retried.result.outcome.status, 'succeeded');
    assert.deepEqual(retried.call.operation?.retry?.review, { actor: HUMAN.actor, evidence: HUMAN.evidence, outcome: 'not_executed' });
    assert.equal(sent.count, 1);
    const done = await r.store.loadHistory(r.sessionId);
    assert.equal(assessSession(done).totals.byNextStep.retry_allowed + assessSession(done).totals.byNextStep.needs_review, 0);
    // The superseded call can no longer be reviewed.
    await assert.rejects(recordToolReview(r.owner, done, callId, { ...HUMAN, outcome: 'completed' }), codeOf('not_latest_attempt'));
    await r.store.close();
  });

  it('an uncertain review is recorded and unblocks nothing; the latest review is the one read', async () => {
    const r = await rig(target, { tools: [mailer({ count: 0 })] });
    const { history, callId } = await uncertainCall(r);
    await recordToolReview(r.owner, history, callId, { ...HUMAN, outcome: 'not_executed' });
    const once = await r.store.loadHistory(r.sessionId);
    await recordToolReview(r.owner, once, callId, { actor: 'ops:li', evidence: 'the provider log is incomplete for that hour', outcome: 'uncertain' });
    const twice = await r.store.loadHistory(r.sessionId);
    const [listed] = assessSession(twice).calls;
    assert.equal(listed?.nextStep, 'needs_review');
    assert.equal(listed?.review?.outcome, 'uncertain');
    assert.equal(inspectToolRecovery(twice, callId).resolved, false);
    assert.throws(() => prepareToolRetry(twice, callId), codeOf('needs_review'));
    await r.store.close();
  });

  it('refuses reviews recovery could not use, typed, writing nothing', async () => {
    const r = await rig(target, {
      tools: [mailer({ count: 0 }), tool('ok', async () => 'fine'), tool('strict', async () => 'x', new ToolMetadata('strict', { type: 'object', required: ['n'] }))],
    });
    const { history, callId } = await uncertainCall(r);
    const ok = await r.gateway.call('ok', {});
    const rejected = await r.gateway.call('strict', {});
    assert.equal(rejected.result.outcome.status, 'failed');
    const all = await r.store.loadHistory(r.sessionId);
    const review = { ...HUMAN, outcome: 'completed' } as const;

    await assert.rejects(recordToolReview(r.owner, all, ok.call.id, review), codeOf('completed'));
    await assert.rejects(recordToolReview(r.owner, all, rejected.call.id, review), codeOf('not_in_doubt'));
    await assert.rejects(recordToolReview(r.owner, all, 'toolcall_never', review), codeOf('invalid_evidence'));
    await assert.rejects(recordToolReview(r.owner, history, callId, review), codeOf('history_changed'), 'decided on a stale history');
    await assert.rejects(recordToolReview(r.owner, all, callId, { ...review, actor: '  ' }), codeOf('invalid_input'));
    await assert.rejects(recordToolReview(r.owner, all, callId, { ...review, outcome: 'maybe' as never }), codeOf('invalid_input'));
    await assert.rejects(recordToolReview(r.owner, all, callId, { ...review, source: 'model' as never }), codeOf('invalid_input'));
    await assert.rejects(recordToolReview(r.owner, [], callId, review), codeOf('invalid_input'));
    // The same text is refused on both ways into the journal: recordToolReview and a review passed to prepareToolRetry.
    const nul = { ...HUMAN, outcome: 'not_executed', evidence: 'checked\u0000the outbox' } as const;
    await assert.rejects(recordToolReview(r.owner, all, callId, nul), codeOf('invalid_input'));
    assert.throws(() => prepareToolRetry(all, callId, nul), codeOf('invalid_evidence'));
    assert.throws(() => prepareToolRetry(all, callId, { ...nul, evidence: 'fine', actor: 'ops\u0000' }), codeOf('invalid_evidence'));
    // A name or evidence a reader cannot see (zero-width, joiners, a soft hyphen, a Hangul filler) says nothing (r88).
    for (const blank of ['\u200B', '\u2060\u00AD', ' \u3164 ', '\u200D\u0301', '\u0001\u007F\u0090', '\uFDD0\uFFFF\u0378', '\u{1D159}', '\uE000\u{F0000}', '\uFFFC']) {
      await assert.rejects(recordToolReview(r.owner, all, callId, { ...review, actor: blank }), codeOf('invalid_input'), JSON.stringify(blank));
      await assert.rejects(recordToolReview(r.owner, all, callId, { ...review, evidence: blank }), codeOf('invalid_input'), JSON.stringify(blank));
      assert.throws(() => prepareToolRetry(all, callId, { ...HUMAN, outcome: 'not_executed', evidence: blank }), codeOf('invalid_evidence'));
    }
    await assert.rejects(
      r.owner.append([{ turnId: 'turn-x', kind: { type: 'tool_review', review: { callId: callId as never, ...review, source: 'human' } } }]),
      codeOf('invalid_input'),
      'the public append never writes a review',
    );
    assert.equal((await r.store.loadHistory(r.sessionId)).length, all.length, 'nothing was written');

    const other = await r.store.acquire('another-session', { owner: 'host' });
    await assert.rejects(recordToolReview(other, all, callId, review), codeOf('invalid_input'), 'the history of another session');
    const fenced = await r.store.acquire(r.sessionId, { owner: 'host-2', takeover: true });
    await assert.rejects(recordToolReview(r.owner, all, callId, review), codeOf('stale_owner'));
    await recordToolReview(fenced, all, callId, review);
    await r.store.close();
  });

  it('a journaled review survives export and import, and the Rust-format export drops it', async () => {
    const r = await rig(target, { tools: [mailer({ count: 0 })] });
    const { history, callId } = await uncertainCall(r);
    await recordToolReview(r.owner, history, callId, { ...HUMAN, outcome: 'completed' });
    const jsonl = await r.store.exportJsonl(r.sessionId);
    assert.match(jsonl, /"type":"tool_review","review":\{"call_id":"[^"]+","actor":"ops:maria","outcome":"completed","evidence":"[^"]+","source":"human"\}/);
    const elsewhere = await target.fresh().open();
    await elsewhere.importJsonl(jsonl, { owner: 'importer' });
    const copy = await elsewhere.loadHistory(r.sessionId);
    await elsewhere.close();
    assert.equal(assessSession(copy).calls[0]?.nextStep, 'completed');
    const rust = exportRustJournal(copy);
    assert.doesNotMatch(rust, /tool_review/);
    assert.doesNotMatch(rust, /task_ledger/);
    assert.equal(rust.trim().split('\n').length, copy.length - 3, 'the task\'s start, the start marker and the review are dropped');
    await r.store.close();
  });

  it('the evidence pass refuses a review no host API could have written', async () => {
    const cases: { name: string; pick: (ids: { uncertain: string; ok: string }) => string; expect: RegExp }[] = [
      { name: 'a succeeded call', pick: (ids) => ids.ok, expect: /invalid_evidence: .*not in doubt/ },
      { name: 'no earlier call', pick: () => 'toolcall_never', expect: /invalid_evidence: .*no earlier call/ },
    ];
    for (const c of cases) {
      const r = await rig(target, { tools: [mailer({ count: 0 }), tool('ok', async () => 'fine')] });
      const { callId } = await uncertainCall(r);
      const ok = await r.gateway.call('ok', {});
      // owner.commit is the runtime's primitive: it writes what it is given, so a forged review is possible there.
      const review = { ...HUMAN, source: 'human', outcome: 'completed', callId: c.pick({ uncertain: callId, ok: ok.call.id }) };
      await commitAs(r.owner, { events: [{ turnId: 'turn-forged', kind: { type: 'tool_review', review: review as never } }] });
      const forged = await r.store.loadHistory(r.sessionId);
      assert.throws(() => assessSession(forged), c.expect, c.name);
      assert.throws(() => prepareToolRetry(forged, callId), c.expect, c.name);
      await r.store.close();
    }
  });

  it('a second review after a completed one is refused by the evidence pass too', async () => {
    const r = await rig(target, { tools: [mailer({ count: 0 })] });
    const { history, callId } = await uncertainCall(r);
    await recordToolReview(r.owner, history, callId, { ...HUMAN, outcome: 'completed' });
    const review = { ...HUMAN, source: 'human', outcome: 'not_executed', callId };
    await commitAs(r.owner, { events: [{ turnId: 'turn-forged', kind: { type: 'tool_review', review: review as never } }] });
    const forged = await r.store.loadHistory(r.sessionId);
    assert.throws(() => assessSession(forged), /invalid_evidence: .*already resolved/);
    await r.store.close();
  });
});
