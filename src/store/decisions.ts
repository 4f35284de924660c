/**
 * The store's rules, as pure decisions over what a transaction read. Every backend runs these inside one atomic
 * transaction, so fencing, sequencing, the hash chain, budgets and the D4 latest-attempt check are written once.
 */
import { decideApprovalChange } from './approvals.js';
import { BudgetExhaustedError, InvalidInputError, JournalCorruptError, OperationInDoubtError, JournalFullError, SessionBusyError, StaleOwnerError, StoreConflictError, TaskNotFoundError, TaskNotRunningError, ToolRetryError, WireDecodeError } from '../errors.js';
import { apiFieldPath } from '../event/api-path.js';
import { decodeEncodedEventText, encodeEventText, recordedAtText } from '../event/codec.js';
import type { EventDraft, SessionEvent, TaskLedgerChange, TaskLedgerRecord } from '../event/types.js';
import { newEventId, type SessionId, type TaskId, type TurnId } from '../ids.js';
import { LIMITS, TASK_DEFAULTS } from '../limits.js';
import { utf8Length } from '../text.js';
import { attentionWrites, keepsReviewRoom } from './attention.js';
import { chainedEventIds, chainHash, GENESIS_HASH } from './chain.js';
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

/**
 * How an acquire treats a session another owner holds: refuse, fence it unconditionally, or only once its lease ran
 * out; `abandoned` as `expired`, and refuses a session nobody holds (released since it was listed): there is nothing
 * to recover.
 */
export type TakeoverMode = boolean | 'expired' | 'abandoned';

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
    if (takeover === 'abandoned' && !current?.held) {
      throw new StaleOwnerError(sessionId, current?.epoch ?? 0,
        current ? `released by ${current.owner ?? 'its owner'} at epoch ${current.epoch}: nobody abandoned it, so there is nothing to take over` : 'the session does not exist');
    }
    const expiredMayGo = (takeover === 'expired' || takeover === 'abandoned') && current !== undefined && leaseExpired(current, now);
    if (current?.held && takeover !== true && !expiredMayGo) {
      throw new SessionBusyError(sessionId, current.owner ?? '?', current.epoch, current.leaseExpiresAt ?? null, owner, leaseExpired(current, now));
    }
    // No owner row, yet events of the session (an owner row deleted by hand, a partial restore): a new row at epoch 1
    // would sit under a journal it does not head, and every write would fail on a key the events already hold.
    if (!current && typeof state.writtenSince === 'number') {
      throw new JournalCorruptError(sessionId, state.writtenSince, 'head_mismatch', 'the session has events but no owner row: restore the owner row (jingwei verify reports the journal) before taking the session');
    }
    const leaseExpiresAt = now + leaseMs;
    const row: SessionRow = current
      ? { ...current, owner, held: true, epoch: current.epoch + 1, leaseExpiresAt }
      : { sessionId, owner, held: true, epoch: 1, lastSeq: -1, headHash: GENESIS_HASH, bodyBytes: 0, recordedAt: null, leaseExpiresAt };
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

/** A draft with the time it was recorded at: what an import hands on from the file it reads. */
type TimedDraft = EventDraft & { readonly recordedAt?: string };

/** An imported history as the drafts its import chains again: ids, turns, kinds and recorded times kept. */
export function importDrafts(events: readonly SessionEvent[]): TimedDraft[] {
  return events.map((e) => ({
    eventId: e.eventId,
    turnId: e.turnId,
    kind: e.kind,
    ...(e.generationId !== undefined ? { generationId: e.generationId } : {}),
    ...(e.messageId !== undefined ? { messageId: e.messageId } : {}),
    ...(e.recordedAt !== undefined ? { recordedAt: e.recordedAt } : {}),
  }));
}

/**
 * Turns drafts into positioned, hashed rows after the session's current head, written by `epochs` (one epoch for all,
 * or, for an import that keeps a chained export's, draft i's). With `now` (a commit), every event is recorded at
 * max(now, the session's last time), so times never decrease (docs/design.md#recorded-times); without it (an
 * import), each keeps the time it carries, and those must not decrease.
 */
export function chainEvents(session: SessionRow, epochs: number | readonly number[], drafts: readonly TimedDraft[], now: number | null = null) {
  const events: SessionEvent[] = [];
  const rows: EventRow[] = [];
  const count = session.lastSeq + 1 + drafts.length;
  if (count > LIMITS.maxHistoryEvents) {
    throw new JournalFullError(session.sessionId, `${count} events exceed the limit of ${LIMITS.maxHistoryEvents}`);
  }
  let hash = session.headHash;
  let bytes = session.bodyBytes;
  let last = session.recordedAt ?? null;
  drafts.forEach((draft, i) => {
    let recordedAt: string | undefined;
    if (now !== null) {
      last = last === null || now > last ? now : last;
      recordedAt = recordedAtText(last);
    } else if (draft?.recordedAt !== undefined) {
      const at = Date.parse(draft.recordedAt);
      if (last !== null && at < last) {
        throw new InvalidInputError(`events[${i}].recordedAt`, `${draft.recordedAt} is earlier than the event before it (${recordedAtText(last)}); recorded times never decrease`);
      }
      last = at;
      recordedAt = draft.recordedAt;
    }
    const event: SessionEvent = {
      eventId: draft.eventId ?? newEventId(),
      sessionId: session.sessionId,
      turnId: draft.turnId as TurnId,
      seq: session.lastSeq + 1 + i,
      kind: draft.kind,
      ...(draft.generationId !== undefined ? { generationId: draft.generationId } : {}),
      ...(draft.messageId !== undefined ? { messageId: draft.messageId } : {}),
      ...(recordedAt !== undefined ? { recordedAt } : {}),
    };
    if (typeof draft?.kind !== 'object' || draft.kind === null) {
      throw new InvalidInputError(`events[${i}].kind`, 'is required: { type: \'custom\', plugin, kind, payload } or another event kind');
    }
    let body: string;
    // Never store what could not be loaded (or exported and imported) again: that would lose the whole session.
    try {
      body = encodeEventText(event);
      decodeEncodedEventText(body);
    } catch (error) {
      // Name the draft's own field (`turnId`), not its wire form (`turn_id`).
      if (error instanceof WireDecodeError) {
        const detail = error.message.startsWith(`${error.path}: `) ? error.message.slice(error.path.length + 2) : error.message;
        throw new InvalidInputError(`events[${i}].${apiFieldPath(error.path)}`, `cannot be journaled: ${detail}`, { cause: error });
      }
      throw new InvalidInputError(`events[${i}]`, `cannot be journaled: ${(error as Error).message}`, { cause: error });
    }
    const epoch = typeof epochs === 'number' ? epochs : epochs[i]!;
    hash = chainHash(hash, epoch, body);
    bytes += utf8Length(body);
    events.push(event);
    rows.push({ sessionId: session.sessionId, seq: event.seq, eventId: event.eventId, epoch, body, hash });
  });
  const total = historyBytes(count, bytes);
  if (total > LIMITS.maxHistoryBytes) {
    throw new JournalFullError(session.sessionId, `${total} bytes exceed the limit of ${LIMITS.maxHistoryBytes}`);
  }
  const head: SessionRow = { ...session, lastSeq: session.lastSeq + drafts.length, headHash: hash, bodyBytes: bytes, recordedAt: last };
  // The new bodies' UTF-8 size, measured once here for the history limit and reused by the task's journal charge.
  return { events, rows, head, addedBytes: bytes - session.bodyBytes, historyBytes: total };
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
  /** The operations whose attention row the commit wrote, by operationRoomKey: the call whose outcome is open or whose write a review left due, else null. */
  readonly openOutcomes: ReadonlyMap<string, string | null>;
}

/**
 * The journal room an owner keeps for its calls (docs/design.md#a-result-always-has-room): each call it admitted whose
 * result is not written yet (its output reservation, by call id, and LIMITS.evidenceRoomBytes), and one review of each
 * operation whose outcome is open or whose write a review left due (the call, by operationRoomKey:
 * LIMITS.reviewRoomBytes; `keepsReviewRoom`).
 */
export interface RoomKept {
  readonly awaiting: ReadonlyMap<string, number>;
  readonly openOutcomes: ReadonlyMap<string, string>;
  /**
   * Told, as soon as a commit is decided, of the call it admits (with its output reservation) and of the operations
   * whose attention rows it writes: a write decided next in the same transaction (a group commit) or before this
   * one's caller resumes must already leave that room.
   */
  readonly decided?: (admitted: readonly [string, number] | null, outcomes: ReadonlyMap<string, string | null>) => void;
}

export const NO_ROOM_KEPT: RoomKept = { awaiting: new Map(), openOutcomes: new Map() };

/** An operation's key in RoomKept.openOutcomes. */
export const operationRoomKey = (taskId: string, key: string): string => JSON.stringify([taskId, key]);

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

/** `now`: the store's clock when the commit began, in epoch milliseconds. */
export function decideCommit(owner: OwnerRef, request: CommitRequest, now: number, room: RoomKept = NO_ROOM_KEPT) {
  return (state: TxState): TxWrites<CommitOutcome> => {
    const session = renewLease(requireOwner(state.session, owner), owner, state);
    request.recheck?.();
    refuseDuplicateIds(session.sessionId, request.events, state.existingEventIds);
    const lastSeq = request.expectLastSeq;
    if (lastSeq !== undefined && lastSeq !== session.lastSeq) {
      throw new StoreConflictError(
        'history_changed',
        `session ${session.sessionId} now ends at seq ${session.lastSeq}, not ${lastSeq}: load the history again and decide on it`,
      );
    }
    const fresh = request.expectNewOperation;
    if (fresh && state.operation) {
      throw new OperationInDoubtError(fresh.taskId, fresh.key, state.operation.callId, 'another attempt under this key was recorded first');
    }
    const latest = request.expectLatestAttempt;
    if (latest) {
      // The operation of this session only: another session's row of the same (task, key) is another operation.
      const op = state.operation?.sessionId === session.sessionId ? state.operation : undefined;
      if (!op || op.callId !== latest.callId) {
        throw new ToolRetryError(
          'not_latest_attempt',
          `the plan's source ${latest.callId} is no longer the latest attempt of operation ${latest.key}` +
            (op ? ` (latest is ${op.callId})` : ''),
        );
      }
      // A backend that keeps no attention index returns no row: then only the latest-attempt check stands.
      const row = latest.source ? state.attention?.find((r) => r.callId === latest.callId) : undefined;
      if (row && (row.started !== latest.source!.started || row.status !== latest.source!.status)) {
        throw new StoreConflictError(
          'history_changed',
          `the plan's source ${latest.callId} moved on since the history the plan was made from was read ` +
            `(${latest.source!.started ? 'started' : 'not started'}, ${latest.source!.status}; now ${row.started ? 'started' : 'not started'}, ${row.status}): ` +
            'load the history again and prepare a new plan; nothing was written',
        );
      }
      // The identical writes or repeats the retry could make twice with, when the backend keeps the index the latest
      // attempt's row comes from (docs/design.md#the-in-doubt-guard).
      const indexed = latest.repeated?.length ? state.attention?.some((r) => r.callId === latest.callId) : false;
      for (const was of indexed ? latest.repeated! : []) {
        const now = state.attention?.find((r) => r.callId === was.callId);
        if (now === undefined || now.started !== was.started || now.status !== was.status) {
          throw new StoreConflictError(
            'history_changed',
            `call ${was.callId}, an identical write the retry of ${latest.callId} could make twice with (a repeat, or what it repeated), moved on since the history the plan was made from was read ` +
              `(${was.status}; now ${now === undefined ? 'a newer attempt' : now.status}): it may have made that write; load the history again and prepare a new plan; nothing was written`,
          );
        }
      }
      const since = latest.source ? state.writtenSince : undefined;
      if (since !== undefined && since !== null) {
        throw new StoreConflictError(
          'history_changed',
          `event ${since} of session ${session.sessionId} was written by an earlier owner of the session after the history the plan was made from (up to seq ${latest.source!.seenSeq}): ` +
            'load the history again and prepare a new plan; nothing was written',
        );
      }
    }
    const waiting = state.reviews?.[0];
    if (waiting !== undefined) {
      throw new ToolRetryError(
        'needs_review',
        `review decision ${waiting.id} of call ${waiting.callId} (${String(waiting.decision)} by ${waiting.actor ?? 'an operator'}) waits in the decision inbox: ` +
          'journal it (journalInboxReviews) and decide on the journal; nothing was written',
      );
    }
    const chained = chainEvents(session, owner.epoch, request.events, now);
    // An admission counts the open calls of its own task at this epoch itself (journalRoomForOutput); an earlier
    // owner's are settled there, and their outcomes' room is kept here with the others'.
    const counted = request.budget?.admit && state.task ? new Set(settleAbandoned(state.task, owner.epoch).reservations.map((r) => r.callId)) : undefined;
    // A retry's admission keeps its own call's evidence room, a review's included: the review room its operation kept
    // for the attempt before (in doubt, or due) is no longer needed, since a review binds the latest attempt.
    const admitted = request.budget?.admit ? request.events.find((e) => e.kind.type === 'tool_call')?.kind : undefined;
    const before = admitted?.type === 'tool_call' && admitted.call.operation !== undefined
      ? room.openOutcomes.get(operationRoomKey(admitted.call.operation.taskId, admitted.call.operation.key)) : undefined;
    if (before !== undefined && counted !== undefined) counted.add(before);
    const kept = roomKeptFor(session.sessionId, chained.historyBytes, chained.head.lastSeq + 1, room, counted);
    let task: TxWrites['task'];
    let reserved = 0;
    if (request.budget) {
      const bytes = chained.addedBytes;
      const budgeted = applyBudget(requireTask(state.task, request.budget.taskId, session.sessionId), owner.epoch, request, bytes,
        { bytes: chained.historyBytes + kept.bytes, events: chained.head.lastSeq + 1 + kept.events });
      task = { row: budgeted.row, insert: false };
      reserved = budgeted.reserved;
    }
    const decisions = request.approval ? decideApprovalChange(session.sessionId, request.approval, state.approvals ?? [], request.events) : undefined;
    const attention = attentionWrites(session.sessionId, chained.events, state.attention);
    const openOutcomes = new Map(attention.map((row) => [operationRoomKey(row.taskId, row.key), keepsReviewRoom(row) ? row.callId : null]));
    const awaits = admitted?.type === 'tool_call' && !request.events.some((e) => e.kind.type === 'tool_result' && e.kind.result.callId === admitted.call.id);
    room.decided?.(awaits ? [admitted.call.id, reserved] : null, openOutcomes);
    return {
      session: { row: chained.head, expect: { epoch: session.epoch, lastSeq: session.lastSeq } },
      events: chained.rows,
      ...(task ? { task } : {}),
      ...(decisions ? { decisions } : {}),
      operations: operationsOf(session.sessionId, chained.events),
      attention,
      result: {
        events: chained.events,
        reservedOutputBytes: reserved,
        openOutcomes,
      },
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

/** The task's journal-bytes limit and charge, for rows a backend stored before tasks had them. */
export function journalLedger(row: TaskRow): { limit: number; charged: number } {
  return { limit: row.limitJournalBytes ?? TASK_DEFAULTS.journalBytes, charged: row.chargedJournalBytes ?? 0 };
}

/**
 * The journal room the owner's calls awaiting their results keep (each its output reservation and
 * LIMITS.evidenceRoomBytes), `counted` aside; a commit that would leave less is refused before anything is written:
 * events a host appended while a call ran had used the room its result was admitted with, and the write its body made
 * could then be neither recorded nor reviewed (docs/design.md#a-result-always-has-room).
 */
function roomKeptFor(sessionId: SessionId, historyAfter: number, eventsAfter: number, room: RoomKept, counted: ReadonlySet<string> | undefined): { bytes: number; events: number } {
  let kept = 0;
  let running = 0;
  for (const [callId, bytes] of room.awaiting) {
    if (counted?.has(callId)) continue;
    kept += bytes + LIMITS.evidenceRoomBytes;
    running += 1;
  }
  let open = 0;
  for (const callId of room.openOutcomes.values()) {
    if (counted?.has(callId) || room.awaiting.has(callId)) continue;
    kept += LIMITS.reviewRoomBytes;
    open += 1;
  }
  const events = running * LIMITS.evidenceRoomEvents + open * LIMITS.reviewRoomEvents;
  if (historyAfter + kept > LIMITS.maxHistoryBytes || eventsAfter + events > LIMITS.maxHistoryEvents) {
    const whose = [
      running > 0 ? `the results and reviews of ${running} ${callNoun(running)} still running` : null,
      open > 0 ? `a review of each of ${open} ${callNoun(open)} whose outcome is open or whose write is due` : null,
    ].filter((part) => part !== null).join(' and ');
    throw new JournalFullError(
      sessionId,
      `${historyAfter} of ${LIMITS.maxHistoryBytes} bytes and ${eventsAfter} of ${LIMITS.maxHistoryEvents} events would be used with these events, ` +
        `and ${whose} need ${kept} bytes and ${events} events of the rest; nothing was written`,
    );
  }
  return { bytes: kept, events };
}

/** The noun for `n` calls, in the refusals' messages. */
const callNoun = (n: number): string => (n === 1 ? 'call' : 'calls');

/**
 * The most a call reserves output bytes for, and whether it may be admitted, given the session's journal: after this
 * commit the journal must still hold the evidence of every call of the task still open and of this one (each its
 * output reservation and LIMITS.evidenceRoomBytes), so a body that runs can always have its result, and its call a
 * review, recorded (docs/design.md#a-result-always-has-room). The output reservation shrinks to the room left, down
 * to what the evidence room itself is; below that the call is refused before anything is written.
 */
function journalRoomForOutput(sessionId: SessionId, after: { bytes: number; events: number }, open: readonly Reservation[], wanted: number): number {
  const historyAfter = after.bytes;
  const openRoom = open.reduce((sum, r) => sum + r.bytes + LIMITS.evidenceRoomBytes, 0);
  const room = LIMITS.maxHistoryBytes - historyAfter - openRoom - LIMITS.evidenceRoomBytes;
  const eventsLeft = LIMITS.maxHistoryEvents - after.events - (open.length + 1) * LIMITS.evidenceRoomEvents;
  if (room < Math.min(wanted, LIMITS.evidenceRoomBytes) || eventsLeft < 0) {
    const neededBytes = openRoom + LIMITS.evidenceRoomBytes + Math.min(wanted, LIMITS.evidenceRoomBytes);
    const neededEvents = (open.length + 1) * LIMITS.evidenceRoomEvents;
    throw new JournalFullError(
      sessionId,
      `${historyAfter} of ${LIMITS.maxHistoryBytes} bytes and ${after.events} of ${LIMITS.maxHistoryEvents} events would be used or kept with this call, and the results and reviews of ` +
        `${open.length === 0 ? 'this call' : `this call and ${open.length} other open ${callNoun(open.length)}`} need at least ${neededBytes} bytes and ${neededEvents} events of the rest; nothing was written`,
    );
  }
  return Math.min(wanted, room);
}

function applyBudget(task: TaskRow, epoch: number, request: CommitRequest, bytes: number, historyAfter: { bytes: number; events: number }): { row: TaskRow; reserved: number } {
  const budget = request.budget!;
  let row = settleAbandoned(task, epoch);
  const journal = journalLedger(row);
  let reservations = [...row.reservations];
  let reserved = 0;
  const calls = request.events.filter((e) => e.kind.type === 'tool_call');
  if (budget.admit) {
    if (calls.length !== 1) throw new InvalidInputError('budget.admit', 'an admission commit carries exactly one tool_call');
    if (row.state !== 'running') throw new TaskNotRunningError(row.taskId, row.state);
    if (row.chargedToolCalls + 1 > row.limitToolCalls) {
      throw new BudgetExhaustedError(row.taskId, 'tool_calls', `${row.chargedToolCalls} of ${row.limitToolCalls} used`);
    }
    // Checked at admission only: the marker and result of an admitted call are always recorded, since refusing
    // them would lose evidence. The outputs the task's open calls may still record count as used, so that only the
    // last call admitted can take the task past its limit (docs/design.md#budgets-are-exact).
    const open = row.reservations.length;
    if (journal.charged + row.reservedOutputBytes + bytes > journal.limit) {
      throw new BudgetExhaustedError(row.taskId, 'journal_bytes',
        `${journal.charged} of ${journal.limit} used${open > 0 ? `, ${row.reservedOutputBytes} held for the outputs of ${open} ${callNoun(open)} still open` : ''}; this call needs ${bytes}`);
    }
    const unused = row.limitOutputBytes - row.chargedOutputBytes;
    if (unused <= 0) {
      throw new BudgetExhaustedError(row.taskId, 'tool_output_bytes', `${row.chargedOutputBytes} of ${row.limitOutputBytes} used`);
    }
    // A reservation shrinks to what the task has not used, never to what its open calls hold: a body admitted with a
    // limit its siblings had shrunk could do its write and then have its answer refused as output_limit.
    const wanted = Math.min(budget.admit.maxOutputBytes, unused);
    if (unused - row.reservedOutputBytes < wanted) {
      throw new BudgetExhaustedError(row.taskId, 'tool_output_bytes',
        `${row.chargedOutputBytes} of ${row.limitOutputBytes} used and ${row.reservedOutputBytes} reserved by ${open} ${callNoun(open)} still open; ` +
          `this call needs ${wanted}: call it again once they have finished`);
    }
    const callId = (calls[0]!.kind as { call: { id: string } }).call.id;
    reserved = wanted;
    // A call refused before its body carries its result in this commit: it needs no room after it.
    const resultHere = request.events.some((e) => e.kind.type === 'tool_result' && e.kind.result.callId === callId);
    if (!resultHere) reserved = journalRoomForOutput(task.sessionId, historyAfter, reservations, reserved);
    reservations.push({ callId, bytes: reserved, started: false, epoch });
    row = { ...row, chargedToolCalls: row.chargedToolCalls + 1 };
  }
  for (const e of request.events) {
    if (e.kind.type === 'tool_started') {
      // A body starts only while its task runs: a call admitted before its task was stopped or completed (one
      // waiting for approval) never starts (docs/design.md#tasks-and-budgets).
      if (row.state !== 'running') throw new TaskNotRunningError(row.taskId, row.state);
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
  return { row: withReservations({ ...row, limitJournalBytes: journal.limit, chargedJournalBytes: journal.charged + bytes }, reservations), reserved };
}

/** A result that could not be written: its attempt's reservation, and the output bytes the runtime would have charged. */
export interface UnwrittenSettlement {
  readonly callId: string;
  readonly chargeOutputBytes: number;
}

/**
 * Releases the reservations of results whose write failed, at the owner's next write or release, so a transient
 * failure does not hold budget for the owner's lifetime (docs/design.md#budgets-are-exact). Each is charged what
 * its result would have been charged, at most its reservation; one already settled (the write did commit) is left.
 */
export function decideReleaseUnwritten(owner: OwnerRef, unwritten: readonly UnwrittenSettlement[]) {
  return (state: TxState): TxWrites<TaskRow | null> => {
    const session = requireOwner(state.session, owner);
    const task = state.task?.sessionId === session.sessionId ? state.task : undefined;
    if (!task) return { result: null };
    let row = settleAbandoned(task, owner.epoch);
    for (const u of unwritten) {
      const held = row.reservations.find((r) => r.callId === u.callId);
      if (!held) continue;
      row = withReservations(
        { ...row, chargedOutputBytes: row.chargedOutputBytes + Math.min(u.chargeOutputBytes, held.bytes) },
        row.reservations.filter((r) => r.callId !== u.callId),
      );
    }
    if (row === task) return { result: task };
    return { session: fenceOnly(session), task: { row, insert: false }, result: row };
  };
}

function checkLimit(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v < 0) throw new InvalidInputError(name, `must be a non-negative safe integer, got ${v}`);
  return v;
}

export function decideStartTask(owner: OwnerRef, taskId: TaskId, limits: Partial<TaskLimits> | undefined, now: number, room: RoomKept = NO_ROOM_KEPT) {
  const toolCalls = checkLimit('limits.toolCalls', limits?.toolCalls, TASK_DEFAULTS.toolCalls);
  const toolOutputBytes = checkLimit('limits.toolOutputBytes', limits?.toolOutputBytes, TASK_DEFAULTS.toolOutputBytes);
  const journalBytes = checkLimit('limits.journalBytes', limits?.journalBytes, TASK_DEFAULTS.journalBytes);
  return (state: TxState): TxWrites<TaskRow> => {
    const session = renewLease(requireOwner(state.session, owner), owner, state);
    // A task id is unique within its session only (docs/design.md#identity-is-per-session).
    const existing = state.task?.sessionId === session.sessionId ? state.task : undefined;
    if (existing) return { session: fenceOnly(session), result: existing };
    const row: TaskRow = {
      taskId,
      sessionId: session.sessionId,
      state: 'running',
      limitToolCalls: toolCalls,
      limitOutputBytes: toolOutputBytes,
      limitJournalBytes: journalBytes,
      chargedToolCalls: 0,
      chargedOutputBytes: 0,
      chargedJournalBytes: 0,
      reservedOutputBytes: 0,
      reservations: [],
      stopReason: null,
    };
    return { ...ledgerWrites(session, owner.epoch, row, 'started', now, room), task: { row, insert: true }, result: row };
  };
}

export function decideTaskState(owner: OwnerRef, taskId: string, next: Exclude<TaskState, 'running'>, reason: string | null, now: number, room: RoomKept = NO_ROOM_KEPT) {
  return (state: TxState): TxWrites<TaskRow> => {
    const session = renewLease(requireOwner(state.session, owner), owner, state);
    const task = settleAbandoned(requireTask(state.task, taskId, session.sessionId), owner.epoch);
    if (task.state !== 'running') return { session: fenceOnly(session), result: task };
    const row: TaskRow = { ...task, state: next, stopReason: reason };
    return { ...ledgerWrites(session, owner.epoch, row, next, now, room), task: { row, insert: false }, result: row };
  };
}

/** The task's ledger after a change, as journaled (docs/design.md#the-task-ledger-in-the-chain). */
export function ledgerRecord(row: TaskRow, change: TaskLedgerChange): TaskLedgerRecord {
  const journal = journalLedger(row);
  return {
    taskId: row.taskId,
    change,
    state: row.state,
    limits: { toolCalls: row.limitToolCalls, toolOutputBytes: row.limitOutputBytes, journalBytes: journal.limit },
    charged: { toolCalls: row.chargedToolCalls, toolOutputBytes: row.chargedOutputBytes, journalBytes: journal.charged },
    reservedOutputBytes: row.reservedOutputBytes,
    stopReason: row.stopReason,
  };
}

/**
 * A task change joins the hash chain: its `task_ledger` event is written in the same transaction as the task row
 * (docs/design.md#the-task-ledger-in-the-chain). The event is the store's, not the task's: never charged to its budget.
 * It is recorded on the store's clock, like every event, and named by its place in the chain, so two stores given
 * the same history and clock write the same journal.
 */
function ledgerWrites(session: SessionRow, epoch: number, row: TaskRow, change: TaskLedgerChange, now: number, room: RoomKept) {
  const ids = chainedEventIds(session.headHash, session.lastSeq + 1);
  const draft: EventDraft = { eventId: ids.eventId, turnId: ids.turnId, kind: { type: 'task_ledger', ledger: ledgerRecord(row, change) } };
  const chained = chainEvents(session, epoch, [draft], now);
  // A task change leaves the room of the owner's calls as any other write that is not their evidence does.
  roomKeptFor(session.sessionId, chained.historyBytes, chained.head.lastSeq + 1, room, undefined);
  return {
    session: { row: chained.head, expect: { epoch: session.epoch, lastSeq: session.lastSeq } },
    events: chained.rows,
  };
}

/** A write that changes nothing on the owner row but still goes through its conditional update. */
function fenceOnly(session: SessionRow): NonNullable<TxWrites['session']> {
  return { row: session, expect: { epoch: session.epoch, lastSeq: session.lastSeq } };
}

/**
 * Stores an imported history as a new session, left released. A chained export's epochs are kept, and its owner's
 * (or a newer one, past an empty session row already there): the chain is the exported one, so the checkpoints
 * signed over it still match (docs/design.md#anchored-signed-heads). Otherwise every event is the importer's epoch.
 */
export function decideImport(sessionId: SessionId, owner: string, events: readonly SessionEvent[], chain: { readonly epochs: readonly number[]; readonly ownerEpoch: number } | null = null) {
  return (state: TxState): TxWrites<number> => {
    const current = state.session;
    if (current && current.lastSeq >= 0) {
      throw new StoreConflictError('session_exists', `session ${sessionId} already has ${current.lastSeq + 1} events`);
    }
    if (current?.held) throw new SessionBusyError(sessionId, current.owner ?? '?', current.epoch);
    const epoch = Math.max(current ? current.epoch + 1 : 1, chain?.ownerEpoch ?? 1);
    const base: SessionRow = current
      ? { ...current, owner, epoch }
      : { sessionId, owner, held: false, epoch, lastSeq: -1, headHash: GENESIS_HASH, bodyBytes: 0, recordedAt: null, leaseExpiresAt: null };
    const chained = chainEvents(base, chain?.epochs ?? epoch, importDrafts(events));
    return {
      session: { row: { ...chained.head, held: false }, expect: current ? { epoch: current.epoch, lastSeq: current.lastSeq } : null },
      events: chained.rows,
      operations: operationsOf(sessionId, chained.events),
      attention: attentionWrites(sessionId, chained.events),
      result: chained.events.length,
    };
  };
}

/** What an owner at `epoch` sees: reservations of fenced owners count as settled, as its next budget write will make them. */
export function taskSnapshot(stored: TaskRow, epoch: number): TaskSnapshot {
  const row = settleAbandoned(stored, epoch);
  const journal = journalLedger(row);
  return {
    taskId: row.taskId,
    sessionId: row.sessionId,
    state: row.state,
    limits: { toolCalls: row.limitToolCalls, toolOutputBytes: row.limitOutputBytes, journalBytes: journal.limit },
    charged: { toolCalls: row.chargedToolCalls, toolOutputBytes: row.chargedOutputBytes, journalBytes: journal.charged },
    reservedOutputBytes: row.reservedOutputBytes,
    stopReason: row.stopReason,
  };
}
