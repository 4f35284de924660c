import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { InvalidInputError, StorePathError } from '../../errors.js';
import { describeValue } from '../../text.js';

const SQLITE_HEADER = Buffer.from('SQLite format 3\u0000', 'latin1');

/**
 * Refuses, before the driver touches anything, a path in a missing directory, a missing file with `mustExist`, and a
 * file that is not SQLite. `kind` names the file in the message (a journal, or a business database).
 */
export function checkSqlitePath(path: string, mustExist: boolean, kind = 'journal'): void {
  if (typeof path !== 'string') throw new InvalidInputError('path', `must be the path of a SQLite ${kind} file, got ${describeValue(path)}`);
  if (path === ':memory:') return;
  // SQLite would open a private temporary database for '' (a journal nobody can open again), and stop reading a
  // path at a NUL byte, so it would create a file under the path cut there.
  if (path === '') throw new InvalidInputError('path', `must be the path of a SQLite ${kind} file (or :memory:), got an empty string`);
  if (path.includes('\u0000')) throw new InvalidInputError('path', 'contains a NUL byte');
  if (!existsSync(path)) {
    refuseOrphanedLog(path, 'missing');
    if (mustExist) throw new StorePathError('store_not_found', path, 'no such file');
    const dir = dirname(path);
    if (!existsSync(dir)) throw new StorePathError('store_directory_missing', path, `the directory ${dir} does not exist`);
    return;
  }
  const stat = statSync(path);
  if (stat.isDirectory()) throw new StorePathError('store_not_sqlite', path, `is a directory, not a SQLite ${kind} file`);
  // SQLite keeps a database's write-ahead log beside the name it was opened by. Through another hard link a reader
  // sees none of the commits still in that log, and a writer starts a log of its own (docs/design.md#one-name-per-journal-file).
  if (stat.nlink > 1) {
    throw new StorePathError(
      'store_hard_linked',
      path,
      `has ${stat.nlink} hard links: SQLite keeps its write-ahead log beside the name it opened, so commits made through one name are not seen through another; remove the other links (a copy made while nothing writes is safe)`,
    );
  }
  const header = Buffer.alloc(SQLITE_HEADER.length);
  const fd = openSync(path, 'r');
  let read: number;
  try {
    read = readSync(fd, header, 0, header.length, 0);
  } finally {
    closeSync(fd);
  }
  // An empty file is a database SQLite has not written yet; anything else must start with SQLite's header.
  if (read === 0) refuseOrphanedLog(path, 'empty');
  if (read > 0 && !header.subarray(0, read).equals(SQLITE_HEADER.subarray(0, read))) {
    throw new StorePathError('store_not_sqlite', path, 'is not a SQLite database');
  }
  if (read > 0 && read < SQLITE_HEADER.length) throw new StorePathError('store_not_sqlite', path, 'is not a SQLite database (too short)');
}

/**
 * Refuses a database file that is missing or empty while its write-ahead log holds commits. A database in WAL mode
 * has its first page in its file before it has a log, so this is a file lost or emptied under its log; SQLite, opening
 * it, would delete the log, the only copy of those commits, and a host would start a fresh journal over it.
 */
function refuseOrphanedLog(path: string, state: 'missing' | 'empty'): void {
  let size = 0;
  try {
    size = statSync(`${path}-wal`).size;
  } catch {
    return;
  }
  // Another process creating the journal writes the file's first page before its log: seen now, it was not lost.
  if (size === 0 || (statSync(path, { throwIfNoEntry: false })?.size ?? 0) > 0) return;
  throw new StorePathError(
    'store_log_without_database',
    path,
    `is ${state}, but its write-ahead log ${path}-wal holds ${size} bytes of commits: opening it would discard them; nothing was opened. ` +
      'Keep both files, and put the database file back from where it went (a copy or a backup taken with its -wal)',
  );
}
