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
  const deadline = performance.now() + timeoutMs;
  for (let pauseMs = 1; ; pauseMs = Math.min(pauseMs * 2, 50)) {
    try {
      return db.pragma('journal_mode = WAL', { simple: true });
    } catch (error) {
      if (!isSqliteBusy(error) || performance.now() + pauseMs > deadline) throw error;
      Atomics.wait(PAUSE, 0, 0, pauseMs);
    }
  }
}

/** A cell nobody notifies: Atomics.wait on it is a synchronous pause (opening a store is synchronous). */
const PAUSE = new Int32Array(new SharedArrayBuffer(4));
