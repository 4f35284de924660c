import { ATTENTION_COLUMNS, ATTENTION_STATE_COLUMNS, ATTENTION_UPDATE, SESSION_COLUMNS, TASK_CHANGING_COLUMNS, TASK_COLUMNS, type AttentionRecord, type OperationRecord, type SessionRecord, type TaskRecord } from '../sql-rows.js';
import type { SessionId } from '../../ids.js';
import type { EventRow } from '../rows.js';
import type { Database, Statement } from './driver.js';

const params = (columns: string) => columns.split(', ').map(() => '?').join(', ');

/**
 * An event row of one session as the driver returns it in raw mode: seq, event_id, epoch, body, hash. The session's
 * id is the one the statement selected by, so each row shares that string instead of reading its own copy.
 */
type EventRowArray = [number, string, number, string, string];

/**
 * Rows read per statement when a session's journal is read. Reading it in pages of raw rows, each turned into an
 * EventRow here, costs about 60% of what one statement stepped row by row into driver-built objects does (and
 * 40% of one `all()` of a 16 MiB journal, which holds every row at once); the read transaction around the pages
 * keeps them one snapshot.
 */
const EVENT_PAGE_ROWS = 1000;

/**
 * A session's event rows in seq order, read a page at a time (inside the caller's read transaction): every row the
 * one ordered statement would give, in its order, since seq is a distinct integer per session (STRICT, NOT NULL,
 * part of the key) and each page starts after the last seq of the one before. A seq past 2^53 cannot be bound
 * exactly, so paging stops after the page that holds one: no reader accepts such a row (a stored seq must equal the
 * row's position), and every row before it in seq order has been read.
 */
export function* eventRows(statements: SqliteStatements, sessionId: SessionId): Generator<EventRow, void, undefined> {
  let page = statements.eventsFirst.all(sessionId, EVENT_PAGE_ROWS);
  for (;;) {
    for (const r of page) yield { sessionId, seq: r[0], eventId: r[1], epoch: r[2], body: r[3], hash: r[4] };
    const next = pageAfter(statements, sessionId, page);
    if (next === null) return;
    page = next;
  }
}

/** eventRows, all of them at once, in a plain loop (the generator spread into an array cost B6's resume more). */
export function eventRowList(statements: SqliteStatements, sessionId: SessionId): EventRow[] {
  const rows: EventRow[] = [];
  for (let page: EventRowArray[] | null = statements.eventsFirst.all(sessionId, EVENT_PAGE_ROWS); page !== null; page = pageAfter(statements, sessionId, page)) {
    for (const r of page) rows.push({ sessionId, seq: r[0], eventId: r[1], epoch: r[2], body: r[3], hash: r[4] });
  }
  return rows;
}

/** The page after `page`, or null when `page` is the last: a short one, or one ending at a seq past 2^53. */
function pageAfter(statements: SqliteStatements, sessionId: SessionId, page: EventRowArray[]): EventRowArray[] | null {
  const last = page[page.length - 1]?.[0];
  if (page.length < EVENT_PAGE_ROWS || !Number.isSafeInteger(last)) return null;
  return statements.eventsAfter.all(sessionId, last!, EVENT_PAGE_ROWS);
}

/** Every statement the SQLite backend runs, prepared once per connection. */
export interface SqliteStatements {
  readonly session: Statement<[string], SessionRecord>;
  readonly insertSession: Statement;
  readonly updateSession: Statement;
  readonly insertEvent: Statement;
  /** A session's first events in seq order, at most a count of them, as raw rows. */
  readonly eventsFirst: Statement<[string, number], EventRowArray>;
  /** A session's events after a seq, in seq order, at most a count of them, as raw rows. */
  readonly eventsAfter: Statement<[string, number, number], EventRowArray>;
  readonly eventIdExists: Statement<[string, string], { one: number }>;
  readonly earlierEpochSince: Statement<[string, number, number], { seq: number }>;
  readonly task: Statement<[string, string], TaskRecord>;
  readonly upsertTask: Statement;
  readonly operation: Statement<[string, string, string], OperationRecord>;
  readonly withoutOwnerRow: Statement<[], string>;
  readonly sessionOperations: Statement<[string], OperationRecord & { task_id: string; key: string }>;
  readonly upsertOperation: Statement;
  readonly list: Statement<[], SessionRecord & { events: number }>;
  readonly attentionByCall: Statement<[string, string], AttentionRecord>;
  readonly attentionByBinding: Statement<[string, string, string, string], AttentionRecord>;
  readonly upsertAttention: Statement;
  /** The columns an attempt's later commit changes, for a row whose key, call and binding stay (see narrowAttention). */
  readonly updateAttentionState: Statement;
}

export function prepareStatements(db: Database): SqliteStatements {
  return {
    session: db.prepare<[string], SessionRecord>(`SELECT ${SESSION_COLUMNS} FROM jw_sessions WHERE session_id = ?`),
    insertSession: db.prepare(`INSERT INTO jw_sessions (${SESSION_COLUMNS}) VALUES (${params(SESSION_COLUMNS)})`),
    updateSession: db.prepare(
      'UPDATE jw_sessions SET owner = ?, held = ?, epoch = ?, last_seq = ?, head_hash = ?, body_bytes = ?, recorded_at = ?, lease_expires_at = ? ' +
        'WHERE session_id = ? AND epoch = ? AND last_seq = ?',
    ),
    insertEvent: db.prepare('INSERT INTO jw_events (session_id, seq, event_id, epoch, body, hash) VALUES (?, ?, ?, ?, ?, ?)'),
    eventsFirst: db.prepare<[string, number], EventRowArray>(
      'SELECT seq, event_id, epoch, body, hash FROM jw_events WHERE session_id = ? ORDER BY seq LIMIT ?',
    ).raw(true),
    eventsAfter: db.prepare<[string, number, number], EventRowArray>(
      'SELECT seq, event_id, epoch, body, hash FROM jw_events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?',
    ).raw(true),
    eventIdExists: db.prepare<[string, string], { one: number }>('SELECT 1 AS one FROM jw_events WHERE session_id = ? AND event_id = ? LIMIT 1'),
    earlierEpochSince: db.prepare<[string, number, number], { seq: number }>('SELECT seq FROM jw_events WHERE session_id = ? AND seq > ? AND epoch < ? ORDER BY seq LIMIT 1'),
    task: db.prepare<[string, string], TaskRecord>(`SELECT ${TASK_COLUMNS} FROM jw_tasks WHERE session_id = ? AND task_id = ?`),
    upsertTask: db.prepare(
      `INSERT INTO jw_tasks (${TASK_COLUMNS}) VALUES (${params(TASK_COLUMNS)}) ON CONFLICT (session_id, task_id) DO UPDATE SET ` +
        TASK_CHANGING_COLUMNS.map((c) => `${c} = excluded.${c}`).join(', '),
    ),
    operation: db.prepare<[string, string, string], OperationRecord>(
      'SELECT session_id, call_id, event_id FROM jw_operations WHERE session_id = ? AND task_id = ? AND key = ?',
    ),
    withoutOwnerRow: db.prepare<[], string>(`SELECT session_id FROM jw_events UNION SELECT session_id FROM jw_tasks UNION SELECT session_id FROM jw_operations UNION SELECT session_id FROM jw_attention EXCEPT SELECT session_id FROM jw_sessions ORDER BY 1`).pluck(),
    sessionOperations: db.prepare<[string], OperationRecord & { task_id: string; key: string }>(
      'SELECT task_id, key, session_id, call_id, event_id FROM jw_operations WHERE session_id = ?',
    ),
    upsertOperation: db.prepare(
      'INSERT INTO jw_operations (task_id, key, session_id, call_id, event_id) VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, task_id, key) DO UPDATE SET ' +
        'call_id = excluded.call_id, event_id = excluded.event_id',
    ),
    list: db.prepare<[], SessionRecord & { events: number }>(
      `SELECT ${SESSION_COLUMNS.split(', ').map((c) => `s.${c}`).join(', ')}, ` +
        '(SELECT count(*) FROM jw_events e WHERE e.session_id = s.session_id) AS events FROM jw_sessions s ORDER BY s.session_id',
    ),
    attentionByCall: db.prepare<[string, string], AttentionRecord>(`SELECT ${ATTENTION_COLUMNS} FROM jw_attention WHERE session_id = ? AND call_id = ?`),
    attentionByBinding: db.prepare<[string, string, string, string], AttentionRecord>(
      `SELECT ${ATTENTION_COLUMNS} FROM jw_attention WHERE session_id = ? AND task_id = ? AND tool = ? AND args_digest = ?`,
    ),
    upsertAttention: db.prepare(
      `INSERT INTO jw_attention (${ATTENTION_COLUMNS}) VALUES (${params(ATTENTION_COLUMNS)}) ON CONFLICT (session_id, task_id, key) DO UPDATE SET ${ATTENTION_UPDATE}`,
    ),
    updateAttentionState: db.prepare(
      `UPDATE jw_attention SET ${ATTENTION_STATE_COLUMNS.map((c) => `${c} = ?`).join(', ')} WHERE session_id = ? AND task_id = ? AND key = ?`,
    ),
  };
}
