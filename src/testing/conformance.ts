/**
 * The one store conformance suite, on `node:test`. Every store (memory, SQLite, PostgreSQL, and any third-party
 * backend) runs it through options that give a fresh, empty store; `reopen` (when the store is durable) opens a
 * second handle on the same data.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import type { EventDraft } from '../event/types.js';
import { newCallId, newOperationKey, newTurnId, type CallId, type EventId, type OperationKey, type SessionId, type TaskId, type TurnId } from '../ids.js';
import { JournalStore } from '../store/journal-store.js';
import { exportChainedJsonl } from '../store/anchor-store.js';
import type { SessionStore } from '../store/types.js';
import { LIMITS } from '../limits.js';
import { commitAs } from '../store/owner-commit.js';
import { attentionRules } from './conformance-attention.js';
import { decisionInbox, type DecisionInbox } from '../store/inbox.js';
import type { ApprovalBinding } from '../store/inbox-rows.js';
import { leaseRules, operationRules } from './lease-conformance.js';
import { applyRules, concurrencyRules, NO_REOPEN } from './concurrency-conformance.js';

export interface StoreConformanceOptions {
  /** Shown in the suite's title. */
  readonly name: string;
  /** A fresh, empty store; called once or twice per test. */
  open(): Promise<SessionStore> | SessionStore;
  /**
   * A second handle on the same data as `store`, as a second process would open it. Without it the cases that need
   * two handles (a second handle's reads and fencing, concurrent acquires, takeovers and appends) are reported as
   * skipped, not passed.
   */
  reopen?(store: SessionStore): Promise<SessionStore> | SessionStore;
  /** Disposes of a store the suite is done with (default: `store.close()`); called once per store, after it was closed or not. */
  close?(store: SessionStore): Promise<void> | void;
}

interface StoreFactory {
  open(): Promise<{ store: SessionStore; reopen?: () => Promise<SessionStore> }>;
}

const turn = newTurnId();
const message = (text: string, turnId: TurnId = turn): EventDraft => ({ turnId, kind: { type: 'user_message', text } });

function callDraft(taskId: string, key: OperationKey, id: CallId = newCallId(), startMarker?: true): EventDraft {
  return {
    turnId: turn,
    kind: {
      type: 'tool_call',
      call: {
        id,
        name: 'probe',
        arguments: { ok: true },
        operation: { taskId: taskId as TaskId, key, contract: { effect: 'idempotent', revision: 'v1' }, retry: null, ...(startMarker ? { startMarker } : {}) },
      },
    },
  };
}

function resultDraft(callId: CallId): EventDraft {
  return { turnId: turn, kind: { type: 'tool_result', result: { callId, outcome: { status: 'succeeded', output: 'ok' } } } };
}

/** The tool-call and output charges of a snapshot (journal bytes are checked on their own). */
const callsAndOutput = (charged: { toolCalls: number; toolOutputBytes: number }) => ({ toolCalls: charged.toolCalls, toolOutputBytes: charged.toolOutputBytes });

/** Expects `promise` to fail with `code`; `why` says what a success would mean about the store. */
async function rejects(promise: Promise<unknown>, code: string, why?: string): Promise<void> {
  await assert.rejects(
    promise,
    (error: unknown) => {
      assert.equal((error as { code?: string }).code, code, `expected ${code}, got ${String(error)}${why ? `: ${why}` : ''}`);
      return true;
    },
    `expected ${code}, but the call succeeded${why ? `: ${why}` : ''}`,
  );
}

function storeRules(name: string, factory: StoreFactory): void {
  describe(`store conformance: ${name}`, () => {
    it('appends in order and loads exactly what was appended', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-order', { owner: 'host-a' });
      assert.equal(owner.epoch, 1);
      const first = await owner.append([message('one'), message('two')]);
      const second = await owner.append([message('three')]);
      assert.deepEqual([...first, ...second].map((e) => e.seq), [0, 1, 2]);
      const history = await store.loadHistory('s-order');
      assert.equal(history.length, 3, `loadHistory returned ${history.length} events after appends acknowledged 3: every write transact resolved must be stored, all of it (a commit acknowledged but lost?)`);
      assert.deepEqual(history, [...first, ...second], 'loadHistory must return exactly the acknowledged events, in seq order, as appended');
      assert.deepEqual(await store.loadHistory('never-written'), []);
      await store.close();
    });

    it('fences: SessionBusy without takeover, StaleOwner after takeover, nothing written and no seq consumed', async () => {
      const { store } = await factory.open();
      const a = await store.acquire('s-fence', { owner: 'host-a' });
      await a.append([message('by a')]);
      await rejects(store.acquire('s-fence', { owner: 'host-b' }), 'session_busy');
      const b = await store.acquire('s-fence', { owner: 'host-b', takeover: true });
      assert.equal(b.epoch, a.epoch + 1);
      await rejects(a.append([message('stale')]), 'stale_owner');
      await rejects(a.startTask('t-stale'), 'stale_owner');
      const [next] = await b.append([message('by b')]);
      assert.equal(next!.seq, 1, 'the stale append consumed no seq');
      const history = await store.loadHistory('s-fence');
      assert.deepEqual(history.map((e) => (e.kind as { text: string }).text), ['by a', 'by b']);
      await store.close();
    });

    it('release lets the next host acquire without takeover, and the released owner is stale', async () => {
      const { store } = await factory.open();
      const a = await store.acquire('s-release', { owner: 'host-a' });
      await a.release();
      await a.release();
      const b = await store.acquire('s-release', { owner: 'host-b' });
      assert.equal(b.epoch, 2);
      await rejects(a.append([message('late')]), 'stale_owner');
      const sessions = await store.listSessions();
      const row = sessions.find((s) => s.sessionId === 's-release');
      assert.equal(typeof row?.leaseExpiresAt, 'number',
        `lease: listSessions() reports leaseExpiresAt ${String(row?.leaseExpiresAt)} for a held session: a backend must store SessionRow.leaseExpiresAt exactly as written`);
      assert.deepEqual(row, { sessionId: 's-release', events: 0, epoch: 2, owner: 'host-b', held: true, leaseExpiresAt: row!.leaseExpiresAt, leaseExpired: false });
      await store.close();
    });

    it('rejects bad ids with a typed error and writes nothing', async () => {
      const { store } = await factory.open();
      await rejects(store.acquire('   ', { owner: 'h' }), 'invalid_input');
      await rejects(store.acquire('x'.repeat(1025), { owner: 'h' }), 'invalid_input');
      await rejects(store.acquire('€'.repeat(342), { owner: 'h' }), 'invalid_input');
      await rejects(store.acquire('nul\u0000inside', { owner: 'h' }), 'invalid_input');
      const ok = await store.acquire('😀'.repeat(256), { owner: 'h' });
      assert.equal(ok.epoch, 1);
      await rejects(store.acquire('s', { owner: '' }), 'invalid_input');
      await store.close();
    });

    it('tasks: start with limits, start again returns it unchanged, stop and complete admit nothing', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-task', { owner: 'h' });
      const t = await owner.startTask('t1', { limits: { toolCalls: 2 } });
      assert.deepEqual(t, {
        taskId: 't1', sessionId: 's-task', state: 'running', limits: { toolCalls: 2, toolOutputBytes: 16 * 1024 * 1024, journalBytes: 8 * 1024 * 1024 },
        charged: { toolCalls: 0, toolOutputBytes: 0, journalBytes: 0 }, reservedOutputBytes: 0, stopReason: null,
      });
      assert.deepEqual(await owner.startTask('t1', { limits: { toolCalls: 99 } }), t,
        'starting t1 again must return the stored task unchanged: the task row (TxWrites.task) commits with the events and owner row beside it');
      await rejects(owner.startTask('t-bad', { limits: { toolCalls: -1 } }), 'invalid_input');
      await rejects(owner.startTask('t-bad', { limits: { toolOutputBytes: 1.5 } }), 'invalid_input');
      await rejects(owner.task('missing'), 'task_not_found');
      // A task id is unique within its session only: another session has its own task t1, with its own budget.
      const other = await store.acquire('s-task-2', { owner: 'h' });
      await rejects(other.task('t1'), 'task_not_found');
      const theirs = await other.startTask('t1', { limits: { toolCalls: 5 } });
      assert.deepEqual([theirs.sessionId, theirs.limits.toolCalls, theirs.state], ['s-task-2', 5, 'running']);
      assert.deepEqual(await owner.task('t1'), t, 'the other session\'s task t1 left this one unchanged');
      let stoppedBy: string | undefined;
      owner.onTaskStopped((_id, reason) => { stoppedBy = reason; });
      const stopped = await owner.stopTask('t1', 'operator pressed stop');
      assert.equal(stopped.state, 'stopped');
      assert.equal(stoppedBy, 'operator pressed stop');
      await rejects(commitAs(owner, { events: [callDraft('t1', newOperationKey())], budget: { taskId: 't1' as TaskId, admit: { maxOutputBytes: 10 } } }), 'task_not_running',
        'stopTask resolved, so the task row must be stored as stopped (a lost commit?)');
      assert.equal((await owner.startTask('t1')).state, 'stopped', 'a start never reopens a task');
      await owner.startTask('t2');
      assert.equal((await owner.completeTask('t2')).state, 'completed');
      // Only the task changes are journaled (one task_ledger event each); the repeated and refused starts wrote nothing.
      const changes = (await store.loadHistory('s-task')).map((e) => (e.kind.type === 'task_ledger' ? `${e.kind.ledger.taskId}:${e.kind.ledger.change}` : e.kind.type));
      assert.deepEqual(changes, ['t1:started', 't1:stopped', 't2:started', 't2:completed']);
      await store.close();
    });

    it('charges budget in the same commit as the events, refuses over budget with nothing written', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-budget', { owner: 'h' });
      const task = 't-budget' as TaskId;
      await owner.startTask(task, { limits: { toolCalls: 2, toolOutputBytes: 100 } });
      const first = newCallId();
      const r1 = await commitAs(owner, { events: [callDraft(task, newOperationKey(), first)], budget: { taskId: task, admit: { maxOutputBytes: 64 } } });
      assert.equal(r1.reservedOutputBytes, 64);
      await rejects(commitAs(owner, { events: [callDraft(task, newOperationKey())], budget: { taskId: task, admit: { maxOutputBytes: 64 } } }), 'budget_exhausted',
        'a call whose output limit fits what the task has not used, but not beside what its open calls hold, must be refused, not admitted with a limit its siblings shrank');
      const r2 = await commitAs(owner, { events: [callDraft(task, newOperationKey())], budget: { taskId: task, admit: { maxOutputBytes: 36 } } });
      assert.equal(r2.reservedOutputBytes, 36, 'a call that fits beside the open ones is admitted with its whole limit');
      await rejects(commitAs(owner, { events: [callDraft(task, newOperationKey())], budget: { taskId: task, admit: { maxOutputBytes: 1 } } }), 'budget_exhausted');
      await rejects(commitAs(owner, { events: [message('no call')], budget: { taskId: task, admit: { maxOutputBytes: 1 } } }), 'invalid_input');
      await commitAs(owner, { events: [resultDraft(first)], budget: { taskId: task, settle: { chargeOutputBytes: 10 } } });
      const snap = await owner.task(task);
      assert.deepEqual(callsAndOutput(snap.charged), { toolCalls: 2, toolOutputBytes: 10 });
      assert.equal(snap.reservedOutputBytes, 36, 'the settled call released its own reservation only');
      // The task's start, two calls and one result.
      assert.equal((await store.loadHistory('s-budget')).length, 4);
      await rejects(commitAs(owner, { events: [message('x')], budget: { taskId: 'nope' as TaskId, admit: { maxOutputBytes: 1 } } }), 'task_not_found');
      assert.equal((await store.loadHistory('s-budget')).length, 4);
      // What the task has used (not what its open calls hold) shrinks a reservation: one after the other, the second
      // call gets what the first left.
      const clamp = 't-clamp' as TaskId;
      await owner.startTask(clamp, { limits: { toolOutputBytes: 100 } });
      const used = newCallId();
      await commitAs(owner, { events: [callDraft(clamp, newOperationKey(), used)], budget: { taskId: clamp, admit: { maxOutputBytes: 64 } } });
      await commitAs(owner, { events: [resultDraft(used)], budget: { taskId: clamp, settle: { chargeOutputBytes: 64 } } });
      const next = await commitAs(owner, { events: [callDraft(clamp, newOperationKey())], budget: { taskId: clamp, admit: { maxOutputBytes: 64 } } });
      assert.equal(next.reservedOutputBytes, 36, 'the reservation is clamped to what the task has not used');
      await store.close();
    });

    it('a task\'s journal bytes: every budgeted event charged exactly, admission refused past the limit, the session untouched', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-journal-bytes', { owner: 'h' });
      const task = 't-journal' as TaskId;
      await owner.startTask(task, { limits: { journalBytes: 2000 } });
      await rejects(owner.startTask('t-bad', { limits: { journalBytes: -1 } }), 'invalid_input');
      const call = newCallId();
      await commitAs(owner, { events: [callDraft(task, newOperationKey(), call)], budget: { taskId: task, admit: { maxOutputBytes: 8 } } });
      await commitAs(owner, { events: [resultDraft(call)], budget: { taskId: task, settle: { chargeOutputBytes: 2 } } });
      await owner.append([message('host events are not the task\'s')]);
      // Exactly the wire bytes of the call and its result; the host's message and the store's own record of the
      // task's start (line 0) are not the task's.
      const lines = (await store.exportJsonl('s-journal-bytes')).trim().split('\n');
      assert.equal((JSON.parse(lines[0]!) as { kind: { type: string } }).kind.type, 'task_ledger');
      const utf8 = (line: string) => new TextEncoder().encode(line).length;
      assert.equal((await owner.task(task)).charged.journalBytes, utf8(lines[1]!) + utf8(lines[2]!));
      const small = callDraft(task, newOperationKey());
      const big: EventDraft = small.kind.type === 'tool_call' ? { turnId: turn, kind: { type: 'tool_call', call: { ...small.kind.call, arguments: { blob: 'x'.repeat(2000) } } } } : small;
      await assert.rejects(
        commitAs(owner, { events: [big], budget: { taskId: task, admit: { maxOutputBytes: 8 } } }),
        (e: unknown) => {
          assert.deepEqual([(e as { code?: string }).code, (e as { resource?: string }).resource], ['budget_exhausted', 'journal_bytes'], String(e));
          return true;
        },
      );
      assert.equal((await store.loadHistory('s-journal-bytes')).length, 4, 'nothing written (the start, the call, its result, the message)');
      assert.equal((await owner.task(task)).charged.toolCalls, 1, 'nothing charged');
      await owner.append([message('the session still takes events')]);
      await store.close();
    });

    it('a result is charged at most its reservation, never past the task limit', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-exact', { owner: 'h' });
      const task = 't-exact' as TaskId;
      await owner.startTask(task, { limits: { toolOutputBytes: 1000 } });
      const call = newCallId();
      const r = await commitAs(owner, { events: [callDraft(task, newOperationKey(), call)], budget: { taskId: task, admit: { maxOutputBytes: 4096 } } });
      assert.equal(r.reservedOutputBytes, 1000);
      await commitAs(owner, { events: [{ turnId: turn, kind: { type: 'tool_started', callId: call } }], budget: { taskId: task } });
      await commitAs(owner, { events: [resultDraft(call)], budget: { taskId: task, settle: { chargeOutputBytes: 5000 } } });
      const snapshot = await owner.task(task);
      assert.equal(snapshot.charged.toolOutputBytes, 1000);
      assert.equal(snapshot.reservedOutputBytes, 0);
      await store.close();
    });

    it('a start marker is refused once its task is stopped or completed; the call\'s result is still recorded', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-ended', { owner: 'h' });
      for (const [task, end] of [['t-completed', () => owner.completeTask('t-completed')], ['t-stopped', () => owner.stopTask('t-stopped', 'operator')]] as const) {
        await owner.startTask(task, { limits: { toolOutputBytes: 100 } });
        const call = newCallId();
        await commitAs(owner, { events: [callDraft(task as TaskId, newOperationKey(), call)], budget: { taskId: task as TaskId, admit: { maxOutputBytes: 100 } } });
        await end();
        const before = (await store.loadHistory('s-ended')).length;
        await rejects(commitAs(owner, { events: [{ turnId: turn, kind: { type: 'tool_started', callId: call } }], budget: { taskId: task as TaskId } }), 'task_not_running');
        assert.equal((await store.loadHistory('s-ended')).length, before, 'nothing written');
        await commitAs(owner, { events: [resultDraft(call)], budget: { taskId: task as TaskId, settle: { chargeOutputBytes: 0 } } });
        const snapshot = await owner.task(task);
        assert.deepEqual([snapshot.charged.toolCalls, snapshot.charged.toolOutputBytes, snapshot.reservedOutputBytes], [1, 0, 0]);
      }
      await store.close();
    });

    it('reservations left by a fenced owner are settled: refunded if never started, charged if started', async () => {
      const { store } = await factory.open();
      const a = await store.acquire('s-abandon', { owner: 'host-a' });
      const task = 't-abandon' as TaskId;
      await a.startTask(task, { limits: { toolOutputBytes: 1000 } });
      const unstarted = newCallId();
      const started = newCallId();
      await commitAs(a, { events: [callDraft(task, newOperationKey(), unstarted)], budget: { taskId: task, admit: { maxOutputBytes: 100 } } });
      await commitAs(a, { events: [callDraft(task, newOperationKey(), started)], budget: { taskId: task, admit: { maxOutputBytes: 200 } } });
      await commitAs(a, { events: [{ turnId: turn, kind: { type: 'tool_started', callId: started } }], budget: { taskId: task } });
      assert.equal((await a.task(task)).reservedOutputBytes, 300);
      // host-a dies; host-b fences it. Neither reservation can ever be settled by its admitter now.
      const b = await store.acquire('s-abandon', { owner: 'host-b', takeover: true });
      const seen = await b.task(task);
      assert.equal(seen.reservedOutputBytes, 0);
      assert.deepEqual(callsAndOutput(seen.charged), { toolCalls: 2, toolOutputBytes: 200 }, 'the started call is charged in full, the other refunded');
      const fresh = newCallId();
      const r = await commitAs(b, { events: [callDraft(task, newOperationKey(), fresh)], budget: { taskId: task, admit: { maxOutputBytes: 1000 } } });
      assert.equal(r.reservedOutputBytes, 800, 'the refunded bytes are available again');
      const after = await b.task(task);
      assert.deepEqual(callsAndOutput(after.charged), { toolCalls: 3, toolOutputBytes: 200 });
      assert.equal(after.reservedOutputBytes, 800);
      await store.close();
    });

    it('D4: a commit conditioned on the latest attempt fails once a newer attempt exists, writing and charging nothing', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-d4', { owner: 'h' });
      const task = 't-d4' as TaskId;
      await owner.startTask(task);
      const key = newOperationKey();
      const firstId = newCallId();
      await commitAs(owner, { events: [callDraft(task, key, firstId)], budget: { taskId: task, admit: { maxOutputBytes: 8 } } });
      const retryId = newCallId();
      await commitAs(owner, {
        events: [callDraft(task, key, retryId)],
        budget: { taskId: task, admit: { maxOutputBytes: 8 } },
        expectLatestAttempt: { taskId: task, key, callId: firstId },
      });
      await rejects(
        commitAs(owner, {
          events: [callDraft(task, key)],
          budget: { taskId: task, admit: { maxOutputBytes: 8 } },
          expectLatestAttempt: { taskId: task, key, callId: firstId },
        }),
        'not_latest_attempt',
      );
      await rejects(
        commitAs(owner, { events: [callDraft(task, newOperationKey())], expectLatestAttempt: { taskId: task, key: newOperationKey(), callId: firstId } }),
        'not_latest_attempt',
      );
      assert.deepEqual((await store.loadHistory('s-d4')).map((e) => e.kind.type), ['task_ledger', 'tool_call', 'tool_call']);
      assert.equal((await owner.task(task)).charged.toolCalls, 2);
      await store.close();
    });

    it("a retry's commit is refused once an earlier owner of the session wrote after the history its plan was made from", async () => {
      const { store } = await factory.open();
      const first = await store.acquire('s-seen', { owner: 'h' });
      const task = 't-seen' as TaskId;
      await first.startTask(task);
      const key = newOperationKey();
      const firstId = newCallId();
      await commitAs(first, { events: [callDraft(task, key, firstId)] });
      const row = (await store.attention({ sessionId: 's-seen' })).items.find((r) => r.callId === firstId);
      const source = { started: row?.started ?? false, status: row?.status ?? 'no_result' };
      const seen = (await store.loadHistory('s-seen')).length - 1;
      const latest = (seenSeq: number) => ({ taskId: task, key, callId: firstId, source: { ...source, seenSeq } });
      // The plan's owner writes on: its own events after the plan's history are no reason to refuse.
      await commitAs(first, { events: [message('more')] });
      await commitAs(first, { events: [message('checked')], expectLatestAttempt: latest(seen) });
      await first.release();
      const next = await store.acquire('s-seen', { owner: 'h2' });
      const before = (await store.loadHistory('s-seen')).length;
      await rejects(commitAs(next, { events: [message('retry')], expectLatestAttempt: latest(seen) }), 'history_changed',
        'a commit whose plan was made before another owner wrote went through: TxReads.writtenSince must find the first event after seq under an earlier epoch');
      assert.equal((await store.loadHistory('s-seen')).length, before, 'a refused commit writes nothing');
      await commitAs(next, { events: [message('retry')], expectLatestAttempt: latest(before - 1) });
      await store.close();
    });

    it('identity is per session: a live session exported, renamed and imported into the same store leaves its operations alone', async () => {
      const { store } = await factory.open();
      const live = await store.acquire('s-live', { owner: 'h' });
      const task = 't-live' as TaskId;
      await live.startTask(task);
      const key = newOperationKey();
      const firstId = newCallId();
      await commitAs(live, { events: [callDraft(task, key, firstId)], budget: { taskId: task, admit: { maxOutputBytes: 8 } } });
      const early = await store.exportJsonl('s-live');
      const retryId = newCallId();
      await commitAs(live, { events: [callDraft(task, key, retryId)], expectLatestAttempt: { taskId: task, key, callId: firstId } });
      // The early export, under another session id, holds the first attempt of the same (task, key).
      const renamed = early.replaceAll('"session_id":"s-live"', '"session_id":"s-copy"');
      assert.deepEqual(await store.importJsonl(renamed, { owner: 'importer' }), { sessionId: 's-copy', events: 2 });
      // The live session's latest attempt is still the retry: a stale plan from the first attempt is refused.
      await rejects(commitAs(live, { events: [callDraft(task, key)], expectLatestAttempt: { taskId: task, key, callId: firstId } }), 'not_latest_attempt');
      const next = newCallId();
      await commitAs(live, { events: [callDraft(task, key, next)], expectLatestAttempt: { taskId: task, key, callId: retryId } });
      // The copy has its own operation row, and its own task of the same id once it starts one.
      const copy = await store.acquire('s-copy', { owner: 'h2' });
      await rejects(commitAs(copy, { events: [], expectLatestAttempt: { taskId: task, key, callId: next } }), 'not_latest_attempt');
      await commitAs(copy, { events: [], expectLatestAttempt: { taskId: task, key, callId: firstId } });
      await rejects(copy.task(task), 'task_not_found');
      assert.equal((await copy.startTask(task)).charged.toolCalls, 0);
      assert.equal((await live.task(task)).charged.toolCalls, 1, 'the live task is not the copy\'s');
      const liveHistory = await store.loadHistory('s-live');
      assert.equal(liveHistory[0]!.kind.type, 'task_ledger');
      assert.deepEqual(liveHistory.slice(1).map((e) => (e.kind as { call: { id: string } }).call.id), [firstId, retryId, next]);
      await store.close();
    });

    it('refuses an append that would make the history uninspectable, writing nothing', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-full', { owner: 'h' });
      const big = 'x'.repeat(4 * 1024 * 1024);
      await owner.append([message(big), message(big), message(big)]);
      await rejects(owner.append([message(big)]), 'journal_full');
      const history = await store.loadHistory('s-full');
      assert.equal(history.length, 3);
      assert.ok(LIMITS.maxHistoryBytes > 3 * big.length);
      await store.close();
    });

    it('exports JSONL and imports it verified into an empty store; refuses a non-empty target', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-export', { owner: 'h' });
      const task = 't-export' as TaskId;
      await owner.startTask(task);
      await owner.append([message('hello')]);
      await commitAs(owner, { events: [callDraft(task, newOperationKey())], budget: { taskId: task, admit: { maxOutputBytes: 16 } } });
      const jsonl = await store.exportJsonl('s-export');
      assert.equal(jsonl.trim().split('\n').length, 3, `exportJsonl must hold the three acknowledged events: every write transact resolved must be stored, all of it (a commit acknowledged but lost?)`);
      await rejects(store.importJsonl(jsonl, { owner: 'importer' }), 'session_exists');
      const { store: target } = await factory.open();
      const report = await target.importJsonl(jsonl, { owner: 'importer' });
      assert.deepEqual(report, { sessionId: 's-export', events: 3 });
      assert.deepEqual(await target.loadHistory('s-export'), await store.loadHistory('s-export'));
      assert.equal(await target.exportJsonl('s-export'), jsonl);
      const again = await target.acquire('s-export', { owner: 'next' });
      assert.equal(again.epoch, 2, 'an import leaves the session released');
      await rejects(target.importJsonl('{"not":"an event"}\n', { owner: 'i' }), 'import_rejected');
      const lines = jsonl.trim().split('\n');
      await rejects(target.importJsonl(`${lines[1]}\n${lines[0]}\n`, { owner: 'i' }), 'import_rejected');
      await rejects(target.importJsonl(jsonl.slice(0, jsonl.length - 10), { owner: 'i' }), 'import_rejected');
      await store.close();
      await target.close();
    });

    it('a chained export imports with its epochs: the imported chain is the exported one, for a session taken over too', async () => {
      const { store } = await factory.open();
      const first = await store.acquire('s-chained', { owner: 'h1' });
      await first.append([message('before the takeover')]);
      const second = await store.acquire('s-chained', { owner: 'h2', takeover: true });
      await second.append([message('after it')]);
      await second.release();
      const text = await exportChainedJsonl(store, 's-chained');
      const { store: target } = await factory.open();
      assert.deepEqual(await target.importJsonl(text, { owner: 'importer' }), { sessionId: 's-chained', events: 2 });
      assert.equal(await exportChainedJsonl(target, 's-chained'), text, 'the same lines, epochs, hashes and owner epoch as the source');
      const next = await target.acquire('s-chained', { owner: 'next' });
      assert.equal(next.epoch, second.epoch + 1, "past the exported owner's epoch");
      await store.close();
      await target.close();
    });

    it('after close(), every call on the store and its owners fails with store_closed; close() again is harmless', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-closed', { owner: 'h' });
      await owner.startTask('t-closed');
      await owner.append([message('before close')]);
      const jsonl = await store.exportJsonl('s-closed');
      await store.close();
      await rejects(store.acquire('s-closed-2', { owner: 'h' }), 'store_closed');
      await rejects(store.loadHistory('s-closed'), 'store_closed');
      await rejects(store.listSessions(), 'store_closed');
      await rejects(store.exportJsonl('s-closed'), 'store_closed');
      await rejects(store.importJsonl(jsonl, { owner: 'i', sessionId: 's-closed-import' }), 'store_closed');
      await rejects(owner.append([message('after close')]), 'store_closed');
      await rejects(commitAs(owner, { events: [message('after close')] }), 'store_closed');
      await rejects(owner.startTask('t-after'), 'store_closed');
      await rejects(owner.task('t-closed'), 'store_closed');
      await rejects(owner.stopTask('t-closed', 'late'), 'store_closed');
      await rejects(owner.completeTask('t-closed'), 'store_closed');
      await rejects(owner.release(), 'store_closed');
      await store.close();
    });

    it('a second handle sees committed events and is fenced like any other writer', async (t) => {
      const { store, reopen } = await factory.open();
      if (!reopen) return t.skip(NO_REOPEN);
      const a = await store.acquire('s-handles', { owner: 'a' });
      await a.append([message('from a')]);
      const other = await reopen();
      assert.equal((await other.loadHistory('s-handles')).length, 1);
      const b = await other.acquire('s-handles', { owner: 'b', takeover: true });
      await rejects(a.append([message('stale')]), 'stale_owner');
      await b.append([message('from b')]);
      assert.equal((await store.loadHistory('s-handles')).length, 2);
      await other.close();
      await store.close();
    });
  });
}

/** Bad drafts must be refused at write time: a stored event that cannot be loaded would lose the whole session. */
function draftValidation(name: string, factory: StoreFactory): void {
  describe(`store write-time validation: ${name}`, () => {
    it('refuses an event that could not be loaded again, writing nothing', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-drafts', { owner: 'h' });
      await owner.append([message('fine')]);
      await rejects(owner.append([message('blank turn', '   ' as TurnId)]), 'invalid_input');
      await rejects(owner.append([message('lone \ud800 surrogate')]), 'invalid_input');
      let deep: unknown = 1;
      for (let i = 0; i < 300; i++) deep = [deep];
      await rejects(owner.append([{ turnId: turn, kind: { type: 'custom', plugin: 'p', kind: 'k', payload: deep as never } }]), 'invalid_input');
      const history = await store.loadHistory('s-drafts');
      assert.equal(history.length, 1);
      const [next] = await owner.append([message('still fine')]);
      assert.equal(next!.seq, 1, 'a refused append consumed no seq');
      await store.close();
    });

    it('append takes host events only: tool calls, markers, results and impersonating opaque events are refused, nothing written', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-host-only', { owner: 'h' });
      const task = 't-host-only' as TaskId;
      await owner.startTask(task);
      const call = newCallId();
      await rejects(owner.append([callDraft(task, newOperationKey(), call)]), 'invalid_input');
      await rejects(owner.append([message('ok'), { turnId: turn, kind: { type: 'tool_started', callId: call } }]), 'invalid_input');
      await rejects(owner.append([resultDraft(call)]), 'invalid_input');
      const review = { callId: call, actor: 'ops', outcome: 'completed', evidence: 'checked', source: 'human' } as const;
      await rejects(owner.append([{ turnId: turn, kind: { type: 'tool_review', review } }]), 'invalid_input');
      // The task ledger is the store's own record of a task change: never appended by a host.
      const ledger = { taskId: task, change: 'stopped', state: 'stopped', limits: { toolCalls: 1, toolOutputBytes: 1, journalBytes: 1 }, charged: { toolCalls: 0, toolOutputBytes: 0, journalBytes: 0 }, reservedOutputBytes: 0, stopReason: 'forged' } as const;
      await rejects(owner.append([{ turnId: turn, kind: { type: 'task_ledger', ledger } }]), 'invalid_input');
      for (const wireType of ['tool_call', 'tool_result', 'tool_started', 'tool_review', 'task_ledger', 'user_message']) {
        await rejects(owner.append([{ turnId: turn, kind: { type: 'opaque', wireType, fields: {} } }]), 'invalid_input');
      }
      await owner.append([message('host'), { turnId: turn, kind: { type: 'opaque', wireType: 'host_note', fields: { a: 1 } } }]);
      assert.deepEqual((await store.loadHistory('s-host-only')).map((e) => e.kind.type), ['task_ledger', 'user_message', 'opaque']);
      assert.equal((await owner.task(task)).charged.toolCalls, 0);
      await store.close();
    });

    it('a commit conditioned on the journal\'s last seq goes through only on exactly that journal', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-last-seq', { owner: 'h' });
      await rejects(commitAs(owner, { events: [message('a')], expectLastSeq: 0 }), 'history_changed');
      await commitAs(owner, { events: [message('a')], expectLastSeq: -1 });
      await rejects(commitAs(owner, { events: [message('b')], expectLastSeq: -1 }), 'history_changed');
      await rejects(commitAs(owner, { events: [message('b')], expectLastSeq: 1.5 }), 'invalid_input');
      await commitAs(owner, { events: [message('b')], expectLastSeq: 0 });
      assert.deepEqual((await store.loadHistory('s-last-seq')).map((e) => e.seq), [0, 1], 'refused commits consumed no seq');
      await store.close();
    });

    it('import runs the evidence pass before writing: a forged second result is refused and nothing is written', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-forged', { owner: 'h' });
      const task = 't-forged' as TaskId;
      await owner.startTask(task);
      const call = newCallId();
      await commitAs(owner, { events: [callDraft(task, newOperationKey(), call)], budget: { taskId: task, admit: { maxOutputBytes: 16 } } });
      await commitAs(owner, { events: [resultDraft(call)], budget: { taskId: task, settle: { chargeOutputBytes: 2 } } });
      const lines = (await store.exportJsonl('s-forged')).trim().split('\n');
      assert.equal(lines.length, 3, `exportJsonl must hold the task's start, the call and its result: every write transact resolved must be stored, all of it (a commit acknowledged but lost?)`);
      // Line 0 is the task's start, line 2 the result.
      const second = JSON.parse(lines[2]!) as Record<string, unknown>;
      const forged = [...lines, JSON.stringify({ ...second, event_id: 'evt-forged', seq: 3 })].join('\n') + '\n';
      const { store: target } = await factory.open();
      await rejects(target.importJsonl(forged, { owner: 'i' }), 'import_rejected');
      assert.deepEqual(await target.listSessions(), [], 'nothing was written');
      const sound = lines.join('\n') + '\n';
      assert.deepEqual(await target.importJsonl(sound, { owner: 'i' }), { sessionId: 's-forged', events: 3 });
      await store.close();
      await target.close();
    });

    it('refuses an event id the session already has, or one named twice in one batch, writing nothing', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('s-dup-ids', { owner: 'h' });
      const [first] = await owner.append([{ ...message('first'), eventId: 'evt-fixed' as EventId }]);
      assert.equal(first!.eventId, 'evt-fixed');
      await rejects(owner.append([{ ...message('again'), eventId: 'evt-fixed' as EventId }]), 'duplicate_event_id');
      await rejects(
        owner.append([{ ...message('a'), eventId: 'evt-twice' as EventId }, { ...message('b'), eventId: 'evt-twice' as EventId }]),
        'duplicate_event_id',
      );
      await rejects(commitAs(owner, { events: [{ ...message('via commit'), eventId: 'evt-fixed' as EventId }] }), 'duplicate_event_id');
      // The same id in another session is that session's own business.
      const other = await store.acquire('s-dup-ids-other', { owner: 'h' });
      await other.append([{ ...message('elsewhere'), eventId: 'evt-fixed' as EventId }]);
      const history = await store.loadHistory('s-dup-ids');
      assert.deepEqual(history.map((e) => e.eventId), ['evt-fixed'], 'nothing of a refused append was written');
      const [next] = await owner.append([message('still loads')]);
      assert.equal(next!.seq, 1);
      assert.equal((await store.loadHistory('s-dup-ids')).length, 2);
      await store.close();
    });

    it('refuses U+0000 in every id on acquire, append, commit and import; listing sessions stays whole', async () => {
      const { store } = await factory.open();
      await rejects(store.acquire('nul\u0000session', { owner: 'h' }), 'invalid_input');
      await rejects(store.acquire('s-nul', { owner: 'nul\u0000owner' }), 'invalid_input');
      const owner = await store.acquire('s-nul', { owner: 'h' });
      await rejects(owner.append([message('bad turn', 'turn\u0000x' as TurnId)]), 'invalid_input');
      await rejects(owner.append([{ ...message('bad event id'), eventId: 'evt\u0000x' as EventId }]), 'invalid_input');
      await rejects(owner.append([{ ...message('bad generation'), generationId: 'gen\u0000x' }]), 'invalid_input');
      await rejects(commitAs(owner, { events: [callDraft('t\u0000nul', newOperationKey())] }), 'invalid_input');
      await rejects(commitAs(owner, { events: [callDraft('t-nul', 'key\u0000x' as OperationKey)] }), 'invalid_input');
      await rejects(commitAs(owner, { events: [callDraft('t-nul', newOperationKey(), 'call\u0000x' as CallId)] }), 'invalid_input');
      await rejects(owner.startTask('task\u0000x'), 'invalid_input');
      const [ok] = await owner.append([message('fine')]);
      const line = JSON.stringify({ ...JSON.parse((await store.exportJsonl('s-nul')).trim()), session_id: 'imported\u0000nul' });
      assert.ok(ok);
      await rejects(store.importJsonl(`${line}\n`, { owner: 'i' }), 'import_rejected');
      const turnLine = JSON.stringify({ ...JSON.parse((await store.exportJsonl('s-nul')).trim()), session_id: 's-nul-2', turn_id: 't\u0000' });
      await rejects(store.importJsonl(`${turnLine}\n`, { owner: 'i' }), 'import_rejected');
      const sessions = await store.listSessions();
      assert.deepEqual(sessions.map((x) => x.sessionId), ['s-nul']);
      assert.equal((await store.loadHistory('s-nul')).length, 1);
      await store.close();
    });
  });
}

/** The store's decision inbox, or null with the test skipped when the store has none (it refuses with inbox_unsupported). */
function inboxOrSkip(store: SessionStore, t: { skip(message: string): void }): DecisionInbox | null {
  try {
    return decisionInbox(store);
  } catch (error) {
    if ((error as { code?: string }).code !== 'inbox_unsupported') throw error;
    t.skip('this store has no decision inbox');
    return null;
  }
}

/** The decision inbox, for a store whose backend has one (a store without it refuses with inbox_unsupported). */
function inboxRules(name: string, factory: StoreFactory): void {
  describe(`store decision inbox: ${name}`, () => {
    it('an approval request is left with its commit, decided once, used once with its binding, and superseded by a newer one', async (t) => {
      const { store } = await factory.open();
      const inbox = inboxOrSkip(store, t);
      if (inbox === null) return;
      const owner = await store.acquire('s-inbox', { owner: 'h' });
      const task = 't-inbox' as TaskId;
      await owner.startTask(task);
      const key = newOperationKey();
      const callId = newCallId();
      const binding: ApprovalBinding = { taskId: task, key, tool: 'probe', revision: 'v1', argumentsDigest: 'a'.repeat(64), approver: 'lead' };
      const at = '2026-12-01T00:00:00.000Z';
      await commitAs(owner, { events: [callDraft(task, key, callId)], approval: { request: { id: 'approval_1', callId, binding, note: null, at } } });
      assert.equal((await inbox.get('approval_1'))?.state, 'open',
        'the approval request committed with its call must be stored in the inbox (TxWrites.decisions, in the same transaction)');
      assert.deepEqual((await inbox.get('approval_1'))?.binding, binding,
        'the binding must be stored and returned unchanged, its approver included: an approval is used only by an attempt asking the same approver');
      await inbox.approve('approval_1', { actor: 'alice' });
      assert.equal((await inbox.get('approval_1'))?.state, 'decided',
        'once approve() resolved, inbox.get() must read the approval as decided: transactDecision stores the row decide returns and hands the next decide the row as stored now, never an older copy');
      await rejects(inbox.approve('approval_1', { actor: 'bob' }), 'decision_stale',
        'a decision already decided was decided again: transactDecision must hand decide the row as it is stored now (locked), not an older copy');
      await rejects(inbox.deny('approval_none', { actor: 'bob' }), 'decision_not_found');
      assert.equal((await owner.decidedApproval?.(task, key))?.id, 'approval_1');
      const other = { ...binding, argumentsDigest: 'b'.repeat(64) };
      await rejects(commitAs(owner, { events: [message('x')], approval: { use: { id: 'approval_1', callId, binding: other, at } } }), 'decision_binding_changed');
      await rejects(commitAs(owner, { events: [message('x')], approval: { use: { id: 'approval_1', callId, binding: { ...binding, approver: 'cfo' }, at } } }), 'decision_binding_changed');
      assert.deepEqual((await store.loadHistory('s-inbox')).map((e) => e.kind.type), ['task_ledger', 'tool_call'], 'a refused use writes nothing');
      await commitAs(owner, { events: [message('used')], approval: { use: { id: 'approval_1', callId, binding, at } } });
      assert.equal((await inbox.get('approval_1'))?.state, 'consumed');
      await rejects(commitAs(owner, { events: [message('again')], approval: { use: { id: 'approval_1', callId, binding, at } } }), 'decision_stale');
      await commitAs(owner, { events: [message('ask')], approval: { request: { id: 'approval_2', callId, binding, note: null, at } } });
      await commitAs(owner, { events: [message('ask again')], approval: { request: { id: 'approval_3', callId, binding, note: 'n', at } } });
      assert.equal((await inbox.get('approval_2'))?.state, 'superseded');
      const page = await inbox.list({ sessionId: 's-inbox' });
      assert.deepEqual(page.items.map((d) => d.id), ['approval_3']);
      assert.equal(page.next, null);
      await store.close();
    });

    it('an approval a start marker spent goes back to decided, with the result that says that body was never called, and only then', async (t) => {
      const { store } = await factory.open();
      const inbox = inboxOrSkip(store, t);
      if (inbox === null) return;
      const owner = await store.acquire('s-restore', { owner: 'h' });
      const task = 't-restore' as TaskId;
      await owner.startTask(task);
      const key = newOperationKey();
      const asked = newCallId();
      const spender = newCallId();
      const binding: ApprovalBinding = { taskId: task, key, tool: 'probe', revision: 'v1', argumentsDigest: 'a'.repeat(64), approver: 'lead' };
      const at = '2026-12-01T00:00:00.000Z';
      await commitAs(owner, { events: [callDraft(task, key, asked)], approval: { request: { id: 'approval_r', callId: asked, binding, note: null, at } } });
      await inbox.approve('approval_r', { actor: 'alice' });
      const approval = { requestId: 'approval_r', decision: 'approved' as const, actor: 'alice' };
      await commitAs(owner, { events: [callDraft(task, key, spender), { turnId: turn, kind: { type: 'tool_started', callId: spender, approval } }], approval: { use: { id: 'approval_r', callId: spender, binding, at } } });
      const result = (callId: CallId, code: string): EventDraft => ({
        turnId: turn,
        kind: { type: 'tool_result', result: { callId, outcome: { status: 'failed', category: 'cancelled', code, message: 'stopped', retryable: false } } },
      });
      const restore = { restore: { id: 'approval_r', callId: spender, taskId: task, key, at } };
      const before = (await store.loadHistory('s-restore')).length;
      await rejects(commitAs(owner, { events: [message('x')], approval: restore }), 'invalid_input', 'a restore without its call\'s stopped-before-body result must be refused');
      await rejects(commitAs(owner, { events: [result(spender, 'tool_cancelled')], approval: restore }), 'invalid_input',
        'a restore with a result that does not say the body was never called must be refused: that body may have run');
      await rejects(commitAs(owner, { events: [result(asked, 'tool_stopped_before_body')], approval: restore }), 'invalid_input',
        'a restore with another call\'s result must be refused');
      const thrown: EventDraft = {
        turnId: turn,
        kind: { type: 'tool_result', result: { callId: spender, outcome: { status: 'failed', category: 'body_failure', code: 'tool_stopped_before_body', message: 'a body\'s own code', retryable: false } } },
      };
      await rejects(commitAs(owner, { events: [thrown], approval: restore }), 'invalid_input',
        'a restore with a body\'s own failure that carries the code must be refused: that body ran');
      const returned: EventDraft = { turnId: turn, kind: { type: 'custom', plugin: 'jingwei.runtime', kind: 'body_ended', payload: { callId: spender, ended: 'returned' } } };
      await rejects(commitAs(owner, { events: [returned], approval: restore }), 'invalid_input',
        'a restore with a body end that says the body returned must be refused: only not_called is evidence');
      assert.equal((await store.loadHistory('s-restore')).length, before, 'a refused restore writes nothing');
      assert.equal((await inbox.get('approval_r'))?.state, 'consumed');
      await commitAs(owner, { events: [result(spender, 'tool_stopped_before_body')], approval: restore });
      const row = await inbox.get('approval_r');
      assert.deepEqual([row?.state, row?.consumedBy, row?.consumedAt, row?.actor], ['decided', null, null, 'alice'],
        'the approval the marker spent must be decided and unused again: TxReads.approvals must read the row `spent` names whatever its state');
      assert.equal((await owner.decidedApproval?.(task, key))?.id, 'approval_r', 'the next attempt finds it');
      const next = newCallId();
      await commitAs(owner, { events: [callDraft(task, key, next), { turnId: turn, kind: { type: 'tool_started', callId: next, approval } }], approval: { use: { id: 'approval_r', callId: next, binding, at } } });
      assert.equal((await inbox.get('approval_r'))?.consumedBy, next);
      await commitAs(owner, { events: [result(spender, 'tool_stopped_before_body')], approval: restore });
      assert.equal((await inbox.get('approval_r'))?.consumedBy, next, 'a restore names the call that spent the approval: spent by another since, it stays spent');
      await store.close();
    });

    it('a call takes one waiting review: reviews given at once are decided one at a time, and only a review naming the waiting one replaces it', async (t) => {
      const { store, reopen } = await factory.open();
      const inbox = inboxOrSkip(store, t);
      if (inbox === null) return;
      const owner = await store.acquire('s-review', { owner: 'h' });
      await owner.startTask('t-review');
      const callId = newCallId();
      await commitAs(owner, { events: [callDraft('t-review', newOperationKey(), callId)] });
      await owner.release();
      const other = reopen ? decisionInbox(await reopen()) : inbox;
      const review = (by: DecisionInbox, actor: string, outcome: 'completed' | 'not_executed', replaces?: string) =>
        by.recordReview({ sessionId: 's-review', callId, outcome, evidence: `${actor} checked`, actor, ...(replaces ? { replaces } : {}) });
      const answers = await Promise.allSettled([review(inbox, 'carol', 'not_executed'), review(other, 'dan', 'completed'), review(inbox, 'erin', 'completed')]);
      const recorded = answers.filter((a) => a.status === 'fulfilled');
      assert.equal(recorded.length, 1,
        'three reviews of one call given at once were recorded side by side: transactReview must hand decide the call\'s waiting reviews as stored now, serialized with every other transactReview of that call');
      for (const a of answers) if (a.status === 'rejected') assert.equal((a.reason as { code?: string }).code, 'decision_stale');
      const first = (recorded[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof review>>>).value;
      await rejects(review(inbox, 'dan', 'completed', 'review_0'), 'decision_not_found', 'a review naming one that does not exist must be refused, as an unknown id');
      const second = await review(other, 'dan', 'completed', first.id);
      assert.equal((await inbox.get(first.id))?.state, 'superseded', 'the review a newer one replaces must be marked superseded in the same transaction');
      await rejects(review(inbox, 'carol', 'not_executed', first.id), 'decision_stale', 'a review naming one already replaced must be refused');
      const waiting = await inbox.list({ sessionId: 's-review', kind: 'review' });
      assert.deepEqual(waiting.items.map((d) => d.id), [second.id], 'one review of the call waits: the one that replaced the first');
      await store.close();
    });

    it('a commit is refused while a review of a call it names waits, and transactReview reads the call\'s progress as committed', async (t) => {
      const { store } = await factory.open();
      const inbox = inboxOrSkip(store, t);
      if (inbox === null) return;
      const backend = store instanceof JournalStore ? store.backend.inbox : undefined;
      const task = 't-wait' as TaskId;
      const first = newCallId();
      const earlier = await store.acquire('s-wait', { owner: 'h' });
      await earlier.startTask(task);
      await commitAs(earlier, { events: [callDraft(task, newOperationKey(), first, true), { turnId: turn, kind: { type: 'tool_started', callId: first } }] });
      await earlier.release();
      const owner = await store.acquire('s-wait', { owner: 'h2' });
      const review = await inbox.recordReview({ sessionId: 's-wait', callId: first, outcome: 'completed', evidence: 'the receipt', actor: 'carol' });
      const before = (await store.loadHistory('s-wait')).length;
      await rejects(commitAs(owner, { events: [message('start')], expectNoWaitingReview: [newCallId(), first] }), 'needs_review',
        'a commit naming a call whose review decision waits in the inbox went through: TxReads.reviews must read the decided review rows of those calls in the transaction, and TxState.reviews carry them');
      assert.equal((await store.loadHistory('s-wait')).length, before, 'a refused commit writes nothing');
      await commitAs(owner, { events: [message('other')], expectNoWaitingReview: [newCallId()] });
      await inbox.markReviewStale(review.id, 'not needed');
      await commitAs(owner, { events: [message('start')], expectNoWaitingReview: [first] });
      const progress = (callId: CallId) => backend!.transactReview('s-wait' as SessionId, callId, (_waiting, now) => ({ writes: [], result: now }));
      const next = newCallId();
      await commitAs(owner, { events: [callDraft(task, newOperationKey(), next, true)] });
      assert.deepEqual(await progress(next), { started: false, status: 'no_result' },
        'transactReview must hand decide the call\'s attention row as committed (started, status)');
      await commitAs(owner, { events: [{ turnId: turn, kind: { type: 'tool_started', callId: next } }] });
      assert.deepEqual(await progress(next), { started: true, status: 'no_result' },
        'transactReview handed decide the call\'s progress from before its start marker was committed');
      assert.equal(await progress(newCallId()), null, 'a call with no attention row has no progress');
      await store.close();
    });
  });
}

/**
 * Registers the store conformance suite on `node:test` (run the file with `node --test`): the behaviour every
 * SessionStore must show (ordering, fencing, release, id checks, tasks and budgets, settlement of abandoned
 * reservations, the latest-attempt check, history limits, JSONL export and import, write-time validation,
 * store_closed after close(), recorded times, the attention index and its queue, the decision inbox, leases and
 * `takeover: 'expired'`, the backend's own refusal of a stale owner-row write, and, with `reopen`, a second handle
 * and concurrent acquires, takeovers and appends over two handles; without `reopen` those cases are reported as
 * skipped). Each test opens its own fresh stores. The cases are `node:test`'s: run the file with `node --test`.
 */
export function runStoreConformance(options: StoreConformanceOptions): void {
  if (typeof options?.name !== 'string' || typeof options.open !== 'function') {
    throw new TypeError('runStoreConformance needs { name, open }');
  }
  const opened: SessionStore[] = [];
  const track = async (store: Promise<SessionStore> | SessionStore): Promise<SessionStore> => {
    const s = await store;
    opened.push(s);
    return s;
  };
  const factory: StoreFactory = {
    async open() {
      const store = await track(options.open());
      const reopen = options.reopen;
      return reopen ? { store, reopen: () => track(reopen(store)) } : { store };
    },
  };
  describe(`store conformance: ${options.name}`, () => {
    afterEach(async () => {
      for (const store of opened.splice(0)) await (options.close ? options.close(store) : store.close());
    });
    storeRules(options.name, factory);
    draftValidation(options.name, factory);
    attentionRules(options.name, factory);
    inboxRules(options.name, factory);
    leaseRules(options.name, factory);
    operationRules(options.name, factory);
    concurrencyRules(options.name, factory);
    applyRules(options.name, factory);
  });
}
