/**
 * Store conformance for transactions that run at the same time (docs/design.md#fencing). Two handles on the same
 * data (`reopen`, the suite's model of a second process) race first acquires, takeovers and appends, and each race
 * checks what must hold whatever the interleaving: one owner per epoch, only the newest owner writes, every
 * acknowledged write is in the history, and the history verifies. The backend's own half of fencing, the conditional
 * owner-row update, is also checked directly on the backend: the library's decisions refuse a stale owner before the
 * backend is asked, so only a direct write shows whether the backend would have refused it too.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventDraft } from '../event/types.js';
import { newTurnId } from '../ids.js';
import { JournalStore } from '../store/journal-store.js';
import type { EventRow, JournalBackend, SessionRow, TaskRow, TxWrites } from '../store/rows.js';
import type { SessionOwner, SessionStore } from '../store/types.js';

interface Factory {
  open(): Promise<{ store: SessionStore; reopen?: () => Promise<SessionStore> }>;
}

/** Why a case that needs a second handle did not run: reported as a skip, never as a pass. */
export const NO_REOPEN = 'not run: needs a second handle on the same data (give runStoreConformance a reopen)';

/** Races per case: each round is a fresh session, so an interleaving the first round missed may show in another. */
const ROUNDS = 3;

const turn = newTurnId();
const message = (text: string): EventDraft => ({ turnId: turn, kind: { type: 'user_message', text } });
const texts = (events: readonly { kind: unknown }[]) => events.map((e) => (e.kind as { text?: string }).text);
const quiet = { heartbeat: false } as const;

type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

async function settle<T>(promise: Promise<T>): Promise<Settled<T>> {
  try {
    return { ok: true, value: await promise };
  } catch (error) {
    return { ok: false, error };
  }
}

const codeOf = (error: unknown): unknown => (error as { code?: unknown } | null)?.code;
const describeError = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** The backend under a store built by `createJournalStore`; undefined for any other SessionStore. */
function backendOf(store: SessionStore): JournalBackend | undefined {
  return store instanceof JournalStore ? store.backend : undefined;
}

/** The summary row of one session as a handle lists it. */
async function rowOf(store: SessionStore, sessionId: string) {
  return (await store.listSessions()).find((s) => s.sessionId === sessionId);
}

/** The history as `store` loads it; a history that no longer verifies fails the case with what the race left. */
async function verifiedTexts(store: SessionStore, sessionId: string, after: string): Promise<(string | undefined)[]> {
  try {
    return texts(await store.loadHistory(sessionId));
  } catch (error) {
    assert.fail(`after ${after}, the history of ${sessionId} no longer verifies (${describeError(error)}): two writers were both let through`);
  }
}

/** A takeover; an optimistic backend may refuse it (stale_owner) when the row changed under it, so it is asked again. */
async function takeOver(store: SessionStore, sessionId: string, owner: string): Promise<SessionOwner> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await store.acquire(sessionId, { owner, takeover: true, ...quiet });
    } catch (error) {
      if (codeOf(error) !== 'stale_owner' || attempt >= 5) throw error;
    }
  }
}

export function concurrencyRules(name: string, factory: Factory): void {
  describe(`store concurrency: ${name}`, () => {
    it('two handles: concurrent first acquires of a new session, exactly one wins and the other is refused', async (t) => {
      const { store, reopen } = await factory.open();
      if (!reopen) return t.skip(NO_REOPEN);
      const other = await reopen();
      for (let round = 0; round < ROUNDS; round++) {
        const id = `c-first-${round}`;
        const results = await Promise.all([
          settle(store.acquire(id, { owner: 'host-a', ...quiet })),
          settle(other.acquire(id, { owner: 'host-b', ...quiet })),
        ]);
        const winners = results.flatMap((r) => (r.ok ? [r.value] : []));
        assert.equal(winners.length, 1,
          `${winners.length} of two concurrent first acquires of ${id} succeeded (${results.map((r) => (r.ok ? `${r.value.owner} at epoch ${r.value.epoch}` : String(codeOf(r.error)))).join(', ')}): ` +
          'an owner-row write with expect null must insert only where no row exists, and refuse (StaleOwnerError) or rerun the transaction otherwise');
        for (const r of results) {
          if (!r.ok) {
            assert.ok(['session_busy', 'stale_owner'].includes(codeOf(r.error) as string),
              `the losing first acquire of ${id} must fail with session_busy or stale_owner, got ${describeError(r.error)}`);
          }
        }
        const winner = winners[0]!;
        assert.equal(winner.epoch, 1, `the first acquire of ${id} got epoch ${winner.epoch}`);
        await winner.append([message(`by ${winner.owner}`)]);
        const row = await rowOf(other, id);
        assert.deepEqual([row?.owner, row?.epoch, row?.events], [winner.owner, 1, 1], `the owner row of ${id} must name the one winner, ${winner.owner}`);
      }
    });

    it('two handles: concurrent takeovers get one epoch each, and only the newest owner can write', async (t) => {
      const { store, reopen } = await factory.open();
      if (!reopen) return t.skip(NO_REOPEN);
      const other = await reopen();
      for (let round = 0; round < ROUNDS; round++) {
        const id = `c-takeover-${round}`;
        const first = await store.acquire(id, { owner: 'host-a', ...quiet });
        await first.append([message('by host-a')]);
        const results = await Promise.all([
          settle(store.acquire(id, { owner: 'host-b', takeover: true, ...quiet })),
          settle(other.acquire(id, { owner: 'host-c', takeover: true, ...quiet })),
        ]);
        for (const r of results) {
          if (!r.ok) {
            assert.equal(codeOf(r.error), 'stale_owner', `a takeover racing another may only be refused as stale_owner, got ${describeError(r.error)}`);
          }
        }
        const winners = results.flatMap((r) => (r.ok ? [r.value] : []));
        assert.ok(winners.length >= 1, `both concurrent takeovers of ${id} were refused`);
        const epochs = winners.map((w) => w.epoch);
        assert.equal(new Set(epochs).size, epochs.length,
          `two concurrent takeovers of ${id} were both given epoch ${epochs[0]} (${winners.map((w) => w.owner).join(' and ')}): ` +
          'the backend applied an owner-row update whose expected epoch and lastSeq (TxWrites.session.expect) no longer held');
        assert.ok(epochs.every((e) => e > first.epoch), `a takeover of ${id} did not raise the epoch past ${first.epoch}: ${epochs.join(', ')}`);
        const newest = winners.reduce((a, b) => (b.epoch > a.epoch ? b : a));
        for (const older of [first, ...winners.filter((w) => w !== newest)]) {
          const late = await settle(older.append([message(`late ${older.owner}`)]));
          assert.ok(!late.ok && codeOf(late.error) === 'stale_owner',
            `${older.owner} (epoch ${older.epoch}) could still write after ${newest.owner} took ${id} over at epoch ${newest.epoch}` +
            (late.ok ? '' : ` (it failed with ${describeError(late.error)} instead of stale_owner)`));
        }
        const own = await settle(newest.append([message(`by ${newest.owner}`)]));
        assert.ok(own.ok, `the newest owner ${newest.owner} (epoch ${newest.epoch}) of ${id} could not write: ${own.ok ? '' : describeError(own.error)}`);
        const row = await rowOf(store, id);
        assert.deepEqual([row?.owner, row?.epoch], [newest.owner, newest.epoch], `the owner row of ${id} must name the newest owner`);
        assert.deepEqual(await verifiedTexts(other, id, 'concurrent takeovers'), ['by host-a', `by ${newest.owner}`],
          `the history of ${id} must hold host-a's event and the newest owner's, nothing else`);
      }
    });

    it("two handles: a fenced owner's appends racing the takeover and the new owner's appends never land after the takeover", async (t) => {
      const { store, reopen } = await factory.open();
      if (!reopen) return t.skip(NO_REOPEN);
      const other = await reopen();
      for (let round = 0; round < ROUNDS + 1; round++) {
        const id = `c-race-${round}`;
        const a = await store.acquire(id, { owner: 'host-a', ...quiet });
        await a.append([message('a0')]);
        const acked: string[] = [];
        let b: SessionOwner | undefined;
        // host-a keeps appending until it is fenced; host-b takes over, then appends. Even rounds start the takeover
        // first, odd rounds host-a's append, so that either may read the owner row before the other writes it.
        const runA = async () => {
          for (let i = 1; i <= 3; i++) {
            const r = await settle(a.append([message(`a${i}`)]));
            if (r.ok) {
              acked.push(`a${i}`);
              continue;
            }
            assert.equal(codeOf(r.error), 'stale_owner', `host-a's append a${i} failed with ${describeError(r.error)}, not stale_owner`);
            return;
          }
        };
        const runB = async () => {
          b = await takeOver(other, id, 'host-b');
          for (let i = 1; i <= 2; i++) {
            const r = await settle(b.append([message(`b${i}`)]));
            assert.ok(r.ok, `host-b took ${id} over at epoch ${b.epoch}, then its append b${i} failed (${r.ok ? '' : describeError(r.error)}): ` +
              'a write of the fenced host-a was applied after the takeover; a backend must apply an owner-row update only where ' +
              'epoch and lastSeq still equal TxWrites.session.expect');
            acked.push(`b${i}`);
          }
        };
        await (round % 2 === 0 ? Promise.all([runB(), runA()]) : Promise.all([runA(), runB()]));
        const history = await verifiedTexts(other, id, "host-a's appends raced host-b's takeover");
        const fromA = acked.filter((x) => x.startsWith('a'));
        assert.deepEqual(history, ['a0', ...fromA, 'b1', 'b2'],
          `the history of ${id} must hold every acknowledged append exactly once, host-a's before host-b's takeover (acknowledged: ${acked.join(', ')})`);
        const row = await rowOf(store, id);
        assert.deepEqual([row?.owner, row?.epoch], ['host-b', b!.epoch], `the owner row of ${id} must name host-b at its epoch`);
      }
    });

    it("two handles: each handle's reads reflect every transaction the other committed (no cached snapshot)", async (t) => {
      const { store, reopen } = await factory.open();
      if (!reopen) return t.skip(NO_REOPEN);
      const other = await reopen();
      const id = 'c-fresh';
      const a = await store.acquire(id, { owner: 'host-a', ...quiet });
      await a.startTask('t-fresh');
      await a.append([message('one')]);
      assert.deepEqual(texts(await other.loadHistory(id)), [undefined, 'one'], 'the second handle must read what the first one committed');
      assert.equal((await rowOf(other, id))?.events, 2, 'the second handle must list what the first one committed');
      await a.append([message('two')]);
      await a.stopTask('t-fresh', 'enough');
      const stale = (what: string, reader = 'second', writer = 'first') =>
        `${what} on the ${reader} handle missed a transaction the ${writer} one committed: JournalBackend reads (snapshot, readTask, ` +
        'listSessions) must reflect every committed transaction, never a cached copy';
      assert.deepEqual(texts(await other.loadHistory(id)), [undefined, 'one', 'two', undefined], stale('loadHistory (snapshot)'));
      assert.equal((await rowOf(other, id))?.events, 4, stale('listSessions'));
      assert.equal((await store.loadHistory(id)).length, 4, 'the first handle must read its own four events');
      const b = await other.acquire(id, { owner: 'host-b', takeover: true, ...quiet });
      assert.equal((await b.task('t-fresh')).state, 'stopped', stale('readTask'));
      await b.append([message('three')]);
      assert.deepEqual(texts(await store.loadHistory(id)), [undefined, 'one', 'two', undefined, 'three'], stale('loadHistory (snapshot)', 'first', 'second'));
    });
  });
}

/** A write the library would never decide: the owner row (and rows beside it) under a condition that no longer holds. */
function forgedWrite(state: SessionRow, expect: { epoch: number; lastSeq: number } | null, tag: string): TxWrites<string> {
  const seq = state.lastSeq + 1;
  const event: EventRow = { sessionId: state.sessionId, seq, eventId: `evt-forged-${tag}`, epoch: state.epoch, body: '{}', hash: '0'.repeat(64) };
  const task: TaskRow = {
    taskId: `t-forged-${tag}` as TaskRow['taskId'], sessionId: state.sessionId, state: 'running', limitToolCalls: 1, limitOutputBytes: 1,
    chargedToolCalls: 0, chargedOutputBytes: 0, reservedOutputBytes: 0, reservations: [], stopReason: null,
  };
  return {
    session: { row: { ...state, owner: `forged-${tag}`, lastSeq: seq }, expect },
    events: [event],
    task: { row: task, insert: true },
    result: 'applied',
  };
}

export function applyRules(name: string, factory: Factory): void {
  describe(`store backend writes: ${name}`, () => {
    it('the backend itself refuses an owner-row write whose expected epoch or lastSeq no longer holds, writing none of its rows', async (t) => {
      const { store } = await factory.open();
      const backend = backendOf(store);
      if (!backend) return t.skip('not run: the store was not built by createJournalStore, so its backend cannot be reached');
      const id = 'w-expect';
      const a = await store.acquire(id, { owner: 'host-a', ...quiet });
      await a.append([message('one'), message('two')]);
      const b = await store.acquire(id, { owner: 'host-b', takeover: true, ...quiet });
      await b.append([message('three')]);
      const cases: Array<[string, string, (s: SessionRow) => { epoch: number; lastSeq: number } | null]> = [
        ['epoch', 'an owner-row update expecting the epoch before the takeover', (s) => ({ epoch: s.epoch - 1, lastSeq: s.lastSeq })],
        ['seq', 'an owner-row update expecting an earlier lastSeq', (s) => ({ epoch: s.epoch, lastSeq: s.lastSeq - 1 })],
        ['insert', 'an insert (expect null) of an owner row that exists', () => null],
      ];
      for (const [tag, what, expect] of cases) {
        const outcome: Settled<string> = await settle(backend.transact(b.sessionId, {}, (state) => {
          assert.ok(state.session, `transact read no owner row for ${id}`);
          return forgedWrite(state.session, expect(state.session), tag);
        }));
        assert.ok(!outcome.ok,
          `the backend applied ${what} (TxWrites.session.expect no longer held): it must refuse it with StaleOwnerError and write nothing; ` +
          'the library decides on the rows transact read, so only this check stops a writer whose read went stale');
        if (tag === 'insert') {
          assert.equal(typeof codeOf(outcome.error), 'string', `${what} must be refused with a typed error (StaleOwnerError), got ${describeError(outcome.error)}`);
        } else {
          assert.equal(codeOf(outcome.error), 'stale_owner', `${what} must be refused with StaleOwnerError, got ${describeError(outcome.error)}`);
        }
        const row = await rowOf(store, id);
        assert.deepEqual([row?.owner, row?.epoch, row?.events], ['host-b', b.epoch, 3], `the refused write (${what}) changed the owner row or the events: a refused transaction must write none of its rows`);
        assert.equal(await backend.readTask(b.sessionId, `t-forged-${tag}`), undefined, `the refused write (${what}) left its task row: a write's rows commit atomically or not at all`);
      }
      assert.deepEqual(texts(await store.loadHistory(id)), ['one', 'two', 'three']);
      await b.append([message('four')]);
      assert.equal((await store.loadHistory(id)).length, 4, 'after the refused writes, the owner appends again and its event is read back');
    });

    it("the backend rejects with decide's own error, unchanged, and writes nothing when decide throws", async (t) => {
      const { store } = await factory.open();
      const backend = backendOf(store);
      if (!backend) return t.skip('not run: the store was not built by createJournalStore, so its backend cannot be reached');
      const owner = await store.acquire('w-throws', { owner: 'host-a', ...quiet });
      await owner.append([message('one')]);
      const thrown = new Error('decided against it');
      const refuse = (): TxWrites<undefined> => {
        throw thrown;
      };
      const outcome = await settle(backend.transact(owner.sessionId, {}, refuse));
      assert.ok(!outcome.ok && outcome.error === thrown,
        `transact must reject with the very error decide threw, got ${outcome.ok ? 'a result' : describeError(outcome.error)}`);
      assert.deepEqual(texts(await store.loadHistory('w-throws')), ['one']);
    });
  });
}
