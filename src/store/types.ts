import type { TaskLedgerReport } from './task-ledger.js';
import type { LookupRowsReport } from './index-check.js';
import type { EventId, OperationKey, SessionId, TaskId, CallId } from '../ids.js';
import type { EventDraft, SessionEvent, ToolEffect, ToolReviewRecord } from '../event/types.js';
import type { AttentionStatus } from './rows.js';
import type { AnchorOptions } from './anchors.js';
import type { ApprovalBinding, DecisionRow } from './inbox-rows.js';

export type TaskState = 'running' | 'stopped' | 'completed';

export interface TaskLimits {
  readonly toolCalls: number;
  readonly toolOutputBytes: number;
  /** Bytes of journal (the wire text of the task's tool calls, start markers and results), checked at admission. */
  readonly journalBytes: number;
}

export interface TaskCharges {
  readonly toolCalls: number;
  readonly toolOutputBytes: number;
  readonly journalBytes: number;
}

export interface TaskSnapshot {
  readonly taskId: TaskId;
  readonly sessionId: SessionId;
  readonly state: TaskState;
  readonly limits: TaskLimits;
  readonly charged: TaskCharges;
  /** Output bytes reserved by attempts whose result is not recorded yet. */
  readonly reservedOutputBytes: number;
  readonly stopReason: string | null;
}

/**
 * A budget change written in the same transaction as the events of a commit, so a crash can neither lose nor
 * double a charge (docs/design.md#tasks-and-budgets). The commit's own events say which call it concerns: its `tool_call` is admitted, a
 * `tool_started` marks that call's reservation as started, its `tool_result` settles it. Every budget commit also
 * settles reservations left by fenced owners (whose results can never be recorded): refunded when the body never
 * started, charged in full when it may have produced output.
 */
export interface BudgetChange {
  readonly taskId: TaskId;
  /**
   * Admit the commit's one tool call: the task must be running and able to cover one more tool call. Charges one
   * tool call (never refunded) and reserves min(maxOutputBytes, remaining output budget) bytes.
   */
  readonly admit?: { readonly maxOutputBytes: number };
  /** Settle the reservation of the commit's tool result, charging the output bytes it is accountable for. */
  readonly settle?: { readonly chargeOutputBytes: number };
}

/** The row of the latest attempt of an identical operation a retry could make its write twice with, as a plan's history made it. */
export interface RepeatedRow {
  readonly callId: CallId;
  readonly started: boolean;
  readonly status: AttentionStatus;
}

/** Decision D4: the append of a retry call verifies the plan's source is still the latest attempt of its operation. */
export interface LatestAttemptCondition {
  readonly taskId: TaskId;
  readonly key: OperationKey;
  readonly callId: CallId;
  /**
   * A retry plan's view of its source: the source's row of the attention index as the plan's history made it. The
   * commit is refused (StoreConflictError `history_changed`) when the stored row says otherwise: the source started
   * or got a result or a review after the history the plan was made from was read (docs/design.md#plans-are-checked-against-the-journal-at-use).
   */
  readonly source?: {
    readonly started: boolean;
    readonly status: AttentionStatus;
    /**
     * The seq of the last event of the plan's history: the commit is refused (`history_changed`) when an event after it
     * was written by an earlier owner of the session than the committing one (a host that held the session in
     * between, which may have journaled a review of the source that leaves its row as it was).
     */
    readonly seenSeq?: number;
  };
  /**
   * The rows, as a retry plan's history made them, of the latest attempts of the identical operations not made that
   * the retry could make its write twice with: for a source the in-doubt guard refused as a repeat, the writes it may
   * have repeated; for another, its repeats. Checked at the retry's call and again at its start marker (a call waiting
   * for its approver is not one the in-doubt guard reads), when the backend keeps the index the latest attempt's row
   * comes from: the commit is refused (`history_changed`) when one of them moved on (a review, a result, a newer
   * attempt), as the write may have been made since (docs/design.md#the-in-doubt-guard).
   */
  readonly repeated?: readonly RepeatedRow[];
}

/**
 * The inbox change a commit makes in its own transaction (docs/design.md#durable-approvals): `request` leaves a new
 * open approval request (superseding the operation's older open or decided ones); `use` consumes a decided one,
 * `settle` supersedes the requests earlier attempts left (this attempt was answered by the host's approver, or
 * refused because its tool changed);
 * refused with DecisionError unless it is still decided and its binding equals this one. `at` is the writer's
 * ISO-8601 time, for people.
 */
export type ApprovalChange =
  | { readonly request: { readonly id: string; readonly callId: string; readonly binding: ApprovalBinding; readonly note: string | null; readonly at: string } }
  | { readonly use: { readonly id: string; readonly callId: string; readonly binding: ApprovalBinding; readonly at: string } }
  /**
   * `settle`: the attempt `callId` was answered by the host's approver (approved, or refused), or was refused before
   * its body because its tool changed (docs/design.md#a-redeploy-while-a-call-waits), so the operation's requests
   * left by earlier attempts (open or decided, unused) are superseded: a decision made later for an earlier attempt
   * is never spent on a later one, and a request of an operation that moved on does not wait for ever. Refused
   * (nothing written) while an operator's denial of this very action waits unused: that denial is the answer.
   */
  | { readonly settle: { readonly callId: string; readonly binding: ApprovalBinding; readonly at: string } }
  /**
   * `resolve`: a `completed` review settled the operation for good, so no attempt of it will ever be made: its
   * requests, open or decided and unused, are superseded (none waits in the queue for a person or a host).
   */
  | { readonly resolve: { readonly taskId: string; readonly key: string; readonly at: string } }
  /**
   * `restore`: the attempt `callId` spent the approval `id` in its start marker, and this commit records that its body
   * was never called (its `tool_stopped_before_body` result, or, when that result could not be written, the runtime's
   * `body_ended` event saying `not_called`, is among the commit's events): the approval goes back to decided and
   * unused, and answers the operation's next attempt. An approval lets at most one body run, and a person's decision
   * is not spent on an attempt the journal proves never ran. Nothing changes when the row is not spent by that call;
   * refused (InvalidInputError, nothing written) without such an event.
   */
  | { readonly restore: { readonly id: string; readonly callId: string; readonly taskId: string; readonly key: string; readonly at: string } };

/** A caller-keyed first attempt: the commit fails with OperationInDoubtError if the operation already has an attempt. */
export interface NewOperationCondition {
  readonly taskId: TaskId;
  readonly key: OperationKey;
}

export interface CommitRequest {
  readonly events: readonly EventDraft[];
  readonly budget?: BudgetChange;
  readonly expectLatestAttempt?: LatestAttemptCondition;
  /** Needs a store with a decision inbox. */
  readonly approval?: ApprovalChange;
  /**
   * The commit goes through only while the journal's last event is still at this seq (-1: no events): a decision
   * made on a loaded history (a journaled review) is written only on exactly that history. Otherwise
   * StoreConflictError `history_changed`, nothing written.
   */
  readonly expectLastSeq?: number;
  /** Exclusive with `expectLatestAttempt`: the first attempt of a caller-keyed operation (docs/design.md#caller-keys-and-replay). */
  readonly expectNewOperation?: NewOperationCondition;
  /**
   * The commit goes through only while no review decision about one of these calls waits in the store's decision
   * inbox (recorded, not journaled): a retry's start marker, which an operator's decision about its operation must
   * stop (docs/design.md#a-review-decision-stops-a-retry-before-its-body). Otherwise ToolRetryError `needs_review`,
   * nothing written. Stores without an inbox have none waiting.
   */
  readonly expectNoWaitingReview?: readonly string[];
  /**
   * Internal to the runtime: a condition of this process the commit must still meet when its state is read, run
   * synchronously inside the transaction before anything is written; what it throws rejects the commit unchanged,
   * nothing written. A retry's checks of what was journaled here: a review the owner's own inbox pass journals while
   * the retry's commit waits for its connection (or its turn) is seen (docs/design.md#a-review-decision-stops-a-retry-before-its-body).
   */
  readonly recheck?: () => void;
}

/** The latest attempt of one operation as journaled: its call and whatever of its marker and result is recorded. */
export interface RecordedAttempt {
  readonly taskId: TaskId;
  readonly key: OperationKey;
  readonly callId: CallId;
  readonly callEvent: SessionEvent;
  readonly startedEvent: SessionEvent | null;
  readonly resultEvent: SessionEvent | null;
  /** The latest journaled review of this attempt, when it has one. */
  readonly review?: ToolReviewRecord;
}

export interface CommitReceipt {
  readonly events: SessionEvent[];
  /** With `budget.admit`: the output bytes reserved for the attempt (its effective output limit). */
  readonly reservedOutputBytes: number;
}

/** What the in-doubt guard asks a session owner: an operation's task, tool and argument digest. */
export interface InDoubtQuery {
  readonly taskId: string;
  readonly tool: string;
  /** The digest of the canonical JSON of the arguments (argumentsDigest). */
  readonly argsDigest: string;
  /** Call ids this host is still running, which are not in doubt and are passed over. */
  readonly running?: ReadonlySet<string>;
  /** The operation asking: its own attempts are passed over (a retry of an operation in doubt is not a repeat of it). */
  readonly exceptKey?: string;
  /**
   * The asking operation (`exceptKey`) is a retry of a write of its own: when its own row is in doubt or its retry
   * due, the identical operations in doubt or due beside it are writes of their own too (a model's parallel calls),
   * not ones it repeats, and are passed over, except `related`. Without it, two such writes in doubt, each free to
   * retry (idempotent), refused each other's retries for ever.
   */
  readonly ownWrite?: boolean;
  /**
   * With `ownWrite`: the call ids of the identical operations the retry could make twice with (its plan's repeats
   * and what they repeated), which still refuse it while in doubt or due.
   */
  readonly related?: ReadonlySet<string>;
  /**
   * Call ids of retries made from a plan that this host has under way (not for a retry asking): such a row refuses the
   * asking operation while no result is journaled for it, body started or not. The retry is its operation's write,
   * and an identical new operation beside it would make that write twice.
   */
  readonly retrying?: ReadonlySet<string>;
}

/**
 * The current, fenced writer of one session. Every write checks this owner's epoch in the same transaction; once
 * another acquire has raised the epoch, or after `release()`, every write fails with StaleOwnerError.
 */
export interface SessionOwner {
  readonly sessionId: SessionId;
  readonly epoch: number;
  /** The host identity given to `acquire`. */
  readonly owner: string;
  /** Starts a task in this session, or returns it unchanged if it exists here (a start never resets a budget). */
  startTask(taskId: string, options?: { limits?: Partial<TaskLimits> }): Promise<TaskSnapshot>;
  stopTask(taskId: string, reason: string): Promise<TaskSnapshot>;
  completeTask(taskId: string): Promise<TaskSnapshot>;
  task(taskId: string): Promise<TaskSnapshot>;
  /**
   * Appends host events (user and assistant messages, custom events, opaque events of unknown kinds). Tool calls,
   * start markers and results are refused with InvalidInputError: only the runtime records tool evidence.
   */
  append(events: readonly EventDraft[]): Promise<SessionEvent[]>;
  /**
   * The latest attempt of an operation of `binding.taskId` with the same tool and arguments (digest of their
   * canonical JSON), of any contract revision, whose recorded effect is not read-only and whose outcome is in doubt,
   * or, when none is, whose reviewed retry is still due (status `reviewed_not_executed`); or null
   * (docs/design.md#the-in-doubt-guard). Read from the store's attention index, never from the journal. Absent on a
   * store whose backend keeps no index.
   */
  findInDoubt?(binding: InDoubtQuery): Promise<AttentionItem | null>;
  /**
   * Optional (stores with a decision inbox): the operator's decision, not yet used, for the latest approval request
   * of this operation in this session; undefined when there is none.
   */
  decidedApproval?(taskId: string, key: string): Promise<DecisionRow | undefined>;
  /**
   * Optional (stores with a decision inbox): the oldest review decision of any of `callIds` (the attempts of one
   * operation) of this session recorded in the inbox and not journaled yet; undefined when none waits. A retry of the
   * operation is refused while one does.
   */
  waitingReview?(callIds: readonly string[]): Promise<DecisionRow | undefined>;
  /** Called in this process when this owner stops a task, so running calls of that task can be interrupted. */
  onTaskStopped(listener: (taskId: TaskId, reason: string) => void): () => void;
  /**
   * The latest attempt of operation (taskId, key) in this session, or undefined when the key has none. The store's
   * operation row names the attempt; its events come from the session's verified history (a full read: this is
   * the path of replays and in-doubt checks, not of ordinary calls).
   */
  readOperation(taskId: string, key: string): Promise<RecordedAttempt | undefined>;
  /** Gives the session up and stops the heartbeat; this owner is then stale. A no-op when already stale. */
  release(): Promise<void>;
  /** The lease this owner holds, in ms: its writes and its heartbeat renew it (docs/design.md#leases). */
  readonly leaseMs: number;
  /**
   * Renews the lease now (the heartbeat calls this every third of `leaseMs`) and resolves with the new expiry (ms
   * since the Unix epoch, on the store's clock). Fails with StaleOwnerError once fenced or released.
   */
  renewLease(): Promise<number>;
  /**
   * Whether the heartbeat still runs: false after release, after the store closed, and once a heartbeat found this
   * owner fenced (it then stops for good; the owner's next write fails with StaleOwnerError).
   */
  readonly heartbeating: boolean;
}

/** Acquire options (docs/design.md#leases). */
export interface AcquireOptions {
  /** The host identity recorded as the session's owner. */
  readonly owner: string;
  /**
   * What to do while another owner holds the session: `false` (the default) fails with SessionBusyError; `'expired'`
   * takes over only once the holder's lease has run out (SessionBusyError naming the holder and its expiry
   * otherwise); `true` fences the holder unconditionally. `'abandoned'` is `'expired'` for a startup routine that
   * listed the session as abandoned: a session nobody holds any more (another routine recovered and released it
   * since) is refused with StaleOwnerError, nothing written, instead of being acquired and recovered twice.
   */
  readonly takeover?: boolean | 'expired' | 'abandoned';
  /** The lease length in ms (LEASE_LIMITS: default 30 s, at least 100 ms, at most one day). */
  readonly leaseMs?: number;
  /**
   * Run the heartbeat that renews the lease every third of `leaseMs` (default true). With false, only the owner's
   * writes and its own `renewLease()` calls renew it.
   */
  readonly heartbeat?: boolean;
  /** Sign checkpoints of the chain head and hand them to `anchor.sink` (docs/design.md#anchored-signed-heads). */
  readonly anchor?: AnchorOptions;
}

export interface SessionSummary {
  readonly sessionId: SessionId;
  readonly events: number;
  readonly epoch: number;
  readonly owner: string | null;
  readonly held: boolean;
  /** When the holder's lease runs out (ms since the Unix epoch, the store's clock); null when released or unrecorded. */
  readonly leaseExpiresAt: number | null;
  /** Held, and its lease ran out by the store's clock when listed: its owner stopped writing and heartbeating. */
  readonly leaseExpired: boolean;
}

/** Filters for the attention queue (docs/design.md#the-attention-index). */
export interface AttentionQuery {
  readonly sessionId?: string;
  readonly tool?: string;
  readonly effect?: ToolEffect;
  /** One status or several; default `no_result`, `outcome_unknown` and `reviewed_not_executed` (what needs attention). */
  readonly status?: AttentionStatus | readonly AttentionStatus[];
  /**
   * Only operations whose latest attempt was last active at least this many milliseconds ago: its result's time, or
   * its start marker's before the result, or its call's before the marker (operations without a time are left out).
   * A body that started a moment ago after a long wait for approval is young, and so is a deadline recorded a moment
   * ago: its owner is at work. An outcome still open, or a write still due, that retries refused before their body
   * carried over from an earlier attempt is as old as that standing (`pendingSince`): a refused retry makes nothing.
   */
  readonly olderThanMs?: number;
  /** Page size, 1..1000; default 100. */
  readonly limit?: number;
  /** `next` of the previous page. */
  readonly cursor?: string | null;
}

/** One operation in the attention queue: its latest attempt, as the store's index knows it. Times are recorded-time text. */
export interface AttentionItem {
  readonly sessionId: SessionId;
  readonly taskId: TaskId;
  readonly key: string;
  readonly callId: string;
  readonly tool: string;
  readonly effect: ToolEffect;
  readonly revision: string;
  readonly status: AttentionStatus;
  /** Its start marker is recorded: the body started. */
  readonly started: boolean;
  /** The failure category of its result, null without one or for a success. */
  readonly category: string | null;
  /** The outcome is in doubt for an unknown or non-idempotent tool: what the in-doubt guard refuses to repeat. */
  readonly inDoubt: boolean;
  readonly calledAt: string | null;
  readonly startedAt: string | null;
  readonly endedAt: string | null;
  /**
   * Since when the operation's outcome has been open, or its write due, where its latest attempt never ran its body
   * and carried that over from an earlier one (refused before its body, stopped after its start marker, or still
   * waiting); null otherwise, and while a body has started and has no result.
   */
  readonly pendingSince: string | null;
}

export interface AttentionListing {
  readonly items: readonly AttentionItem[];
  /** The cursor of the next page, null on the last one. */
  readonly next: string | null;
}

export interface ImportReport {
  readonly sessionId: SessionId;
  readonly events: number;
}

export interface SessionStore {
  /** Which engine holds the journal: 'memory', 'sqlite', 'postgres', or a third-party backend's own name. */
  readonly kind: string;
  /**
   * Takes ownership of a session (creating it if new) under a fresh, higher epoch, with a lease its writes and a
   * heartbeat renew. Fails with SessionBusyError while another owner holds it, unless `takeover` is true (or
   * `'expired'` and the holder's lease ran out). With `anchor`, the owner signs checkpoints of its
   * chain head and hands them to `anchor.sink` (at acquire, after commits, at release; docs/design.md#anchored-signed-heads).
   */
  acquire(sessionId: string, options: AcquireOptions): Promise<SessionOwner>;
  /** The confirmed, integrity-checked journal; throws JournalCorruptError, never repairs. Empty for a new session. */
  loadHistory(sessionId: string): Promise<SessionEvent[]>;
  listSessions(): Promise<SessionSummary[]>;
  /**
   * The operations that need attention across sessions (by default those without a result or with an uncertain
   * one), paged in (session, task, key) order, read from the attention index kept at commit time: no journal is
   * loaded. Throws InvalidInputError for a bad filter, StoreUnavailableError('store_failure') on a backend without
   * the index.
   */
  attention(query?: AttentionQuery): Promise<AttentionListing>;
  /** The held sessions whose lease ran out by the store's clock: abandoned owners a recovering host may take over. */
  listExpiredSessions(): Promise<SessionSummary[]>;
  /** The session's journal as JSONL, one wire event per line, verified as by loadHistory. */
  exportJsonl(sessionId: string): Promise<string>;
  /**
   * Verifies the session as loadHistory does, then recomputes each task's ledger from its journaled changes and its
   * tool evidence and compares it with the stored task row (docs/design.md#the-task-ledger-in-the-chain).
   * JournalCorruptError (reason `task_ledger`, naming the task) when a row disagrees. Optional: a store without
   * task rows of its own has nothing to compare.
   */
  checkTaskLedger?(sessionId: string): Promise<TaskLedgerReport>;
  /**
   * Verifies the session as loadHistory does, then compares its lookup rows (the attention index and the operation
   * rows, which the queue, the in-doubt guard and caller keys read) with the ones the chain makes
   * (docs/design.md#the-lookup-rows-are-checked). JournalCorruptError (reason `attention_index` or
   * `operation_index`) at the first disagreement. Optional: a store without such rows has nothing to compare.
   */
  checkLookupRows?(sessionId: string): Promise<LookupRowsReport>;
  /**
   * The session ids with rows (events, tasks, operations, attention) but no owner row, which listSessions cannot
   * name: a deleted owner row would otherwise hide a damaged session from a store-wide verify. Optional.
   */
  sessionsWithoutOwnerRow?(): Promise<string[]>;
  /**
   * Imports a JSONL journal (ours, or one written by Jingwei for Rust) into a session that has no events yet, after verifying
   * it. The imported session is left released.
   */
  importJsonl(text: string, options: { owner: string; sessionId?: string }): Promise<ImportReport>;
  /** Closes the store; every later call (on the store or its owners) fails with StoreClosedError. Idempotent. */
  close(): Promise<void>;
}

export type { EventId };
