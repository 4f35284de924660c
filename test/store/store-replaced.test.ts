/**
 * A SQLite journal deleted or replaced while a store has it open: the store refuses to write (store_replaced), so a
 * second host cannot quietly start the session over at epoch 1 while the first host's acknowledged appends vanish.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { describe, it } from 'node:test';
import { StoreReplacedError } from '../../src/errors.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir('jingwei-store-replaced-');
const message = (text: string) => [{ turnId: 't', kind: { type: 'user_message' as const, text } }];
/** The store's module as another Node process imports it. */
const sqlite = new URL('../../src/sqlite.js', import.meta.url).href;

/** Another process opens the journal, appends `n` events to `sessionId` and closes it. */
function writeFromAnotherProcess(path: string, sessionId: string, n: number): void {
  execFileSync(process.execPath, ['--input-type=module', '-e', `
    const { openSqliteStore } = await import(${JSON.stringify(sqlite)});
    const store = openSqliteStore(${JSON.stringify(path)});
    const owner = await store.acquire(${JSON.stringify(sessionId)}, { owner: 'host-b' });
    for (let i = 0; i < ${n}; i++) await owner.append([{ turnId: 't', kind: { type: 'user_message', text: 'b' + i } }]);
    await owner.release();
    await store.close();
  `]);
}

/** How many events sessions "a" and "b" hold, as a fresh process reads them: "5 30". */
function countsFromAnotherProcess(path: string): string {
  return execFileSync(process.execPath, ['--input-type=module', '-e', `
    const { openSqliteStore } = await import(${JSON.stringify(sqlite)});
    const store = openSqliteStore(${JSON.stringify(path)});
    console.log((await store.loadHistory('a')).length, (await store.loadHistory('b')).length);
    await store.close();
  `], { encoding: 'utf8' }).trim();
}

describe('a SQLite store whose file is removed or replaced while open', () => {
  it('a deleted journal: every later write is refused, and the first host loses nothing it was told was written', async () => {
    const path = tempDbPath(dir);
    const first = openSqliteStore(path);
    const owner = await first.acquire('s', { owner: 'host-1' });
    await owner.append(message('acknowledged'));
    rmSync(path);
    rmSync(`${path}-wal`, { force: true });
    rmSync(`${path}-shm`, { force: true });
    await assert.rejects(owner.append(message('after the delete')), (error: unknown) => {
      assert.ok(error instanceof StoreReplacedError);
      assert.equal(error.code, 'store_replaced');
      assert.match(error.message, /was deleted/);
      return true;
    });
    await assert.rejects(first.acquire('s', { owner: 'host-1', takeover: true }), StoreReplacedError);
    // A second host on the path gets a fresh file; the first host can no longer write anything it would lose.
    const second = openSqliteStore(path);
    const fresh = await second.acquire('s', { owner: 'host-2' });
    assert.equal(fresh.epoch, 1);
    await assert.rejects(owner.append(message('still refused')), StoreReplacedError);
    await second.close();
    await first.close();
  });

  it('a journal replaced by another file (renamed over it) is refused', async () => {
    const path = tempDbPath(dir);
    const other = tempDbPath(dir);
    const seed = openSqliteStore(other);
    await (await seed.acquire('x', { owner: 'h' })).release();
    await seed.close();
    const store = openSqliteStore(path);
    const owner = await store.acquire('s', { owner: 'host-1' });
    await owner.append(message('one'));
    copyFileSync(other, `${other}.copy`);
    renameSync(`${other}.copy`, path);
    await assert.rejects(owner.append(message('two')), /replaced by another file/);
    await store.close();
  });

  // u148 #4: a host whose log was deleted under it closed its store and never ended: as it was about to, it started a
  // guard over the file, which could not open it and ended, and the next turn started another, for ever.
  it('a host whose write-ahead log was deleted under it ends once it closes its store', async () => {
    const path = tempDbPath(dir);
    const host = spawn(process.execPath, ['--input-type=module', '-e', `
      const { rmSync } = await import('node:fs');
      const { openSqliteStore } = await import(${JSON.stringify(sqlite)});
      const store = openSqliteStore(${JSON.stringify(path)});
      const owner = await store.acquire('s', { owner: 'host-1' });
      await owner.append([{ turnId: 't', kind: { type: 'user_message', text: 'one' } }]);
      rmSync(${JSON.stringify(`${path}-wal`)});
      await owner.append([{ turnId: 't', kind: { type: 'user_message', text: 'two' } }]).catch((e) => process.stdout.write(e.code + '\\n'));
      await owner.release().catch(() => undefined);
      await store.close();
      process.stdout.write('closed\\n');
    `], { stdio: ['ignore', 'pipe', 'ignore'] });
    let said = '';
    host.stdout.setEncoding('utf8');
    host.stdout.on('data', (text: string) => { said += text; });
    // A watchdog, not a timing: a host that never ends is killed, so the test fails instead of hanging.
    const watchdog = setTimeout(() => host.kill('SIGKILL'), 60_000);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => host.once('exit', (c, s) => resolve([c, s])));
    clearTimeout(watchdog);
    assert.match(said, /store_replaced\nclosed\n/);
    assert.deepEqual([code, signal], [0, null], 'it ended on its own');
  });

  it('a deleted write-ahead log is refused too', async () => {
    const path = tempDbPath(dir);
    const store = openSqliteStore(path);
    const owner = await store.acquire('s', { owner: 'host-1' });
    await owner.append(message('one'));
    rmSync(`${path}-wal`);
    await assert.rejects(owner.append(message('two')), /write-ahead log was deleted/);
    await store.close();
  });

  // u125 #2: with the -shm deleted, a second process opening the journal built an index of its own and wrote the log
  // beside the first host, which went on acknowledging calls until the file was damaged.
  it('a deleted or replaced shared-memory index (-shm) is refused too', async () => {
    const path = tempDbPath(dir);
    const store = openSqliteStore(path);
    const owner = await store.acquire('s', { owner: 'host-1' });
    await owner.append(message('one'));
    rmSync(`${path}-shm`);
    await assert.rejects(owner.append(message('two')), (error: unknown) => error instanceof StoreReplacedError && /shared-memory index \(-shm\) was deleted/.test(error.message));
    await assert.rejects(owner.append(message('three')), StoreReplacedError);
    await store.close();

    const replacedPath = tempDbPath(dir);
    const replaced = openSqliteStore(replacedPath);
    const holder = await replaced.acquire('s', { owner: 'host-1' });
    await holder.append(message('one'));
    copyFileSync(`${replacedPath}-shm`, `${replacedPath}-shm.copy`);
    renameSync(`${replacedPath}-shm.copy`, `${replacedPath}-shm`);
    await assert.rejects(holder.append(message('two')), /shared-memory index \(-shm\) was replaced by another file/);
    await replaced.close();
  });

  // u127 H1: opened through a symbolic link, the store looked for link.db-wal and link.db-shm, which SQLite never
  // makes (it keeps them beside the file the link names), so it checked neither, and the file was destroyed.
  it('opened through a symbolic link, it watches the -wal and -shm beside the real file', async () => {
    const real = tempDbPath(dir);
    const link = `${real}.link`;
    symlinkSync(real, link);
    const store = openSqliteStore(link);
    const owner = await store.acquire('s', { owner: 'host-1' });
    await owner.append(message('one'));
    rmSync(`${real}-shm`);
    await assert.rejects(owner.append(message('two')), /shared-memory index \(-shm\) was deleted/);
    await store.close();
  });

  // u127 H2, u128 H1, H2: refused, the first host's store was then closed, and its connection, holding the deleted
  // index, took itself for the last one: SQLite wrote its stale view of the log over the file, and another process's
  // acknowledged writes were gone; kept open instead, it was closed at the process's natural exit all the same; and a
  // second store opened in the same process shared its stale index and overwrote them while it ran.
  it('once its -shm was replaced, it is closed under another process\'s read lock and not opened again beside itself: the other process\'s events survive', async () => {
    const path = tempDbPath(dir);
    const store = openSqliteStore(path);
    const owner = await store.acquire('a', { owner: 'host-a' });
    for (let i = 0; i < 5; i++) await owner.append(message(`a${i}`));
    rmSync(`${path}-shm`);
    writeFromAnotherProcess(path, 'b', 30);
    // A second store of this process would share the first one's stale index: refused until the first is closed.
    assert.throws(() => openSqliteStore(path), (error: unknown) => error instanceof StoreReplacedError && /a store of this process has the file open, and its write-ahead log or index was replaced under it/.test(error.message));
    await assert.rejects(owner.append(message('refused')), StoreReplacedError);
    const warned: string[] = [];
    const onWarning = (warning: Error & { code?: string }) => void warned.push(String(warning.code));
    process.on('warning', onWarning);
    try {
      await store.close();
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    assert.deepEqual(warned, [], 'closed under the guard: nothing kept open');
    assert.equal(countsFromAnotherProcess(path), '5 30', 'another process reads every acknowledged event of both hosts');
    // Closed, the file opens again here with a view of its own.
    const again = openSqliteStore(path);
    assert.equal((await again.loadHistory('b')).length, 30);
    await again.close();
  });

  // u129 H1: a host that never closed its store ended on its own, better-sqlite3 closed the stale connection at the
  // process's end, and the other process's acknowledged events were gone; verify then said the journal was intact.
  for (const writesAfter of [false, true]) {
    it(`a host ${writesAfter ? 'refused a write' : 'idle'} after its -shm was replaced, ending on its own without closing its store, loses nothing of another process's`, async () => {
      const path = tempDbPath(dir);
      const go = `${path}.go`;
      const host = spawn(process.execPath, ['--input-type=module', '-e', `
        const { existsSync } = await import('node:fs');
        const { openSqliteStore } = await import(${JSON.stringify(sqlite)});
        const store = openSqliteStore(${JSON.stringify(path)});
        const owner = await store.acquire('a', { owner: 'host-a', heartbeat: false });
        for (let i = 0; i < 5; i++) await owner.append([{ turnId: 't', kind: { type: 'user_message', text: 'a' + i } }]);
        process.stdout.write('ready\\n');
        while (!existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 20));
        ${writesAfter ? "await owner.append([{ turnId: 't', kind: { type: 'user_message', text: 'refused' } }]).catch((e) => process.stdout.write(e.code + '\\n'));" : ''}
        // Ends here on its own: the store is never closed.
      `], { stdio: ['ignore', 'pipe', 'inherit'] });
      let said = '';
      host.stdout.setEncoding('utf8');
      host.stdout.on('data', (text: string) => { said += text; });
      const ended = new Promise<number | null>((resolve) => host.once('exit', resolve));
      while (!said.includes('ready')) await new Promise((resolve) => setTimeout(resolve, 20));
      rmSync(`${path}-shm`);
      writeFromAnotherProcess(path, 'b', 30);
      writeFileSync(go, '');
      assert.equal(await ended, 0);
      if (writesAfter) assert.match(said, /store_replaced/);
      // The guard the host left ends once the host has: wait for a fresh process to read both sessions whole.
      let counts = '';
      for (let tries = 0; tries < 50 && counts !== '5 30'; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        counts = countsFromAnotherProcess(path);
      }
      assert.equal(counts, '5 30', 'another process reads every acknowledged event of both hosts');
    });
  }

  it('once its directory has settled, a deleted or replaced write-ahead log or journal file is still refused', async () => {
    // After a while without changes in the directory, a store checks its files through the directory's change times
    // instead of a stat of each; deleting or renaming a file must still be noticed before the next write.
    const open = async () => {
      const path = tempDbPath(tempDir('jingwei-store-replaced-settled-'));
      const store = openSqliteStore(path);
      const owner = await store.acquire('s', { owner: 'host-1' });
      await owner.append(message('one'));
      return { path, store, owner };
    };
    const deleted = await open();
    const renamed = await open();
    const other = await open();
    const journal = await open();
    // Longer than a file system keeping whole seconds needs (docs/design.md#a-store-notices-its-file-was-replaced).
    await new Promise((resolve) => setTimeout(resolve, 2_700));
    for (const { owner } of [deleted, renamed, other, journal]) {
      await owner.append(message('two'));
      await owner.append(message('three'));
    }
    rmSync(`${deleted.path}-wal`);
    await assert.rejects(deleted.owner.append(message('four')), /write-ahead log was deleted/);
    copyFileSync(`${other.path}-wal`, `${renamed.path}-wal.copy`);
    renameSync(`${renamed.path}-wal.copy`, `${renamed.path}-wal`);
    await assert.rejects(renamed.owner.append(message('four')), /write-ahead log was replaced by another file/);
    copyFileSync(other.path, `${journal.path}.copy`);
    renameSync(`${journal.path}.copy`, journal.path);
    await assert.rejects(journal.owner.append(message('four')), /journal file was replaced by another file/);
    await other.owner.append(message('four'));
    assert.equal((await other.store.loadHistory('s')).length, 4);
    for (const { store } of [deleted, renamed, other, journal]) await store.close();
  });

  it('a journal opened by a relative path keeps working after the process changes directory, and is still watched', async () => {
    const path = tempDbPath(dir);
    const home = process.cwd();
    process.chdir(dirname(path));
    let store: ReturnType<typeof openSqliteStore>;
    try {
      store = openSqliteStore(basename(path));
    } finally {
      process.chdir(home);
    }
    const owner = await store.acquire('s', { owner: 'host-1' });
    process.chdir(tempDir('jingwei-elsewhere-'));
    try {
      await owner.append(message('written from another working directory'));
      assert.equal((await store.loadHistory('s')).length, 1);
      rmSync(path);
      await assert.rejects(owner.append(message('after the delete')), /was deleted/);
    } finally {
      process.chdir(home);
      await store.close();
    }
  });

  it('an untouched journal keeps working across many writes and reopens', async () => {
    const path = tempDbPath(dir);
    for (let round = 0; round < 3; round++) {
      const store = openSqliteStore(path);
      const owner = await store.acquire('s', { owner: `host-${round}`, takeover: true });
      for (let i = 0; i < 5; i++) await owner.append(message(`${round}-${i}`));
      await owner.release();
      await store.close();
    }
    const store = openSqliteStore(path);
    assert.equal((await store.loadHistory('s')).length, 15);
    await store.close();
  });
});
