/**
 * Group commit on SQLite (docs/design.md#group-commit): the write transactions a store is asked for in one turn of the
 * event loop run as one SQLite transaction, each in a savepoint of its own, and share its one fsync.
 */
import type { SessionId } from '../../ids.js';
import type { TxReads, TxState, TxWrites } from '../rows.js';

/** A write transaction asked for and not yet run: its part of the next group commit (docs/design.md#group-commit). */
export interface QueuedWrite {
  readonly sessionId: SessionId;
  readonly reads: TxReads;
  readonly decide: (state: TxState) => TxWrites<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
  /** Set inside the group's transaction: the write's result, or the error its savepoint was rolled back for. */
  outcome?: { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };
}

/** At most this many writes share one commit, so one group holds the write lock for a bounded time. */
export const GROUP_MAX = 64;

/**
 * The body of a group's transaction: each write through `writeOne`, which the caller has made a nested
 * better-sqlite3 transaction, so each runs in a savepoint of its own and a write that fails is rolled back alone. If
 * SQLite rolled the whole transaction back (a full disk, an I/O error), no write of the group is kept: the error is
 * rethrown for all of them.
 */
export function runGroup(db: { readonly inTransaction: boolean }, group: readonly QueuedWrite[], writeOne: (write: QueuedWrite) => unknown): void {
  for (const write of group) {
    try {
      write.outcome = { ok: true, value: writeOne(write) };
    } catch (error) {
      if (!db.inTransaction) throw error;
      write.outcome = { ok: false, error };
    }
  }
}
