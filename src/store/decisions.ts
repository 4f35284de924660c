/**
 * The store's rules, as pure decisions over what a transaction read. Every backend runs these inside one atomic
 * transaction, so fencing, sequencing, the hash chain, budgets and the D4 latest-attempt check are written once.
 */
import { BudgetExhaustedError, InvalidInputError, OperationInDoubtError, JournalFullError, SessionBusyError, StaleOwnerError, StoreConflictError, TaskNotFoundError, TaskNotRunningError, ToolRetryError, WireDecodeError } from '../errors.js';
import { apiFieldPath } from '../event/api-path.js';
import { decodeEventText, encodeEventText } from '../event/codec.js';
import type { EventDraft, SessionEvent } from '../event/types.js';
import { newEventId, type SessionId, type TaskId, type TurnId } from '../ids.js';
import { LIMITS, TASK_DEFAULTS } from '../limits.js';
import { utf8Length } from '../text.js';
import { chainHash, GENESIS_HASH } from './chain.js';
import type { EventRow, OperationRow, Reservation, SessionRow, TaskRow, TxState, TxWrites } from './rows.js';
import type { CommitRequest, TaskLimits, TaskSnapshot, TaskState } from './types.js';

export interface OwnerRef {
  readonly sessionId: SessionId;
  readonly epoch: number;
  /** The owner's lease: each of its writes renews it to the store's now plus this (docs/design.md#leases). */
  readonly leaseMs?: number;
}

/** The store's now for this transaction: the backend's clock when it reports one, else this process's. */
export function storeNow(state: TxState): number {
  return state.now ?? Date.now();
}

/** Whether a held session's lease has run out at `now`; a session without a recorded lease never expires by itself. */
export function leaseExpired(session: SessionRow, now: number): boolean {
  return session.held && typeof session.leaseExpiresAt === 'number' && session.leaseExpiresAt <= now;
}

/** The owner row with the owner's lease renewed from the store's now (unchanged for an owner without a lease). */
function renewLease(session: SessionRow, owner: OwnerRef, state: TxState): SessionRow {
  return owner.leaseMs === undefined ? session : { ...session, leaseExpiresAt: storeNow(state) + owner.leaseMs };
}

/** How an acquire treats a session another owner holds: refuse, fence it unconditionally, or only once its lease ran out. */
export type TakeoverMode = boolean | 'expired';

function requireOwner(session: SessionRow | undefined, owner: OwnerRef): SessionRow {
  if (!session) throw new StaleOwnerError(owner.sessionId, owner.epoch, 'the session does not exist');
  if (session.epoch !== owner.epoch) {
    throw new StaleOwnerError(owner.sessionId, owner.epoch, `fenced by epoch ${session.epoch}`);
  }
  if (!session.held) throw new StaleOwnerError(owner.sessionId, owner.epoch, 'ownership was released');
  return session;
}

export function decideAcquire(sessionId: SessionId, owner: string, takeover: TakeoverMode, leaseMs: number) {
  return (state: TxState): TxWrites<SessionRow> => {
    const current = state.session;
    const now = storeNow(state);
    if (current?.held && takeover !== true && !(takeover === 'expired' && leaseExpired(current, now))) {
      throw new SessionBusyError(sessionId, current.owner ?? '?', current.epoch, current.leaseExpiresAt ?? null);
    }
    const leaseExpiresAt = now + leaseMs;
    const row: SessionRow = current
      ? { ...current, owner, held: true, epoch: current.epoch + 1, leaseExpiresAt }
      : { sessionId, owner, held: true, epoch: 1, lastSeq: -1, headHash: GENESIS_HASH, bodyBytes: 0, leaseExpiresAt };
    return {
      session: { row, expect: current ? { epoch: current.epoch, lastSeq: current.lastSeq } : null },
      result: row,
    };
  };
}

export function decideRelease(owner: OwnerRef) {
  return (state: TxState): TxWrites<boolean> => {
    const s = state.session;
    if (!s || s.epoch !== owner.epoch || !s.held) return { result: false };
    return { session: { row: { ...s, held: false, leaseExpiresAt: null }, expect: { epoch: s.epoch, lastSeq: s.lastSeq } }, result: true };
  };
}

/** A heartbeat: renews the owner's lease without writing an event; StaleOwnerError once fenced or released. */
export function decideRenew(owner: OwnerRef & { readonly leaseMs: number }) {
  return (state: TxState): TxWrites<number> => {
    const leaseExpiresAt = storeNow(state) + owner.leaseMs;
    return { session: fenceOnly({ ...requireOwner(state.session, owner), leaseExpiresAt }), result: leaseExpiresAt };
  };
}

/** Compact-JSON size of a whole history array whose event bodies sum to `bodyBytes`. */
export function historyBytes(events: number, bodyBytes: number): number {
  return events === 0 ? 2 : 2 + bodyBytes + (events - 1);
}

/** Turns drafts into positioned, hashed rows after the session's current head. */
export function chainEvents(session: SessionRow, epoch: number, drafts: readonly EventDraft[]) {
  const events: SessionEvent[] = [];
  const rows: EventRow[] = [];
  const count = session.lastSeq + 1 + drafts.length;
  if (count > LIMITS.maxHistoryEvents) {
    throw new JournalFullError(session.sessionId, `${count} events exceed the limit of ${LIMITS.maxHistoryEvents}`);
  }
  let hash = session.headHash;
  let bytes = session.bodyBytes;
  drafts.forEach((draft, i) => {
    const event: SessionEvent = {
      eventId: draft.eventId ?? newEventId(),
      sessionId: session.sessionId,
      turnId: draft.turnId as TurnId,
      seq: session.lastSeq + 1 + i,
      kind: draft.kind,
      ...(draft.generationId !== undefined ? { generationId: draft.generationId } : {}),
      ...(draft.messageId !== undefined ? { messageId: draft.messageId } : {}),
    };
    if (typeof draft?.kind !== 'object' || draft.kind === null) {
      throw new InvalidInputError(`events[${i}].kind`, 'is required: { type: \'custom\', plugin, kind, payload } or another event kind');
    }
    let body: string;
    // Never store what could not be loaded (or exported and imported) again: that would lose the whole session.
    try {
      body = encodeEventText(event);
      decodeEventText(body);
    } catch (error) {
      // Name the draft's own field (`turnId`), not its wire form (`turn_id`).
      if (error instanceof WireDecodeError) {
        const detail = error.message.startsWith(`${error.path}: `) ? error.message.slice(error.path.length + 2) : error.message;
        throw new InvalidInputError(`events[${i}].${apiFieldPath(error.path)}`, `cannot be journaled: ${detail}`, { cause: error });
      }
      throw new InvalidInputError(`events[${i}]`, `cannot be journaled: ${(error as Error).message}`, { cause: error });
    }
    hash = chainHash(hash, epoch, body);
    bytes += utf8Length(body);
    events.push(event);
    rows.push({ sessionId: session.sessionId, seq: event.seq, eventId: event.eventId, epoch, body, hash });
  });
  const total = historyBytes(count, bytes);
  if (total > LIMITS.maxHistoryBytes) {
    throw new JournalFullError(session.sessionId, `${total} bytes exceed the limit of ${LIMITS.maxHistoryBytes}`);
  }
  const head: SessionRow = { ...session, lastSeq: session.lastSeq + drafts.length, headHash: hash, bodyBytes: bytes };
  return { events, rows, head };
}

function operationsOf(sessionId: SessionId, events: readonly SessionEvent[]): OperationRow[] {
  const ops: OperationRow[] = [];
  for (const e of events) {
    if (e.kind.type === 'tool_call' && e.kind.call.operation) {
      const op = e.kind.call.operation;
      ops.push({ taskId: op.taskId, key: op.key, sessionId, callId: e.kind.call.id, eventId: e.eventId });
    }
  }
  return ops;
}

export interface CommitOutcome {
  readonly events: SessionEvent[];
  readonly reservedOutputBytes: number;
}

/** The event ids drafts name themselves (the store mints the others, which cannot collide). */
export function draftEventIds(drafts: readonly EventDraft[]): string[] {
  const ids: string[] = [];
  for (const d of drafts) if (typeof d?.eventId === 'string') ids.push(d.eventId);
  return ids;
}

/** An event id names one event of its session: refuse a repeat within the batch or of a stored event (docs/design.md#event-ids-are-unique). */
function refuseDuplicateIds(sessionId: SessionId, drafts: readonly EventDraft[], existing: readonly string[]): void {
  const seen = new Set<string>();
  for (const id of draftEventIds(drafts)) {
    if (seen.has(id)) throw new StoreConflictError('duplicate_event_id', `the batch names event id ${JSON.stringify(id)} twice`);
    seen.add(id);
  }
  if (existing.length > 0) {
    throw new StoreConflictError('duplicate_event_id', `session ${sessionId} already has an event with id ${JSON.stringify(existing[0])}`);
  }
}

export function decideCommit(owner: OwnerRef, request: CommitRequest) {
  return (state: TxState): TxWrites<CommitOutcome> => {
    const session = renewLease(requireOwner(state.session, owner), owner, state);
    refuseDuplicateIds(session.sessionId, request.events, state.existingEventIds);
    const fresh = request.expectNewOperation;
    if (fresh && state.operation) {
      throw new OperationInDoubtError(fresh.taskId, fresh.key, state.operation.callId, 'another attempt under this key was recorded first');
    }
    const latest = request.expectLatestAttempt;
    if (latest) {
      const op = state.operation;
      if (!op || op.callId !== latest.callId) {
        throw new ToolRetryError(
          'not_latest_attempt',
          `the plan's source ${latest.callId} is no longer the latest attempt of operation ${latest.key}` +
            (op ? ` (latest is ${op.callId})` : ''),
        );
      }
    }
    let task: TxWrites['task'];
    let reserved = 0;
    if (request.budget) {
      const budgeted = applyBudget(requireTask(state.task, request.budget.taskId, session.sessionId), owner.epoch, request);
      task = { row: budgeted.row, insert: false };
      reserved = budgeted.reserved;
    }
    const chained = chainEvents(session, owner.epoch, request.events);
    return {
      session: { row: chained.head, expect: { epoch: session.epoch, lastSeq: session.lastSeq } },
      events: chained.rows,
      ...(task ? { task } : {}),
      operations: operationsOf(session.sessionId, chained.events),
      result: { events: chained.events, reservedOutputBytes: reserved },
    };
  };
}

function requireTask(task: TaskRow | undefined, taskId: string, sessionId: SessionId): TaskRow {
  if (!task || task.sessionId !== sessionId) throw new TaskNotFoundError(taskId, sessionId);
  return task;
}

/** Settles the reservations of fenced owners: refunded if the body never started, charged in full if it may have run. */
export function settleAbandoned(row: TaskRow, epoch: number): TaskRow {
  if (!row.reservations.some((r) => r.epoch < epoch)) return row;
  let charged = row.chargedOutputBytes;
  const kept: Reservation[] = [];
  for (const r of row.reservations) {
    if (r.epoch >= epoch) kept.push(r);
    else if (r.started) charged += r.bytes;
  }
  return withReservations({ ...row, chargedOutputBytes: charged }, kept);
}

function withReservations(row: TaskRow, reservations: Reservation[]): TaskRow {
  return { ...row, reservations, reservedOutputBytes: reservations.reduce((sum, r) => sum + r.bytes, 0) };
}

function applyBudget(task: TaskRow, epoch: number, request: CommitRequest): { row: TaskRow; reserved: number } {
  const budget = request.budget!;
  let row = settleAbandoned(task, epoch);
  let reservations = [...row.reservations];
  let reserved = 0;
  const calls = request.events.filter((e) => e.kind.type === 'tool_call');
  if (budget.admit) {
    if (calls.length !== 1) throw new InvalidInputError('budget.admit', 'an admission commit carries exactly one tool_call');
    if (row.state !== 'running') throw new TaskNotRunningError(row.taskId, row.state);
    if (row.chargedToolCalls + 1 > row.limitToolCalls) {
      throw new BudgetExhaustedError(row.taskId, 'tool_calls', `${row.chargedToolCalls} of ${row.limitToolCalls} used`);
    }
    const remaining = row.limitOutputBytes - row.chargedOutputBytes - row.reservedOutputBytes;
    if (remaining <= 0) {
      throw new BudgetExhaustedError(row.taskId, 'tool_output_bytes', `${row.chargedOutputBytes} of ${row.limitOutputBytes} used`);
    }
    reserved = Math.min(budget.admit.maxOutputBytes, remaining);
    const callId = (calls[0]!.kind as { call: { id: string } }).call.id;
    reservations.push({ callId, bytes: reserved, started: false, epoch });
    row = { ...row, chargedToolCalls: row.chargedToolCalls + 1 };
  }
  for (const e of request.events) {
    if (e.kind.type === 'tool_started') {
      const callId = e.kind.callId;
      reservations = reservations.map((r) => (r.callId === callId ? { ...r, started: true } : r));
    } else if (e.kind.type === 'tool_result') {
      const callId = e.kind.result.callId;
      // A result is charged at most what its attempt reserved: never past the task's limit
      // (docs/design.md#budgets-are-exact). No reservation left (already settled) means nothing more to charge.
      const held = reservations.find((r) => r.callId === callId)?.bytes ?? 0;
      reservations = reservations.filter((r) => r.callId !== callId);
      const requested = budget.settle?.chargeOutputBytes ?? 0;
      if (!Number.isSafeInteger(requested) || requested < 0) {
        throw new InvalidInputError('budget.settle.chargeOutputBytes', `must be a non-negative safe integer, got ${requested}`);
      }
      row = { ...row, chargedOutputBytes: row.chargedOutputBytes + Math.min(requested, held) };
    }
  }
  return { row: withReservations(row, reservations), reserved };
}

function checkLimit(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v < 0) throw new InvalidInputError(name, `must be a non-negative safe integer, got ${v}`);
  return v;
}

export function decideStartTask(owner: OwnerRef, taskId: TaskId, limits: Partial<TaskLimits> | undefined) {
  const toolCalls = checkLimit('limits.toolCalls', limits?.toolCalls, TASK_DEFAULTS.toolCalls);
  const toolOutputBytes = checkLimit('limits.toolOutputBytes', limits?.toolOutputBytes, TASK_DEFAULTS.toolOutputBytes);
  return (state: TxState): TxWrites<TaskRow> => {
    const session = renewLease(requireOwner(state.session, owner), owner, state);
    const existing = state.task;
    if (existing) {
      if (existing.sessionId !== session.sessionId) {
        throw new StoreConflictError('task_in_other_session', `task ${taskId} belongs to session ${existing.sessionId}`);
      }
      return { session: fenceOnly(session), result: existing };
    }
    const row: TaskRow = {
      taskId,
      sessionId: session.sessionId,
      state: 'running',
      limitToolCalls: toolCalls,
      limitOutputBytes: toolOutputBytes,
      chargedToolCalls: 0,
      chargedOutputBytes: 0,
      reservedOutputBytes: 0,
      reservations: [],
      stopReason: null,
    };
    return { session: fenceOnly(session), task: { row, insert: true }, result: row };
  };
}

export function decideTaskState(owner: OwnerRef, taskId: string, next: Exclude<TaskState, 'running'>, reason: string | null) {
  return (state: TxState): TxWrites<TaskRow> => {
    const session = renewLease(requireOwner(state.session, owner), owner, state);
    const task = settleAbandoned(requireTask(state.task, taskId, session.sessionId), owner.epoch);
    if (task.state !== 'running') return { session: fenceOnly(session), result: task };
    const row: TaskRow = { ...task, state: next, stopReason: reason };
    return { session: fenceOnly(session), task: { row, insert: false }, result: row };
  };
}

/** A write that changes nothing on the owner row but still goes through its conditional update. */
function fenceOnly(session: SessionRow): NonNullable<TxWrites['session']> {
  return { row: session, expect: { epoch: session.epoch, lastSeq: session.lastSeq } };
}

/** Imports verified events into an empty session, under a fresh epoch, leaving the session released. */
export function decideImport(sessionId: SessionId, owner: string, events: readonly SessionEvent[]) {
  return (state: TxState): TxWrites<number> => {
    const current = state.session;
    if (current && current.lastSeq >= 0) {
      throw new StoreConflictError('session_exists', `session ${sessionId} already has ${current.lastSeq + 1} events`);
    }
    if (current?.held) throw new SessionBusyError(sessionId, current.owner ?? '?', current.epoch);
    const base: SessionRow = current
      ? { ...current, owner, epoch: current.epoch + 1 }
      : { sessionId, owner, held: false, epoch: 1, lastSeq: -1, headHash: GENESIS_HASH, bodyBytes: 0, leaseExpiresAt: null };
    const drafts: EventDraft[] = events.map((e) => ({
      eventId: e.eventId,
      turnId: e.turnId,
      kind: e.kind,
      ...(e.generationId !== undefined ? { generationId: e.generationId } : {}),
      ...(e.messageId !== undefined ? { messageId: e.messageId } : {}),
    }));
    const chained = chainEvents(base, base.epoch, drafts);
    return {
      session: { row: { ...chained.head, held: false }, expect: current ? { epoch: current.epoch, lastSeq: current.lastSeq } : null },
      events: chained.rows,
      operations: operationsOf(sessionId, chained.events),
      result: chained.events.length,
    };
  };
}

/** What an owner at `epoch` sees: reservations of fenced owners count as settled, as its next budget write will make them. */
export function taskSnapshot(stored: TaskRow, epoch: number): TaskSnapshot {
  const row = settleAbandoned(stored, epoch);
  return {
    taskId: row.taskId,
    sessionId: row.sessionId,
    state: row.state,
    limits: { toolCalls: row.limitToolCalls, toolOutputBytes: row.limitOutputBytes },
    charged: { toolCalls: row.chargedToolCalls, toolOutputBytes: row.chargedOutputBytes },
    reservedOutputBytes: row.reservedOutputBytes,
    stopReason: row.stopReason,
  };
}
