import { InvalidInputError } from '../errors.js';
import { JournalStore } from '../store/journal-store.js';
import { beforeCommitHooks, type PostgresBeforeCommit } from '../store/postgres/hooks.js';
import type { SessionStore } from '../store/types.js';

export type { PostgresBeforeCommit };

/**
 * Installs (or with null removes) a hook that the PostgreSQL store `store` awaits inside every write transaction,
 * after all writes and just before COMMIT, while the owner row lock is held. `backendPid` is the server process of
 * that transaction, so a test can kill it (`pg_terminate_backend`) or hold the lock. For tests only.
 */
export function setPostgresBeforeCommit(store: SessionStore, hook: PostgresBeforeCommit | null): void {
  if (!(store instanceof JournalStore) || store.kind !== 'postgres') {
    throw new InvalidInputError('store', 'must be a store opened by openPostgresStore');
  }
  if (hook === null) beforeCommitHooks.delete(store.backend);
  else beforeCommitHooks.set(store.backend, hook);
}
