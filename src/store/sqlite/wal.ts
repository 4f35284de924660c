import { performance } from 'node:perf_hooks';
import type { Database } from './driver.js';
import { isSqliteBusy } from './errors.js';

/**
 * Puts the file in WAL mode, waiting out another process's write lock like any write does, and returns the mode
 * SQLite reports. The switch upgrades a read transaction to a write one, and SQLite answers that upgrade SQLITE_BUSY
 * at once, without its busy handler, while another connection holds the write lock, as a process creating the same
 * new file does. So it is retried here, with growing pauses, until `timeoutMs` runs out; then SQLite's busy error is
 * thrown (docs/design.md#opening-a-journal-another-process-is-creating).
 */
export function switchToWal(db: Database, timeoutMs: number): unknown {
  if (db.pragma('journal_mode', { simple: true }) === 'wal') return 'wal';
  return retryBusy(timeoutMs, () => db.pragma('journal_mode = WAL', { simple: true }));
}

/**
 * Marks a new journal's file as one (JOURNAL_APPLICATION_ID) before it turns to WAL: written in the rollback journal's
 * mode, the mark reaches the file itself, whose first page is then its only page outside the log until a checkpoint
 * (path-check.ts, refuseFirstPageAlone). A file in WAL mode already, or marked, is left as it is.
 */
export function markJournalFile(db: Database, timeoutMs: number): void {
  if (db.pragma('journal_mode', { simple: true }) === 'wal' || db.pragma('application_id', { simple: true }) !== 0) return;
  retryBusy(timeoutMs, () => db.pragma(`application_id = ${JOURNAL_APPLICATION_ID}`));
}

/**
 * The `application_id` of a journal's file (SQLite's header, offset 68): "JWJ1". Set on a new journal's file before it
 * turns to WAL, so that the file alone, its first page, says it is a journal.
 */
export const JOURNAL_APPLICATION_ID = 0x4a574a31;

/** Runs `write`, waiting out another process's write lock with growing pauses until `timeoutMs` runs out. */
function retryBusy<T>(timeoutMs: number, write: () => T): T {
  const deadline = performance.now() + timeoutMs;
  for (let pauseMs = 1; ; pauseMs = Math.min(pauseMs * 2, 50)) {
    try {
      return write();
    } catch (error) {
      if (!isSqliteBusy(error) || performance.now() + pauseMs > deadline) throw error;
      pauseSync(pauseMs);
    }
  }
}

/** A cell nobody notifies: Atomics.wait on it is a synchronous pause (opening a store is synchronous). */
const PAUSE = new Int32Array(new SharedArrayBuffer(4));

/** Waits `ms` without returning to the event loop, as the synchronous open of a store must. */
export function pauseSync(ms: number): void {
  Atomics.wait(PAUSE, 0, 0, ms);
}
