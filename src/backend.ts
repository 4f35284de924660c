/**
 * `jingwei/backend`: the seam for a storage engine of your own. Implement JournalBackend (one atomic
 * read → decide → write per `transact`), wrap it with `createJournalStore`, and prove it with
 * `runStoreConformance` from `jingwei/testing`. The store's rules stay in the library: a backend stores rows.
 */
import { JournalStore, type JournalStoreOptions } from './store/journal-store.js';
import type { JournalBackend } from './store/rows.js';
import type { SessionStore } from './store/types.js';

export type {
  AttentionRow,
  AttentionScan,
  AttentionStatus,
  EventRow,
  JournalBackend,
  OperationBinding,
  OperationRow,
  Reservation,
  SessionRow,
  TaskRow,
  TxReads,
  TxState,
  TxWrites,
} from './store/rows.js';
export type { AttentionItem, AttentionListing, AttentionQuery, SessionStore, TaskState } from './store/types.js';
export type { JournalStoreOptions } from './store/journal-store.js';
export { attentionWrites, compareAttention, isInDoubt, matchesScan, resolveAttention } from './store/attention.js';
export type { ApprovalBinding, CallProgress, DecisionKind, DecisionQuery, DecisionRow, DecisionState, InboxBackend } from './store/inbox-rows.js';
export { queryRows } from './store/inbox-rows.js';
export type { SessionId, TaskId } from './ids.js';
export {
  JingweiError,
  JournalCorruptError,
  StaleOwnerError,
  StoreBusyError,
  StoreClosedError,
  StoreUnavailableError,
} from './errors.js';

/** A full SessionStore (fencing, the hash chain, budgets, verified loads, JSONL export and import) on `backend`. */
export function createJournalStore(backend: JournalBackend, options?: JournalStoreOptions): SessionStore {
  return new JournalStore(backend, options);
}
