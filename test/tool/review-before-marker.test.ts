/**
 * A review decision recorded while a retry waits to start (its approver is asked) stops the retry before its body:
 * the inbox takes a review of the waiting retry itself, and a retry's start marker is refused, recorded as
 * `tool_review_waiting`, while a decision about any attempt of its operation waits in the inbox, however late it
 * came. The decision is then journaled and settles the operation.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DecisionError, StoreConflictError, ToolBodyError, ToolRetryError } from '../../src/errors.js';
import type { SessionEvent } from '../../src/event/types.js';
import { pendingInboxReviews, withInboxReviews } from '../../src/cli/assessment.js';
import { decisionInbox } from '../../src/store/inbox.js';
import { assessSession } from '../../src/tool/assess.js';
import type { JournalStore } from '../../src/store/journal-store.js';
import { createMemoryStore } from '../../src/store/memory.js';
import type { SessionOwner, SessionStore } from '../../src/store/types.js';
import { journalInboxReviews } from '../../src/tool/inbox-review.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool, ToolApproval, ToolExecution } from '../../src/tool/types.js';
import { forEachStore } from '../support/stores.js';


const calls = (history: readonly SessionEvent[]) => history.flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call.id] : []));

/**
 * A wire transfer (with approval when `approver` is given) whose first attempt wrote and then failed, and a person's
 * wrong `not_executed` about it journaled from the inbox. `writes` counts the bodies that ran; `retrying()` is true
 * once the history a retry is planned on has been read.
 */
async function wrongNotExecuted(store: SessionStore, approver?: (retrying: boolean) => Promise<ToolApproval>) {
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  const state = { writes: 0, retrying: false };
  const metadata = new ToolMetadata('wire', { type: 'object' }).withEffect('non_idempotent', 'w1');
  const wire: Tool = {
    name: 'wire',
    metadata: approver ? metadata.withApproval('finance') : metadata,
    execute: async () => {
      state.writes += 1;
      if (!state.retrying) throw new ToolBodyError('reset', 'the connection reset after the transfer was sent');
      return 'sent';
    },
  };
  const gateway = createToolRuntime({ tools: [wire], grants: { agent: '*' }, ...(approver ? { approvers: { finance: () => approver(state.retrying) } } : {}) })
    .bind({ owner, taskId: 't', caller: 'agent' });
  const first = await gateway.call('wire', { amount: 5 });
  assert.equal(first.result.outcome.status, 'failed');
  const inbox = decisionInbox(store);
  await inbox.recordReview({ sessionId: 's', callId: first.call.id, outcome: 'not_executed', evidence: 'the bank shows nothing', actor: 'ops' });
  const { history } = await journalInboxReviews(owner, store, await store.loadHistory('s'));
  state.retrying = true;
  return { owner, inbox, state, gateway, history, first: first.call.id };
}

/**
 * wrongNotExecuted with a retry planned and started: the approver approves the first attempt at once; the retry's
 * approval waits for `approve()`, and `asked` resolves when it is asked.
 */
async function wrongNotExecutedThenRetry(store: SessionStore) {
  let approve: () => void = () => {};
  let onAsked: () => void = () => {};
  const asked = new Promise<void>((resolve) => { onAsked = resolve; });
  const wired = await wrongNotExecuted(store, async (retrying) => {
    if (retrying) {
      onAsked();
      await new Promise<void>((resolve) => { approve = resolve; });
    }
    return { decision: 'approved' as const };
  });
  const plan = prepareToolRetry(wired.history, wired.first);
  const retry = wired.gateway.callWithOptions('wire', plan.arguments, { retry: plan });
  return { ...wired, retry, asked, approve: () => approve() };
}

function refusedForReview(execution: ToolExecution): void {
  const outcome = execution.result.outcome;
  assert.ok(outcome.status === 'failed' && outcome.category === 'in_doubt' && outcome.code === 'tool_review_waiting', JSON.stringify(outcome));
  assert.equal(execution.startedEvent, null, 'refused before its start marker');
}

/** The operator's view before the owner journals the waiting decision: the latest attempt reads as resolved. */
async function pictured(store: SessionStore, latest: string) {
  const history = await store.loadHistory('s');
  const view = withInboxReviews(assessSession(history), (await pendingInboxReviews(store, 's')).get('s'), history);
  const call = view.calls.find((c) => c.callId === latest)!;
  assert.deepEqual([call.nextStep, call.attention], ['completed', 'none'], call.reason);
}

/** The operation is settled by the journaled `completed` review: no plan for any of its attempts. */
async function settledForGood(owner: SessionOwner, store: SessionStore, callIds: readonly string[]) {
  await pictured(store, callIds.at(-1)!);
  const report = await journalInboxReviews(owner, store, await store.loadHistory('s'));
  assert.deepEqual(report.journaled.map((j) => [j.outcome, j.callId]), [['completed', callIds.at(-1)]], JSON.stringify(report.stale));
  for (const id of callIds) {
    assert.throws(() => prepareToolRetry(report.history, id), (e: unknown) => e instanceof ToolRetryError && (e.code === 'completed' || e.code === 'not_latest_attempt'));
  }
}

function cases(open: () => SessionStore | Promise<SessionStore>): void {
  it('about the waiting retry itself: recorded, and the retry is refused before its body once approved', async () => {
    const store = await open();
    const { owner, inbox, state, first, retry, asked, approve } = await wrongNotExecutedThenRetry(store);
    await asked;
    const waiting = calls(await store.loadHistory('s')).at(-1)!;
    assert.notEqual(waiting, first);
    // About the earlier attempt, it is refused: a review binds the latest attempt.
    await assert.rejects(
      inbox.recordReview({ sessionId: 's', callId: first, outcome: 'completed', evidence: 'the provider sent a receipt', actor: 'ops-2' }),
      (e: unknown) => e instanceof DecisionError && e.code === 'decision_stale',
    );
    const row = await inbox.recordReview({ sessionId: 's', callId: waiting, outcome: 'completed', evidence: 'the provider sent a receipt for the first attempt', actor: 'ops-2' });
    assert.equal(row.state, 'decided');
    approve();
    refusedForReview(await retry);
    assert.equal(state.writes, 1, 'the transfer was made once');
    await settledForGood(owner, store, [first, waiting]);
    await store.close();
  });

  for (const outcome of ['completed', 'uncertain'] as const) {
    it(`a ${outcome} decision about the earlier attempt, recorded after the last look at the inbox, refuses the retry's call commit; then it is journaled there`, async () => {
      const store = await open();
      const { owner, inbox, state, gateway, history, first } = await wrongNotExecuted(store, async () => ({ decision: 'approved' as const }));
      // The decision lands just after the runtime's look at the inbox following the guards (a narrow race, made here
      // by wrapping that look), before the retry's call is committed.
      const look = owner.waitingReview!.bind(owner);
      let looks = 0;
      (owner as { waitingReview: SessionOwner['waitingReview'] }).waitingReview = async (ids) => {
        const found = await look(ids);
        looks += 1;
        if (looks === 2) await inbox.recordReview({ sessionId: 's', callId: first, outcome, evidence: 'the provider shows something', actor: 'ops-2' });
        return found;
      };
      const plan = prepareToolRetry(history, first);
      const before = (await store.loadHistory('s')).length;
      await assert.rejects(gateway.callWithOptions('wire', plan.arguments, { retry: plan }), (e: unknown) => e instanceof ToolRetryError && e.code === 'needs_review');
      assert.equal(looks, 2, 'the runtime looked at the inbox twice, and the decision landed after the second look');
      assert.equal(state.writes, 1, 'the transfer was made once');
      assert.equal((await store.loadHistory('s')).length, before, 'nothing was written');
      // The earlier attempt is still the latest: the decision is journaled there, as recorded.
      const report = await journalInboxReviews(owner, store, await store.loadHistory('s'));
      assert.deepEqual(report.journaled.map((j) => [j.callId, j.outcome]), [[first, outcome]]);
      assert.throws(() => prepareToolRetry(report.history, first), (e: unknown) => e instanceof ToolRetryError && e.code === (outcome === 'completed' ? 'completed' : 'needs_review'));
      await store.close();
    });
  }

  it('a review read before the retry started and written after its start marker is refused, and the retry runs', async () => {
    const store = await open();
    const { inbox, state, retry, asked, approve } = await wrongNotExecutedThenRetry(store);
    await asked;
    const waiting = calls(await store.loadHistory('s')).at(-1)!;
    // The operator's read of the journal shows the retry not started; its start marker is journaled (the approver
    // approves, and the body runs) before the review is written.
    const journal = store as JournalStore;
    const read = journal.callInFlight.bind(journal);
    let started: () => void = () => {};
    const bodyRan = new Promise<void>((resolve) => { started = resolve; });
    (journal as { callInFlight: JournalStore['callInFlight'] }).callInFlight = async (sessionId, callId) => {
      const seen = await read(sessionId, callId);
      approve();
      await bodyRan;
      return seen;
    };
    const writes = state.writes;
    const body = retry.then((execution) => { started(); return execution; });
    await assert.rejects(
      inbox.recordReview({ sessionId: 's', callId: waiting, outcome: 'completed', evidence: 'the provider sent a receipt for the first attempt', actor: 'ops-2' }),
      (e: unknown) => e instanceof DecisionError && e.code === 'call_in_flight' && /started while the review was recorded/.test(e.message),
    );
    assert.equal((await body).result.outcome.status, 'succeeded');
    assert.equal(state.writes, writes + 1);
    assert.deepEqual((await inbox.list({ sessionId: 's', kind: 'review', states: ['decided'] })).items, [], 'nothing waits');
    await store.close();
  });

  it("a completed review the owner's own inbox pass journals while the retry's call commit waits for its turn refuses that commit", async () => {
    const store = await open();
    const { owner, inbox, state, gateway, history, first } = await wrongNotExecuted(store);
    const plan = prepareToolRetry(history, first);
    // The retry's checks before its commit have passed; its transaction has not begun (a busy pool, a slow connect):
    // meanwhile a colleague's completed review is recorded and the host's own routine journals it.
    const backend = (store as JournalStore).backend;
    const transact = backend.transact.bind(backend);
    let held = true;
    (backend as { transact: typeof transact }).transact = async (sessionId, reads, decide) => {
      if (held && reads.writtenSince !== undefined) {
        held = false;
        await inbox.recordReview({ sessionId: 's', callId: first, outcome: 'completed', evidence: 'the provider sent a receipt', actor: 'ops-2' });
        assert.equal((await journalInboxReviews(owner, store, await store.loadHistory('s'))).journaled.length, 1);
      }
      return transact(sessionId, reads, decide);
    };
    await assert.rejects(gateway.callWithOptions('wire', plan.arguments, { retry: plan }), (e: unknown) => e instanceof StoreConflictError && e.code === 'history_changed');
    assert.equal(held, false, 'the review was journaled while the commit waited');
    assert.equal(state.writes, 1, 'the transfer was made once');
    await assert.rejects(async () => prepareToolRetry(await store.loadHistory('s'), first), (e: unknown) => e instanceof ToolRetryError && e.code === 'completed');
    await store.close();
  });

  it('a review of an attempt read while it was the latest and written after a retry of it was journaled is refused', async () => {
    const store = await open();
    const { inbox, gateway, history, first } = await wrongNotExecuted(store);
    // The colleague's read of the journal shows the first attempt as the latest; the host's retry is made before the
    // review is written.
    const journal = store as JournalStore;
    const read = journal.callInFlight.bind(journal);
    (journal as { callInFlight: JournalStore['callInFlight'] }).callInFlight = async (sessionId, callId) => {
      const seen = await read(sessionId, callId);
      const plan = prepareToolRetry(history, first);
      assert.equal((await gateway.callWithOptions('wire', plan.arguments, { retry: plan })).result.outcome.status, 'succeeded');
      return seen;
    };
    await assert.rejects(
      inbox.recordReview({ sessionId: 's', callId: first, outcome: 'completed', evidence: 'the provider sent a receipt', actor: 'ops-2' }),
      (e: unknown) => e instanceof DecisionError && e.code === 'decision_stale' && /a newer attempt of its operation was journaled/.test(e.message),
    );
    assert.deepEqual((await inbox.list({ sessionId: 's', kind: 'review', states: ['decided'] })).items, [], 'the colleague is told at once; nothing waits');
    await store.close();
  });

  it("a completed review journaled on a retry waiting for a person's approval supersedes its request: nothing is left to approve", async () => {
    const store = await open();
    const { owner, inbox, state, gateway, history, first } = await wrongNotExecuted(store, async (retrying) =>
      (retrying ? { decision: 'pending' as const, note: 'a person decides' } : { decision: 'approved' as const }));
    const plan = prepareToolRetry(history, first);
    const pending = await gateway.callWithOptions('wire', plan.arguments, { retry: plan });
    assert.equal(pending.result.outcome.status === 'failed' && pending.result.outcome.category, 'approval_pending');
    const requests = () => inbox.list({ sessionId: 's', kind: 'approval', states: ['open', 'decided'] });
    assert.equal((await requests()).items.length, 1, 'a request waits for a person');
    await inbox.recordReview({ sessionId: 's', callId: pending.call.id, outcome: 'completed', evidence: 'the provider sent a receipt for the first attempt', actor: 'ops-2' });
    const report = await journalInboxReviews(owner, store, await store.loadHistory('s'));
    assert.deepEqual(report.journaled.map((j) => [j.callId, j.outcome]), [[pending.call.id, 'completed']]);
    assert.deepEqual((await requests()).items, [], 'the request was superseded with the review');
    assert.equal(state.writes, 1);
    await store.close();
  });
}

describe('a review decision recorded while a retry waits for its approver, on memory', () => cases(() => createMemoryStore()));
forEachStore('a review decision recorded while a retry waits for its approver', (target) => cases(() => target.fresh().open()));
