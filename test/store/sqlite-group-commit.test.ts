/** Group commit on SQLite (docs/design.md#group-commit): writes asked for together share one transaction and one fsync. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { afterEach, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { setFaultHook } from '../../src/fault.js';
import type { SessionId } from '../../src/ids.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { GROUP_MAX, type QueuedWrite, runGroup } from '../../src/store/sqlite/group-commit.js';
import type { SessionOwner, SessionStore } from '../../src/store/types.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir();
const message = (text: string) => ({ turnId: 'turn-1', kind: { type: 'user_message' as const, text } });

/** Empties the file's write-ahead log (its frames moved into the database), so the next commits are counted alone. */
function resetWal(path: string): void {
  const side = new Database(path);
  try {
    const [result] = side.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>;
    assert.equal(result?.busy, 0, 'the checkpoint ran');
  } finally {
    side.close();
  }
}

/** The commits in the file's write-ahead log: frames whose header records the database size after a commit. */
function walCommits(path: string): number {
  const wal = readFileSync(`${path}-wal`);
  const pageSize = wal.readUInt32BE(8);
  let commits = 0;
  for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
    if (wal.readUInt32BE(at + 4) !== 0) commits += 1;
  }
  return commits;
}

const texts = async (store: SessionStore, sessionId: string) =>
  (await store.loadHistory(sessionId)).flatMap((e) => (e.kind.type === 'user_message' ? [e.kind.text] : []));

async function owners(store: SessionStore, count: number): Promise<SessionOwner[]> {
  const list: SessionOwner[] = [];
  for (let k = 0; k < count; k++) list.push(await store.acquire(`s${k}`, { owner: 'host' }));
  return list;
}

describe('SQLite group commit', () => {
  afterEach(() => setFaultHook(null));

  it('commits the writes of several sessions asked for together in one transaction, each acknowledged once durable', async () => {
    const path = tempDbPath(dir, 'together');
    const store = openSqliteStore(path);
    const held = await owners(store, 8);
    resetWal(path);
    await Promise.all(held.map((owner, k) => owner.append([message(`hello ${k}`)])));
    assert.equal(walCommits(path), 1, 'eight appends, one commit');
    // Asked for one after another, each write is its own commit.
    await held[0]!.append([message('later')]);
    await held[1]!.append([message('later')]);
    assert.equal(walCommits(path), 3);
    await store.close();
    const reopened = openSqliteStore(path);
    for (let k = 0; k < 8; k++) assert.deepEqual(await texts(reopened, `s${k}`), k < 2 ? [`hello ${k}`, 'later'] : [`hello ${k}`]);
    await reopened.close();
  });

  it('splits more writes than a group holds into several commits, settling each write once its own commit returned', async () => {
    const path = tempDbPath(dir, 'many');
    const store = openSqliteStore(path);
    const held = await owners(store, GROUP_MAX + 6);
    resetWal(path);
    const events = await Promise.all(held.map((owner, k) => owner.append([message(`hello ${k}`)])));
    assert.equal(walCommits(path), 2, `${GROUP_MAX} writes, then 6`);
    assert.deepEqual(events.map((written) => written[0]?.seq), held.map(() => 0));
    for (const k of [0, GROUP_MAX - 1, GROUP_MAX, GROUP_MAX + 5]) assert.deepEqual(await texts(store, `s${k}`), [`hello ${k}`]);
    await store.close();
  });

  it('rolls back a write that fails inside a group alone: the others commit', async () => {
    const path = tempDbPath(dir, 'alone');
    const store = openSqliteStore(path);
    const held = await owners(store, 3);
    resetWal(path);
    let seen = 0;
    setFaultHook((point) => {
      // The group runs its writes in the order they were asked for: the second is s1's.
      if (point === 'commit:before' && ++seen === 2) throw new Error('the write of s1 fails after writing its rows');
    });
    const settled = await Promise.allSettled(held.map((owner, k) => owner.append([message(`hello ${k}`)])));
    setFaultHook(null);
    assert.deepEqual(settled.map((s) => s.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.match(String((settled[1] as PromiseRejectedResult).reason), /the write of s1 fails/);
    assert.equal(walCommits(path), 1, 'the two others shared one commit');
    assert.deepEqual(await texts(store, 's0'), ['hello 0']);
    assert.deepEqual(await texts(store, 's1'), []);
    assert.deepEqual(await texts(store, 's2'), ['hello 2']);
    // The failed write consumed nothing: its owner writes on from the same head.
    await held[1]!.append([message('again')]);
    assert.deepEqual(await texts(store, 's1'), ['again']);
    await store.close();
  });

  it('fails every write of a group that cannot take the write lock, and writes none of them', async () => {
    const path = tempDbPath(dir, 'busy');
    const store = openSqliteStore(path, { busyTimeoutMs: 50 });
    const held = await owners(store, 3);
    const blocker = new Database(path);
    blocker.exec('BEGIN IMMEDIATE');
    const settled = await Promise.allSettled(held.map((owner, k) => owner.append([message(`hello ${k}`)])));
    blocker.exec('ROLLBACK');
    blocker.close();
    for (const s of settled) {
      assert.equal(s.status, 'rejected');
      assert.equal((s as PromiseRejectedResult).reason.code, 'store_busy');
    }
    for (let k = 0; k < 3; k++) assert.deepEqual(await texts(store, `s${k}`), []);
    await Promise.all(held.map((owner, k) => owner.append([message(`hello ${k}`)])));
    for (let k = 0; k < 3; k++) assert.deepEqual(await texts(store, `s${k}`), [`hello ${k}`]);
    await store.close();
  });

  it('keeps no write of a group when SQLite rolls the whole transaction back, and keeps the others when one write fails', () => {
    const db = new Database(':memory:');
    db.exec('CREATE TABLE t (x INTEGER)');
    const insert = db.prepare('INSERT INTO t VALUES (?)');
    const count = () => (db.prepare('SELECT count(*) AS n FROM t').get() as { n: number }).n;
    const write = (x: number): QueuedWrite => ({
      sessionId: `s${x}` as SessionId,
      reads: {},
      decide: () => ({ result: x }),
      resolve: () => undefined,
      reject: () => undefined,
    });
    // One write fails in its savepoint: only it is rolled back.
    const failing = db.transaction((x: number) => {
      insert.run(x);
      if (x === 2) throw new Error('this write is refused');
      return x;
    });
    const group = [write(1), write(2), write(3)];
    db.transaction((g: QueuedWrite[]) => runGroup(db, g, (w) => failing(Number(w.sessionId.slice(1))))).immediate(group);
    assert.deepEqual(group.map((w) => w.outcome?.ok), [true, false, true]);
    assert.deepEqual(db.prepare('SELECT x FROM t ORDER BY x').all(), [{ x: 1 }, { x: 3 }]);
    // SQLite ends the whole transaction (as it does on a full disk or an I/O error): the group fails as one.
    db.exec('DELETE FROM t');
    const fatal = db.transaction((x: number) => {
      insert.run(x);
      if (x === 2) {
        db.exec('ROLLBACK');
        throw new Error('database or disk is full');
      }
      return x;
    });
    assert.throws(
      () => db.transaction((g: QueuedWrite[]) => runGroup(db, g, (w) => fatal(Number(w.sessionId.slice(1))))).immediate([write(1), write(2), write(3)]),
      /disk is full/,
    );
    assert.equal(count(), 0, 'the first write, done before the failure, is not kept either');
    assert.equal(db.inTransaction, false);
    db.close();
  });
});
