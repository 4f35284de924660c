import { InvalidInputError, JournalCorruptError, StoreClosedError, StoreUnavailableError, } from '../errors.js';
import { checkId, type SessionId, } from '../ids.js';
import type { SessionEvent } from '../event/types.js';
import { allAttentionRows, attentionItem, attentionPage, attentionScan, } from './attention.js';
import {
  decideAcquire,
  type TakeoverMode,
  leaseExpired,
} from './decisions.js';
import { LEASE_LIMITS } from '../limits.js';
import { exportJournal, importJournal } from './jsonl.js';
import { checkJournalAgainstAnchor, journalIdOf } from './anchor-log.js';
import { HeadAnchor } from './anchors.js';
import type { EventRow, JournalBackend, OperationRow, SessionRow, TaskRow, } from './rows.js';
import { checkTaskLedger, taskLedgerCoverage, type TaskLedgerReport } from './task-ledger.js';
import { LeaseWatch } from './lease-watch.js';
import { verifyJournal } from './verify.js';
import { bodyEnded, bodyMayStillRun, journalPendingBodyEnds, journalPendingBodyEndsIn } from '../tool/late-bodies.js';
import { heldBodiesEnded, storeScope } from './owner-commit.js';
import { latestAttempts, lookupRowsDisagreement, ownerRowDisagreement, type LookupRowsReport } from './index-check.js';
import { operationId } from '../tool/evidence.js';
import { FencedOwner, OpenGuard, readClock } from './fenced-owner.js';
import type {
  AttentionListing,
  AttentionQuery,
  AcquireOptions,
  ImportReport,
  SessionOwner,
  SessionStore,
  SessionSummary,
} from './types.js';

/** Options of a store built on a backend. */
export interface JournalStoreOptions {
  /**
   * The clock the store records event times with, in epoch milliseconds (default `Date.now`). Times never decrease
   * within a session whatever it returns (docs/design.md#recorded-times).
   */
  readonly clock?: () => number;
}

function checkLeaseMs(value: number | undefined): number {
  const v = value ?? LEASE_LIMITS.defaultMs;
  if (!Number.isSafeInteger(v) || v < LEASE_LIMITS.minMs || v > LEASE_LIMITS.maxMs) {
    throw new InvalidInputError('leaseMs', `must be an integer from ${LEASE_LIMITS.minMs} to ${LEASE_LIMITS.maxMs} ms, got ${String(v)}`);
  }
  return v;
}

function checkTakeover(value: unknown): TakeoverMode {
  if (value === undefined) return false;
  if (value === true || value === false || value === 'expired' || value === 'abandoned') return value;
  throw new InvalidInputError('takeover', `must be true, false, 'expired' or 'abandoned', got ${JSON.stringify(value) ?? String(value)}`);
}

/** The store's clock: the backend's when it has one (docs/design.md#leases). */
async function storeClock(backend: JournalBackend): Promise<number> {
  return backend.now ? backend.now() : Date.now();
}

const isLedgerDisagreement = (error: unknown): boolean => error instanceof JournalCorruptError && error.reason === 'task_ledger';

/**
 * Whether the stored `row` of `taskId` is the task's ledger as the chain stood after some event from `from` events on:
 * the row was read after the first `from` events and before the rest of `chain`.
 */
function matchesBetween(sessionId: SessionId, chain: { rows: EventRow[]; events: SessionEvent[] }, from: number, taskId: string, row: TaskRow): boolean {
  for (let end = from; end <= chain.rows.length; end++) {
    try {
      checkTaskLedger(sessionId, chain.events.slice(0, end), chain.rows.slice(0, end), new Map([[taskId, row]]));
      return true;
    } catch (error) {
      if (!isLedgerDisagreement(error)) throw error;
    }
  }
  return false;
}

/** Why a call may still be running (see JournalStore.callInFlight). */
export type CallInFlight = 'no_result' | 'body_outlived_result';

/** The one SessionStore implementation; engines differ only in their JournalBackend. */
export class JournalStore implements SessionStore {
  readonly kind: string;
  private readonly guard: OpenGuard;
  private readonly clock: () => number;
  constructor(readonly backend: JournalBackend, options: JournalStoreOptions = {}) {
    this.kind = backend.kind;
    this.guard = new OpenGuard(backend);
    this.clock = options.clock ?? Date.now;
  }

  async acquire(sessionId: string, options: AcquireOptions): Promise<SessionOwner> {
    this.guard.check();
    const id = checkId<SessionId>('sessionId', sessionId);
    const ownerName = checkId<string>('owner', options?.owner);
    const takeover = checkTakeover(options.takeover);
    const leaseMs = checkLeaseMs(options.leaseMs);
    if (options.heartbeat !== undefined && typeof options.heartbeat !== 'boolean') {
      throw new InvalidInputError('heartbeat', `must be a boolean, got ${typeof options.heartbeat}`);
    }
    const anchor = options.anchor !== undefined ? new HeadAnchor(options.anchor, journalIdOf(this.backend)) : null;
    if (anchor) await checkJournalAgainstAnchor(id, anchor, () => this.readChain(id));
    const sentAt = LeaseWatch.now();
    // Any event of the session (the first after seq -1 under any epoch): an acquire that would create its owner row
    // refuses a journal that already has events (decideAcquire).
    const row = await this.backend.transact(id, { writtenSince: { seq: -1, epoch: Number.MAX_SAFE_INTEGER } }, decideAcquire(id, ownerName, takeover, leaseMs));
    const owner = new FencedOwner(this.backend, this.guard, { sessionId: id, epoch: row.epoch, leaseMs }, ownerName, anchor, this.clock, sentAt);
    if (options.heartbeat !== false) owner.startHeartbeat();
    if (anchor) await anchor.observe(row, true);
    // A body of this session that ended here while no owner here held it: its end reaches the journal now, before the
    // new owner decides anything on it (docs/design.md#a-body-that-outlives-its-attempt).
    await journalPendingBodyEnds(owner);
    return owner;
  }

  async loadHistory(sessionId: string): Promise<SessionEvent[]> {
    this.guard.check();
    // A read begun while close() stops the calls in flight would wait on a connection the close is about to end.
    if (this.guard.closing) throw new StoreClosedError(this.backend.kind, this.backend.location);
    const id = checkId<SessionId>('sessionId', sessionId);
    if (this.backend.scanSnapshot) return this.backend.scanSnapshot(id, (session, events) => verifyJournal(id, session, events));
    const { session, events } = await this.backend.snapshot(id);
    return verifyJournal(id, session, events);
  }

  async sessionsWithoutOwnerRow(): Promise<string[]> {
    this.guard.check();
    return (await this.backend.sessionsWithoutOwnerRow?.()) ?? [];
  }

  async listSessions(): Promise<SessionSummary[]> {
    this.guard.check();
    const rows = await this.backend.listSessions();
    const now = await storeClock(this.backend);
    return rows.map(({ session, events }) => ({
      sessionId: session.sessionId,
      events,
      epoch: session.epoch,
      owner: session.owner,
      held: session.held,
      leaseExpiresAt: session.held ? (session.leaseExpiresAt ?? null) : null,
      leaseExpired: leaseExpired(session, now),
    }));
  }

  async attention(query: AttentionQuery = {}): Promise<AttentionListing> {
    this.guard.check();
    const scan = attentionScan(query, readClock(this.clock));
    if (!this.backend.scanAttention) {
      throw new StoreUnavailableError('store_failure', `the ${this.kind} backend keeps no attention index (JournalBackend.scanAttention)`);
    }
    const page = attentionPage(await this.backend.scanAttention(scan), scan);
    return { items: page.rows.map(attentionItem), next: page.next };
  }

  async listExpiredSessions(): Promise<SessionSummary[]> {
    return (await this.listSessions()).filter((s) => s.leaseExpired);
  }

  /**
   * Compares the session's lookup rows (its attention index and operation rows) with the ones its verified chain
   * makes (docs/design.md#the-lookup-rows-are-checked): JournalCorruptError (reason `attention_index` or
   * `operation_index`) at the first disagreement. The rows are read between two reads of the chain that found it
   * unchanged, so a live session's commits are not taken for damage; a session that changed under four attempts is
   * reported unchecked.
   */
  async checkLookupRows(sessionId: string): Promise<LookupRowsReport> {
    this.guard.check();
    const id = checkId<SessionId>('sessionId', sessionId);
    const backend = this.backend;
    for (let attempt = 0; attempt < 4; attempt += 1) {
      const { session, rows, events } = await this.readChain(id);
      const attention = backend.scanAttention ? await allAttentionRows(backend, id) : null;
      let operations: Map<string, OperationRow | undefined> | null = null;
      if (backend.scanOperations) {
        operations = new Map((await backend.scanOperations(id)).map((op) => [operationId(op.taskId, op.key), op]));
      } else if (backend.readOperation) {
        operations = new Map();
        for (const [k, op] of latestAttempts(events)) operations.set(k, await backend.readOperation(id, op.taskId, op.key));
      }
      if ((await backend.snapshot(id)).events.length !== events.length) continue;
      const problem = lookupRowsDisagreement(id, events, attention, operations) ?? ownerRowDisagreement(id, session, rows, events);
      if (problem) throw problem;
      const storage = await backend.checkLookupStorage?.();
      if (storage) {
        throw new JournalCorruptError(id, Math.max(events.length - 1, 0), storage.table === 'attention' ? 'attention_index' : 'operation_index',
          `the ${storage.table} table's rows agree with the chain, but an index over them does not (the queue and the in-doubt guard read through it): ${storage.problem}`);
      }
      return { checked: true, attentionRows: attention?.length ?? 0, operationRows: operations?.size ?? 0 };
    }
    return { checked: false, attentionRows: 0, operationRows: 0 };
  }

  /** The verified rows of a session with its owner row and epoch (for chained exports, anchor and lookup-row checks). */
  async readChain(sessionId: string): Promise<{ epoch: number; session: SessionRow | undefined; rows: EventRow[]; events: SessionEvent[] }> {
    this.guard.check();
    const id = checkId<SessionId>('sessionId', sessionId);
    const { session, events } = await this.backend.snapshot(id);
    return { epoch: session?.epoch ?? 0, session, rows: events, events: verifyJournal(id, session, events) };
  }

  /**
   * The session's verified journal, and whether the attempt `callId` may still be running: the session's holder
   * wrote its call (the same ownership epoch), its lease is live by the store's clock, and no result is journaled
   * (`no_result`), or the result is a deadline, cancellation or task stop recorded while the body ran and no event
   * says the body has ended since (`body_outlived_result`, docs/design.md#a-body-that-outlives-its-attempt). A
   * review of such a call could be overtaken by its body (docs/design.md#a-review-waits-for-the-call-to-stop).
   */
  async callInFlight(sessionId: string, callId: string): Promise<{ history: SessionEvent[]; inFlight: CallInFlight | null }> {
    this.guard.check();
    const id = checkId<SessionId>('sessionId', sessionId);
    // The store's clock first, the lease after: a lease renewed while this reader paused between the two reads is
    // still seen live, where a clock read after the snapshot would find the lease it holds run out.
    const now = await storeClock(this.backend);
    const { session, events: rows } = await this.backend.snapshot(id);
    const history = verifyJournal(id, session, rows);
    const call = history.find((e) => e.kind.type === 'tool_call' && e.kind.call.id === callId);
    if (!session || !call || !session.held) return { history, inFlight: null };
    const settled = history.some((e) => e.kind.type === 'tool_result' && e.kind.result.callId === callId);
    // With no result, a body end the host journaled (its result could not be written, or its start marker's commit
    // landed unconfirmed and the body was never called) says the call is not running.
    const running: CallInFlight | null = !settled ? (bodyEnded(history, callId) === null ? 'no_result' : null)
      : bodyMayStillRun(history, callId) ? 'body_outlived_result' : null;
    const writer = rows[call.seq]?.epoch;
    const holds = running !== null && writer === session.epoch && !leaseExpired(session, now);
    return { history, inFlight: holds ? running : null };
  }

  /**
   * Recomputes each journaled task's ledger from the verified chain and compares it with the stored task row. The
   * chain and the task rows are two reads, so on a live session a commit between them makes a row newer than the
   * chain it is compared with, with nothing damaged. A disagreement therefore reads the chain again: each row must
   * match the chain as it stood at some point between the two reads (docs/design.md#the-task-ledger-in-the-chain).
   */
  async checkTaskLedger(sessionId: string): Promise<TaskLedgerReport> {
    const id = checkId<SessionId>('sessionId', sessionId);
    const { rows, events } = await this.readChain(id);
    const rowsByTask = new Map<string, TaskRow | undefined>();
    for (const e of events) {
      if (e.kind.type === 'task_ledger' && !rowsByTask.has(e.kind.ledger.taskId)) {
        rowsByTask.set(e.kind.ledger.taskId, await this.backend.readTask(id, e.kind.ledger.taskId));
      }
    }
    try {
      return checkTaskLedger(id, events, rows, rowsByTask);
    } catch (error) {
      if (!isLedgerDisagreement(error)) throw error;
      const later = await this.readChain(id);
      if (later.rows.length === rows.length) throw error;
      for (const [taskId, row] of rowsByTask) {
        if (row !== undefined && !matchesBetween(id, later, rows.length, taskId, row)) throw error;
      }
      return taskLedgerCoverage(events, rowsByTask);
    }
  }

  async exportJsonl(sessionId: string): Promise<string> {
    return exportJournal(await this.loadHistory(sessionId));
  }

  async importJsonl(text: string, options: { owner: string; sessionId?: string }): Promise<ImportReport> {
    this.guard.check();
    return importJournal(this.backend, text, options);
  }

  async close(): Promise<void> {
    if (this.guard.closed) return;
    // The calls in flight are stopped and record their outcomes first: none starts, or goes on unrecorded, after
    // close() returns (docs/design.md#letting-a-session-go-stops-its-calls).
    this.guard.closing = true;
    await Promise.all([...this.guard.callStoppers].map((stop) => stop('the store is closing')));
    // A stopped body that ignores its signal can still make its write: its session stays held, the heartbeats
    // running, until it ends and its end is journaled; closed before, the lease ran out under a body still running.
    await heldBodiesEnded(storeScope(this.backend), this.guard, `close() of the ${this.backend.kind} store${this.backend.location === undefined ? '' : ` at ${this.backend.location}`}`);
    // Body ends no journal has taken yet, through the owners that hold their sessions here, while they still can.
    await journalPendingBodyEndsIn(storeScope(this.backend));
    if (this.guard.closed) return;
    this.guard.closed = true;
    for (const stop of [...this.guard.heartbeats]) stop();
    await this.backend.close();
  }
}
