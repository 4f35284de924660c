/**
 * The PostgreSQL store's test hook, outside its public options: only `jingwei/testing` sets it. Kept in a module
 * that does not load the driver, so `jingwei/testing` works without `pg` installed.
 */
import type { JournalBackend } from '../rows.js';

/** Awaited inside a write transaction after all writes, just before COMMIT, while the owner row lock is held. */
export type PostgresBeforeCommit = (context: { readonly sessionId: string; readonly backendPid: number }) => Promise<void> | void;

export const beforeCommitHooks = new WeakMap<JournalBackend, PostgresBeforeCommit>();
