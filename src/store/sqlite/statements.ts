import { ATTENTION_COLUMNS, ATTENTION_UPDATE, SESSION_COLUMNS, TASK_CHANGING_COLUMNS, TASK_COLUMNS, type AttentionRecord, type OperationRecord, type SessionRecord, type TaskRecord } from '../sql-rows.js';
import type { EventRow } from '../rows.js';
import type { Database, Statement } from './driver.js';

const params = (columns: string) => columns.split(', ').map(() => '?').join(', ');

/** Every statement the SQLite backend runs, prepared once per connection. */
export interface SqliteStatements {
  readonly session: Statement<[string], SessionRecord>;
  readonly insertSession: Statement;
  readonly updateSession: Statement;
  readonly insertEvent: Statement;
  readonly events: Statement<[string], EventRow>;
  readonly eventIdExists: Statement<[string, string], { one: number }>;
  readonly task: Statement<[string, string], TaskRecord>;
  readonly upsertTask: Statement;
  readonly operation: Statement<[string, string, string], OperationRecord>;
  readonly upsertOperation: Statement;
  readonly list: Statement<[], SessionRecord & { events: number }>;
  readonly attentionByCall: Statement<[string, string], AttentionRecord>;
  readonly attentionByBinding: Statement<[string, string, string, string, string], AttentionRecord>;
  readonly upsertAttention: Statement;
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
    // Columns named as EventRow's fields: the driver builds each row object itself, which costs less than an array
    // per row turned into an object.
    events: db.prepare<[string], EventRow>(
      'SELECT session_id AS sessionId, seq, event_id AS eventId, epoch, body, hash FROM jw_events WHERE session_id = ? ORDER BY seq',
    ),
    eventIdExists: db.prepare<[string, string], { one: number }>('SELECT 1 AS one FROM jw_events WHERE session_id = ? AND event_id = ? LIMIT 1'),
    task: db.prepare<[string, string], TaskRecord>(`SELECT ${TASK_COLUMNS} FROM jw_tasks WHERE session_id = ? AND task_id = ?`),
    upsertTask: db.prepare(
      `INSERT INTO jw_tasks (${TASK_COLUMNS}) VALUES (${params(TASK_COLUMNS)}) ON CONFLICT (session_id, task_id) DO UPDATE SET ` +
        TASK_CHANGING_COLUMNS.map((c) => `${c} = excluded.${c}`).join(', '),
    ),
    operation: db.prepare<[string, string, string], OperationRecord>(
      'SELECT session_id, call_id, event_id FROM jw_operations WHERE session_id = ? AND task_id = ? AND key = ?',
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
    attentionByBinding: db.prepare<[string, string, string, string, string], AttentionRecord>(
      `SELECT ${ATTENTION_COLUMNS} FROM jw_attention WHERE session_id = ? AND task_id = ? AND tool = ? AND args_digest = ? AND revision = ?`,
    ),
    upsertAttention: db.prepare(
      `INSERT INTO jw_attention (${ATTENTION_COLUMNS}) VALUES (${params(ATTENTION_COLUMNS)}) ON CONFLICT (session_id, task_id, key) DO UPDATE SET ${ATTENTION_UPDATE}`,
    ),
  };
}
