import { closeSync, existsSync, openSync, readlinkSync, readSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { InvalidInputError, StorePathError } from '../../errors.js';
import { describeValue } from '../../text.js';
import { JOURNAL_APPLICATION_ID, pauseSync } from './wal.js';

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
  const header = Buffer.alloc(FIRST_PAGE_FIELDS);
  const fd = openSync(path, 'r');
  let read: number;
  try {
    read = readSync(fd, header, 0, header.length, 0);
  } finally {
    closeSync(fd);
  }
  // An empty file is a database SQLite has not written yet; anything else must start with SQLite's header.
  if (read === 0) refuseOrphanedLog(path, 'empty');
  const magic = Math.min(read, SQLITE_HEADER.length);
  if (read > 0 && !header.subarray(0, magic).equals(SQLITE_HEADER.subarray(0, magic))) {
    throw new StorePathError('store_not_sqlite', path, `is not a SQLite database${logKept(path)}`);
  }
  if (read > 0 && read < SQLITE_HEADER.length) throw new StorePathError('store_not_sqlite', path, `is not a SQLite database (too short)${logKept(path)}`);
  if (kind === 'journal' && read === FIRST_PAGE_FIELDS) refuseFirstPageAlone(path, header);
}

/** The bytes of a SQLite file's header read here: up to its application id (offset 68). */
const FIRST_PAGE_FIELDS = 72;

/**
 * Where SQLite keeps `path`'s write-ahead log: beside the file the path names, symbolic links followed, a dangling one
 * too (SQLite resolves them to find the log).
 */
function logOf(path: string): string {
  let target = path;
  for (let hops = 0; hops < 40; hops += 1) {
    let link: string;
    try {
      link = readlinkSync(target);
    } catch {
      break;
    }
    target = resolve(dirname(target), link);
  }
  return `${target}-wal`;
}

const sizeOf = (file: string): number | null => statSync(file, { throwIfNoEntry: false })?.size ?? null;

/** For a refusal of a file that is not SQLite (zeroed, cut short): that its log, which may hold the journal, was kept. */
function logKept(path: string): string {
  const log = logOf(path);
  const size = sizeOf(log) ?? 0;
  return size > 0 ? `; its write-ahead log ${log} holds ${size} bytes, perhaps the journal's only copy: keep it` : '';
}

/**
 * Refuses a database file that is missing or empty while its write-ahead log holds commits. A database in WAL mode
 * has its first page in its file before it has a log, so this is a file lost or emptied under its log; SQLite, opening
 * it, would delete the log, the only copy of those commits, and a host would start a fresh journal over it.
 */
function refuseOrphanedLog(path: string, state: 'missing' | 'empty'): void {
  const log = logOf(path);
  const size = sizeOf(log) ?? 0;
  // Another process creating the journal writes the file's first page before its log: seen now, it was not lost.
  if (size === 0 || (sizeOf(path) ?? 0) > 0) return;
  throw new StorePathError(
    'store_log_without_database',
    path,
    `is ${state}, but its write-ahead log ${log} holds ${size} bytes of commits: opening it would discard them; nothing was opened. ` +
      'Keep both files, and put the database file back from where it went (a copy or a backup taken with its -wal)',
  );
}

/**
 * Refuses a journal's file in WAL mode that holds its first page alone, with no write-ahead log beside it. A journal
 * marks its file (JOURNAL_APPLICATION_ID) and then writes its tables, in the same open that turns it to WAL, into the
 * log; the file gets them at a checkpoint. So a file left like that by a host that crashed holds all of its journal in
 * its log, and a copy or a rename of the file without it (after a crash nothing else is left to copy) would be opened
 * as a new, empty journal, and its host make its writes again. A process creating the journal at this moment is told
 * apart by looking again a moment later. An empty database in WAL mode that no journal marked is a new file.
 */
function refuseFirstPageAlone(path: string, header: Buffer): void {
  const pageSize = header.readUInt16BE(16) === 1 ? 65_536 : header.readUInt16BE(16);
  const marked = header[18] === 2 && header[19] === 2 && header.readUInt32BE(68) === JOURNAL_APPLICATION_ID;
  const alone = () => (sizeOf(path) ?? 0) <= pageSize && sizeOf(logOf(path)) === null;
  if (!marked || !alone()) return;
  pauseSync(CREATION_GRACE_MS);
  if (!alone()) return;
  throw new StorePathError(
    'store_log_without_database',
    path,
    `is a journal's file in WAL mode holding its first page alone, with no write-ahead log ${logOf(path)} beside it: a journal's commits are in its log until a checkpoint, ` +
      'so this is a journal copied or moved without its -wal (after a crash); opened, it would be a new, empty journal; nothing was opened. ' +
      'Copy or move the file together with its -wal; a file that was created and never written to can be deleted',
  );
}

/** How long a file that looks like a journal without its log is given to get its log, in case it is being created. */
const CREATION_GRACE_MS = 100;
