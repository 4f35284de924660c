/**
 * The row mapping the SQL backends share: column records as the drivers return them (SQLite gives numbers and 0/1,
 * PostgreSQL gives BIGINT as decimal strings and real booleans) to the store's rows, checked once here.
 */
import { JournalCorruptError } from '../errors.js';
import type { ToolEffect } from '../event/types.js';
import type { SessionId, TaskId } from '../ids.js';
import { journalLedger } from './decisions.js';
import { parseReservations } from './reservations.js';
import type { AttentionRow, AttentionScan, AttentionStatus, OperationRow, SessionRow, TaskRow } from './rows.js';
import type { TaskState } from './types.js';

/** An integer column: a number (SQLite) or a BIGINT's decimal text (PostgreSQL). */
export type IntColumn = number | string;

export interface SessionRecord {
  session_id: string; owner: string | null; held: boolean | number; epoch: IntColumn; last_seq: IntColumn; head_hash: string;
  body_bytes: IntColumn; recorded_at: IntColumn | null; lease_expires_at: IntColumn | null;
}

export interface TaskRecord {
  task_id: string; session_id: string; state: string; limit_tool_calls: IntColumn; limit_output_bytes: IntColumn;
  charged_tool_calls: IntColumn; charged_output_bytes: IntColumn; reserved_output_bytes: IntColumn; stop_reason: string | null;
  reservations: string; limit_journal_bytes: IntColumn; charged_journal_bytes: IntColumn;
}

export interface OperationRecord {
  session_id: string; call_id: string; event_id: string;
}

/** The column order of the session and task tables, shared by the statements of both SQL backends. */
export const SESSION_COLUMNS = 'session_id, owner, held, epoch, last_seq, head_hash, body_bytes, recorded_at, lease_expires_at';
/** The columns of a task row that change after it is created (the rest: its identity and limits). */
export const TASK_CHANGING_COLUMNS = [
  'state', 'charged_tool_calls', 'charged_output_bytes', 'reserved_output_bytes', 'stop_reason', 'reservations', 'charged_journal_bytes',
] as const;
export const TASK_COLUMNS =
  'task_id, session_id, state, limit_tool_calls, limit_output_bytes, charged_tool_calls, charged_output_bytes, reserved_output_bytes, stop_reason, reservations, ' +
  'limit_journal_bytes, charged_journal_bytes';

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
  recordedAt: r.recorded_at === null || r.recorded_at === undefined ? null : int(r.recorded_at, 'recorded_at', r.session_id),
  leaseExpiresAt: r.lease_expires_at === null || r.lease_expires_at === undefined ? null : int(r.lease_expires_at, 'lease_expires_at', r.session_id),
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
  limitJournalBytes: int(r.limit_journal_bytes, 'limit_journal_bytes', r.session_id),
  chargedJournalBytes: int(r.charged_journal_bytes, 'charged_journal_bytes', r.session_id),
});

export const toOperation = (read: { readonly taskId: string; readonly key: string }, r: OperationRecord): OperationRow => ({
  taskId: read.taskId as TaskId, key: read.key, sessionId: r.session_id as SessionId, callId: r.call_id, eventId: r.event_id,
});

/** A session row as the positional values of an insert, in SESSION_COLUMNS order (`held` as the driver wants it). */
export function sessionValues<H>(row: SessionRow, held: (held: boolean) => H): [string, string | null, H, number, number, string, number, number | null, number | null] {
  return [row.sessionId, row.owner, held(row.held), row.epoch, row.lastSeq, row.headHash, row.bodyBytes, row.recordedAt ?? null, row.leaseExpiresAt ?? null];
}

// ---------------------------------------------------------------------------------------------------------------
// The attention index (docs/design.md#the-attention-index)

export interface AttentionRecord {
  session_id: string; task_id: string; key: string; call_id: string; tool: string; effect: string; revision: string;
  args_digest: string; start_marker: boolean | number; started: boolean | number; status: string; category: string | null;
  called_at: IntColumn | null; started_at: IntColumn | null; ended_at: IntColumn | null; updated_at: IntColumn | null;
  pending_since: IntColumn | null;
}

export const ATTENTION_COLUMNS =
  'session_id, task_id, key, call_id, tool, effect, revision, args_digest, start_marker, started, status, category, called_at, started_at, ended_at, updated_at, pending_since';

/** The columns an upsert replaces: every one but the key. */
export const ATTENTION_UPDATE = ATTENTION_COLUMNS.split(', ').slice(3).map((c) => `${c} = excluded.${c}`).join(', ');

/**
 * The columns of an attention row outside the secondary indexes' call id, tool and arguments digest: what the later
 * commits of one attempt change. SQLite rewrites the entries of every index that holds a column an UPDATE sets, whether
 * or not its value changed, so setting only these leaves the pages of the by-call and by-binding indexes untouched.
 */
export const ATTENTION_STATE_COLUMNS = [
  'effect', 'revision', 'start_marker', 'started', 'status', 'category', 'called_at', 'started_at', 'ended_at', 'updated_at', 'pending_since',
] as const;

const time = (v: IntColumn | null, column: string, sessionId: string): number | null => (v === null || v === undefined ? null : int(v, column, sessionId));

export const toAttention = (r: AttentionRecord): AttentionRow => ({
  sessionId: r.session_id as SessionId, taskId: r.task_id as TaskId, key: r.key, callId: r.call_id, tool: r.tool,
  effect: r.effect as ToolEffect, revision: r.revision, argsDigest: r.args_digest,
  startMarker: r.start_marker === true || r.start_marker === 1, started: r.started === true || r.started === 1,
  status: r.status as AttentionStatus, category: r.category,
  calledAt: time(r.called_at, 'called_at', r.session_id), startedAt: time(r.started_at, 'started_at', r.session_id),
  endedAt: time(r.ended_at, 'ended_at', r.session_id), updatedAt: time(r.updated_at, 'updated_at', r.session_id),
  pendingSince: time(r.pending_since, 'pending_since', r.session_id),
});

/** An attention row as positional values in ATTENTION_COLUMNS order (`flag` turns booleans into what the driver wants). */
export function attentionValues<B>(r: AttentionRow, flag: (b: boolean) => B): unknown[] {
  return [
    r.sessionId, r.taskId, r.key, r.callId, r.tool, r.effect, r.revision, r.argsDigest, flag(r.startMarker), flag(r.started),
    r.status, r.category, r.calledAt, r.startedAt, r.endedAt, r.updatedAt, r.pendingSince ?? null,
  ];
}

/** An attention row's state columns (ATTENTION_STATE_COLUMNS), then its key, as the narrow UPDATE takes them. */
export function attentionStateValues<B>(r: AttentionRow, flag: (b: boolean) => B): unknown[] {
  return [
    r.effect, r.revision, flag(r.startMarker), flag(r.started), r.status, r.category, r.calledAt, r.startedAt, r.endedAt, r.updatedAt,
    r.pendingSince ?? null, r.sessionId, r.taskId, r.key,
  ];
}

/** Whether `next` changes `prior` only in its state columns: same key, call id, tool and arguments digest. */
export const onlyStateChanges = (prior: AttentionRow, next: AttentionRow): boolean =>
  prior.sessionId === next.sessionId && prior.taskId === next.taskId && prior.key === next.key && prior.callId === next.callId &&
  prior.tool === next.tool && prior.argsDigest === next.argsDigest;

/**
 * The SELECT of one attention scan: only the index table, filtered and ordered by its key. `param(i)` writes the
 * i-th (1-based) placeholder; `order` is the collation clause that makes text order bytewise.
 */
export function attentionScanSql(table: string, scan: AttentionScan, param: (i: number) => string, order = ''): { text: string; values: unknown[] } {
  const values: unknown[] = [];
  const p = (v: unknown) => {
    values.push(v);
    return param(values.length);
  };
  const where: string[] = [`status IN (${scan.statuses.map((s) => p(s)).join(', ')})`];
  if (scan.sessionId !== undefined) where.push(`session_id = ${p(scan.sessionId)}`);
  if (scan.tool !== undefined) where.push(`tool = ${p(scan.tool)}`);
  if (scan.effect !== undefined) where.push(`effect = ${p(scan.effect)}`);
  if (scan.activeAtMost !== undefined) {
    // attentionAge: the unsettled standing's start (unless a body runs), or the result's time, or the start marker's, or the call's.
    const at = 'COALESCE(CASE WHEN started AND ended_at IS NULL THEN NULL ELSE pending_since END, ended_at, started_at, called_at)';
    where.push(scan.orActiveAfter === undefined ? `${at} <= ${p(scan.activeAtMost)}` : `(${at} <= ${p(scan.activeAtMost)} OR ${at} > ${p(scan.orActiveAfter)})`);
  }
  if (scan.after) {
    const [s, t, k] = scan.after;
    where.push(`(session_id${order}, task_id${order}, key${order}) > (${p(s)}, ${p(t)}, ${p(k)})`);
  }
  const text = `SELECT ${ATTENTION_COLUMNS} FROM ${table} WHERE ${where.join(' AND ')} ` +
    `ORDER BY session_id${order}, task_id${order}, key${order} LIMIT ${p(scan.limit)}`;
  return { text, values };
}

/** A task row as the positional values of an insert, in TASK_COLUMNS order. */
export function taskValues(row: TaskRow): [string, string, string, number, number, number, number, number, string | null, string, number, number] {
  const journal = journalLedger(row);
  return [
    row.taskId, row.sessionId, row.state, row.limitToolCalls, row.limitOutputBytes, row.chargedToolCalls, row.chargedOutputBytes,
    row.reservedOutputBytes, row.stopReason, JSON.stringify(row.reservations), journal.limit, journal.charged,
  ];
}
