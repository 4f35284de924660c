/**
 * Conformance cases for recorded times and the attention index (docs/design.md#recorded-times,
 * docs/design.md#the-attention-index). A backend without the index (no `scanAttention`) skips the index cases.
 */
import { commitAs } from '../store/owner-commit.js';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeEventText } from '../event/codec.js';
import type { EventDraft, SessionEvent, ToolEffect } from '../event/types.js';
import { newCallId, newOperationKey, newTurnId, type CallId, type OperationKey, type TaskId } from '../ids.js';
import { argumentsDigest } from '../store/attention.js';
import { ATTENTION_STATUSES } from '../store/rows.js';
import type { LatestAttemptCondition, SessionStore } from '../store/types.js';

interface Factory {
  open(): Promise<{ store: SessionStore }>;
}

const turn = newTurnId();

function call(taskId: string, key: OperationKey, id: CallId, effect: ToolEffect, name = 'mail', revision = 'v1'): EventDraft {
  return {
    turnId: turn,
    kind: {
      type: 'tool_call',
      call: { id, name, arguments: { to: 'a' }, operation: { taskId: taskId as TaskId, key, contract: { effect, revision }, retry: null, startMarker: true } },
    },
  };
}

const started = (callId: CallId): EventDraft => ({ turnId: turn, kind: { type: 'tool_started', callId } });
const succeeded = (callId: CallId): EventDraft => ({ turnId: turn, kind: { type: 'tool_result', result: { callId, outcome: { status: 'succeeded', output: 'ok' } } } });
/** A result recorded before the body: `unavailable` (a grant withdrawn) or `approval_denied`. */
const refused = (callId: CallId, category: 'unavailable' | 'approval_denied'): EventDraft => ({
  turnId: turn,
  kind: { type: 'tool_result', result: { callId, outcome: { status: 'failed', category, code: category === 'unavailable' ? 'tool_unavailable' : 'tool_approval_denied', message: 'refused', retryable: false } } },
});

/** Why the index cases did not run; a backend without the index also has no in-doubt guard. */
const NO_INDEX = 'not run: this backend keeps no attention index (no scanAttention): store.attention() fails with store_failure, ' +
  'and without findAttention the in-doubt guard is off';

async function hasIndex(store: SessionStore): Promise<boolean> {
  try {
    await store.attention();
    return true;
  } catch (error) {
    if ((error as { code?: string }).code === 'store_failure') return false;
    throw error;
  }
}

export function attentionRules(name: string, factory: Factory): void {
  describe(`store conformance: ${name}: times and the attention index`, () => {
    it('every committed event carries a recorded time, never decreasing, kept by export and import', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-time', { owner: 'h' });
      await owner.append([{ turnId: turn, kind: { type: 'user_message', text: 'a' } }, { turnId: turn, kind: { type: 'user_message', text: 'b' } }]);
      await owner.append([{ turnId: turn, kind: { type: 'user_message', text: 'c' } }]);
      const history = await store.loadHistory('s-time');
      const times = history.map((e) => e.recordedAt);
      assert.ok(times.every((t) => typeof t === 'string' && !Number.isNaN(Date.parse(t))), `times: ${JSON.stringify(times)}`);
      assert.deepEqual([...times].sort(), times, 'never decreasing');
      const { store: other } = await factory.open();
      await other.importJsonl(await store.exportJsonl('s-time'), { owner: 'i' });
      assert.deepEqual((await other.loadHistory('s-time')).map((e) => e.recordedAt), times, 'import keeps the times it is given');
    });

    it('import refuses times that decrease, writing nothing; events without a time stay valid', async () => {
      const { store } = await factory.open();
      const line = (seq: number, recordedAt?: string) => encodeEventText({
        eventId: `e-${seq}` as SessionEvent['eventId'], sessionId: 's-import' as SessionEvent['sessionId'], turnId: turn, seq,
        kind: { type: 'user_message', text: String(seq) }, ...(recordedAt ? { recordedAt } : {}),
      });
      const bad = [line(0, '2026-12-01T10:00:00.000Z'), line(1), line(2, '2026-12-01T09:59:59.999Z')].join('\n') + '\n';
      await assert.rejects(store.importJsonl(bad, { owner: 'i' }));
      assert.deepEqual(await store.loadHistory('s-import'), []);
      const good = [line(0), line(1, '2026-12-01T10:00:00.000Z'), line(2), line(3, '2026-12-01T10:00:00.000Z')].join('\n') + '\n';
      assert.equal((await store.importJsonl(good, { owner: 'i' })).events, 4);
      assert.deepEqual((await store.loadHistory('s-import')).map((e) => e.recordedAt ?? null), [null, '2026-12-01T10:00:00.000Z', null, '2026-12-01T10:00:00.000Z']);
    });

    it('the index follows each operation\'s latest attempt; the queue pages and filters it without loading journals', async (t) => {
      const { store } = await factory.open();
      if (!(await hasIndex(store))) {
        t.skip(NO_INDEX);
        return;
      }
      const a = await store.acquire('s-att-a', { owner: 'h' });
      const b = await store.acquire('s-att-b', { owner: 'h' });
      await a.startTask('t-a');
      await b.startTask('t-b');
      const k1 = newOperationKey();
      const c1 = newCallId();
      await commitAs(a, { events: [call('t-a', k1, c1, 'non_idempotent'), started(c1)] });
      const c2 = newCallId();
      await commitAs(a, { events: [call('t-a', newOperationKey(), c2, 'idempotent', 'put')] });
      const c3 = newCallId();
      await commitAs(b, { events: [call('t-b', newOperationKey(), c3, 'unknown')] });
      await commitAs(b, { events: [started(c3), succeeded(c3)] });

      const all = await store.attention();
      assert.deepEqual(new Set(all.items.map((i) => i.callId)), new Set([c1, c2]),
        'attention() must list the two operations without a result: a backend stores every row of TxWrites.attention in the commit that carries it');
      assert.deepEqual(all.items.map((i) => i.callId), [c1, c2].sort((x, y) => {
        const kx = all.items.find((i) => i.callId === x)!.key;
        const ky = all.items.find((i) => i.callId === y)!.key;
        return kx < ky ? -1 : 1;
      }));
      assert.equal(all.next, null);
      const first = all.items.find((i) => i.callId === c1)!;
      assert.equal(first.status, 'no_result');
      assert.equal(first.started, true);
      assert.equal(first.inDoubt, true);
      assert.ok(first.calledAt !== null && first.startedAt !== null && first.endedAt === null);
      assert.equal(all.items.find((i) => i.callId === c2)!.inDoubt, false, 'never started, and idempotent');

      const done = await store.attention({ status: 'completed' });
      assert.deepEqual(done.items.map((i) => i.callId), [c3]);
      assert.ok(done.items[0]!.endedAt !== null);

      const pages: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await store.attention({ status: ['no_result', 'completed'], limit: 1, cursor });
        assert.ok(page.items.length <= 1);
        pages.push(...page.items.map((i) => i.callId));
        cursor = page.next;
      } while (cursor !== null);
      assert.equal(pages.length, 3);
      assert.deepEqual(new Set(pages), new Set([c1, c2, c3]));

      assert.deepEqual((await store.attention({ sessionId: 's-att-b', status: 'completed' })).items.map((i) => i.callId), [c3]);
      assert.deepEqual((await store.attention({ tool: 'put' })).items.map((i) => i.callId), [c2]);
      assert.deepEqual((await store.attention({ effect: 'non_idempotent' })).items.map((i) => i.callId), [c1]);
      assert.deepEqual((await store.attention({ olderThanMs: 86_400_000 })).items, [], 'nothing is a day old');
      await assert.rejects(store.attention({ cursor: 'not-a-cursor' }), { code: 'invalid_input' });
      await assert.rejects(store.attention({ limit: 0 }), { code: 'invalid_input' });
      await assert.rejects(store.attention({ status: 'open' as never }), { code: 'invalid_input' });

      const inDoubt = await a.findInDoubt!({ taskId: 't-a', tool: 'mail', argsDigest: argumentsDigest({ to: 'a' }) });
      assert.equal(inDoubt?.callId, c1, 'findInDoubt must find the started non-idempotent call: JournalBackend.findAttention (without it the in-doubt guard is off)');
      assert.equal(await a.findInDoubt!({ taskId: 't-a', tool: 'mail', argsDigest: argumentsDigest({ to: 'b' }) }), null, 'other arguments');

      // A result of the latest attempt settles it: nothing left to look at in session a but the idempotent call.
      await commitAs(a, { events: [succeeded(c1)] });
      assert.deepEqual((await store.attention({ sessionId: 's-att-a' })).items.map((i) => i.callId), [c2]);
      // Every field of every stored attention and operation row is what the chain makes (a disagreement throws
      // JournalCorruptError naming the row and the field).
      for (const id of ['s-att-a', 's-att-b']) assert.notEqual((await store.checkLookupRows?.(id))?.checked, false);
    });

    it('a review settles its call in the index: completed resolves it, not_executed leaves its write due, uncertain leaves it open', async (t) => {
      const { store } = await factory.open();
      if (!(await hasIndex(store))) {
        t.skip(NO_INDEX);
        return;
      }
      const owner = await store.acquire('s-att-review', { owner: 'h' });
      await owner.startTask('t-r');
      const digest = { taskId: 't-r', tool: 'mail', argsDigest: argumentsDigest({ to: 'a' }) };
      const open = async () => (await store.attention({ sessionId: 's-att-review' })).items.map((i) => i.callId);
      const [c1, c2, c2Key] = [newCallId(), newCallId(), newOperationKey()];
      await commitAs(owner, { events: [call('t-r', newOperationKey(), c1, 'non_idempotent'), started(c1)] });
      await commitAs(owner, { events: [call('t-r', c2Key, c2, 'unknown'), started(c2)] });
      assert.deepEqual(new Set(await open()), new Set([c1, c2]),
        'attention() must list the two started calls: a backend stores every row of TxWrites.attention in the commit that carries it');

      await commitAs(owner, { events: [review(c1, 'uncertain')] });
      assert.deepEqual(new Set(await open()), new Set([c1, c2]), 'an uncertain review unblocks nothing');
      assert.notEqual(await owner.findInDoubt!(digest), null);

      await commitAs(owner, { events: [review(c1, 'completed')] });
      assert.deepEqual(await open(), [c2]);
      const resolved = (await store.attention({ sessionId: 's-att-review', status: 'resolved' })).items;
      assert.deepEqual(resolved.map((i) => [i.callId, i.inDoubt]), [[c1, false]]);
      assert.equal((await owner.findInDoubt!(digest))?.callId, c2, 'only the unreviewed identical call is still in doubt');

      // A review saying the write did not happen settles the doubt, but the write is still to be made: the queue keeps
      // the operation, no longer in doubt, until a retry (or a completed review) replaces it.
      const listed = async () => (await store.attention({ sessionId: 's-att-review' })).items.map((i) => [i.callId, i.status, i.inDoubt]);
      await commitAs(owner, { events: [review(c2, 'not_executed')] });
      assert.deepEqual(await listed(), [[c2, 'reviewed_not_executed', false]],
        'a not_executed review must leave its operation in the queue as reviewed_not_executed: the write it says did not happen is still due');
      assert.equal((await owner.findInDoubt!(digest))?.status, 'reviewed_not_executed',
        'the guard refuses an identical new operation while the reviewed one\'s retry is due: both would make the write');
      assert.equal(await owner.findInDoubt!({ ...digest, exceptKey: c2Key }), null, 'the reviewed operation\'s own retry passes');
      // An identical operation in doubt beside it is what findInDoubt names first: a caller may act on the doubt alone.
      const c3 = newCallId();
      await commitAs(owner, { events: [call('t-r', newOperationKey(), c3, 'unknown'), started(c3)] });
      assert.equal((await owner.findInDoubt!(digest))?.callId, c3, 'findInDoubt must name an operation in doubt before one whose reviewed retry is due');
      // Two identical writes meant (a model's parallel calls), both reviewed not made: neither one's retry is a repeat
      // of the other, or each would refuse the other for ever.
      await commitAs(owner, { events: [review(c3, 'not_executed')] });
      assert.equal(await owner.findInDoubt!({ ...digest, exceptKey: c2Key }), null, 'a due write\'s retry must pass over another due write');
      assert.notEqual(await owner.findInDoubt!(digest), null, 'a new operation is still refused');
      await commitAs(owner, { events: [review(c3, 'completed')] });
      // The latest review is what recovery reads: an uncertain one over a settled review opens the call again.
      await commitAs(owner, { events: [review(c2, 'uncertain')] });
      assert.deepEqual(await open(), [c2], 'an uncertain review after a settled one must list the call again: its outcome is open');
      assert.equal((await owner.findInDoubt!(digest))?.callId, c2);
      await commitAs(owner, { events: [review(c2, 'not_executed')] });
      assert.deepEqual(await listed(), [[c2, 'reviewed_not_executed', false]]);
      // A retry refused before its body, not denied (its grant withdrawn), makes nothing: the write is still due. One an
      // approver denies is decided against: it leaves the queue (pass r72 #2).
      const [withdrawn, denied] = [newCallId(), newCallId()];
      // As the runtime commits a retry: on the condition that its source, the operation's latest attempt, is where the
      // plan saw it (which also hands the commit the source's row).
      const retryOf = async (): Promise<{ expectLatestAttempt: LatestAttemptCondition }> => {
        const row = (await store.attention({ sessionId: 's-att-review', status: ATTENTION_STATUSES })).items.find((i) => i.key === c2Key)!;
        return { expectLatestAttempt: { taskId: 't-r' as TaskId, key: c2Key, callId: row.callId as CallId, source: { started: row.started, status: row.status } } };
      };
      await commitAs(owner, { events: [call('t-r', c2Key, withdrawn, 'unknown'), refused(withdrawn, 'unavailable')], ...(await retryOf()) });
      assert.deepEqual(await listed(), [[withdrawn, 'reviewed_not_executed', false]],
        'a retry of a reviewed operation refused before its body must keep the operation listed as reviewed_not_executed: nothing made the write');
      assert.equal((await owner.findInDoubt!(digest))?.callId, withdrawn);
      await commitAs(owner, { events: [call('t-r', c2Key, denied, 'unknown'), refused(denied, 'approval_denied')], ...(await retryOf()) });
      assert.deepEqual(await listed(), [], 'a denied retry settles the operation: decided against');
      // A retry of it replaces the row; the retry's success leaves nothing of this session in the queue, and lets an
      // identical new operation through.
      const retry = newCallId();
      await commitAs(owner, { events: [call('t-r', c2Key, retry, 'unknown'), started(retry)], ...(await retryOf()) });
      assert.deepEqual(await listed(), [[retry, 'no_result', true]], 'the retry is the operation\'s latest attempt, started with no result');
      await commitAs(owner, { events: [succeeded(retry)] });
      assert.deepEqual(await listed(), [], 'nothing of this session is left in the queue');
      assert.equal(await owner.findInDoubt!(digest), null, 'the guard lets an identical operation through');

      // A call of an earlier revision (a redeploy since) and a started idempotent call keep the guard shut too.
      const [c4, c5] = [newCallId(), newCallId()];
      await commitAs(owner, { events: [call('t-r', newOperationKey(), c4, 'non_idempotent', 'mail', 'v0'), started(c4)] });
      assert.equal((await owner.findInDoubt!(digest))?.callId, c4,
        'findInDoubt must find an identical call of another revision: JournalBackend.findAttention matches task, tool and arguments only');
      await commitAs(owner, { events: [review(c4, 'completed'), call('t-r', newOperationKey(), c5, 'idempotent'), started(c5)] });
      assert.equal((await owner.findInDoubt!(digest))?.callId, c5, 'a new key writes again even for an idempotent tool');
      assert.notEqual((await store.checkLookupRows?.('s-att-review'))?.checked, false, 'the stored rows are what the chain makes');
    });
  });
}

function review(callId: CallId, outcome: 'completed' | 'not_executed' | 'uncertain'): EventDraft {
  return { turnId: turn, kind: { type: 'tool_review', review: { callId, actor: 'alice', outcome, evidence: 'checked the outbox', source: 'human' } } };
}
