/** How openSqliteStore treats its path: typed errors that name it, nothing created that was not asked for. */
import assert from 'node:assert/strict';
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { StoreClosedError, StorePathError, StoreUnavailableError } from '../../src/errors.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { mapSqliteError } from '../../src/store/sqlite/errors.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir();

function pathError(code: string, path: string) {
  return (error: unknown) => {
    assert.ok(error instanceof StorePathError, `expected StorePathError, got ${String(error)}`);
    assert.equal(error.code, code);
    assert.equal(error.path, path);
    assert.ok(error.message.includes(path), 'the message names the path');
    return true;
  };
}

describe('openSqliteStore: paths', () => {
  it('a path in a missing directory: store_directory_missing, and no directory is created', () => {
    const path = join(dir, 'no-such-dir', 'journal.db');
    assert.throws(() => openSqliteStore(path), pathError('store_directory_missing', path));
    assert.equal(existsSync(join(dir, 'no-such-dir')), false);
  });

  it('a path that is not one (not a string, empty, a NUL byte) and a bad busy timeout: invalid_input, and nothing is created', () => {
    const folder = join(dir, 'nul-test');
    mkdirSync(folder);
    // SQLite stops reading a path at a NUL byte: it used to create a journal at the path cut there ('nul-test/a').
    assert.throws(() => openSqliteStore(join(folder, 'a\u0000b.db')), { name: 'InvalidInputError', field: 'path', message: /NUL byte/ });
    assert.throws(() => openSqliteStore(''), { name: 'InvalidInputError', field: 'path', message: /empty string/ });
    for (const bad of [undefined, 5, null]) {
      assert.throws(() => openSqliteStore(bad as unknown as string), { name: 'InvalidInputError', field: 'path' });
    }
    for (const busyTimeoutMs of [-1, 1.5, 2 ** 31, Number.NaN]) {
      assert.throws(() => openSqliteStore(join(folder, 'b.db'), { busyTimeoutMs }), { name: 'InvalidInputError', field: 'busyTimeoutMs' });
    }
    assert.deepEqual(readdirSync(folder), []);
  });

  it('a file that is not SQLite: store_not_sqlite, and the file is left as it was', () => {
    const path = tempDbPath(dir, 'text');
    writeFileSync(path, 'plain words, long enough to cover the sixteen bytes of a header\n');
    const before = readFileSync(path);
    assert.throws(() => openSqliteStore(path), pathError('store_not_sqlite', path));
    assert.throws(() => openSqliteStore(path, { mustExist: true }), pathError('store_not_sqlite', path));
    assert.deepEqual(readFileSync(path), before);
    const short = tempDbPath(dir, 'short');
    writeFileSync(short, 'SQL');
    assert.throws(() => openSqliteStore(short), pathError('store_not_sqlite', short));
    assert.throws(() => openSqliteStore(dir), pathError('store_not_sqlite', dir));
  });

  it('a journal file with a second hard link: store_hard_linked at every open, the file left as it was; it opens again once the link is gone', async () => {
    const path = tempDbPath(dir, 'linked');
    const first = openSqliteStore(path);
    await (await first.acquire('s', { owner: 'h' })).append([{ turnId: 't', kind: { type: 'user_message', text: 'kept' } }]);
    await first.close();
    const link = tempDbPath(dir, 'link');
    linkSync(path, link);
    const before = readFileSync(path);
    for (const name of [path, link]) {
      for (const options of [{}, { mustExist: true }, { readonly: true }]) {
        assert.throws(() => openSqliteStore(name, options), (error: unknown) => {
          assert.ok(pathError('store_hard_linked', name)(error));
          assert.match((error as Error).message, /2 hard links/);
          return true;
        });
      }
    }
    assert.deepEqual(readFileSync(path), before);
    assert.equal(existsSync(`${link}-wal`), false, 'nothing was opened through the second name');
    unlinkSync(link);
    const again = openSqliteStore(path, { readonly: true });
    assert.equal((await again.loadHistory('s')).length, 1);
    await again.close();
  });

  // u147 #1: SQLite, opening an empty file, deleted the write-ahead log beside it, the only copy of the journal, and a
  // host restarting on it started a fresh journal and made its payments again.
  it('an empty or missing file beside a write-ahead log that holds commits: store_log_without_database, the log left as it was', async () => {
    const path = tempDbPath(dir, 'logged');
    const host = openSqliteStore(path);
    await (await host.acquire('s', { owner: 'h' })).append([{ turnId: 't', kind: { type: 'user_message', text: 'only in the log' } }]);
    const lost = tempDbPath(dir, 'lost');
    writeFileSync(`${lost}-wal`, readFileSync(`${path}-wal`));
    await host.close();
    const log = readFileSync(`${lost}-wal`);
    assert.ok(log.length > 0);
    for (const state of ['missing', 'empty'] as const) {
      if (state === 'empty') writeFileSync(lost, '');
      for (const options of [{}, { mustExist: true }, { readonly: true }]) {
        assert.throws(() => openSqliteStore(lost, options), (error: unknown) => {
          assert.ok(pathError('store_log_without_database', lost)(error));
          assert.match((error as Error).message, new RegExp(`is ${state}, but its write-ahead log .* holds ${log.length} bytes of commits`));
          return true;
        });
      }
      assert.deepEqual(readFileSync(`${lost}-wal`), log, 'the log is left as it was');
      assert.equal(existsSync(lost), state === 'empty', 'nothing was created');
    }
    writeFileSync(`${lost}-wal`, '');
    const fresh = openSqliteStore(lost);
    assert.deepEqual(await fresh.listSessions(), [], 'an empty log beside an empty file is a new journal');
    await fresh.close();
  });

  // u148 #2, #3: the same, through a symbolic link to the file (SQLite keeps the log beside the link's target); and a
  // file copied or renamed without its log after a crash (its first page alone, the journal all in the log).
  it('a log without its file is refused through a symbolic link, and a journal file without its log is refused', async () => {
    const path = tempDbPath(dir, 'crashed');
    const host = openSqliteStore(path);
    await (await host.acquire('s', { owner: 'h' })).append([{ turnId: 't', kind: { type: 'user_message', text: 'only in the log' } }]);
    const log = readFileSync(`${path}-wal`);
    const firstPage = readFileSync(path);
    await host.close();
    const target = tempDbPath(dir, 'target');
    const link = tempDbPath(dir, 'link-to-target');
    symlinkSync(target, link);
    writeFileSync(`${target}-wal`, log);
    for (const state of ['missing', 'empty'] as const) {
      if (state === 'empty') writeFileSync(target, '');
      for (const options of [{}, { readonly: true }]) {
        assert.throws(() => openSqliteStore(link, options), pathError('store_log_without_database', link));
      }
      assert.deepEqual(readFileSync(`${target}-wal`), log, 'the log beside the target is left as it was');
    }
    const copy = tempDbPath(dir, 'copied-alone');
    writeFileSync(copy, firstPage);
    for (const options of [{}, { readonly: true }]) {
      assert.throws(() => openSqliteStore(copy, options), (error: unknown) => {
        assert.ok(pathError('store_log_without_database', copy)(error));
        assert.match((error as Error).message, /holding its first page alone, with no write-ahead log .* copied or moved without its -wal/);
        return true;
      });
    }
    assert.deepEqual(readFileSync(copy), firstPage, 'the file is left as it was');
    writeFileSync(`${copy}-wal`, log);
    const whole = openSqliteStore(copy, { readonly: true });
    assert.equal((await whole.loadHistory('s')).length, 1, 'copied with its log, it is the journal');
    await whole.close();
  });

  it('a file that is not SQLite beside a log that holds bytes says to keep the log', () => {
    const zeroed = tempDbPath(dir, 'zeroed');
    writeFileSync(zeroed, Buffer.alloc(4096));
    writeFileSync(`${zeroed}-wal`, Buffer.alloc(2048, 1));
    assert.throws(() => openSqliteStore(zeroed), (error: unknown) => {
      assert.ok(pathError('store_not_sqlite', zeroed)(error));
      assert.match((error as Error).message, /its write-ahead log .* holds 2048 bytes, perhaps the journal's only copy: keep it/);
      return true;
    });
  });

  // u147 #2: read-only, in a directory it could not write, the reader was told of a write it never asked for.
  it('SQLite\'s read-only failures say what SQLite needs to write, even to read', () => {
    const mapped = mapSqliteError(Object.assign(new Error('attempt to write a readonly database'), { code: 'SQLITE_READONLY_CANTINIT' }), 's');
    assert.ok(mapped instanceof StoreUnavailableError && mapped.code === 'store_failure');
    assert.match(mapped.message, /\(SQLITE_READONLY_CANTINIT\): the file, its -wal or -shm, or its directory is not writable .* copy the file with its -wal to a writable directory/);
  });

  it('mustExist: a missing file is store_not_found and is not created; an empty database is store_not_journal', async () => {
    const missing = tempDbPath(dir, 'missing');
    assert.throws(() => openSqliteStore(missing, { mustExist: true }), pathError('store_not_found', missing));
    assert.throws(() => openSqliteStore(missing, { readonly: true }), pathError('store_not_found', missing));
    assert.equal(existsSync(missing), false);
    const empty = tempDbPath(dir, 'empty');
    new Database(empty).close();
    const before = readFileSync(empty);
    assert.throws(() => openSqliteStore(empty, { mustExist: true }), pathError('store_not_journal', empty));
    assert.deepEqual(readFileSync(empty), before);
    const store = openSqliteStore(empty);
    await store.close();
    const again = openSqliteStore(empty, { mustExist: true });
    assert.deepEqual(await again.listSessions(), []);
    await again.close();
  });

  it('readonly: reads a journal, refuses every write, and refuses a file that holds no journal', async () => {
    const path = tempDbPath(dir, 'ro');
    const writer = openSqliteStore(path);
    const owner = await writer.acquire('s', { owner: 'h' });
    await owner.append([{ turnId: 'turn' as never, kind: { type: 'user_message', text: 'kept' } }]);
    await writer.close();
    const reader = openSqliteStore(path, { readonly: true });
    assert.equal((await reader.loadHistory('s')).length, 1);
    await assert.rejects(reader.acquire('s', { owner: 'other', takeover: true }), (error: unknown) => {
      assert.ok(error instanceof StoreUnavailableError);
      assert.equal(error.code, 'store_failure');
      return true;
    });
    assert.equal((await reader.loadHistory('s')).length, 1);
    await reader.close();
    const other = tempDbPath(dir, 'other');
    const raw = new Database(other);
    raw.exec('CREATE TABLE customers (id INTEGER PRIMARY KEY)');
    raw.close();
    assert.throws(() => openSqliteStore(other, { readonly: true }), pathError('store_not_journal', other));
  });

  it('after close(): store_closed naming the file, on the store and on its owners', async () => {
    mkdirSync(join(dir, 'closed'), { recursive: true });
    const path = join(dir, 'closed', 'journal.db');
    const store = openSqliteStore(path);
    const owner = await store.acquire('s', { owner: 'h' });
    await store.close();
    for (const call of [() => store.loadHistory('s'), () => owner.append([])]) {
      await assert.rejects(call(), (error: unknown) => {
        assert.ok(error instanceof StoreClosedError);
        assert.equal(error.code, 'store_closed');
        assert.equal(error.location, path);
        assert.ok(error.message.includes(path));
        return true;
      });
    }
  });
});
