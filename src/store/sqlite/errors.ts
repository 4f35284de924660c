import { JingweiError, JournalCorruptError, StoreBusyError, StoreUnavailableError } from '../../errors.js';

const sqliteCode = (error: unknown): unknown => (error as { code?: unknown } | null)?.code;

/** Whether SQLite failed because another connection holds a lock (SQLITE_BUSY*, SQLITE_LOCKED*): worth waiting out. */
export function isSqliteBusy(error: unknown): boolean {
  const code = sqliteCode(error);
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
}

/** Maps better-sqlite3's errors on a journal onto the library's typed ones; our own errors pass through. */
export function mapSqliteError(error: unknown, sessionId: string): unknown {
  const code = sqliteCode(error);
  if (code === 'SQLITE_NOTADB' || (typeof code === 'string' && code.startsWith('SQLITE_CORRUPT'))) {
    // Damage met outside any one session's read (a listing, say) is the whole file's: '*', as quick_check reports it.
    return new JournalCorruptError(sessionId === '' ? '*' : sessionId, -1, 'storage', `the database file is damaged (${code})`, { cause: error });
  }
  return mapSqliteFailure(error, 'journal');
}

/**
 * Busy → StoreBusyError, any other SQLite failure → StoreUnavailableError (`store_failure`); our own errors and
 * errors that are not SQLite's pass through. `what` names the database in the message.
 */
export function mapSqliteFailure(error: unknown, what: string): unknown {
  if (error instanceof JingweiError) return error;
  const code = sqliteCode(error);
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return error;
  if (isSqliteBusy(error)) return new StoreBusyError(`the ${what} database is locked by another writer (${code}); a process paused inside a write (stopped, in a debugger) holds the lock until it goes on or ends`, { cause: error });
  if (code.startsWith('SQLITE_READONLY')) {
    // Met by a read-only open too: SQLite writes the -shm file beside a database in WAL mode even to read it.
    return new StoreUnavailableError('store_failure', `SQLite failed on the ${what} database: ${(error as Error).message} (${code}): the file, its -wal or -shm, or its ` +
      'directory is not writable by this process, and SQLite writes beside the file even to read it (its -shm); to read it from here, copy the file with its -wal to a writable directory', { cause: error });
  }
  return new StoreUnavailableError('store_failure', `SQLite failed on the ${what} database: ${(error as Error).message}`, { cause: error });
}
