/**
 * The backend contract: what a storage engine implements so that `createJournalStore` can build a full
 * SessionStore on it. The store's rules (fencing, sequencing, the hash chain, budgets, the latest-attempt check)
 * are pure decisions the library runs inside `transact`; a backend only has to store rows and make each
 * read → decide → write atomic. Published as `jingwei/backend`; see docs/design.md for why the seam sits here.
 */
import type { SessionId, TaskId } from '../ids.js';
import type { TaskState } from './types.js';

/** The owner row of a session: the fencing epoch and the head of the hash chain (docs/design.md#fencing). */
export interface SessionRow {
  readonly sessionId: SessionId;
  /** The host identity of the last acquire, null before any. */
  readonly owner: string | null;
  /** Whether `owner` still holds the session (false after release or an import). */
  readonly held: boolean;
  /** Raised by every acquire; writes of an owner at a lower epoch are refused. */
  readonly epoch: number;
  /** seq of the last event, -1 while the journal is empty. */
  readonly lastSeq: number;
  /** The chain hash of the last event (the genesis hash while empty). */
  readonly headHash: string;
  /** Sum of the UTF-8 sizes of all event bodies, to keep the history within what recovery can inspect. */
  readonly bodyBytes: number;
  /**
   * When the holder's lease runs out, in ms since the Unix epoch on the store's clock (docs/design.md#leases): set
   * by acquire, renewed by every write of the owner and by its heartbeat, null once released. Store it unchanged;
   * a backend that omits it (undefined) reads as no lease recorded, which `takeover: 'expired'` never takes over.
   */
  readonly leaseExpiresAt?: number | null;
}

/** One stored event: its wire JSON text exactly as hashed, and the epoch of the owner that wrote it. Store `body` byte for byte. */
export interface EventRow {
  readonly sessionId: SessionId;
  /** 0, 1, 2, ... per session, without gaps. */
  readonly seq: number;
  readonly eventId: string;
  readonly epoch: number;
  readonly body: string;
  readonly hash: string;
}

/** Output bytes reserved by one admitted attempt until its result settles them. */
export interface Reservation {
  readonly callId: string;
  readonly bytes: number;
  /** The start marker is durable: the body may have produced output. */
  readonly started: boolean;
  /** The epoch of the owner that admitted it; once that owner is fenced, nobody else will ever settle it. */
  readonly epoch: number;
}

/** A task and its budget, keyed by `taskId` across all sessions. Store and return every field unchanged. */
export interface TaskRow {
  readonly taskId: TaskId;
  readonly sessionId: SessionId;
  readonly state: TaskState;
  readonly limitToolCalls: number;
  readonly limitOutputBytes: number;
  readonly chargedToolCalls: number;
  readonly chargedOutputBytes: number;
  /** The sum of `reservations`' bytes. */
  readonly reservedOutputBytes: number;
  readonly reservations: readonly Reservation[];
  readonly stopReason: string | null;
}

/** The latest attempt of one logical operation, keyed by (taskId, key), kept for the latest-attempt check at the point of use. */
export interface OperationRow {
  readonly taskId: TaskId;
  readonly key: string;
  readonly sessionId: SessionId;
  readonly callId: string;
  readonly eventId: string;
}

/** What a decision reads, inside the transaction, besides the session's owner row (always read). */
export interface TxReads {
  /** Read the task row with this id. */
  readonly taskId?: string;
  /** Read the operation row with this (taskId, key). */
  readonly operation?: { readonly taskId: string; readonly key: string };
  /** Event ids the writes will carry: report which of them already exist in this session (docs/design.md#event-ids-are-unique). */
  readonly eventIds?: readonly string[];
}

/** What the backend read for a decision; `undefined` where no such row exists (or it was not asked for). */
export interface TxState {
  readonly session: SessionRow | undefined;
  readonly task: TaskRow | undefined;
  readonly operation: OperationRow | undefined;
  /** Those of `reads.eventIds` that some event of this session already carries (empty when none were asked). */
  readonly existingEventIds: readonly string[];
  /**
   * The store's notion of now (ms since the Unix epoch), read inside the transaction: the clock leases are measured
   * on. Optional: when a backend leaves it out, the store uses this process's clock.
   */
  readonly now?: number;
}

/**
 * What a decision writes, all in the same transaction. `session.expect` is the conditional part: the backend
 * updates the owner row only where epoch and lastSeq still equal it, and with `expect: null` inserts a new session
 * row (which must not exist yet). `events` are appended (a row at an existing (sessionId, seq) must fail the whole
 * transaction). `task` inserts or replaces the task row. `operations` upsert by (taskId, key), the last one winning.
 */
export interface TxWrites<R = undefined> {
  readonly session?: { readonly row: SessionRow; readonly expect: { readonly epoch: number; readonly lastSeq: number } | null };
  readonly events?: readonly EventRow[];
  readonly task?: { readonly row: TaskRow; readonly insert: boolean };
  readonly operations?: readonly OperationRow[];
  /** Handed back to the caller after the transaction commits. */
  readonly result: R;
}

/**
 * A storage engine. Implement it and pass it to `createJournalStore`; prove it with `runStoreConformance` from
 * `jingwei/testing`.
 *
 * Rules a backend must keep:
 * - `transact` runs read → `decide` → write as one atomic, isolated transaction per session: read the session row
 *   (and the rows `reads` names), call `decide` exactly once with them, apply its writes, commit, and resolve with
 *   `writes.result`. Concurrent transactions on one session must serialise (lock the owner row, or equivalent).
 * - `decide` is synchronous and pure. If it throws, write nothing and reject with that same error, unchanged.
 * - A conditional owner-row update that matches no row (`expect` no longer current, or an insert of a row that
 *   exists) must roll everything back and reject with StaleOwnerError (a lost insert race may instead rerun the
 *   whole transaction once).
 * - Map the engine's failures to the library's errors: StoreBusyError for a lock wait that timed out (nothing
 *   written), StoreUnavailableError('store_failure') for a lost connection, JournalCorruptError for damaged storage.
 * - After `close()`, every method rejects with StoreClosedError. `close()` twice is harmless.
 */
export interface JournalBackend {
  /** The engine's name, shown as SessionStore.kind: any string ('memory', 'sqlite' and 'postgres' are the built-in ones). */
  readonly kind: string;
  /** Where the data lives (a path, a schema), for error messages; omit when there is no such place. */
  readonly location?: string;
  transact<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>): Promise<R>;
  /** The owner row and every event row of a session, ordered by seq, read in one consistent snapshot. */
  snapshot(sessionId: SessionId): Promise<{ session: SessionRow | undefined; events: EventRow[] }>;
  /** The task row with this id, whatever session it belongs to. */
  readTask(taskId: string): Promise<TaskRow | undefined>;
  /** Every session row with its number of events (the built-in backends order them by session id). */
  listSessions(): Promise<Array<{ session: SessionRow; events: number }>>;
  /**
   * The store's clock (ms since the Unix epoch), the same one `TxState.now` reads. Optional: without it the store
   * uses this process's clock. A backend shared by several hosts should answer from the shared engine's clock.
   */
  now?(): Promise<number>;
  /**
   * The operation row of (taskId, key) in this session, or undefined (docs/design.md#caller-keys-and-replay).
   * Optional: without it the store finds the latest attempt by reading the session's history.
   */
  readOperation?(sessionId: SessionId, taskId: string, key: string): Promise<OperationRow | undefined>;
  close(): Promise<void>;
}
