/**
 * The room a journal keeps for calls' results and reviews (docs/design.md#a-result-always-has-room), against the
 * writes an attack (u141) found taking it: task changes, the event-count limit, a restarted owner's call in the task
 * an earlier owner left calls open in, and an append decided in the same group commit as a call's admission.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolEffect } from '../../src/event/types.js';
import type { SessionEvent } from '../../src/event/types.js';
import type { EventId, SessionId, TurnId } from '../../src/ids.js';
import { LIMITS } from '../../src/limits.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { decisionInbox } from '../../src/store/inbox.js';
import { exportJournal } from '../../src/store/jsonl.js';
import type { SessionOwner, SessionStore } from '../../src/store/types.js';
import { keptCompletedAnswer } from '../../src/tool/attempt-rules.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { journalInboxReviews } from '../../src/tool/inbox-review.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { reconcileUncertainCalls } from '../../src/tool/reconcile.js';
import { recordToolReview } from '../../src/tool/review.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { ToolExecution } from '../../src/tool/types.js';
import { untilBodyEnded } from '../support/body-ended.js';
import { fillUntil, used } from '../support/journal-fill.js';
import { forEachStore } from '../support/stores.js';

const OUTPUT_LIMIT = 64 * 1024;
const ROOMY = { limits: { toolOutputBytes: 64 * 1024 * 1024, journalBytes: 64 * 1024 * 1024, toolCalls: 100_000 } };

/** A mail tool whose bodies wait until released, then return a short text. */
function waitingMailer(owner: SessionOwner, taskId = 't') {
  const releases: Array<() => void> = [];
  let started = 0;
  const tool = {
    name: 'send_mail',
    metadata: new ToolMetadata('Sends one e-mail', { type: 'object' }).withEffect(ToolEffect.NonIdempotent, 'mail-v1').withOutputCeiling(OUTPUT_LIMIT),
    async execute(): Promise<string> {
      started += 1;
      await new Promise<void>((resolve) => releases.push(resolve));
      return 'sent';
    },
  };
  const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' }, maxOutputBytes: OUTPUT_LIMIT }).bind({ owner, taskId, caller: 'agent' });
  return { gateway, started: () => started, releaseAll: () => {
    for (const release of releases.splice(0)) release();
  } };
}

const until = async (check: () => boolean): Promise<void> => {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 5));
};

forEachStore('the room kept for results and reviews', (target) => {
  it('task changes leave a running call\'s room: starting or stopping tasks is refused before it is taken', async () => {
    const store = await target.fresh().open();
    const owner = await store.acquire('s-tasks', { owner: 'host' });
    await owner.startTask('t', ROOMY);
    await fillUntil(store, owner, LIMITS.evidenceRoomBytes + OUTPUT_LIMIT + 60 * 1024);
    const mail = waitingMailer(owner);
    const call = mail.gateway.call('send_mail', {});
    await until(() => mail.started() === 1);
    const name = (i: number) => `task-${i}-${'x'.repeat(900)}`;
    let refused: unknown;
    for (let i = 0; i < 200 && refused === undefined; i++) {
      try {
        await owner.startTask(name(i));
        await owner.stopTask(name(i), 'r'.repeat(900));
      } catch (error) {
        refused = error;
      }
    }
    assert.equal((refused as { code?: string } | undefined)?.code, 'journal_full', 'a task change is refused once only the call\'s room is left');
    assert.match(String((refused as Error).message), /the results and reviews of 1 call still running need/, 'refused for the room kept, not at the limit itself');
    mail.releaseAll();
    assert.equal((await call).result.outcome.status, 'succeeded', 'its result was recorded');
    await owner.release();
    await store.close();
  });

  it('a new owner\'s call in the task an earlier owner left calls open in keeps their reviews\' room', async () => {
    const location = target.fresh();
    const first = await location.open();
    const old = await first.acquire('s-restart', { owner: 'host-a' });
    await old.startTask('t', ROOMY);
    const mail = waitingMailer(old);
    const calls = Array.from({ length: 10 }, () => mail.gateway.call('send_mail', {}).catch(() => null));
    await until(() => mail.started() === 10);
    const second = await location.open();
    const owner = await second.acquire('s-restart', { owner: 'host-b', takeover: true });
    // Room for the ten reviews, and less than a call's evidence beside them.
    await fillUntil(second, owner, 10 * LIMITS.reviewRoomBytes + 100 * 1024);
    // Before, this call in the same task was admitted with the reviews' room as its output reservation.
    const next = waitingMailer(owner);
    // Other arguments than the calls in doubt, which the in-doubt guard would refuse it as a repeat of.
    const admitted = next.gateway.call('send_mail', { to: 'another' });
    await assert.rejects(admitted, { code: 'journal_full' });
    mail.releaseAll();
    const executions = (await Promise.all(calls)).filter((e): e is ToolExecution => e !== null);
    assert.equal(executions.length, 0, 'the fenced owner records no result');
    const callIds = (await second.loadHistory('s-restart')).flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call.id] : []));
    for (const callId of callIds) await untilBodyEnded(second, 's-restart', callId);
    for (const callId of callIds) {
      const review = await recordToolReview(owner, await second.loadHistory('s-restart'), callId, { turnId: 'turn-review', actor: 'ops', outcome: 'completed', evidence: 'in the outbox' });
      assert.equal(review.kind.type, 'tool_review');
    }
    await owner.release();
    await second.close();
    await first.close();
  });

  it('an append decided in the same commit batch as a call\'s admission leaves the call\'s room', async () => {
    for (const ticks of [0, 1, 2, 4, 8, 16, 32]) {
      const store = await target.fresh().open();
      const owner = await store.acquire('s-race', { owner: 'host' });
      await owner.startTask('t', ROOMY);
      await fillUntil(store, owner, LIMITS.evidenceRoomBytes + OUTPUT_LIMIT + 60 * 1024);
      const free = LIMITS.maxHistoryBytes - (await used(store, 's-race'));
      const mail = waitingMailer(owner);
      let outcome: string | undefined;
      const call = mail.gateway.call('send_mail', {}).then(
        (e) => (outcome = e.result.outcome.status === 'failed' ? `${e.result.outcome.category} ${e.result.outcome.message}` : e.result.outcome.status),
        (e: { code?: string }) => (outcome = e.code),
      );
      for (let i = 0; i < ticks; i++) await Promise.resolve();
      const append = owner.append([{ turnId: 'turn-race' as TurnId, kind: { type: 'user_message', text: 'm'.repeat(free - 2048) } }]).then(() => 'appended', (e: { code?: string }) => e.code);
      await until(() => mail.started() === 1 || outcome !== undefined);
      mail.releaseAll();
      await call;
      const appended = await append;
      // Whichever was decided first: the call, whose result is then recorded, the append refused while the call runs
      // (or written once it has ended); or the append, and the call is refused before its body. Never an append
      // between a call's admission and its result, nor a body run whose result has no room.
      const history = await store.loadHistory('s-race');
      const seqOf = (match: (kind: (typeof history)[number]['kind']) => boolean) => history.find((e) => match(e.kind))?.seq;
      const calledAt = seqOf((k) => k.type === 'tool_call');
      const resultAt = seqOf((k) => k.type === 'tool_result');
      const appendedAt = history.find((e) => e.turnId === 'turn-race')?.seq;
      const between = calledAt !== undefined && appendedAt !== undefined && appendedAt > calledAt && (resultAt === undefined || appendedAt < resultAt);
      const fine = !between && (outcome === 'succeeded' || (outcome === 'journal_full' && mail.started() === 0));
      assert.ok(fine, `after ${ticks} ticks: the call ${outcome} (seq ${calledAt}, result ${resultAt}), the append ${appended} (seq ${appendedAt})`);
      await owner.release();
      await store.close();
    }
  });
});

it('the event-count limit keeps a call\'s slots: a call with no slots left for its result is refused before its body', async () => {
  const store = createMemoryStore();
  const owner = await store.acquire('s-count', { owner: 'host' });
  await owner.startTask('t', ROOMY);
  // Short event ids of the host's own: the count limit, not the size limit, is reached first.
  let next = 0;
  const batch = (n: number) => Array.from({ length: n }, () => ({ eventId: `e${next++}` as EventId, turnId: 't' as TurnId, kind: { type: 'user_message' as const, text: '.' } }));
  // The task's ledger and these: two events short of the limit, as many as a call and its start marker take.
  for (let left = LIMITS.maxHistoryEvents - 1 - 2; left > 0; left -= Math.min(left, 5_000)) await owner.append(batch(Math.min(left, 5_000)));
  const mail = waitingMailer(owner);
  await assert.rejects(mail.gateway.call('send_mail', {}), { code: 'journal_full' });
  assert.equal(mail.started(), 0, 'the body never ran');
  await owner.append(batch(1));
  await store.close();
});

// u143 #1: a reconciler's `unknown` answer settles nothing, yet it took the review slot an open call keeps; after a
// late body's end had taken the other, a person's review of the call (a mail sent) was refused for good.
it('a reconciler\'s unknown answer leaves the room of the review that settles the call', async () => {
  const store = createMemoryStore();
  const owner = await store.acquire('s-unknown', { owner: 'host' });
  await owner.startTask('t', ROOMY);
  const mail = lateMailer(owner);
  const timedOut = await mail.timedOut();
  assert.ok(timedOut.result.outcome.status === 'failed' && timedOut.result.outcome.code === 'tool_timeout');
  const callId = timedOut.call.id;
  await appendUntilLeft(store, owner, LIMITS.reviewRoomEvents);
  await assert.rejects(owner.append([{ turnId: 't' as TurnId, kind: { type: 'user_message', text: '.' } }]), { code: 'journal_full' }, 'the call\'s review slots are kept');
  mail.release();
  await untilBodyEnded(store, 's-unknown', callId);
  const reconciled = await reconcileUncertainCalls(owner, [mail.tool], await store.loadHistory('s-unknown'));
  assert.deepEqual(reconciled.calls.map((c) => [c.action, c.answer]), [['unchanged', 'unknown']], 'the answer is not journaled');
  assert.deepEqual(reconciled.needsReview, [callId]);
  const review = await recordToolReview(owner, await store.loadHistory('s-unknown'), callId, { actor: 'alice', outcome: 'completed', evidence: 'the mail is in the outbox' });
  assert.equal(review.seq, LIMITS.maxHistoryEvents - 1, 'the person\'s review took the last slot');
  await store.close();
});

/** A mail tool whose body ignores its signal and ends when released, with a reconciler answering `answers.next`. */
function lateMailer(owner: SessionOwner) {
  let release = () => {};
  const answers: { next: 'unknown' | 'not_executed' | 'completed' } = { next: 'unknown' };
  const tool = {
    name: 'send_mail',
    metadata: new ToolMetadata('Sends one e-mail', { type: 'object' }).withEffect(ToolEffect.NonIdempotent, 'mail-v1'),
    async execute(): Promise<string> {
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      return 'sent';
    },
    reconcile: () => ({ outcome: answers.next, evidence: `the provider says ${answers.next}` }),
  };
  const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  return { tool, answers, gateway, release: () => release(), timedOut: () => gateway.callWithOptions('send_mail', {}, { timeoutMs: 20 }) };
}

/** A session whose mail call timed out and whose body then ended (sent): its outcome is open, for a review. */
async function mailInDoubt(sessionId: string) {
  const store = createMemoryStore();
  const owner = await store.acquire(sessionId, { owner: 'host' });
  await owner.startTask('t', ROOMY);
  const mail = lateMailer(owner);
  const callId = (await mail.timedOut()).call.id;
  mail.release();
  await untilBodyEnded(store, sessionId, callId);
  return { store, owner, mail, callId };
}

/** Appends one-event batches with short ids until `left` events of the limit are left. */
async function appendUntilLeft(store: SessionStore, owner: SessionOwner, left: number): Promise<void> {
  let next = 0;
  const batch = (n: number) => Array.from({ length: n }, () => ({ eventId: `e${next++}` as EventId, turnId: 't' as TurnId, kind: { type: 'user_message' as const, text: '.' } }));
  const count = (await store.loadHistory(owner.sessionId)).length;
  for (let n = LIMITS.maxHistoryEvents - count - left; n > 0; n -= Math.min(n, 5_000)) await owner.append(batch(Math.min(n, 5_000)));
}

// u146 #1: an operation a review found not made keeps room too: the reconciler answered not_executed while its
// provider lagged, appends then took the rest of the journal, and its later `completed` answer (or a person's) could
// never be journaled, while the queue told operators the write was still to be made.
it('a write a review left due keeps the room of the review that may still find it made', async () => {
  const { store, owner, mail } = await mailInDoubt('s-due');
  mail.answers.next = 'not_executed';
  assert.deepEqual((await reconcileUncertainCalls(owner, [mail.tool], await store.loadHistory('s-due'))).calls.map((c) => c.action), ['recorded']);
  await appendUntilLeft(store, owner, LIMITS.reviewRoomEvents);
  await assert.rejects(owner.append([{ turnId: 't' as TurnId, kind: { type: 'user_message', text: '.' } }]), { code: 'journal_full' });
  mail.answers.next = 'completed';
  const found = await reconcileUncertainCalls(owner, [mail.tool], await store.loadHistory('s-due'));
  assert.deepEqual(found.calls.map((c) => [c.action, c.answer]), [['recorded', 'completed']], 'the answer that it was made is journaled');
  await store.close();
});

// u146 #2: a person's `uncertain` review, which settles nothing, no longer fits beside the kept room; thrown, it held
// up every later decision of the session and failed every startup routine.
it('a person\'s uncertain review with no room is marked stale, and their next decision is journaled', async () => {
  const { store, owner, callId } = await mailInDoubt('s-person');
  await appendUntilLeft(store, owner, LIMITS.reviewRoomEvents);
  const inbox = decisionInbox(store);
  const unsure = await inbox.recordReview({ sessionId: 's-person', callId, outcome: 'uncertain', evidence: 'cannot tell yet', actor: 'ana' });
  const first = await journalInboxReviews(owner, store, await store.loadHistory('s-person'));
  assert.deepEqual(first.stale.map((s) => s.decisionId), [unsure.id]);
  assert.match(first.stale[0]!.reason, /no room for an uncertain review .* if the write was made .* record it completed/);
  await inbox.recordReview({ sessionId: 's-person', callId, outcome: 'completed', evidence: 'in the outbox', actor: 'ana' });
  const second = await journalInboxReviews(owner, store, await store.loadHistory('s-person'));
  assert.deepEqual(second.journaled.map((j) => j.outcome), ['completed']);
  await store.close();
});

// u146 #3: a journal an earlier version filled keeps no room for a settling answer; the pass threw for the whole
// session, every other call's answer with it. Such a journal is made here by importing one at the event limit.
it('a reconciler\'s completed answer with no room in a journal filled before is reported for its call and kept in this process', async () => {
  const { store: built, mail, callId } = await mailInDoubt('s-filled');
  const history = await built.loadHistory('s-filled');
  const filler = Array.from({ length: LIMITS.maxHistoryEvents - history.length }, (_, i): SessionEvent =>
    ({ eventId: `f${i}` as EventId, sessionId: 's-filled' as SessionId, turnId: 't' as TurnId, seq: history.length + i, kind: { type: 'user_message', text: '.' } }));
  const store = createMemoryStore();
  await store.importJsonl(exportJournal([...history, ...filler]), { owner: 'importer' });
  const owner = await store.acquire('s-filled', { owner: 'host', takeover: true });
  mail.answers.next = 'completed';
  const report = await reconcileUncertainCalls(owner, [mail.tool], await store.loadHistory('s-filled'));
  assert.deepEqual(report.calls.map((c) => [c.action, c.answer]), [['failed', 'completed']]);
  assert.match(report.calls[0]!.error ?? '', /answered completed .* no room for it: nothing was journaled/);
  assert.equal(keptCompletedAnswer(owner, callId)?.evidence, 'the provider says completed', 'kept in this process');
  await store.close();
  await built.close();
});

// The room a due write keeps is for a review of the attempt before; its retry's own evidence room includes a review,
// so an admission that counted both refused, near the end of a journal, a retry that fitted.
it('a retry of a due write is admitted in the room its own evidence needs, not that and the review room before it', async () => {
  const { store, owner, mail, callId } = await mailInDoubt('s-retry');
  mail.answers.next = 'not_executed';
  await reconcileUncertainCalls(owner, [mail.tool], await store.loadHistory('s-retry'));
  // The retry's evidence room and its output reservation fit; with the review room of the attempt before, they do not.
  await fillUntil(store, owner, LIMITS.evidenceRoomBytes + OUTPUT_LIMIT + LIMITS.reviewRoomBytes / 2);
  const plan = prepareToolRetry(await store.loadHistory('s-retry'), callId);
  let ended = false;
  const retry = mail.gateway.callWithOptions('send_mail', {}, { retry: plan }).finally(() => {
    ended = true;
  });
  while (!ended) {
    mail.release();
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const made = await retry;
  assert.equal(made.result.outcome.status, 'succeeded', 'the retry was admitted and recorded');
  await store.close();
});

// u148 #1: each not_executed review of a due write took the room kept for a review and left the write due, keeping
// room it no longer had; alternating reviews used it up, and the completed review that the mail was sent was refused.
it('only a completed review uses the room kept for a call: reviews that leave it open or due leave that room', async () => {
  const { store, owner, callId } = await mailInDoubt('s-chain');
  const review = async (actor: string, outcome: 'not_executed' | 'completed') =>
    recordToolReview(owner, await store.loadHistory('s-chain'), callId, { actor, outcome, evidence: `${actor} checked the outbox`, despiteLateReturn: true });
  await review('ana', 'not_executed');
  await appendUntilLeft(store, owner, LIMITS.reviewRoomEvents);
  await assert.rejects(review('bob', 'not_executed'), { code: 'journal_full' }, 'a not_executed review leaves the write due: it may not take the room');
  const made = await review('ana', 'completed');
  assert.equal(made.kind.type === 'tool_review' && made.kind.review.outcome, 'completed', 'the review that settles it has its room');
  await store.close();
});
