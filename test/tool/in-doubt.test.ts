/**
 * The in-doubt guard: a non-idempotent call is given up on (cancelled, as a timeout would) after its body started; the model issues the same call again
 * as a new operation. The second is refused before its body (`in_doubt`, naming the first call), the outside effect
 * happened once, the queue lists the first call, and after a `not_executed` review the retry plan runs it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ToolEffect, type ActionContext, type SessionEvent, type ToolResult } from '../../src/event/types.js';
import { OperationInDoubtError, OperationMadeByIdenticalError, RECORDED_FAILURE_CODES, StoreConflictError, ToolRetryError } from '../../src/errors.js';
import { createMemoryStore } from '../../src/store/memory.js';
import type { SessionOwner, SessionStore } from '../../src/store/types.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { assessSession } from '../../src/tool/assess.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { exportRustJournal } from '../../src/store/rust-format.js';
import { modelFacingOutcome } from '../../src/bridges/outcome.js';
import { mailer } from '../support/mailer.js';
import { forEachStore } from '../support/stores.js';
import { HistoryBuilder, succeeded } from '../support/history.js';
import { recordToolReview } from '../../src/review.js';
import type { CallId, TaskId } from '../../src/ids.js';
import type { JsonValue } from '../../src/json/types.js';

const failed = (r: ToolResult) => (r.outcome.status === 'failed' ? r.outcome : null);

/** A write whose calls record a start marker, for histories built by hand. */
const WRITE = { effect: ToolEffect.NonIdempotent, startMarker: true } as const;
/** The in-doubt guard's refusal, as journaled. */
const REFUSED = { status: 'failed', category: 'in_doubt', code: 'tool_in_doubt', message: 'an identical call may already have taken effect', retryable: false } as const;
/** A person's review journaled into a history built by hand. */
const reviewIn = (h: HistoryBuilder, callId: string, outcome: 'completed' | 'not_executed') =>
  h.push({ type: 'tool_review', review: { callId: callId as CallId, actor: 'ops', evidence: 'checked', outcome, source: 'human' } });

type Denial = { readonly status: 'failed'; readonly category: 'denied' | 'approval_denied'; readonly code: string; readonly message: string; readonly retryable: false };
/** A guard's denial, as journaled. */
const POLICY_DENIED: Denial = { status: 'failed', category: 'denied', code: 'policy_blocked', message: 'no', retryable: false };

/**
 * By hand, into `h`: a write in doubt (`first`) and its repeat (`repeat`) refused; the write reviewed not made, and
 * its retry (`<first>-2`) denied. Returns the three calls' events, to retry them.
 */
function deniedBesideRepeat(h: HistoryBuilder, first: string, repeat: string, denial: Denial = POLICY_DENIED) {
  const firstCall = h.call({ ...WRITE, id: first, key: `k-${first}` });
  h.started(first);
  const repeatCall = h.call({ ...WRITE, id: repeat, key: `k-${repeat}` });
  h.result(repeat, REFUSED);
  reviewIn(h, first, 'not_executed');
  const retry = h.retry(firstCall, { ...WRITE, id: `${first}-2` });
  h.result(`${first}-2`, denial);
  return { firstCall, repeatCall, retry };
}

/**
 * A chain of repeats, built by hand: a write in doubt (a) and its repeat (b) refused; a reviewed not made and its
 * retry denied; b's retry in doubt and its repeat (c) refused; b's retry reviewed not made and its next retry denied.
 */
function repeatChain() {
  const h = new HistoryBuilder();
  const { repeatCall: b, retry: a2 } = deniedBesideRepeat(h, 'a', 'b');
  // The repeat, retried, is in doubt in its turn, and repeated: that repeat stands for it.
  const b2 = h.retry(b, { ...WRITE, id: 'b-2' });
  h.started('b-2');
  const c = h.call({ ...WRITE, id: 'c', key: 'k-c' });
  h.result('c', REFUSED);
  reviewIn(h, 'b-2', 'not_executed');
  h.retry(b2, { ...WRITE, id: 'b-3' });
  h.result('b-3', POLICY_DENIED);
  return { h, a2, c };
}

async function scenario(store: SessionStore) {
  const caller = new AbortController();
  const mode = { hang: true, giveUp: () => caller.abort() };
  const { tool, sent } = mailer(mode);
  const owner = await store.acquire('mail-session', { owner: 'host' });
  await owner.startTask('mail-task');
  const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 'mail-task', caller: 'agent' });
  const args = { to: 'ana@example.com', subject: 'Your order' };

  const first = await gateway.callWithOptions('send_mail', args, { signal: caller.signal });
  assert.equal(failed(first.result)?.category, 'cancelled');
  assert.ok(first.startedEvent, 'the body started');
  assert.equal(sent.length, 0, 'the mail never left, but nobody can tell from the journal');

  const queue = await store.attention();
  assert.equal(queue.items.length, 1);
  assert.equal(queue.items[0]!.callId, first.call.id);
  assert.equal(queue.items[0]!.status, 'outcome_unknown');
  assert.equal(queue.items[0]!.inDoubt, true);
  assert.ok(queue.items[0]!.calledAt && queue.items[0]!.endedAt);

  // The model asks again, the same mail as a new operation: refused before the body, naming the first call.
  mode.hang = false;
  const second = await gateway.call('send_mail', { subject: 'Your order', to: 'ana@example.com' });
  const refusal = failed(second.result);
  assert.equal(refusal?.category, 'in_doubt');
  assert.equal(refusal?.code, 'tool_in_doubt');
  assert.match(refusal!.message, new RegExp(first.call.id));
  assert.match(refusal!.message, /needs review/);
  // The journal names the earlier call for an operator; the model reads the refusal without it (r99 #2).
  const told = modelFacingOutcome(second);
  assert.ok(!told.ok && told.text.includes('an identical send_mail call may already have taken effect') && !told.text.includes(first.call.id), told.ok ? '' : told.text);
  assert.equal(second.startedEvent, null);
  assert.notEqual(second.call.operation!.key, first.call.operation!.key);
  assert.equal(sent.length, 0, 'no second mail: the repeat never ran');
  assert.equal((await store.attention()).items.length, 1, 'a refusal delivered to the model is not pending work');

  // Other arguments are another mail: not refused.
  const other = await gateway.call('send_mail', { ...args, subject: 'Another' });
  assert.equal(other.result.outcome.status, 'succeeded');
  assert.equal(sent.length, 1);
  return { owner, gateway, first, second, sent, args };
}

describe('the in-doubt guard on memory', () => {
  it('refuses the repeat; after a not_executed review the retry plan runs it; the queue empties', async () => {
    const store = createMemoryStore();
    const { gateway, first, sent, args } = await scenario(store);
    const history = await store.loadHistory('mail-session');
    const plan = prepareToolRetry(history, first.call.id, { actor: 'ops@example.com', evidence: 'not in the mail server log', outcome: 'not_executed' });
    const retry = await gateway.callWithOptions('send_mail', args, { retry: plan });
    assert.equal(retry.result.outcome.status, 'succeeded');
    assert.equal(retry.call.operation!.key, first.call.operation!.key);
    assert.equal(sent.filter((a) => (a as { subject: string }).subject === 'Your order').length, 1, 'the mail was sent exactly once');
    assert.deepEqual((await store.attention()).items, [], 'the retry succeeded: nothing left to look at');
    // Once the operation succeeded, the same mail again is a new, deliberate action: the guard has nothing in doubt.
    const again = await gateway.call('send_mail', args);
    assert.equal(again.result.outcome.status, 'succeeded');
  });

  it('a retry of the refused repeat is refused too while the first is in doubt; the first\'s own retry runs', async () => {
    const store = createMemoryStore();
    const { gateway, first, second, sent, args } = await scenario(store);
    // No plan for the repeat while the write it repeats is in doubt: its retry would only be refused by the guard.
    const before = await store.loadHistory('mail-session');
    assert.throws(() => prepareToolRetry(before, second.call.id), (error: unknown) =>
      error instanceof ToolRetryError && error.code === 'identical_in_doubt' && error.detail.includes(`${first.call.id}, an identical call`));
    assert.equal(sent.filter((a) => (a as { subject: string }).subject === 'Your order').length, 0, 'no mail while the first is in doubt');
    const plan = prepareToolRetry(await store.loadHistory('mail-session'), first.call.id, { actor: 'ops@example.com', evidence: 'not in the mail server log', outcome: 'not_executed' });
    const retry = await gateway.callWithOptions('send_mail', args, { retry: plan });
    assert.equal(retry.result.outcome.status, 'succeeded', 'a retry of the operation in doubt is not a repeat of it');
    assert.equal(sent.filter((a) => (a as { subject: string }).subject === 'Your order').length, 1);
    const after = await store.loadHistory('mail-session');
    assert.throws(() => prepareToolRetry(after, second.call.id), (error: unknown) => error instanceof ToolRetryError && error.code === 'completed');
  });

  it('never retries a refused repeat once the write it repeated completed: by a review, or by a retry of the first', async () => {
    for (const settle of ['review', 'retry'] as const) {
      const store = createMemoryStore();
      const { owner, gateway, first, second, sent, args } = await scenario(store);
      let settledBy = first.call.id as string;
      if (settle === 'review') {
        await recordToolReview(owner, await store.loadHistory('mail-session'), first.call.id, { actor: 'ops@example.com', evidence: 'in the mail server log', outcome: 'completed' });
      } else {
        const plan = prepareToolRetry(await store.loadHistory('mail-session'), first.call.id, { actor: 'ops@example.com', evidence: 'not in the mail server log', outcome: 'not_executed' });
        const retry = await gateway.callWithOptions('send_mail', args, { retry: plan });
        assert.equal(retry.result.outcome.status, 'succeeded');
        settledBy = retry.call.id;
      }
      const history = await store.loadHistory('mail-session');
      const assessed = assessSession(history).calls.find((c) => c.callId === second.call.id);
      assert.deepEqual([assessed?.status, assessed?.nextStep, assessed?.rule, assessed?.attention], ['not_executed', 'completed', 'repeat_of_completed', 'none'], settle);
      assert.match(assessed!.reason, new RegExp(`${settledBy} has made that write: a retry would make it twice`));
      for (const review of [null, { actor: 'ops@example.com', evidence: 'never sent', outcome: 'not_executed' } as const]) {
        assert.throws(() => prepareToolRetry(history, second.call.id, review), (error: unknown) =>
          error instanceof ToolRetryError && error.code === 'completed' && error.detail.includes(settledBy), `${settle}: the repeat is not retried`);
      }
      const mails = sent.filter((a) => (a as { subject: string }).subject === 'Your order').length;
      assert.equal(mails, settle === 'review' ? 0 : 1, 'the repeat made no mail of its own');
    }
  });

  it('a write confirmed behind its caller\'s back before the refusal was recorded still settles the repeat: the guard read it in doubt', () => {
    for (const settle of ['review', 'retry'] as const) {
      const h = new HistoryBuilder();
      const first = h.call({ ...WRITE, id: 'first', key: 'k-first' });
      h.started('first');
      h.result('first', { status: 'failed', category: 'timeout', code: 'tool_timeout', message: 'deadline', retryable: true });
      let madeBy = 'first';
      if (settle === 'review') reviewIn(h, 'first', 'completed');
      else {
        // Reviewed not made, then the host's retry made it: the model that saw the timeout never learned of it.
        reviewIn(h, 'first', 'not_executed');
        h.retry(first, { ...WRITE, id: 'first-retry' });
        h.started('first-retry');
        h.result('first-retry', succeeded());
        madeBy = 'first-retry';
      }
      // The guard read the first call in doubt; the settlement was committed before the refusal.
      h.call({ ...WRITE, id: 'repeat', key: 'k-repeat' });
      h.result('repeat', REFUSED);
      const assessed = assessSession(h.build()).calls.find((c) => c.callId === 'repeat');
      assert.deepEqual([assessed?.nextStep, assessed?.rule], ['completed', 'repeat_of_completed'], settle);
      assert.throws(() => prepareToolRetry(h.build(), 'repeat'), (error: unknown) =>
        error instanceof ToolRetryError && error.code === 'completed' && error.detail.includes(`${madeBy} has made that write`), settle);
    }
  });

  it('while the write a refused repeat repeated is open, its assessment points at that call', async () => {
    const store = createMemoryStore();
    const { owner, first, second } = await scenario(store);
    const guidance = new RegExp(`; ${first.call.id}, an identical call, is in doubt, may still be running, or its retry is due: decide on that call first`);
    for (const moment of ['in doubt', 'reviewed not_executed'] as const) {
      const history = await historyWithBodyEnded(store);
      if (moment === 'reviewed not_executed') {
        await recordToolReview(owner, history, first.call.id, { actor: 'ops@example.com', evidence: 'not in the mail server log', outcome: 'not_executed' });
      }
      const assessed = assessSession(await store.loadHistory('mail-session')).calls.find((c) => c.callId === second.call.id);
      // Not retry_allowed: a host retrying every such call from one snapshot would spend a refused attempt each round.
      assert.deepEqual([assessed?.nextStep, assessed?.rule, assessed?.attention], ['superseded', 'identical_in_doubt', 'none'], moment);
      assert.match(assessed!.reason, guidance, moment);
    }
  });

  it('a refused retry of a write that ran is not a repeat: parallel identical calls stay two writes (r89 #1)', () => {
    const h = new HistoryBuilder();
    // Two identical mails the model asked for side by side: both ran, both in doubt.
    h.call({ ...WRITE, id: 'z', key: 'k-z' });
    const x = h.call({ ...WRITE, id: 'x', key: 'k-x' });
    h.started('x');
    h.started('z');
    reviewIn(h, 'x', 'not_executed');
    // The host's retry of x meets the guard while z is in doubt; then z is found made.
    h.retry(x, { ...WRITE, id: 'x-2' });
    h.result('x-2', REFUSED);
    reviewIn(h, 'z', 'completed');
    const assessed = assessSession(h.build()).calls.find((c) => c.callId === 'x-2');
    assert.deepEqual([assessed?.nextStep, assessed?.rule], ['retry_allowed', 'not_executed'], 'x, reviewed not made, is still to be made');
    assert.equal(prepareToolRetry(h.build(), 'x-2').sourceCallId, 'x-2');
  });

  it('a refused repeat is tied to the write in doubt it repeated, not to an older identical write made by a retry (r89 #3)', () => {
    const h = new HistoryBuilder();
    const older = h.call({ ...WRITE, id: 'older', key: 'k-older' });
    h.started('older');
    reviewIn(h, 'older', 'not_executed');
    h.retry(older, { ...WRITE, id: 'older-2' });
    h.started('older-2');
    h.result('older-2', succeeded());
    // A new identical mail, asked for after the first was made, is in doubt; the model repeats it.
    h.call({ ...WRITE, id: 'x', key: 'k-x' });
    h.started('x');
    h.call({ ...WRITE, id: 'repeat', key: 'k-repeat' });
    h.result('repeat', REFUSED);
    const assessed = assessSession(h.build()).calls.find((c) => c.callId === 'repeat');
    assert.deepEqual([assessed?.nextStep, assessed?.rule], ['superseded', 'identical_in_doubt']);
    assert.match(assessed!.reason, /; x, an identical call, is in doubt/);
  });

  it('a repeat stays one whatever refuses its retry, and a write its repeat made is not made again (r90)', () => {
    const refusal = (category: 'denied' | 'approval_denied') => ({ status: 'failed', category, code: `tool_${category}`, message: 'no', retryable: false }) as const;

    // The repeat's retry refused by a guard (not the in-doubt one), then the first payment found made.
    const a = new HistoryBuilder();
    a.call({ ...WRITE, id: 'first', key: 'k-first' });
    a.started('first');
    const repeat = a.call({ ...WRITE, id: 'repeat', key: 'k-repeat' });
    a.result('repeat', REFUSED);
    a.retry(repeat, { ...WRITE, id: 'repeat-2' });
    a.result('repeat-2', refusal('denied'));
    reviewIn(a, 'first', 'completed');
    assert.deepEqual(assessSession(a.build()).calls.filter((c) => c.callId.startsWith('repeat')).map((c) => [c.callId, c.rule]),
      [['repeat', 'superseded'], ['repeat-2', 'repeat_of_completed']]);
    assert.throws(() => prepareToolRetry(a.build(), 'repeat-2'), (error: unknown) => error instanceof ToolRetryError && error.code === 'completed');

    // The first payment reviewed not made and its retry denied; the repeat, retried, pays: the first is made by it.
    const b = new HistoryBuilder();
    const { repeatCall: again } = deniedBesideRepeat(b, 'first', 'repeat', refusal('approval_denied'));
    assert.equal(assessSession(b.build()).calls.find((c) => c.callId === 'first-2')?.nextStep, 'retry_allowed', 'not made, and nothing made it yet');
    b.retry(again, { ...WRITE, id: 'repeat-2' });
    b.started('repeat-2');
    b.result('repeat-2', succeeded());
    const firstNow = assessSession(b.build()).calls.find((c) => c.callId === 'first-2');
    assert.deepEqual([firstNow?.nextStep, firstNow?.rule], ['completed', 'made_by_repeat']);
    assert.throws(() => prepareToolRetry(b.build(), 'first-2'), (error: unknown) =>
      error instanceof ToolRetryError && error.code === 'completed' && error.detail.includes('repeat-2, a retry of an identical repeat of it, has made that write'));

    // A repeat refused while a repeat's retry is in doubt names that retry, the write the guard read in doubt.
    const c = new HistoryBuilder();
    const { repeatCall: cRepeat } = deniedBesideRepeat(c, 'first', 'repeat', refusal('approval_denied'));
    c.retry(cRepeat, { ...WRITE, id: 'repeat-2' });
    c.started('repeat-2');
    c.call({ ...WRITE, id: 'third', key: 'k-third' });
    c.result('third', REFUSED);
    assert.match(assessSession(c.build()).calls.find((x) => x.callId === 'third')!.reason, /; repeat-2, an identical call, is in doubt/);
  });

  it('each write made is credited to one write owed: another repeat retried makes the write a repeat stood for, a new call is its own (r92, r93)', () => {
    const denied = { status: 'failed', category: 'denied', code: 'policy_blocked', message: 'no', retryable: false } as const;
    // The first mail in doubt, repeated twice; reviewed not made, its retry denied.
    const setup = () => {
      const h = new HistoryBuilder();
      const first = h.call({ ...WRITE, id: 'first', key: 'k-first' });
      h.started('first');
      const b = h.call({ ...WRITE, id: 'b', key: 'k-b' });
      h.result('b', REFUSED);
      const d = h.call({ ...WRITE, id: 'd', key: 'k-d' });
      h.result('d', REFUSED);
      reviewIn(h, 'first', 'not_executed');
      h.retry(first, { ...WRITE, id: 'first-2' });
      h.result('first-2', denied);
      return { h, b, d };
    };
    const rowOf = (h: HistoryBuilder, callId: string) => {
      const c = assessSession(h.build()).calls.find((x) => x.callId === callId);
      return [c?.nextStep, c?.rule];
    };

    // The second repeat, retried, sent the mail: the first repeat is made too, and so is the first mail.
    const sibling = setup();
    sibling.h.retry(sibling.d, { ...WRITE, id: 'd-2' });
    sibling.h.started('d-2');
    sibling.h.result('d-2', succeeded());
    assert.deepEqual(rowOf(sibling.h, 'b'), ['completed', 'repeat_of_completed'], 'the other repeat made the write it repeats');
    assert.deepEqual(rowOf(sibling.h, 'first-2'), ['completed', 'made_by_repeat']);
    assert.throws(() => prepareToolRetry(sibling.h.build(), 'b'), (error: unknown) =>
      error instanceof ToolRetryError && error.code === 'completed' && error.detail.includes('d-2'));

    // A repeat's retry in doubt may have made the first mail: a retry of the first waits on it (r93).
    const pending = setup();
    pending.h.retry(pending.b, { ...WRITE, id: 'b-2' });
    pending.h.started('b-2');
    assert.deepEqual(rowOf(pending.h, 'first-2'), ['superseded', 'identical_in_doubt']);
    assert.match(assessSession(pending.h.build()).calls.find((c) => c.callId === 'first-2')!.reason,
      /; b-2, an identical call, is in doubt, may still be running, or its retry is due: decide on that call first/);
    assert.throws(() => prepareToolRetry(pending.h.build(), 'first-2'), (error: unknown) => error instanceof ToolRetryError && error.code === 'identical_in_doubt');
    // Reviewed not made, b-2's retry is due and makes the write; denied, the first's own retry makes it.
    reviewIn(pending.h, 'b-2', 'not_executed');
    assert.deepEqual(rowOf(pending.h, 'first-2'), ['superseded', 'identical_in_doubt']);
    pending.h.retry(pending.h.build().find((e) => e.kind.type === 'tool_call' && e.kind.call.id === 'b-2')!, { ...WRITE, id: 'b-3' });
    pending.h.result('b-3', denied);
    assert.deepEqual(rowOf(pending.h, 'first-2'), ['retry_allowed', 'not_executed']);
    assert.match(assessSession(pending.h.build()).calls.find((c) => c.callId === 'first-2')!.reason,
      /; b-2, a retry of an identical repeat of it, ran and was not settled as made: a retry of this one makes this write$/);

    // The model asked for the mail again once the first was decided against, and it was sent: a write of its own.
    // The first mail, decided against, is still a write a host may make, by its retry or by a repeat's: not both.
    const asked = setup();
    asked.h.call({ ...WRITE, id: 'again', key: 'k-again' });
    asked.h.started('again');
    asked.h.result('again', succeeded());
    assert.deepEqual(rowOf(asked.h, 'b'), ['retry_allowed', 'not_executed']);
    assert.deepEqual(rowOf(asked.h, 'first-2'), ['retry_allowed', 'not_executed']);
    assert.match(assessSession(asked.h.build()).calls.find((c) => c.callId === 'b')!.reason,
      /; it repeats first-2, an identical call whose write was decided against and is not made: a retry of this one makes that write; again, the same call asked anew after that one was denied, has made a write of its own: a retry of this one makes a second$/);
    assert.match(assessSession(asked.h.build()).calls.find((c) => c.callId === 'first-2')!.reason,
      /; again, the same call asked anew after this one was denied, has made a write of its own: a retry of this one makes a second$/);

    // Two mails meant (a model's parallel calls), both in doubt and repeated, both reviewed not made and their
    // retries denied: one repeat's retry makes one of them, and one is still owed (r93 #1).
    const two = new HistoryBuilder();
    const a1 = two.call({ ...WRITE, id: 'a1', key: 'k-a1' });
    const a2 = two.call({ ...WRITE, id: 'a2', key: 'k-a2' });
    two.started('a1');
    two.started('a2');
    const b1 = two.call({ ...WRITE, id: 'b1', key: 'k-b1' });
    two.result('b1', REFUSED);
    two.call({ ...WRITE, id: 'b2', key: 'k-b2' });
    two.result('b2', REFUSED);
    const retried = new Map<string, SessionEvent>();
    for (const [source, id] of [[a1, 'a1'], [a2, 'a2']] as const) {
      reviewIn(two, id, 'not_executed');
      retried.set(id, two.retry(source, { ...WRITE, id: `${id}-2` }));
      two.result(`${id}-2`, denied);
    }
    two.retry(b1, { ...WRITE, id: 'b1-2' });
    two.started('b1-2');
    two.result('b1-2', succeeded());
    assert.deepEqual(rowOf(two, 'a2-2'), ['completed', 'made_by_repeat'], 'the one begun last is the write the repeat made');
    assert.deepEqual(rowOf(two, 'a1-2'), ['retry_allowed', 'not_executed'], 'the other mail is still owed');
    assert.deepEqual(rowOf(two, 'b2'), ['retry_allowed', 'not_executed'], 'the other repeat stands for it');
    two.retry(retried.get('a1')!, { ...WRITE, id: 'a1-3' });
    two.started('a1-3');
    two.result('a1-3', succeeded());
    assert.deepEqual(rowOf(two, 'b2'), ['completed', 'repeat_of_completed'], 'both mails made: nothing left for the repeat');

    // A repeat refused while one identical mail is in doubt and a parallel one is still running: the running one's
    // success is its own write, and the repeat waits on the one in doubt (r93).
    const parallel = new HistoryBuilder();
    parallel.call({ ...WRITE, id: 'p1', key: 'k-p1' });
    parallel.call({ ...WRITE, id: 'p2', key: 'k-p2' });
    parallel.started('p1');
    parallel.started('p2');
    parallel.call({ ...WRITE, id: 'r', key: 'k-r' });
    parallel.result('r', REFUSED);
    parallel.result('p2', succeeded());
    assert.deepEqual(rowOf(parallel, 'r'), ['superseded', 'identical_in_doubt']);
    assert.match(assessSession(parallel.build()).calls.find((c) => c.callId === 'r')!.reason, /; p1, an identical call, is in doubt/);
  });

  it('a chain of repeats is settled whichever end makes the write: the repeat of the repeat (r94 #1) or the first write\'s own retry (r98 #1)', () => {
    const cases = [
      // The repeat of the repeat, retried, makes it: the first write is made by it, through the repeat it stood for.
      { by: 'c-2', retried: (c: ReturnType<typeof repeatChain>) => c.c, expect: [['a-2', 'completed', 'made_by_repeat'], ['b-3', 'completed', 'repeat_of_completed']] },
      // The first write's own retry makes it: the repeat stood for it, and the repeat of the repeat for the repeat.
      { by: 'a-3', retried: (c: ReturnType<typeof repeatChain>) => c.a2, expect: [['c', 'completed', 'repeat_of_completed'], ['b-3', 'completed', 'repeat_of_completed']] },
    ];
    for (const { by, retried, expect } of cases) {
      const chain = repeatChain();
      const { h } = chain;
      h.retry(retried(chain), { ...WRITE, id: by });
      h.started(by);
      h.result(by, succeeded());
      const ids = expect.map(([id]) => id!);
      const rows = assessSession(h.build()).calls.filter((x) => ids.includes(x.callId)).map((x) => [x.callId, x.nextStep, x.rule]);
      assert.deepEqual(rows, expect, by);
      for (const id of ids) {
        assert.throws(() => prepareToolRetry(h.build(), id), (error: unknown) => error instanceof ToolRetryError && error.code === 'completed' && error.detail.includes(by), `${by}: ${id}`);
      }
    }
  });

  it('a repeat of a write decided against, whose same call the model asked anew and made, says a retry of it makes a second write (r98 #2)', () => {
    const h = new HistoryBuilder();
    deniedBesideRepeat(h, 'f', 'r', { status: 'failed', category: 'denied', code: 'tool_contract_changed', message: 'redeployed', retryable: false });
    h.call({ ...WRITE, id: 'anew', key: 'k-anew' });
    h.started('anew');
    h.result('anew', succeeded());
    const assessed = assessSession(h.build()).calls.find((c) => c.callId === 'r');
    assert.deepEqual([assessed?.nextStep, assessed?.rule], ['retry_allowed', 'not_executed']);
    assert.match(assessed!.reason, /; it repeats f-2, an identical call whose write was decided against and is not made: a retry of this one makes that write; anew, the same call asked anew after that one was denied, has made a write of its own: a retry of this one makes a second$/);
  });

  it('a retry denied while its write is in doubt decides nothing: a repeat refused after it waits on that write, and is made by it (r101 F2)', () => {
    const IDEMPOTENT = { effect: ToolEffect.Idempotent, startMarker: true } as const;
    const h = new HistoryBuilder();
    const w = h.call({ ...IDEMPOTENT, id: 'w', key: 'k-w' });
    h.started('w');
    // The host's free retry denied by a policy: no review said the write was not made.
    const w2 = h.retry(w, { ...IDEMPOTENT, id: 'w-2' });
    h.result('w-2', POLICY_DENIED);
    h.call({ ...IDEMPOTENT, id: 'r', key: 'k-r' });
    h.result('r', REFUSED);
    const waiting = assessSession(h.build()).calls.find((c) => c.callId === 'r');
    assert.deepEqual([waiting?.nextStep, waiting?.rule], ['superseded', 'identical_in_doubt'], waiting?.reason);
    assert.match(waiting!.reason, /; w-2, an identical call, is in doubt/);
    h.retry(w2, { ...IDEMPOTENT, id: 'w-3' });
    h.started('w-3');
    h.result('w-3', succeeded());
    const made = assessSession(h.build()).calls.find((c) => c.callId === 'r');
    assert.deepEqual([made?.nextStep, made?.rule], ['completed', 'repeat_of_completed']);
    assert.throws(() => prepareToolRetry(h.build(), 'r'), (error: unknown) => error instanceof ToolRetryError && error.code === 'completed' && error.detail.includes('w-3'));
  });

  it('a write decided against with no repeat at all still says when the same call asked anew made a write of its own (r101 F5)', () => {
    const h = new HistoryBuilder();
    const w = h.call({ ...WRITE, id: 'w', key: 'k-w' });
    h.started('w');
    reviewIn(h, 'w', 'not_executed');
    h.retry(w, { ...WRITE, id: 'w-2' });
    h.result('w-2', POLICY_DENIED);
    h.call({ ...WRITE, id: 'anew', key: 'k-anew' });
    h.started('anew');
    h.result('anew', succeeded());
    const assessed = assessSession(h.build()).calls.find((c) => c.callId === 'w-2');
    assert.deepEqual([assessed?.nextStep, assessed?.rule], ['retry_allowed', 'not_executed']);
    assert.match(assessed!.reason, /; anew, the same call asked anew after this one was denied, has made a write of its own: a retry of this one makes a second$/);
  });

  it('a write a denial settled before a repeat was refused is not made by that repeat (r91 #2)', () => {
    const h = new HistoryBuilder();
    const denial = { status: 'failed', category: 'approval_denied', code: 'tool_approval_denied', message: 'no', retryable: false } as const;
    // Pay bob 5: in doubt, reviewed not made, its retry denied. Settled: not made, by a decision.
    const old = h.call({ ...WRITE, id: 'w', key: 'k-w' });
    h.started('w');
    reviewIn(h, 'w', 'not_executed');
    h.retry(old, { ...WRITE, id: 'w-2' });
    h.result('w-2', denial);
    // Asked again later: x is in doubt, its repeat refused, x reviewed not made and denied, the repeat's retry pays.
    const { repeatCall: repeat } = deniedBesideRepeat(h, 'x', 'repeat', denial);
    h.retry(repeat, { ...WRITE, id: 'repeat-2' });
    h.started('repeat-2');
    h.result('repeat-2', succeeded());
    const rules = new Map<string, string>(assessSession(h.build()).calls.map((c) => [c.callId, c.rule]));
    assert.equal(rules.get('x-2'), 'made_by_repeat', 'x is what the repeat repeated');
    assert.equal(rules.get('w-2'), 'not_executed', 'w was settled before: not made, and not claimed made');
  });

  it('a redeploy refuses a due write\'s retry as decided against: the same call asked again under the new contract is the write, not refused as its repeat (r97)', async () => {
    const store = createMemoryStore();
    const { owner, first, sent, args } = await scenario(store);
    await recordToolReview(owner, await historyWithBodyEnded(store), first.call.id, { actor: 'ops@example.com', evidence: 'not in the mail server log', outcome: 'not_executed' });
    const fresh = mailer({ hang: false });
    const v2 = { ...fresh.tool, metadata: new ToolMetadata('Sends one e-mail', { type: 'object' }).withEffect(ToolEffect.NonIdempotent, 'mail-v2') };
    const redeployed = createToolRuntime({ tools: [v2], grants: { agent: '*' } }).bind({ owner, taskId: 'mail-task', caller: 'agent' });
    const retry = await redeployed.callWithOptions('send_mail', args, { retry: prepareToolRetry(await store.loadHistory('mail-session'), first.call.id) });
    assert.deepEqual([failed(retry.result)?.category, failed(retry.result)?.code, retry.startedEvent], ['denied', 'tool_contract_changed', null]);
    assert.match(failed(retry.result)!.message, /call it again to run it under the current contract$/);
    assert.deepEqual((await store.attention()).items, [], 'no write is left due that no retry can make');
    const again = await redeployed.call('send_mail', args);
    assert.equal(again.result.outcome.status, 'succeeded', 'the call it was invited to make runs');
    assert.equal(fresh.sent.length + sent.filter((a) => (a as { subject: string }).subject === 'Your order').length, 1, 'one mail, under the new contract');
    const old = assessSession(await store.loadHistory('mail-session')).calls.find((c) => c.callId === retry.call.id);
    assert.match(old!.reason, new RegExp(`${again.call.id}, the same call asked anew after this one was denied, has made a write of its own: a retry of this one makes a second`));
  });

  it('a repeat a host guard would deny is refused as a repeat first: once the write is confirmed, a retry of it is refused, never made (r101 F4)', async () => {
    const store = createMemoryStore();
    const { owner, first, sent, args } = await scenario(store);
    let deny = true;
    const { tool } = mailer({ hang: false });
    const guarded = createToolRuntime({ tools: [tool], grants: { agent: '*' }, guards: [() => (deny ? { code: 'policy_blocked', message: 'not now' } : null)] })
      .bind({ owner, taskId: 'mail-task', caller: 'agent' });
    const repeat = await guarded.call('send_mail', args);
    assert.deepEqual([failed(repeat.result)?.category, failed(repeat.result)?.code], ['in_doubt', 'tool_in_doubt'], 'a repeat, whatever the guard would say');
    await recordToolReview(owner, await historyWithBodyEnded(store), first.call.id, { actor: 'ops@example.com', evidence: 'in the mail server log', outcome: 'completed' });
    deny = false;
    const history = await store.loadHistory('mail-session');
    assert.equal(assessSession(history).calls.find((c) => c.callId === repeat.call.id)?.rule, 'repeat_of_completed');
    assert.throws(() => prepareToolRetry(history, repeat.call.id), (error: unknown) => error instanceof ToolRetryError && error.code === 'completed');
    assert.equal(sent.filter((a) => (a as { subject: string }).subject === 'Your order').length, 0, 'the first mail, confirmed sent, is not sent again');
  });

  it('a caller key whose call was refused as a repeat points at the call to settle, by its id, not at itself (r107 #2)', async () => {
    const store = createMemoryStore();
    const { gateway, first, args } = await scenario(store);
    const keyed = await gateway.callWithOptions('send_mail', args, { operationKey: 'order-1' });
    assert.equal(failed(keyed.result)?.code, 'tool_in_doubt');
    await assert.rejects(gateway.callWithOptions('send_mail', args, { operationKey: 'order-1' }), (error: unknown) =>
      error instanceof OperationInDoubtError && error.callId === keyed.call.id &&
      error.message.includes(`refused as a repeat of an identical call whose write was in doubt: settle that call (${first.call.id}) first, while it is open`) &&
      !error.message.includes('recover that call explicitly'));
  });

  it('an identical call completed before the one in doubt is not what the repeat repeated: it waits on the one in doubt', () => {
    const h = new HistoryBuilder();
    h.call({ ...WRITE, id: 'earlier', key: 'k-earlier' });
    h.started('earlier');
    h.result('earlier', succeeded());
    h.call({ ...WRITE, id: 'in-doubt', key: 'k-doubt' });
    h.started('in-doubt');
    h.call({ ...WRITE, id: 'repeat', key: 'k-repeat' });
    h.result('repeat', REFUSED);
    const assessed = assessSession(h.build()).calls.find((c) => c.callId === 'repeat');
    assert.deepEqual([assessed?.nextStep, assessed?.rule], ['superseded', 'identical_in_doubt']);
    assert.throws(() => prepareToolRetry(h.build(), 'repeat'), (error: unknown) =>
      error instanceof ToolRetryError && error.code === 'identical_in_doubt' && error.detail.includes('in-doubt, an identical call'));
    // Once the call in doubt is reviewed completed, the repeat is settled by it, not by the earlier one.
    reviewIn(h, 'in-doubt', 'completed');
    assert.throws(() => prepareToolRetry(h.build(), 'repeat'), (error: unknown) =>
      error instanceof ToolRetryError && error.code === 'completed' && error.detail.includes('in-doubt has made that write'));
  });

  it('the issue\'s case with a real deadline: the call times out after its body started, the repeat is refused', async () => {
    // The deadline (timeoutMs) is generous next to a memory-store write, so the body starts before it; the body then
    // hangs until the deadline aborts it. Nothing here measures time: only the recorded categories are checked.
    const store = createMemoryStore();
    const started: string[] = [];
    const mode = { hang: true, giveUp: () => started.push('body') };
    const { tool, sent } = mailer(mode);
    const owner = await store.acquire('timeout-session', { owner: 'host' });
    await owner.startTask('mail-task');
    const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 'mail-task', caller: 'agent' });
    const args = { to: 'ana@example.com', subject: 'Your order' };
    const first = await gateway.callWithOptions('send_mail', args, { timeoutMs: 1500 });
    assert.deepEqual(started, ['body'], 'the body started before the deadline');
    assert.equal(failed(first.result)?.category, 'timeout');
    assert.ok(first.startedEvent);
    mode.hang = false;
    const second = await gateway.call('send_mail', args);
    assert.equal(failed(second.result)?.category, 'in_doubt');
    assert.match(failed(second.result)!.message, new RegExp(first.call.id));
    assert.equal(sent.length, 0, 'the outside effect did not happen twice (here: not at all until reviewed)');
    const plan = prepareToolRetry(await store.loadHistory('timeout-session'), first.call.id, {
      actor: 'ops@example.com', evidence: 'not in the mail server log', outcome: 'not_executed',
    });
    assert.equal((await gateway.callWithOptions('send_mail', args, { retry: plan })).result.outcome.status, 'succeeded');
    assert.equal(sent.length, 1, 'after the not_executed review the retry plan ran it, once');
  });

  it('is on by default and a runtime option turns it off', async () => {
    const store = createMemoryStore();
    const { owner, sent, args } = await scenario(store);
    const { tool } = mailer({ hang: false });
    const unguarded = createToolRuntime({ tools: [tool], grants: { agent: '*' }, inDoubtGuard: false }).bind({ owner, taskId: 'mail-task', caller: 'agent' });
    const repeat = await unguarded.call('send_mail', args);
    assert.equal(repeat.result.outcome.status, 'succeeded');
    assert.equal(sent.length, 1, 'the other runtime has its own tool instance');
    assert.throws(() => createToolRuntime({ tools: [tool], grants: {}, inDoubtGuard: 'yes' as unknown as boolean }), { code: 'tool_config_invalid' });
  });

  it('refuses the repeat of an idempotent tool (a new key writes again), leaves read-only tools alone; a body that never started is not in doubt', async () => {
    const store = createMemoryStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('t');
    let runs = 0;
    const hang = { on: true };
    let caller = new AbortController();
    const tool = (name: string, effect: ToolEffect) => ({
      name,
      metadata: new ToolMetadata(name, { type: 'object' }).withEffect(effect, 'v1'),
      async execute(_: unknown, signal: AbortSignal) {
        runs += 1;
        if (hang.on) {
          const stopped = new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
          caller.abort();
          await stopped;
        }
        return 'ok';
      },
    });
    const gateway = createToolRuntime({ tools: [tool('put', ToolEffect.Idempotent), tool('get', ToolEffect.ReadOnly)], grants: { a: '*' } })
      .bind({ owner, taskId: 't', caller: 'a' });
    assert.equal(failed((await gateway.callWithOptions('put', { x: 1 }, { signal: caller.signal })).result)?.category, 'cancelled');
    caller = new AbortController();
    assert.equal(failed((await gateway.callWithOptions('get', { x: 1 }, { signal: caller.signal })).result)?.category, 'cancelled');
    hang.on = false;
    assert.equal(failed((await gateway.call('put', { x: 1 })).result)?.code, 'tool_in_doubt', 'an idempotent tool deduplicates by key: the repeat would write again');
    assert.equal((await gateway.call('get', { x: 1 })).result.outcome.status, 'succeeded');
    assert.equal(runs, 3);
    // Refused before its body (an interrupt before the marker): provably never ran, so not in doubt.
    const early = new AbortController();
    early.abort();
    assert.equal(failed((await gateway.callWithOptions('put', { x: 2 }, { signal: early.signal })).result)?.category, 'cancelled');
    assert.equal((await gateway.call('put', { x: 2 })).result.outcome.status, 'succeeded');
  });

  it('in_doubt is a recorded pre-body code; the export for the original writes it as denied', async () => {
    assert.ok((RECORDED_FAILURE_CODES as readonly string[]).includes('tool_in_doubt'));
    const store = createMemoryStore();
    await scenario(store);
    const text = exportRustJournal(await store.loadHistory('mail-session'));
    assert.doesNotMatch(text, /"category":"in_doubt"|recorded_at/);
    assert.match(text, /"category":"denied","code":"tool_in_doubt"/);
  });
});

/** The session's history once the cancelled first mail's body has thrown and its end is journaled. */
async function historyWithBodyEnded(store: SessionStore) {
  let history = await store.loadHistory('mail-session');
  for (let waited = 0; waited < 5000 && !history.some((e) => e.kind.type === 'custom' && e.kind.kind === 'body_ended'); waited += 5) {
    await new Promise((resolve) => setTimeout(resolve, 5));
    history = await store.loadHistory('mail-session');
  }
  return history;
}

/** The first mail of the scenario reviewed not made, and its retry denied by a guard: decided against, not made. */
async function reviewedThenDenied(store: SessionStore, owner: SessionOwner, firstCallId: string, args: JsonValue) {
  await recordToolReview(owner, await historyWithBodyEnded(store), firstCallId, { actor: 'ops@example.com', evidence: 'not in the mail server log', outcome: 'not_executed' });
  const { tool } = mailer({ hang: false });
  const guarded = createToolRuntime({ tools: [tool], grants: { agent: '*' }, guards: [() => ({ code: 'policy_blocked', message: 'not now' })] })
    .bind({ owner, taskId: 'mail-task', caller: 'agent' });
  const denied = await guarded.callWithOptions('send_mail', args, { retry: prepareToolRetry(await store.loadHistory('mail-session'), firstCallId) });
  assert.equal(failed(denied.result)?.category, 'denied');
  return denied;
}

/** The mail tool behind an approver; with `holdFirst`, the first call asked about waits for `answer()`. */
function approvingMailer(owner: SessionOwner, holdFirst: boolean) {
  const approved = mailer({ hang: false });
  let asked = () => {};
  const firstAsked = new Promise<void>((resolve) => { asked = resolve; });
  let answer = () => {};
  const answered = new Promise<void>((resolve) => { answer = resolve; });
  let asks = 0;
  const desk = async () => {
    asks += 1;
    if (asks === 1 && holdFirst) {
      asked();
      await answered;
    }
    return { decision: 'approved' as const };
  };
  const gateway = createToolRuntime({ tools: [{ ...approved.tool, metadata: approved.tool.metadata.withApproval('desk') }], grants: { agent: '*' }, approvers: { desk } })
    .bind({ owner, taskId: 'mail-task', caller: 'agent' });
  return { approved, gateway, firstAsked, answer };
}

/**
 * A non-idempotent `pay` behind a desk that is closed at the first ask; the second ask (the host's retry) waits for
 * `answer()`, then says `second`; later asks approve. `sent` counts the payments made.
 */
async function closedDeskPayer(store: SessionStore, sessionId: string, second: 'approved' | 'unavailable') {
  const owner = await store.acquire(sessionId, { owner: 'host' });
  await owner.startTask('t');
  const sent: unknown[] = [];
  let asks = 0;
  let asked = () => {};
  const retryAsked = new Promise<void>((resolve) => { asked = resolve; });
  let answer = () => {};
  const answered = new Promise<void>((resolve) => { answer = resolve; });
  const desk = async () => {
    asks += 1;
    if (asks === 1) return { decision: 'unavailable' as const, code: 'desk_closed', message: 'nobody at the desk' };
    if (asks === 2) {
      asked();
      await answered;
      return second === 'approved' ? { decision: 'approved' as const } : { decision: 'unavailable' as const, code: 'desk_closed', message: 'closed again' };
    }
    return { decision: 'approved' as const };
  };
  const pay = {
    name: 'pay',
    metadata: new ToolMetadata('Pays', { type: 'object' }).withEffect(ToolEffect.NonIdempotent, 'pay-v1').withApproval('desk'),
    async execute(request: { arguments: unknown }) {
      sent.push(request.arguments);
      return 'paid';
    },
  };
  const gateway = createToolRuntime({ tools: [pay], grants: { agent: '*' }, approvers: { desk } }).bind({ owner, taskId: 't', caller: 'agent' });
  return { gateway, sent, retryAsked, answer };
}

forEachStore('the in-doubt guard', (target) => {
  it("a caller key whose write, decided against, a repeat's retry has made since is operation_made_by_identical too (r107 #1)", async () => {
    const store = await target.fresh().open();
    try {
      const owner = await store.acquire('mail-session', { owner: 'host' });
      await owner.startTask('mail-task');
      const caller = new AbortController();
      const mode = { hang: true, giveUp: () => caller.abort() };
      const { tool, sent } = mailer(mode);
      const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 'mail-task', caller: 'agent' });
      const args = { to: 'ana@example.com', subject: 'Your order' };
      const first = await gateway.callWithOptions('send_mail', args, { signal: caller.signal, operationKey: 'order-1' });
      assert.equal(failed(first.result)?.category, 'cancelled');
      mode.hang = false;
      const repeat = await gateway.callWithOptions('send_mail', args, { operationKey: 'order-1-again' });
      assert.equal(failed(repeat.result)?.code, 'tool_in_doubt');
      const denied = await reviewedThenDenied(store, owner, first.call.id, args);
      // The write the repeat's key repeated is decided against: no call to settle is named (r109 #3).
      await assert.rejects(gateway.callWithOptions('send_mail', args, { operationKey: 'order-1-again' }), (error: unknown) =>
        error instanceof OperationInDoubtError && error.callId === repeat.call.id && error.message.includes('no identical write it waits on is open now') &&
        !error.message.includes('settle that call'));
      // Decided against and not made: the key's latest attempt is the denied retry, to recover.
      await assert.rejects(gateway.callWithOptions('send_mail', args, { operationKey: 'order-1' }), (error: unknown) =>
        error instanceof OperationInDoubtError && error.callId === denied.call.id);
      const made = await gateway.callWithOptions('send_mail', args, { retry: prepareToolRetry(await store.loadHistory('mail-session'), repeat.call.id) });
      assert.equal(made.result.outcome.status, 'succeeded');
      assert.equal(assessSession(await store.loadHistory('mail-session')).calls.find((c) => c.callId === denied.call.id)?.rule, 'made_by_repeat');
      await assert.rejects(gateway.callWithOptions('send_mail', args, { operationKey: 'order-1' }), (error: unknown) => {
        assert.ok(error instanceof OperationMadeByIdenticalError, String(error));
        assert.deepEqual([error.callId, error.operationKey, error.madeByCallId], [denied.call.id, 'order-1', made.call.id]);
        return true;
      });
      assert.equal((await gateway.callWithOptions('send_mail', args, { operationKey: 'order-1-again' })).replayed, true, "the repeat's key replays the write its retry made");
      assert.equal(sent.length, 1, 'one mail');
    } finally {
      await store.close();
    }
  });

  it('a caller key refused as a repeat, once the identical write is made, is operation_made_by_identical naming the call that made it (r106 #2)', async () => {
    for (const ending of ['reviewed completed', 'retried after a not_executed review'] as const) {
      const store = await target.fresh().open();
      try {
        const { owner, gateway, first, sent, args } = await scenario(store);
        const keyed = await gateway.callWithOptions('send_mail', args, { operationKey: 'order-1' });
        assert.equal(failed(keyed.result)?.code, 'tool_in_doubt', ending);
        // While the write it repeated is in doubt, the key points at that write, to settle.
        await assert.rejects(gateway.callWithOptions('send_mail', args, { operationKey: 'order-1' }), OperationInDoubtError, ending);
        const history = await historyWithBodyEnded(store);
        let madeBy = first.call.id;
        if (ending === 'reviewed completed') {
          await recordToolReview(owner, history, first.call.id, { actor: 'ops@example.com', evidence: 'in the mail server log', outcome: 'completed' });
        } else {
          const plan = prepareToolRetry(history, first.call.id, { actor: 'ops@example.com', evidence: 'not in the mail server log', outcome: 'not_executed' });
          const retry = await gateway.callWithOptions('send_mail', args, { retry: plan });
          assert.equal(retry.result.outcome.status, 'succeeded', ending);
          madeBy = retry.call.id;
        }
        assert.equal(assessSession(await store.loadHistory('mail-session')).calls.find((c) => c.callId === keyed.call.id)?.rule, 'repeat_of_completed', ending);
        const mails = sent.filter((a) => (a as { subject: string }).subject === 'Your order').length;
        for (let again = 0; again < 2; again++) {
          await assert.rejects(gateway.callWithOptions('send_mail', args, { operationKey: 'order-1' }), (error: unknown) => {
            assert.ok(error instanceof OperationMadeByIdenticalError, `${ending}: ${String(error)}`);
            assert.deepEqual([error.code, error.callId, error.operationKey, error.madeByCallId], ['operation_made_by_identical', keyed.call.id, 'order-1', madeBy], ending);
            return true;
          });
        }
        assert.equal(sent.filter((a) => (a as { subject: string }).subject === 'Your order').length, mails, `${ending}: the key runs nothing`);
        assert.equal(mails, ending === 'reviewed completed' ? 0 : 1, ending);
      } finally {
        await store.close();
      }
    }
  });

  it('no retry of a refused repeat is planned while the write it repeated runs in this process (r89 #2)', async () => {
    const store = await target.fresh().open();
    try {
      const owner = await store.acquire('s-gate', { owner: 'host' });
      await owner.startTask('t');
      const sent: unknown[] = [];
      const caller = new AbortController();
      let hang = true;
      let entered = 0;
      let release = () => {};
      const gate = new Promise<void>((resolve) => { release = resolve; });
      let inBody = () => {};
      const bodyStarted = new Promise<void>((resolve) => { inBody = resolve; });
      const tool = {
        name: 'send_mail',
        metadata: new ToolMetadata('Sends one e-mail', { type: 'object' }).withEffect(ToolEffect.NonIdempotent, 'mail-v1'),
        async execute(request: { arguments: unknown }, signal: AbortSignal) {
          if (hang) {
            const stopped = new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
            caller.abort();
            await stopped;
          }
          entered += 1;
          if (entered === 1) {
            inBody();
            await gate;
          }
          sent.push(request.arguments);
          return 'sent';
        },
      };
      const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
      const args = { to: 'ana@example.com' };
      const first = await gateway.callWithOptions('send_mail', args, { signal: caller.signal });
      const repeat = await gateway.call('send_mail', args);
      assert.equal(failed(repeat.result)?.code, 'tool_in_doubt');
      let history = await store.loadHistory('s-gate');
      for (let waited = 0; waited < 5000 && !history.some((e) => e.kind.type === 'custom' && e.kind.kind === 'body_ended'); waited += 5) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        history = await store.loadHistory('s-gate');
      }
      hang = false;
      const plan = prepareToolRetry(history, first.call.id, { actor: 'ops', evidence: 'not in the mail log', outcome: 'not_executed' });
      const firstRetry = gateway.callWithOptions('send_mail', args, { retry: plan });
      await bodyStarted;
      // The first mail's retry is in its body, in this process; the repeat, retried now, would be a second mail.
      const running = await store.loadHistory('s-gate');
      try {
        assert.throws(() => prepareToolRetry(running, repeat.call.id), (error: unknown) =>
          error instanceof ToolRetryError && error.code === 'identical_in_doubt' && error.detail.includes('may still be running'));
      } finally {
        release();
      }
      const firstDone = await firstRetry;
      assert.equal(firstDone.result.outcome.status, 'succeeded');
      assert.equal(sent.length, 1, 'one mail');
      const settled = assessSession(await store.loadHistory('s-gate')).calls.find((c) => c.callId === repeat.call.id);
      assert.equal(settled?.rule, 'repeat_of_completed');
    } finally {
      await store.close();
    }
  });

  it('a retry of a write not made, planned before its repeat made that write, is refused at its commit (r90)', async () => {
    const store = await target.fresh().open();
    try {
      const { owner, gateway, first, second, sent, args } = await scenario(store);
      const history = await historyWithBodyEnded(store);
      await recordToolReview(owner, history, first.call.id, { actor: 'ops@example.com', evidence: 'not in the mail server log', outcome: 'not_executed' });
      // The first mail's retry is denied by a guard: decided against, not made.
      const { tool } = mailer({ hang: false });
      const guarded = createToolRuntime({ tools: [tool], grants: { agent: '*' }, guards: [() => ({ code: 'policy_blocked', message: 'not now' })] })
        .bind({ owner, taskId: 'mail-task', caller: 'agent' });
      const denied = await guarded.callWithOptions('send_mail', args, { retry: prepareToolRetry(await store.loadHistory('mail-session'), first.call.id) });
      assert.equal(failed(denied.result)?.category, 'denied');
      const stale = prepareToolRetry(await store.loadHistory('mail-session'), denied.call.id);
      // The repeat, retried after all, sends the mail.
      const made = await gateway.callWithOptions('send_mail', args, { retry: prepareToolRetry(await store.loadHistory('mail-session'), second.call.id) });
      assert.equal(made.result.outcome.status, 'succeeded');
      const mails = () => sent.filter((a) => (a as { subject: string }).subject === 'Your order').length;
      assert.equal(mails(), 1);
      await assert.rejects(gateway.callWithOptions('send_mail', args, { retry: stale }), (error: unknown) =>
        error instanceof StoreConflictError && error.code === 'history_changed' && error.message.includes(`call ${second.call.id}, an identical write the retry of ${denied.call.id} could make twice with`));
      assert.equal(mails(), 1, 'no second mail');
      const now = assessSession(await store.loadHistory('mail-session')).calls.find((c) => c.callId === denied.call.id);
      assert.deepEqual([now?.nextStep, now?.rule], ['completed', 'made_by_repeat']);
    } finally {
      await store.close();
    }
  });

  it('of two identical retries, one waiting for its approver while the other made the write, the waiting one never starts (r91 #1)', async () => {
    for (const waits of ['first', 'repeat'] as const) {
      const store = await target.fresh().open();
      try {
        const { owner, first, second, args } = await scenario(store);
        const denied = await reviewedThenDenied(store, owner, first.call.id, args);
        // Both writes' retries go through an approver: the first one asked waits until the other retry has run.
        const { approved, gateway, firstAsked, answer } = approvingMailer(owner, true);
        const [waiting, running] = waits === 'first' ? [denied.call.id, second.call.id] : [second.call.id, denied.call.id];
        const held = gateway.callWithOptions('send_mail', args, { retry: prepareToolRetry(await store.loadHistory('mail-session'), waiting) });
        await firstAsked;
        const ran = await gateway.callWithOptions('send_mail', args, { retry: prepareToolRetry(await store.loadHistory('mail-session'), running) });
        assert.equal(ran.result.outcome.status, 'succeeded', `${waits} waits: the other retry made the write`);
        answer();
        const late = await held;
        assert.equal(approved.sent.length, 1, `${waits} waits: one mail`);
        assert.equal(late.startedEvent, null, `${waits} waits: approved after the identical write was made, its body never starts`);
        assert.equal(failed(late.result)?.code, 'tool_in_doubt');
        assert.match(failed(late.result)!.message, /an identical write the retry of .+ could make twice with .+ moved on .+ its body never ran$/);
        const now = assessSession(await store.loadHistory('mail-session')).calls.find((c) => c.callId === late.call.id);
        assert.equal(now?.nextStep, 'completed', `${waits} waits: ${now?.reason}`);
        const after = await store.loadHistory('mail-session');
        assert.throws(() => prepareToolRetry(after, late.call.id), (error: unknown) => error instanceof ToolRetryError && error.code === 'completed');
      } finally {
        await store.close();
      }
    }
  });

  it('of two repeats of one write, the retry of one made the write: the other\'s retry never starts, waiting or planned before (r92)', async () => {
    for (const when of ['waiting', 'planned'] as const) {
      const store = await target.fresh().open();
      try {
        const { owner, gateway, first, second, args } = await scenario(store);
        const third = await gateway.call('send_mail', args);
        assert.equal(failed(third.result)?.code, 'tool_in_doubt', 'the model repeated the mail twice');
        await reviewedThenDenied(store, owner, first.call.id, args);
        const { approved, gateway: approving, firstAsked, answer } = approvingMailer(owner, when === 'waiting');
        const plan = prepareToolRetry(await store.loadHistory('mail-session'), second.call.id);
        const held = when === 'waiting' ? approving.callWithOptions('send_mail', args, { retry: plan }) : null;
        if (held) await firstAsked;
        const ran = await approving.callWithOptions('send_mail', args, { retry: prepareToolRetry(await store.loadHistory('mail-session'), third.call.id) });
        assert.equal(ran.result.outcome.status, 'succeeded', `${when}: the second repeat's retry sent the mail`);
        answer();
        let repeatLatest = second.call.id;
        if (held) {
          const late = await held;
          repeatLatest = late.call.id;
          assert.equal(late.startedEvent, null, 'approved after the other repeat made the write, its body never starts');
          assert.equal(failed(late.result)?.code, 'tool_in_doubt');
        } else {
          await assert.rejects(approving.callWithOptions('send_mail', args, { retry: plan }), (error: unknown) =>
            error instanceof StoreConflictError && error.code === 'history_changed' && error.message.includes(`call ${third.call.id}, an identical write`));
        }
        assert.equal(approved.sent.length, 1, `${when}: one mail`);
        const after = await store.loadHistory('mail-session');
        assert.throws(() => prepareToolRetry(after, repeatLatest), (error: unknown) => error instanceof ToolRetryError && error.code === 'completed',
          `${when}: the first repeat is made by the second's retry`);
      } finally {
        await store.close();
      }
    }
  });

  it('a plan for a refused repeat, made while the write it repeated was decided against, is refused once that write was settled', async () => {
    for (const settle of ['review', 'retry'] as const) {
      const store = await target.fresh().open();
      try {
        const { owner, gateway, first, second, sent, args } = await scenario(store);
        // While the first mail is in doubt no plan is made for its repeat; once its retry is denied, one is.
        const inDoubt = await historyWithBodyEnded(store);
        assert.throws(() => prepareToolRetry(inDoubt, second.call.id), (error: unknown) => error instanceof ToolRetryError && error.code === 'identical_in_doubt');
        const denied = await reviewedThenDenied(store, owner, first.call.id, args);
        const history = await store.loadHistory('mail-session');
        const stale = prepareToolRetry(history, second.call.id);
        if (settle === 'review') {
          await recordToolReview(owner, history, denied.call.id, { actor: 'ops@example.com', evidence: 'in the mail server log after all', outcome: 'completed' });
        } else {
          const plan = prepareToolRetry(history, denied.call.id);
          assert.equal((await gateway.callWithOptions('send_mail', args, { retry: plan })).result.outcome.status, 'succeeded');
        }
        const before = (await store.loadHistory('mail-session')).length;
        await assert.rejects(gateway.callWithOptions('send_mail', args, { retry: stale }), (error: unknown) =>
          error instanceof StoreConflictError && error.code === 'history_changed' && error.message.includes(`call ${denied.call.id}, an identical write the retry of ${second.call.id} could make twice with (a repeat, or what it repeated), moved on`),
        `${settle}: the stale plan is refused at its commit`);
        assert.equal((await store.loadHistory('mail-session')).length, before, 'nothing was written');
        assert.equal(sent.filter((a) => (a as { subject: string }).subject === 'Your order').length, settle === 'review' ? 0 : 1, 'no second mail');
        const fresh = await store.loadHistory('mail-session');
        assert.throws(() => prepareToolRetry(fresh, second.call.id), (error: unknown) => error instanceof ToolRetryError && error.code === 'completed',
          'prepared again, the repeat is not retried');
      } finally {
        await store.close();
      }
    }
  });

  it('refuses the repeat from the index, and the reviewed retry runs once', async () => {
    const store = await target.fresh().open();
    try {
      const { gateway, first, sent, args } = await scenario(store);
      // The cancelled body threw on its abort after its result was recorded: the operator reviews with its end in the
      // journal (a review made while it could still run is refused once it has thrown).
      const history = await historyWithBodyEnded(store);
      const plan = prepareToolRetry(history, first.call.id, {
        actor: 'ops@example.com', evidence: 'not in the mail server log', outcome: 'not_executed',
      });
      assert.equal((await gateway.callWithOptions('send_mail', args, { retry: plan })).result.outcome.status, 'succeeded');
      assert.equal(sent.filter((a) => (a as { subject: string }).subject === 'Your order').length, 1, 'the mail was sent exactly once');
      assert.deepEqual((await store.attention()).items, []);
    } finally {
      await store.close();
    }
  });

  it('refuses the repeat after a redeploy changed the revision or the effect: the journaled call is the evidence', async () => {
    const store = await target.fresh().open();
    try {
      const { owner, sent, args } = await scenario(store);
      const redeployed = (effect: ToolEffect, revision: string) => {
        const { tool } = mailer({ hang: false });
        const metadata = new ToolMetadata('Sends one e-mail', { type: 'object' }).withEffect(effect, revision);
        return createToolRuntime({ tools: [{ ...tool, metadata, execute: tool.execute }], grants: { agent: '*' } })
          .bind({ owner, taskId: 'mail-task', caller: 'agent' });
      };
      for (const [effect, revision] of [[ToolEffect.NonIdempotent, 'mail-v2'], [ToolEffect.Idempotent, 'mail-v3'], [ToolEffect.Unknown, 'mail-v4']] as const) {
        const repeat = await redeployed(effect, revision).call('send_mail', args);
        assert.equal(failed(repeat.result)?.code, 'tool_in_doubt', `redeployed as ${effect} ${revision}`);
        assert.equal(repeat.startedEvent, null);
      }
      assert.equal(sent.length, 1, 'only the other mail of the scenario left');
      assert.equal((await store.attention()).items.length, 1, 'the first call still waits for its review');
    } finally {
      await store.close();
    }
  });

  it('passes over an identical call this host is still running: parallel identical calls run whatever the timing', async () => {
    const store = await target.fresh().open();
    try {
      const owner = await store.acquire('s-par', { owner: 'host' });
      await owner.startTask('t');
      const added: number[] = [];
      const cart = {
        name: 'add_to_cart',
        metadata: new ToolMetadata('Adds an item', { type: 'object' }).withEffect(ToolEffect.NonIdempotent, 'cart-v1'),
        async execute() { await new Promise((r) => setTimeout(r, 60)); added.push(1); return 'added'; },
      };
      const gateway = createToolRuntime({ tools: [cart], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
      for (const gapMs of [0, 1, 5, 20]) {
        const first = gateway.call('add_to_cart', { item: 'tea' });
        await new Promise((r) => setTimeout(r, gapMs));
        const second = await gateway.call('add_to_cart', { item: 'tea' });
        assert.equal(second.result.outcome.status, 'succeeded', `gap ${gapMs} ms: ${JSON.stringify(second.result.outcome)}`);
        assert.equal((await first).result.outcome.status, 'succeeded');
      }
      assert.equal(added.length, 8, 'both calls of each pair ran, as they would one after the other');
    } finally {
      await store.close();
    }
  });

  it('two identical idempotent writes meant side by side, both in doubt: each one\'s free retry runs beside the other, a repeat of them or not (r94 #2, r101 F1)', async () => {
    for (const repeated of [false, true]) {
      const store = await target.fresh().open();
      try {
        const owner = await store.acquire('s-two', { owner: 'host' });
        await owner.startTask('t');
        const bodies: number[] = [];
        let hang = true;
        const order = {
          name: 'add_item',
          metadata: new ToolMetadata('Adds an item', { type: 'object' }).withEffect(ToolEffect.Idempotent, 'items-v1'),
          async execute(_request: unknown, signal: AbortSignal) {
            bodies.push(1);
            if (hang) await new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
            return 'added';
          },
        };
        const gateway = createToolRuntime({ tools: [order], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
        const callers = [new AbortController(), new AbortController()];
        const pending = callers.map((c) => gateway.callWithOptions('add_item', { item: 'tea' }, { signal: c.signal }));
        while (bodies.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
        for (const c of callers) c.abort();
        const [first, second] = await Promise.all(pending);
        assert.deepEqual([failed(first!.result)?.category, failed(second!.result)?.category], ['cancelled', 'cancelled'], 'both in doubt');
        hang = false;
        // The model asks once more: a repeat of them, refused. Their retries still run beside each other.
        const repeat = repeated ? await gateway.call('add_item', { item: 'tea' }) : null;
        if (repeat !== null) assert.equal(failed(repeat.result)?.category, 'in_doubt');
        for (const execution of [first!, second!]) {
          const plan = prepareToolRetry(await store.loadHistory('s-two'), execution.call.id);
          const retried = await gateway.callWithOptions('add_item', { item: 'tea' }, { retry: plan });
          assert.equal(retried.result.outcome.status, 'succeeded', `repeated ${repeated}: ${JSON.stringify(retried.result.outcome)}`);
        }
        assert.deepEqual((await store.attention()).items, [], 'both settled');
        assert.equal(bodies.length, 4, 'two writes meant, each made by its own retry');
        if (repeat !== null) {
          const assessed = assessSession(await store.loadHistory('s-two')).calls.find((c) => c.callId === repeat.call.id);
          assert.deepEqual([assessed?.nextStep, assessed?.rule], ['completed', 'repeat_of_completed'], 'the repeat stood for both: made');
        }
      } finally {
        await store.close();
      }
    }
  });

  it('a model\'s repeat while the host\'s retry of the write in doubt or due runs in this process is refused: that retry is the write (r102 N1)', async () => {
    for (const effect of [ToolEffect.Idempotent, ToolEffect.NonIdempotent]) {
      const store = await target.fresh().open();
      try {
        const owner = await store.acquire('s-race', { owner: 'host' });
        await owner.startTask('t');
        const sent: unknown[] = [];
        let phase: 'hang' | 'gate' | 'send' = 'hang';
        let entered = () => {};
        const inBody = new Promise<void>((resolve) => { entered = resolve; });
        let hanging = () => {};
        const hangs = new Promise<void>((resolve) => { hanging = resolve; });
        let open = () => {};
        const gate = new Promise<void>((resolve) => { open = resolve; });
        const pay = {
          name: 'pay',
          metadata: new ToolMetadata('Pays', { type: 'object' }).withEffect(effect, 'pay-v1'),
          async execute(request: { arguments: unknown }, signal: AbortSignal) {
            if (phase === 'hang') {
              const aborted = new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
              hanging();
              await aborted;
            }
            if (phase === 'gate') {
              phase = 'send';
              entered();
              await gate;
            }
            sent.push(request.arguments);
            return 'paid';
          },
        };
        const gateway = createToolRuntime({ tools: [pay], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
        const caller = new AbortController();
        const pending = gateway.callWithOptions('pay', { id: 1 }, { signal: caller.signal });
        // Cancelled once its body runs: cancelled between the start marker and the body, it would provably not have
        // run, and no body_ended would ever come (the test hung on PostgreSQL when the poll saw the marker first).
        await hangs;
        caller.abort();
        const first = await pending;
        assert.equal(failed(first.result)?.category, 'cancelled', 'in doubt');
        let history = await store.loadHistory('s-race');
        while (!history.some((e) => e.kind.type === 'custom' && e.kind.kind === 'body_ended')) {
          await new Promise((resolve) => setTimeout(resolve, 5));
          history = await store.loadHistory('s-race');
        }
        if (effect === ToolEffect.NonIdempotent) {
          await recordToolReview(owner, history, first.call.id, { actor: 'ops', evidence: 'not in the ledger', outcome: 'not_executed' });
          history = await store.loadHistory('s-race');
        }
        phase = 'gate';
        const retry = gateway.callWithOptions('pay', { id: 1 }, { retry: prepareToolRetry(history, first.call.id) });
        await inBody;
        // The model asks for the same payment while the host's retry is in its body.
        const repeat = await gateway.call('pay', { id: 1 }).finally(open);
        assert.deepEqual([failed(repeat.result)?.category, repeat.startedEvent], ['in_doubt', null], `${effect}: the repeat is refused`);
        assert.equal((await retry).result.outcome.status, 'succeeded');
        assert.equal(sent.length, 1, `${effect}: one payment`);
      } finally {
        await store.close();
      }
    }
  });

  it('a model\'s identical call while the host\'s retry of a write that never ran waits for its approver is refused, and stands for that write whether the retry makes it or not (r104 #1)', async () => {
    for (const [second, order, together] of [['approved', 'as listed', false], ['approved', 'as listed', true], ['unavailable', 'as listed', false], ['unavailable', 'reversed', false], ['unavailable', 'reversed', true]] as const) {
      const store = await target.fresh().open();
      try {
        const { gateway, sent, retryAsked, answer } = await closedDeskPayer(store, 's-wait', second);
        const first = await gateway.call('pay', { id: 1 });
        assert.deepEqual([failed(first.result)?.category, first.startedEvent], ['approval_unavailable', null], 'the first attempt never ran');
        const retry = gateway.callWithOptions('pay', { id: 1 }, { retry: prepareToolRetry(await store.loadHistory('s-wait'), first.call.id) });
        // The model, told the desk was closed, asks for the same payment while the host's retry waits at the desk; or
        // at once, the host's retry asked first but its call not journaled yet (r106 #1).
        if (!together) await retryAsked;
        const repeat = await gateway.call('pay', { id: 1 }).finally(() => void retryAsked.then(answer));
        assert.deepEqual([failed(repeat.result)?.category, repeat.startedEvent], ['in_doubt', null], `${second}: the model's call is refused`);
        assert.match(failed(repeat.result)!.message, /is being made now, a retry by the host/);
        await retry;
        if (second === 'approved') {
          assert.equal(sent.length, 1, 'one payment: the retry\'s');
          const assessed = assessSession(await store.loadHistory('s-wait')).calls.find((c) => c.callId === repeat.call.id);
          assert.deepEqual([assessed?.nextStep, assessed?.rule], ['completed', 'repeat_of_completed'], 'the model\'s call was made by the retry');
          continue;
        }
        // The retry never ran either. A host that retries every call advised so, from one reading of the journal:
        // whichever it makes first is the one payment, and the other's plan is refused.
        const history = await store.loadHistory('s-wait');
        const allowed = assessSession(history).calls.filter((c) => c.nextStep === 'retry_allowed').map((c) => c.callId);
        assert.ok(allowed.includes(repeat.call.id), 'the model\'s call may be the one made');
        const plans = allowed.map((id) => prepareToolRetry(history, id));
        for (const plan of order === 'reversed' ? plans.reverse() : plans) await gateway.callWithOptions('pay', { id: 1 }, { retry: plan }).catch((error: unknown) => error);
        assert.equal(sent.length, 1, `one payment, plans run ${order}`);
        const after = assessSession(await store.loadHistory('s-wait')).calls.filter((c) => c.nextStep === 'retry_allowed');
        assert.deepEqual(after.map((c) => c.callId), [], 'nothing is left to retry');
      } finally {
        await store.close();
      }
    }
  });

  it('a retry and an identical new call that one model response asked for side by side are two intents: both run (r104 #1)', async () => {
    const store = await target.fresh().open();
    try {
      const { gateway, sent, retryAsked, answer } = await closedDeskPayer(store, 's-step', 'approved');
      // One model response asked for two identical payments (two of one item); the first met a closed desk.
      const at = (actionIndex: number): ActionContext => ({ decision: { taskId: 't' as TaskId, stepId: 'step-1' }, actionIndex });
      const first = await gateway.callWithOptions('pay', { id: 1 }, { action: at(0) });
      assert.equal(failed(first.result)?.category, 'approval_unavailable');
      const retry = gateway.callWithOptions('pay', { id: 1 }, { action: at(0), retry: prepareToolRetry(await store.loadHistory('s-step'), first.call.id) });
      await retryAsked;
      const second = await gateway.callWithOptions('pay', { id: 1 }, { action: at(1) }).finally(answer);
      assert.equal(second.result.outcome.status, 'succeeded', 'the second of the response runs beside the first one\'s retry');
      assert.equal((await retry).result.outcome.status, 'succeeded');
      assert.equal(sent.length, 2, 'two payments, as asked');
    } finally {
      await store.close();
    }
  });

  it('keeps an operation in doubt when its free retry is refused before its body, so the repeat stays refused', async () => {
    const store = await target.fresh().open();
    try {
      const owner = await store.acquire('s-idem', { owner: 'host' });
      await owner.startTask('t');
      const orders: unknown[] = [];
      const caller = new AbortController();
      const order = (approval: boolean) => {
        const metadata = new ToolMetadata('Places an order', { type: 'object' }).withEffect(ToolEffect.Idempotent, 'orders-v1');
        return {
          name: 'place_order',
          metadata: approval ? metadata.withApproval('desk') : metadata,
          async execute(request: { arguments: unknown }, signal: AbortSignal) {
            orders.push(request.arguments);
            if (!caller.signal.aborted) {
              const stopped = new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
              caller.abort();
              await stopped;
            }
            return 'placed';
          },
        };
      };
      const args = { item: 'book' };
      const first = await createToolRuntime({ tools: [order(false)], grants: { agent: '*' } })
        .bind({ owner, taskId: 't', caller: 'agent' }).callWithOptions('place_order', args, { signal: caller.signal });
      assert.equal(failed(first.result)?.category, 'cancelled');
      assert.equal(orders.length, 1, 'the order was written, then the caller gave up on it');

      // The free retry of the idempotent call meets an approver that is down: refused before its body.
      const gated = createToolRuntime({ tools: [order(true)], grants: { agent: '*' }, approvers: { desk: async () => ({ decision: 'unavailable' }) } })
        .bind({ owner, taskId: 't', caller: 'agent' });
      const plan = prepareToolRetry(await store.loadHistory('s-idem'), first.call.id);
      const retry = await gated.callWithOptions('place_order', args, { retry: plan });
      assert.equal(failed(retry.result)?.category, 'approval_unavailable');
      assert.equal(retry.startedEvent, null);
      const told = modelFacingOutcome(retry);
      assert.ok(!told.ok);
      assert.match(told.text, /This attempt did not run, but it retried an earlier attempt of the same call that may have taken effect/,
        'the model is not told the order did not happen');
      const queue = (await store.attention()).items;
      assert.deepEqual(queue.map((i) => [i.key, i.callId, i.status]), [[first.call.operation!.key, retry.call.id, 'outcome_unknown']],
        'the operation is still in doubt: the first attempt may have written');
      // The session's assessment (jingwei inspect, recoverAbandoned) agrees with the queue: the retry is the call to act on.
      const assessed = assessSession(await store.loadHistory('s-idem')).calls;
      assert.deepEqual(assessed.map((c) => [c.callId, c.status, c.nextStep, c.attention]), [
        [first.call.id, 'outcome_unknown', 'superseded', 'none'],
        [retry.call.id, 'not_executed', 'retry_allowed', 'in_doubt'],
      ]);
      assert.match(assessed[1]!.reason, new RegExp(`attempt 1 \\(${first.call.id}\\) before it may have taken effect`));

      // The model asks again, a new operation: refused, no second order.
      const repeat = await createToolRuntime({ tools: [order(false)], grants: { agent: '*' } })
        .bind({ owner, taskId: 't', caller: 'agent' }).call('place_order', args);
      assert.equal(failed(repeat.result)?.code, 'tool_in_doubt');
      assert.equal(orders.length, 1);

      // A retry that succeeds settles it.
      const again = prepareToolRetry(await store.loadHistory('s-idem'), retry.call.id);
      const done = await createToolRuntime({ tools: [order(false)], grants: { agent: '*' } })
        .bind({ owner, taskId: 't', caller: 'agent' }).callWithOptions('place_order', args, { retry: again });
      assert.equal(done.result.outcome.status, 'succeeded');
      assert.deepEqual((await store.attention()).items, []);
      assert.deepEqual(assessSession(await store.loadHistory('s-idem')).calls.map((c) => c.attention), ['none', 'none', 'none'],
        'settled by the success; the refused repeat was answered to its caller');
    } finally {
      await store.close();
    }
  });
});
