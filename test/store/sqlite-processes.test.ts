import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { openSqliteStore, SqliteIdempotencyStore } from '../../src/sqlite.js';
import { newTurnId } from '../../src/ids.js';
import { StoreBusyError } from '../../src/errors.js';
import { ChildProcess } from '../support/child.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const script = fileURLToPath(new URL('./children/owner-child.js', import.meta.url));
const writeLock = fileURLToPath(new URL('./children/write-lock-child.js', import.meta.url));
const groupWriter = fileURLToPath(new URL('./children/group-writer-child.js', import.meta.url));
const dir = tempDir();
const text = (t: string) => ({ turnId: newTurnId(), kind: { type: 'user_message' as const, text: t } });

async function startChild(path: string, session: string, name: string): Promise<ChildProcess> {
  const child = new ChildProcess(script, [path, session, name]);
  assert.deepEqual(await child.next(), { ready: true });
  return child;
}

describe('SQLite ownership across real processes', () => {
  it('a paused owner (SIGSTOP) is fenced by a takeover and its append is rejected after SIGCONT', async () => {
    const path = tempDbPath(dir);
    const child = await startChild(path, 's-pause', 'child');
    child.send('acquire 0');
    assert.equal((await child.next()).epoch, 1);
    child.send('append before-pause');
    assert.equal((await child.next()).seq, 0);
    child.proc.kill('SIGSTOP');
    const store = openSqliteStore(path);
    const parent = await store.acquire('s-pause', { owner: 'parent', takeover: true });
    assert.equal(parent.epoch, 2);
    await parent.append([text('by parent')]);
    child.proc.kill('SIGCONT');
    child.send('append after-resume');
    const answer = await child.next();
    assert.equal(answer.ok, false);
    assert.equal(answer.code, 'stale_owner');
    const history = await store.loadHistory('s-pause');
    assert.deepEqual(history.map((e) => (e.kind as { text: string }).text), ['before-pause', 'by parent']);
    child.send('exit');
    await child.exited;
    await store.close();
  });

  it('processes creating one new journal at the same moment all open it (none mistakes it for a foreign database)', async () => {
    for (let round = 0; round < 8; round++) {
      const path = tempDbPath(dir);
      const children = Array.from({ length: 6 }, (_, i) => new ChildProcess(script, [path, 's-new', `opener-${i}`]));
      const answers = await Promise.allSettled(children.map((c) => c.next()));
      for (const c of children) c.send('exit');
      await Promise.all(children.map((c) => c.exited));
      for (const [i, a] of answers.entries()) {
        assert.equal(a.status, 'fulfilled', `round ${round}, opener ${i}: ${a.status === 'rejected' ? String(a.reason) : ''}`);
      }
    }
  });

  it('a new journal whose write lock another process holds opens once the lock is released, within the busy timeout', async () => {
    const path = tempDbPath(dir);
    const holder = new ChildProcess(writeLock, [path, '300']);
    assert.deepEqual(await holder.next(), { held: true });
    // Switching the file to WAL is the first write; SQLite refuses it at once, without its busy handler, while the
    // lock is held. The open waits it out like any write.
    const store = openSqliteStore(path, { busyTimeoutMs: 20_000 });
    assert.deepEqual(await holder.next(), { released: true });
    const owner = await store.acquire('s-locked', { owner: 'parent' });
    await owner.append([text('after the lock')]);
    assert.deepEqual((await store.loadHistory('s-locked')).map((e) => e.seq), [0]);
    await store.close();
    await holder.exited;
  });

  it('a write lock held past the busy timeout fails the open with StoreBusyError, and a later open creates the journal', async () => {
    const path = tempDbPath(dir);
    const holder = new ChildProcess(writeLock, [path, '600000']);
    assert.deepEqual(await holder.next(), { held: true });
    assert.throws(() => openSqliteStore(path, { busyTimeoutMs: 200 }), (error: unknown) => error instanceof StoreBusyError && error.code === 'store_busy');
    holder.proc.kill('SIGKILL');
    await holder.exited;
    const store = openSqliteStore(path);
    await (await store.acquire('s-later', { owner: 'parent' })).append([text('created')]);
    assert.deepEqual((await store.loadHistory('s-later')).map((e) => e.seq), [0]);
    await store.close();
  });

  it('the idempotency helper opening a new business database whose write lock another process holds waits for it too', async () => {
    const path = tempDbPath(dir);
    const holder = new ChildProcess(writeLock, [path, '300']);
    assert.deepEqual(await holder.next(), { held: true });
    const business = new SqliteIdempotencyStore(path, { busyTimeoutMs: 20_000 });
    assert.deepEqual(await holder.next(), { released: true });
    const request = { sessionId: 's-1', operation: { taskId: 't-1', key: 'k-1' }, arguments: { n: 1 } };
    assert.deepEqual(business.run(request, () => 'written'), { result: 'written', replayed: false });
    assert.equal(business.count(), 1);
    business.close();
    await holder.exited;
  });

  it('racing takeovers: epochs strictly increase, only the last owner appends, the journal verifies', async () => {
    const path = tempDbPath(dir);
    const n = 6;
    const children = await Promise.all(Array.from({ length: n }, (_, i) => startChild(path, 's-race', `racer-${i}`)));
    for (const c of children) c.send('acquire 1');
    const epochs = (await Promise.all(children.map((c) => c.next()))).map((a) => a.epoch as number);
    assert.deepEqual([...epochs].sort((a, b) => a - b), Array.from({ length: n }, (_, i) => i + 1), 'each epoch went to exactly one owner');
    for (const c of children) c.send('append racing');
    const answers = await Promise.all(children.map((c) => c.next()));
    const winners = answers.map((a, i) => ({ a, epoch: epochs[i]! })).filter(({ a }) => a.ok);
    assert.equal(winners.length, 1);
    assert.equal(winners[0]!.epoch, n, 'only the highest epoch may append');
    for (const [i, a] of answers.entries()) if (!a.ok) assert.equal(a.code, 'stale_owner', `racer ${i}`);
    const store = openSqliteStore(path);
    const history = await store.loadHistory('s-race');
    assert.deepEqual(history.map((e) => e.seq), [0]);
    for (const c of children) c.send('exit');
    await Promise.all(children.map((c) => c.exited));
    await store.close();
  });

  it('appends of many sessions sharing commits: every one acknowledged before a SIGKILL is in the journal', async () => {
    for (let round = 0; round < 4; round++) {
      const path = tempDbPath(dir);
      const child = new ChildProcess(groupWriter, [path, '8']);
      assert.deepEqual(await child.next(), { ready: true });
      const acknowledged: Array<{ session: string; seq: number; text: string }> = [];
      // Killed at a different moment each round, once some hundreds of appends have returned.
      const target = 200 + round * 150;
      while (acknowledged.length < target) acknowledged.push(await child.next());
      child.proc.kill('SIGKILL');
      assert.equal((await child.exited).signal, 'SIGKILL');
      // Lines printed before the kill and not yet read are acknowledged appends too.
      for (;;) {
        const line = await child.next<{ session: string; seq: number; text: string }>().catch(() => null);
        if (line === null) break;
        acknowledged.push(line);
      }
      const store = openSqliteStore(path);
      for (let k = 0; k < 8; k++) {
        // Every row verifies; the session's messages are its appends in order, each acknowledged one at its seq.
        const history = await store.loadHistory(`s${k}`);
        const texts = history.flatMap((e) => (e.kind.type === 'user_message' ? [{ seq: e.seq, text: e.kind.text }] : []));
        assert.deepEqual(texts.map((t) => t.text), texts.map((_, n) => `s${k}-${n}`));
        for (const a of acknowledged.filter((x) => x.session === `s${k}`)) {
          assert.deepEqual(texts.find((t) => t.seq === a.seq), { seq: a.seq, text: a.text }, `round ${round}: ${a.text} was acknowledged`);
        }
      }
      await store.close();
    }
  });

  it('an append that returned survives a SIGKILL right after it', async () => {
    const path = tempDbPath(dir);
    const child = await startChild(path, 's-kill', 'child');
    child.send('acquire 0');
    await child.next();
    child.send('append-and-die durable');
    const answer = await child.next();
    const exit = await child.exited;
    assert.equal(exit.signal, 'SIGKILL');
    const store = openSqliteStore(path);
    const history = await store.loadHistory('s-kill');
    assert.equal(history.length, 1);
    assert.equal(history[0]!.eventId, answer.eventId);
    await assert.rejects(store.acquire('s-kill', { owner: 'recovery' }), { code: 'session_busy' });
    const recovery = await store.acquire('s-kill', { owner: 'recovery', takeover: true });
    assert.equal(recovery.epoch, 2);
    await store.close();
  });
});
