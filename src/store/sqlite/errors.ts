import { JingweiError, JournalCorruptError, StoreBusyError, StoreUnavailableError } from '../../errors.js';

const sqliteCode = (error: unknown): unknown => (error as { code?: unknown } | null)?.code;

/** Whether SQLite failed because another connection holds a lock (SQLITE_BUSY*, SQLITE_LOCKED*): worth waiting out. */
export function isSqliteBusy(error: unknown): boolean {
  const code = sqliteCode(error);
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
}

/** Maps better-sqlite3's errors onto the library's typed ones; our own errors pass through. */
export function mapSqliteError(error: unknown, sessionId: string): unknown {
  if (error instanceof JingweiError) return error;
  const code = sqliteCode(error);
  if (typeof code === 'string') {
    if (isSqliteBusy(error)) {
      return new StoreBusyError(`the SQLite database is locked by another writer (${code})`, { cause: error });
    }
    if (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB') {
      return new JournalCorruptError(sessionId, -1, 'storage', `the database file is damaged (${code})`, { cause: error });
    }
    if (code.startsWith('SQLITE_')) return new StoreUnavailableError('store_failure', `SQLite failed: ${(error as Error).message}`, { cause: error });
  }
  return error;
}
