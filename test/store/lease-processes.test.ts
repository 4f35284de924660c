/**
 * Leases across real processes, on SQLite and PostgreSQL (docs/design.md#leases): a recovering host that keeps
 * trying `takeover: 'expired'` never takes a session from a live, heartbeating owner in another process, and takes
 * over a SIGKILLed owner's session once its lease ran out. No assertion depends on how long anything took: the
 * tests check outcomes and their order only.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { SessionBusyError } from '../../src/errors.js';
import { openSqliteStore } from '../../src/sqlite.js';
import type { SessionOwner, SessionStore } from '../../src/store/types.js';
import { ChildProcess } from '../support/child.js';
import { describePostgres, freshSchema, openPostgresStore } from '../support/postgres.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const script = fileURLToPath(new URL('./children/owner-child.js', import.meta.url));
type Answer = { ok: boolean; epoch?: number; seq?: number; code?: string; heartbeating?: boolean };
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A lease long enough that a loaded machine still heartbeats within it, short enough to try across many lengths of. */
const LIVE_LEASE_MS = 1_500;
const DEAD_LEASE_MS = 200;

interface Target {
  readonly args: (session: string) => string[];
  open(): Promise<SessionStore>;
}

async function startOwner(target: Target, session: string, leaseMs: number): Promise<ChildProcess> {
  const child = new ChildProcess(script, target.args(session));
  assert.deepEqual(await child.next(), { ready: true }, child.stderr);
  child.send(`acquire-lease ${leaseMs}`);
  const acquired = await child.next<Answer>();
  assert.equal(acquired.ok, true, JSON.stringify(acquired));
  assert.equal(acquired.epoch, 1);
  return child;
}

function leaseCases(target: () => Target): void {
  it("a live, heartbeating owner in another process is never taken over by takeover 'expired'", async () => {
    const child = await startOwner(target(), 's-live', LIVE_LEASE_MS);
    const store = await target().open();
    // The recovering host keeps trying across several lease lengths: the heartbeat keeps the lease alive.
    let refusals = 0;
    for (let attempt = 0; attempt < 12; attempt++) {
      await assert.rejects(store.acquire('s-live', { owner: 'recovering', takeover: 'expired' }), (error: unknown) => {
        assert.ok(error instanceof SessionBusyError, String(error));
        assert.equal(error.holder, 'owner');
        assert.equal(typeof error.leaseExpiresAt, 'number');
        return true;
      });
      refusals++;
      assert.deepEqual(await store.listExpiredSessions(), []);
      await pause(LIVE_LEASE_MS / 4);
    }
    assert.equal(refusals, 12);
    // The owner is still the owner: it appends at epoch 1 and its heartbeat still runs.
    child.send('append still-mine');
    const appended = await child.next<Answer>();
    assert.equal(appended.ok, true, JSON.stringify(appended));
    child.send('heartbeating');
    assert.equal((await child.next<Answer>()).heartbeating, true);
    const [summary] = await store.listSessions();
    assert.equal(summary!.epoch, 1);
    child.send('exit');
    await child.exited;
    await store.close();
  });

  it("a SIGKILLed owner's session is listed as expired and taken over once its lease ran out", async () => {
    const child = await startOwner(target(), 's-killed', DEAD_LEASE_MS);
    child.send('append-and-die last-words');
    const last = await child.next<Answer>();
    assert.equal(last.ok, true);
    assert.equal((await child.exited).signal, 'SIGKILL');
    const store = await target().open();
    // Keep trying, as a recovery loop would: refusals (while the lease lasts) are SessionBusy, then it succeeds.
    let recovered: SessionOwner | undefined;
    while (!recovered) {
      try {
        recovered = await store.acquire('s-killed', { owner: 'recovering', takeover: 'expired' });
      } catch (error) {
        assert.ok(error instanceof SessionBusyError, String(error));
        await pause(DEAD_LEASE_MS / 4);
      }
    }
    assert.equal(recovered.epoch, 2);
    const history = await store.loadHistory('s-killed');
    assert.deepEqual(history.map((e) => (e.kind as { text?: string }).text), ['last-words']);
    const [summary] = await store.listSessions();
    assert.equal(summary!.owner, 'recovering');
    assert.equal(summary!.leaseExpired, false);
    await recovered.release();
    await store.close();
  });
}

describe('SQLite leases across real processes', () => {
  const path = tempDbPath(tempDir());
  leaseCases(() => ({ args: (session) => [path, session, 'owner'], open: async () => openSqliteStore(path) }));
});

describePostgres('PostgreSQL leases across real processes', (url) => {
  const schema = freshSchema();
  leaseCases(() => ({ args: (session) => [url, session, 'owner', schema], open: () => openPostgresStore(url, { schema }) }));
});

describe('an acquire refused by a holder of its own name', () => {
  it('says that an earlier acquire under the name, whose answer was lost, may hold the session, and how to take it', async () => {
    const store = openSqliteStore(tempDbPath(tempDir(), 'journal'));
    // What a host sees after an acquire whose commit landed and whose answer was lost: the session is held under its
    // own name, by an owner object it never got.
    await store.acquire('s', { owner: 'host-1' });
    await assert.rejects(store.acquire('s', { owner: 'host-1' }), (error: unknown) => error instanceof SessionBusyError && error.holder === 'host-1' &&
      /is held by host-1 \(epoch 1\); its lease runs until .*\. That is the name this acquire gives: an owner acquired under it and not released holds the session .*takeover 'expired' once its lease runs out/.test(error.message));
    await assert.rejects(store.acquire('s', { owner: 'host-2' }), (error: unknown) => error instanceof SessionBusyError && !/That is the name/.test(error.message), 'another name: the plain refusal');
    await store.close();
  });
});
