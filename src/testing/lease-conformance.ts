/**
 * Store conformance for leases and for the operation lookup of caller keys (docs/design.md#leases): every store records the holder's lease, renews it on writes
 * and heartbeats, lists expired ones, and lets `takeover: 'expired'` take over only a session whose lease ran out.
 * No case asserts a timing: each waits, by polling the store, for the order of events it needs, up to a deadline far
 * beyond any lease it sets, so that a store that never gets there fails naming the lease rule instead of hanging.
 */
import { commitAs } from '../store/owner-commit.js';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventDraft } from '../event/types.js';
import { newCallId, type CallId, type OperationKey, type TaskId } from '../ids.js';
import type { SessionOwner, SessionStore } from '../store/types.js';

interface LeaseStoreFactory {
  open(): Promise<{ store: SessionStore }>;
}

const SHORT = 100;
/** How long a poll waits for what a SHORT lease makes happen within a few hundred milliseconds. */
const DEADLINE_MS = 5_000;
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function code(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
    return undefined;
  } catch (error) {
    return (error as { code?: string }).code;
  }
}

/** Waits until the store lists `sessionId` as expired (the store's clock decides), failing after DEADLINE_MS. */
async function untilExpired(store: SessionStore, sessionId: string): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  while (!(await store.listExpiredSessions()).some((s) => s.sessionId === sessionId)) {
    if (Date.now() > deadline) {
      const row = (await store.listSessions()).find((s) => s.sessionId === sessionId);
      assert.fail(
        `lease: session ${sessionId}, held under a ${SHORT} ms lease that nobody renews, was still not listed as expired after ` +
        `${DEADLINE_MS} ms (listSessions: held ${String(row?.held)}, leaseExpiresAt ${String(row?.leaseExpiresAt)}, leaseExpired ${String(row?.leaseExpired)}). ` +
        'A backend must store SessionRow.leaseExpiresAt exactly as written, and now() must read a clock that advances.',
      );
    }
    await pause(SHORT / 4);
  }
}

async function leaseOf(store: SessionStore, sessionId: string): Promise<number | null> {
  return (await store.listSessions()).find((s) => s.sessionId === sessionId)?.leaseExpiresAt ?? null;
}

export function leaseRules(name: string, factory: LeaseStoreFactory): void {
  describe(`store leases: ${name}`, () => {
    it('acquire records a lease, a heartbeat runs until release, and release clears the lease', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('l-basic', { owner: 'host-a' });
      assert.equal(owner.heartbeating, true);
      const [summary] = await store.listSessions();
      assert.equal(summary!.held, true);
      assert.equal(typeof summary!.leaseExpiresAt, 'number',
        `lease: acquire wrote a lease, but listSessions() reports leaseExpiresAt ${String(summary!.leaseExpiresAt)}: a backend must store SessionRow.leaseExpiresAt exactly as written`);
      assert.equal(summary!.leaseExpired, false, 'lease: a lease just written is not expired');
      assert.deepEqual(await store.listExpiredSessions(), []);
      await owner.release();
      assert.equal(owner.heartbeating, false);
      const [released] = await store.listSessions();
      assert.equal(released!.leaseExpiresAt, null, 'lease: release() writes leaseExpiresAt null, and the backend must store it');
      assert.equal(released!.leaseExpired, false);
      await store.close();
    });

    it("takeover 'expired' refuses a live owner, naming it and its expiry; takeover true still fences it", async () => {
      const { store } = await factory.open();
      const live = await store.acquire('l-live', { owner: 'host-live', leaseMs: 60_000 });
      let refusal: unknown;
      try {
        await store.acquire('l-live', { owner: 'host-recover', takeover: 'expired' });
      } catch (error) {
        refusal = error;
      }
      const busy = refusal as { code?: string; holder?: string; leaseExpiresAt?: number | null };
      assert.equal(busy.code, 'session_busy');
      assert.equal(busy.holder, 'host-live');
      assert.equal(busy.leaseExpiresAt, await leaseOf(store, 'l-live'));
      await live.append([{ turnId: 't' as never, kind: { type: 'user_message', text: 'still mine' } }]);
      const fencer = await store.acquire('l-live', { owner: 'host-admin', takeover: true });
      assert.equal(fencer.epoch, live.epoch + 1);
      assert.equal(await code(live.append([{ turnId: 't' as never, kind: { type: 'user_message', text: 'late' } }])), 'stale_owner');
      await store.close();
    });

    it("a lease nobody renews runs out: listed as expired, then taken over by takeover 'expired'", async () => {
      const { store } = await factory.open();
      const gone = await store.acquire('l-gone', { owner: 'host-gone', leaseMs: SHORT, heartbeat: false });
      assert.equal(gone.heartbeating, false);
      await untilExpired(store, 'l-gone');
      const [expired] = await store.listExpiredSessions();
      assert.equal(expired!.owner, 'host-gone');
      assert.equal(expired!.held, true);
      const next = await store.acquire('l-gone', { owner: 'host-recover', takeover: 'expired' });
      assert.equal(next.epoch, gone.epoch + 1);
      assert.deepEqual(await store.listExpiredSessions(), []);
      assert.equal(await code(gone.append([{ turnId: 't' as never, kind: { type: 'user_message', text: 'late' } }])), 'stale_owner');
      await store.close();
    });

    it("takeover 'expired' acquires a new or released session like a plain acquire", async () => {
      const { store } = await factory.open();
      const first = await store.acquire('l-free', { owner: 'host-a', takeover: 'expired' });
      await first.release();
      const second = await store.acquire('l-free', { owner: 'host-b', takeover: 'expired' });
      assert.equal(second.epoch, first.epoch + 1);
      await store.close();
    });

    it("takeover 'abandoned' takes over an expired session only: a live one is busy, a released or missing one is stale_owner, nothing written", async () => {
      const { store } = await factory.open();
      const gone = await store.acquire('l-abandoned', { owner: 'host-gone', leaseMs: SHORT, heartbeat: false });
      assert.equal(await code(store.acquire('l-abandoned', { owner: 'host-recover', takeover: 'abandoned' })), 'session_busy', 'a live lease is not abandoned');
      await untilExpired(store, 'l-abandoned');
      const recovered = await store.acquire('l-abandoned', { owner: 'host-recover', takeover: 'abandoned' });
      assert.equal(recovered.epoch, gone.epoch + 1);
      await recovered.release();
      assert.equal(await code(store.acquire('l-abandoned', { owner: 'host-late', takeover: 'abandoned' })), 'stale_owner',
        "a session released since it was listed is not abandoned: takeover 'abandoned' must refuse a session nobody holds (decideAcquire)");
      assert.equal(await code(store.acquire('l-never', { owner: 'host-late', takeover: 'abandoned' })), 'stale_owner');
      assert.deepEqual((await store.listSessions()).filter((x) => x.sessionId === 'l-abandoned').map((x) => [x.epoch, x.held]), [[recovered.epoch, false]], 'the refusal wrote nothing');
      assert.equal((await store.listSessions()).some((x) => x.sessionId === 'l-never'), false);
      await store.close();
    });

    it('writes and renewLease move the expiry forward; an expired owner that writes holds its lease again', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('l-renew', { owner: 'host-a', leaseMs: SHORT, heartbeat: false });
      await untilExpired(store, 'l-renew');
      const before = (await leaseOf(store, 'l-renew'))!;
      await owner.append([{ turnId: 't' as never, kind: { type: 'user_message', text: 'alive after all' } }]);
      const afterWrite = (await leaseOf(store, 'l-renew'))!;
      assert.ok(afterWrite > before, 'a write renews the lease from the store clock');
      // A pause, so that the renewal's expiry differs from the write's and a renewal left unstored shows.
      await pause(SHORT / 4);
      const renewed = await owner.renewLease();
      assert.ok(renewed >= afterWrite);
      assert.equal(await leaseOf(store, 'l-renew'), renewed,
        'lease: renewLease() (a write of the owner row alone, as a heartbeat makes) must store the leaseExpiresAt it wrote');
      await store.close();
    });

    it('a heartbeat that finds its owner fenced stops for good', async () => {
      const { store } = await factory.open();
      const fenced: SessionOwner = await store.acquire('l-fenced', { owner: 'host-a', leaseMs: SHORT });
      await store.acquire('l-fenced', { owner: 'host-b', takeover: true });
      const deadline = Date.now() + DEADLINE_MS;
      while (fenced.heartbeating) {
        assert.ok(Date.now() < deadline, `lease: the heartbeat of a fenced owner (a ${SHORT} ms lease) still ran after ${DEADLINE_MS} ms: its renewal must fail with stale_owner`);
        await pause(SHORT / 4);
      }
      assert.equal(await code(fenced.renewLease()), 'stale_owner');
      await store.close();
    });

    it('refuses a bad lease, takeover or heartbeat option with invalid_input and writes nothing', async () => {
      const { store } = await factory.open();
      for (const options of [{ leaseMs: 0 }, { leaseMs: 1.5 }, { leaseMs: 10 ** 12 }, { takeover: 'later' }, { heartbeat: 'yes' }]) {
        assert.equal(await code(store.acquire('l-bad', { owner: 'host-a', ...(options as object) })), 'invalid_input', JSON.stringify(options));
      }
      assert.deepEqual(await store.listSessions(), []);
      await store.close();
    });

    it('close() stops the heartbeats of its owners and leaves the lease to run out', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('l-close', { owner: 'host-a', leaseMs: SHORT });
      await store.close();
      assert.equal(owner.heartbeating, false);
    });
  });
}

function keyedCall(taskId: string, key: string, id: CallId): EventDraft {
  return {
    turnId: 'turn' as never,
    kind: {
      type: 'tool_call',
      call: {
        id, name: 'probe', arguments: { ok: true },
        operation: { taskId: taskId as TaskId, key: key as OperationKey, contract: { effect: 'idempotent', revision: 'v1' }, retry: null },
      },
    },
  };
}

export function operationRules(name: string, factory: LeaseStoreFactory): void {
  describe(`store operation lookup: ${name}`, () => {
    it('readOperation finds the latest attempt of (task, key) with its events; a new key has none', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('o-read', { owner: 'host-a' });
      await owner.startTask('o-task');
      assert.equal(await owner.readOperation('o-task', 'order-1'), undefined);
      const id = newCallId();
      await commitAs(owner, {
        events: [keyedCall('o-task', 'order-1', id)],
        budget: { taskId: 'o-task' as TaskId, admit: { maxOutputBytes: 10 } },
        expectNewOperation: { taskId: 'o-task' as TaskId, key: 'order-1' as OperationKey },
      });
      await commitAs(owner, {
        events: [{ turnId: 'turn' as never, kind: { type: 'tool_result', result: { callId: id, outcome: { status: 'succeeded', output: 'ok' } } } }],
        budget: { taskId: 'o-task' as TaskId, settle: { chargeOutputBytes: 2 } },
      });
      const found = await owner.readOperation('o-task', 'order-1');
      assert.equal(found?.callId, id, 'readOperation must find the attempt just committed (its operation row and its events)');
      // seq 0 is the task's start.
      assert.equal(found?.callEvent.seq, 1);
      assert.equal(found?.startedEvent, null);
      assert.equal(found?.resultEvent?.seq, 2);
      assert.equal(await owner.readOperation('o-task', 'order-2'), undefined);
      await store.close();
    });

    it('a commit expecting a new operation fails with operation_in_doubt once the key has an attempt, writing nothing', async () => {
      const { store } = await factory.open();
      const owner = await store.acquire('o-new', { owner: 'host-a' });
      await owner.startTask('o-task-2');
      const first = newCallId();
      const condition = { taskId: 'o-task-2' as TaskId, key: 'k' as OperationKey };
      await commitAs(owner, { events: [keyedCall('o-task-2', 'k', first)], expectNewOperation: condition });
      let refusal: unknown;
      try {
        await commitAs(owner, { events: [keyedCall('o-task-2', 'k', newCallId())], expectNewOperation: condition });
      } catch (error) {
        refusal = error;
      }
      assert.equal((refusal as { code?: string } | undefined)?.code, 'operation_in_doubt',
        `a second commit expecting a new operation must fail with operation_in_doubt, got ${refusal === undefined ? 'success' : String(refusal)}: ` +
        "the first attempt's operation row must be stored with its commit (TxWrites.operations)");
      assert.equal((refusal as { callId?: string }).callId, first);
      assert.deepEqual((await store.loadHistory('o-new')).map((e) => e.kind.type), ['task_ledger', 'tool_call']);
      await store.close();
    });
  });
}
