/**
 * The row mapping the SQL backends share: column records as the drivers return them (SQLite gives numbers and 0/1,
 * PostgreSQL gives BIGINT as decimal strings and real booleans) to the store's rows, checked once here.
 */
import { JournalCorruptError } from '../errors.js';
import type { SessionId, TaskId } from '../ids.js';
import { parseReservations } from './reservations.js';
import type { OperationRow, SessionRow, TaskRow } from './rows.js';
import type { TaskState } from './types.js';

/** An integer column: a number (SQLite) or a BIGINT's decimal text (PostgreSQL). */
export type IntColumn = number | string;

export interface SessionRecord {
  session_id: string; owner: string | null; held: boolean | number; epoch: IntColumn; last_seq: IntColumn; head_hash: string;
  body_bytes: IntColumn; lease_expires_at: IntColumn | null;
}

export interface TaskRecord {
  task_id: string; session_id: string; state: string; limit_tool_calls: IntColumn; limit_output_bytes: IntColumn;
  charged_tool_calls: IntColumn; charged_output_bytes: IntColumn; reserved_output_bytes: IntColumn; stop_reason: string | null;
  reservations: string;
}

export interface OperationRecord {
  session_id: string; call_id: string; event_id: string;
}

/** The column order of the session and task tables, shared by the statements of both SQL backends. */
export const SESSION_COLUMNS = 'session_id, owner, held, epoch, last_seq, head_hash, body_bytes, lease_expires_at';
export const TASK_COLUMNS =
  'task_id, session_id, state, limit_tool_calls, limit_output_bytes, charged_tool_calls, charged_output_bytes, reserved_output_bytes, stop_reason, reservations';

/** An integer column; anything beyond a safe JS integer is storage we cannot trust. */
export function int(value: unknown, column: string, sessionId: string): number {
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isSafeInteger(n)) {
    throw new JournalCorruptError(sessionId, -1, 'storage', `${column} holds ${String(value)}, which is not a safe integer`);
  }
  return n;
}

export const toSession = (r: SessionRecord): SessionRow => ({
  sessionId: r.session_id as SessionId, owner: r.owner, held: r.held === true || r.held === 1,
  epoch: int(r.epoch, 'epoch', r.session_id), lastSeq: int(r.last_seq, 'last_seq', r.session_id), headHash: r.head_hash,
  bodyBytes: int(r.body_bytes, 'body_bytes', r.session_id),
  leaseExpiresAt: r.lease_expires_at === null ? null : int(r.lease_expires_at, 'lease_expires_at', r.session_id),
});

export const toTask = (r: TaskRecord): TaskRow => ({
  taskId: r.task_id as TaskId, sessionId: r.session_id as SessionId, state: r.state as TaskState,
  limitToolCalls: int(r.limit_tool_calls, 'limit_tool_calls', r.session_id),
  limitOutputBytes: int(r.limit_output_bytes, 'limit_output_bytes', r.session_id),
  chargedToolCalls: int(r.charged_tool_calls, 'charged_tool_calls', r.session_id),
  chargedOutputBytes: int(r.charged_output_bytes, 'charged_output_bytes', r.session_id),
  reservedOutputBytes: int(r.reserved_output_bytes, 'reserved_output_bytes', r.session_id),
  stopReason: r.stop_reason,
  reservations: parseReservations(r.reservations, r.session_id),
});

export const toOperation = (read: { readonly taskId: string; readonly key: string }, r: OperationRecord): OperationRow => ({
  taskId: read.taskId as TaskId, key: read.key, sessionId: r.session_id as SessionId, callId: r.call_id, eventId: r.event_id,
});

/** A session row as the positional values of an insert, in SESSION_COLUMNS order (`held` as the driver wants it). */
export function sessionValues<H>(row: SessionRow, held: (held: boolean) => H): [string, string | null, H, number, number, string, number, number | null] {
  return [row.sessionId, row.owner, held(row.held), row.epoch, row.lastSeq, row.headHash, row.bodyBytes, row.leaseExpiresAt ?? null];
}

/** A task row as the positional values of an insert, in TASK_COLUMNS order. */
export function taskValues(row: TaskRow): [string, string, string, number, number, number, number, number, string | null, string] {
  return [
    row.taskId, row.sessionId, row.state, row.limitToolCalls, row.limitOutputBytes, row.chargedToolCalls, row.chargedOutputBytes,
    row.reservedOutputBytes, row.stopReason, JSON.stringify(row.reservations),
  ];
}
