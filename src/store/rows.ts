/**
 * The backend contract: what a storage engine implements so that `createJournalStore` can build a full
 * SessionStore on it. The store's rules (fencing, sequencing, the hash chain, budgets, the latest-attempt check)
 * are pure decisions the library runs inside `transact`; a backend only has to store rows and make each
 * read → decide → write atomic. Published as `jingwei/backend`; see docs/design.md for why the seam sits here.
 */
import type { ToolEffect } from '../event/types.js';
import type { SessionId, TaskId } from '../ids.js';
import type { AttentionQuery, TaskState } from './types.js';
import type { DecisionRow, InboxBackend } from './inbox-rows.js';

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
   * The recorded time of the last event, in epoch milliseconds; null (or absent, for a backend that keeps no times)
   * while no event has one. The next event's time is never earlier (docs/design.md#recorded-times).
   */
  readonly recordedAt?: number | null;
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

/**
 * A task and its budget, keyed by (sessionId, taskId): a task id is unique within its session only, and two
 * sessions may each have a task of the same id (docs/design.md#identity-is-per-session). Store and return every
 * field unchanged.
 */
export interface TaskRow {
  readonly taskId: TaskId;
  readonly sessionId: SessionId;
  readonly state: TaskState;
  readonly limitToolCalls: number;
  readonly limitOutputBytes: number;
  readonly chargedToolCalls: number;
  readonly chargedOutputBytes: number;
  /** The task's journal-bytes limit; a row stored without it has the default (TASK_DEFAULTS.journalBytes). */
  readonly limitJournalBytes?: number;
  /** Wire bytes of the task's budgeted events so far; a row stored without it has charged 0. */
  readonly chargedJournalBytes?: number;
  /** The sum of `reservations`' bytes. */
  readonly reservedOutputBytes: number;
  readonly reservations: readonly Reservation[];
  readonly stopReason: string | null;
}

/**
 * The latest attempt of one logical operation, keyed by (sessionId, taskId, key), kept for the latest-attempt check
 * at the point of use. Rows of one session are never read or written by a transaction of another.
 */
export interface OperationRow {
  readonly taskId: TaskId;
  readonly key: string;
  readonly sessionId: SessionId;
  readonly callId: string;
  readonly eventId: string;
}

/**
 * Where an operation's latest attempt stands, as far as the store's index knows (docs/design.md#the-attention-index):
 * `no_result` (admitted, no result yet: running, waiting, or interrupted), `outcome_unknown` (a result that leaves
 * the outside effect uncertain), `reviewed_not_executed` (a review says an uncertain outcome did not happen: the
 * write is still to be made, by a retry), `not_executed` (a result recorded before the body: provably never ran),
 * `completed` (the body ran and its result is known), `resolved` (a review says an uncertain outcome happened).
 */
export type AttentionStatus = 'no_result' | 'outcome_unknown' | 'reviewed_not_executed' | 'not_executed' | 'completed' | 'resolved';
export const ATTENTION_STATUSES: readonly AttentionStatus[] = ['no_result', 'outcome_unknown', 'reviewed_not_executed', 'not_executed', 'completed', 'resolved'];

/**
 * One row of the attention index, keyed by (sessionId, taskId, key): the latest attempt of one operation, kept in
 * the commit transaction so the queue and the in-doubt guard never load a journal. Store and return every field
 * unchanged; times are epoch milliseconds (null where the event carried none).
 */
export interface AttentionRow {
  readonly sessionId: SessionId;
  readonly taskId: TaskId;
  readonly key: string;
  readonly callId: string;
  readonly tool: string;
  readonly effect: ToolEffect;
  readonly revision: string;
  /** SHA-256 (hex) of the canonical JSON of the call's arguments. */
  readonly argsDigest: string;
  /** The call is flagged to record a start marker before its body. */
  readonly startMarker: boolean;
  /** Its start marker is recorded. */
  readonly started: boolean;
  readonly status: AttentionStatus;
  /** The failure category of its result, null without one or for a success. */
  readonly category: string | null;
  readonly calledAt: number | null;
  readonly startedAt: number | null;
  readonly endedAt: number | null;
  /** The time of the last change to this row (the event that made it), null where events carry no times. */
  readonly updatedAt: number | null;
  /**
   * When the operation's unsettled standing (`outcome_unknown` or `reviewed_not_executed`) began, where an earlier
   * attempt left it so and later attempts that never ran their body kept it (attentionAge): the age a refused retry
   * does not reset. Null otherwise; a row stored without it reads as null.
   */
  readonly pendingSince?: number | null;
}

/** A page of attention rows in (sessionId, taskId, key) order; `next` is the cursor of the following page, null at the end. */
export interface AttentionPage {
  readonly rows: readonly AttentionRow[];
  readonly next: string | null;
}

/** The backend's half of an attention query: filters already checked, `after` decoded from the cursor. */
export interface AttentionScan {
  readonly sessionId?: string;
  readonly tool?: string;
  readonly effect?: ToolEffect;
  readonly statuses: readonly AttentionStatus[];
  /**
   * Only rows whose age (attentionAge: `pendingSince`, else the row's last activity, the first of `endedAt`,
   * `startedAt` and `calledAt` that is set) is at most this (epoch ms); rows without a time are left out when set.
   */
  readonly activeAtMost?: number;
  /**
   * With `activeAtMost`: rows whose last activity is after this are kept too. A time ahead of the reader's clock (a
   * host clock that ran ahead, an imported event stamped in the future, which every later event of the session then
   * repeats, times never decreasing) says nothing of how old the call is, and must not hide it from an age filter.
   */
  readonly orActiveAfter?: number;
  /** Only rows after this (sessionId, taskId, key), in that order. */
  readonly after?: readonly [string, string, string];
  /** At most this many rows. */
  readonly limit: number;
}

/**
 * The identity the in-doubt guard compares (docs/design.md#the-in-doubt-guard): task, tool and arguments, of any
 * contract revision, since a redeploy does not change what an earlier call may have done.
 */
export interface OperationBinding {
  readonly taskId: string;
  readonly tool: string;
  readonly argsDigest: string;
}

export type { AttentionQuery };

/** What a decision reads, inside the transaction, besides the session's owner row (always read). */
export interface TxReads {
  /** Read the task row with this id in the transaction's session. */
  readonly taskId?: string;
  /** Read the operation row with this (taskId, key) in the transaction's session. */
  readonly operation?: { readonly taskId: string; readonly key: string };
  /** Event ids the writes will carry: report which of them already exist in this session (docs/design.md#event-ids-are-unique). */
  readonly eventIds?: readonly string[];
  /** Read the attention rows of this session whose `callId` is one of these (the calls a commit's markers and results name). */
  readonly attentionCalls?: readonly string[];
  /**
   * Optional (backends with an inbox): read, locked, the approval rows of this operation in this session that are
   * `open` or `decided`, and the row with the id `spent`, whatever its state (the approval a `restore` puts back).
   */
  readonly approvals?: { readonly taskId: string; readonly key: string; readonly spent?: string };
  /** Optional (backends with an inbox): read the review rows of this session about these calls that are `decided` (waiting to be journaled). */
  readonly reviews?: readonly string[];
  /** Read the seq of the first event of this session after `seq` written under an epoch below `epoch` (optional). */
  readonly writtenSince?: { readonly seq: number; readonly epoch: number };
}

/** What the backend read for a decision; `undefined` where no such row exists (or it was not asked for). */
export interface TxState {
  readonly session: SessionRow | undefined;
  readonly task: TaskRow | undefined;
  readonly operation: OperationRow | undefined;
  /** Those of `reads.eventIds` that some event of this session already carries (empty when none were asked). */
  readonly existingEventIds: readonly string[];
  /** The attention rows `reads.attentionCalls` asked for (absent or empty when none were asked or none exist). */
  readonly attention?: readonly AttentionRow[];
  /** The rows `reads.approvals` asked for (absent when not asked). */
  readonly approvals?: readonly DecisionRow[];
  /** The rows `reads.reviews` asked for, ordered by id (absent when not asked). */
  readonly reviews?: readonly DecisionRow[];
  /** What `reads.writtenSince` asked for: that event's seq, or null when there is none (absent when not asked). */
  readonly writtenSince?: number | null;
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
 * transaction). `task` inserts or replaces the task row at (sessionId, taskId). `operations` upsert by
 * (sessionId, taskId, key), the last one winning. Every row a decision writes carries the transaction's session id.
 */
export interface TxWrites<R = undefined> {
  readonly session?: { readonly row: SessionRow; readonly expect: { readonly epoch: number; readonly lastSeq: number } | null };
  readonly events?: readonly EventRow[];
  readonly task?: { readonly row: TaskRow; readonly insert: boolean };
  readonly operations?: readonly OperationRow[];
  /** Upsert by (sessionId, taskId, key), the last one winning. */
  readonly attention?: readonly AttentionRow[];
  /** Inbox rows to insert or replace by id (only ever asked of a backend with an `inbox`). */
  readonly decisions?: readonly DecisionRow[];
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
  /**
   * What the data is, whatever it was opened as (the built-in stores: the journal's own id): two backends of one kind
   * with the same key hold the same sessions (two handles on one journal), and this process's view of the calls
   * running in them is shared (docs/design.md#one-view-of-running-calls-per-database). Omit it and each backend
   * instance is a view of its own.
   */
  readonly scopeKey?: string | undefined;
  transact<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>): Promise<R>;
  /** The owner row and every event row of a session, ordered by seq, read in one consistent snapshot. */
  snapshot(sessionId: SessionId): Promise<{ session: SessionRow | undefined; events: EventRow[] }>;
  /**
   * Optional: the same snapshot handed to `read` as the owner row and the event rows in seq order, one at a time,
   * within the snapshot, returning what `read` returns. A store verifies a history this way without holding every
   * stored text at once (docs/design.md#a-history-is-verified-as-it-is-read); without it, `snapshot` is used.
   */
  scanSnapshot?<T>(sessionId: SessionId, read: (session: SessionRow | undefined, events: Iterable<EventRow>) => T): Promise<T>;
  /** The task row with this id in this session (another session's task of the same id is not this one). */
  readTask(sessionId: SessionId, taskId: string): Promise<TaskRow | undefined>;
  /** Every session row with its number of events (the built-in backends order them by session id). */
  listSessions(): Promise<Array<{ session: SessionRow; events: number }>>;
  /**
   * The attention rows matching `scan`, in (sessionId, taskId, key) order, at most `scan.limit`. Read from the index
   * alone, never from events. Optional: without it the store has no queue and no in-doubt guard.
   */
  scanAttention?(scan: AttentionScan): Promise<AttentionRow[]>;
  /** The attention rows of one session with this binding (any status, any revision), read from the index alone. */
  findAttention?(sessionId: SessionId, binding: OperationBinding): Promise<AttentionRow[]>;
  /**
   * Optional push: call `onChange(sessionId)` after a transaction that wrote that session's attention rows commits,
   * in any process. Resolves once listening; the returned function stops it. Without it, queue views poll.
   */
  watchAttention?(onChange: (sessionId: string) => void): Promise<() => Promise<void>>;
  /** Optional: the decision inbox (docs/design.md#the-decision-inbox). Without it, durable approvals and the inbox API are refused. */
  readonly inbox?: InboxBackend;
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
  /**
   * Optional: the engine's own check that the lookup tables' indexes agree with their rows (SQLite: `integrity_check`
   * of the attention and operation tables; `quick_check` skips that). The rows can be right while an index over them
   * is damaged, and the queue and the in-doubt guard read through the index. The first problem found, or null.
   */
  /**
   * Optional: every operation row of a session, in any order. checkLookupRows reads them so that a row naming an
   * operation the chain does not hold is found too; without it, only the chain's operations' rows are compared.
   */
  scanOperations?(sessionId: SessionId): Promise<OperationRow[]>;
  /** Optional: SessionStore.sessionsWithoutOwnerRow, in session id order. */
  sessionsWithoutOwnerRow?(): Promise<string[]>;
  checkLookupStorage?(): Promise<{ readonly table: 'attention' | 'operations'; readonly problem: string } | null>;
  close(): Promise<void>;
}
