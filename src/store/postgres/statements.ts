import { ATTENTION_COLUMNS, SESSION_COLUMNS, TASK_COLUMNS } from '../sql-rows.js';

/** The database's clock in epoch milliseconds. */
export const CLOCK = 'floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint';

/**
 * The attention rows of session `sid` that carry one of the call ids in the text array `ids`, each locked FOR UPDATE,
 * as rows of `select`: one probe of the call-id index per distinct id (docs/design.md#lookups-that-do-not-decay).
 * A statement's plan is made once per connection, often while the tables are nearly empty and have no statistics,
 * and then every index that starts with session_id costs the same as the call-id index; the plan chosen that way
 * scanned all of the session's rows on every commit. So the session test is written `(…) IS TRUE`, which no index
 * can serve, leaving the call-id index the only one that matches; the lateral part (kept whole by its row locks)
 * makes each probe an equality.
 */
export function attentionOfCalls(S: string, select: string, sid: string, ids: string): string {
  return `SELECT r.* FROM (SELECT DISTINCT id FROM unnest(${ids}) AS u(id)) AS u CROSS JOIN LATERAL ` +
    `(SELECT ${select} FROM ${S}.jw_attention WHERE call_id = u.id AND (session_id = ${sid}) IS TRUE FOR UPDATE) AS r`;
}

/** Every statement the PostgreSQL backend runs, for the tables in schema `S` (already quoted). */
export function postgresStatements(S: string) {
  const sessionCols = SESSION_COLUMNS;
  const taskCols = TASK_COLUMNS;
  return {
    session: `SELECT ${sessionCols} FROM ${S}.jw_sessions WHERE session_id = $1`,
    lockSession: `SELECT ${sessionCols} FROM ${S}.jw_sessions WHERE session_id = $1 FOR UPDATE`,
    insertSession: `INSERT INTO ${S}.jw_sessions (${sessionCols}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    // The fencing check: the owner row changes only where epoch and head are still what the decision read. The
    // statement fails (division by zero, SQLSTATE 22012) when it changed no row, so a pipelined COMMIT sent behind it
    // finds the transaction aborted and commits nothing (docs/design.md#one-round-trip-per-write-on-postgresql).
    updateSession:
      `WITH changed AS (UPDATE ${S}.jw_sessions SET owner = $2, held = $3, epoch = $4, last_seq = $5, head_hash = $6, body_bytes = $7, ` +
      'recorded_at = $8, lease_expires_at = $9 WHERE session_id = $1 AND epoch = $10 AND last_seq = $11 RETURNING 1) ' +
      'SELECT 1 / (SELECT count(*) FROM changed)::int AS changed',
    // The database's clock, so hosts with skewed clocks agree on when a lease runs out (docs/design.md#leases).
    now: `SELECT ${CLOCK} AS now_ms`,
    events: `SELECT seq, event_id, epoch, body, hash FROM ${S}.jw_events WHERE session_id = $1 ORDER BY seq`,
    eventHashesAt: `SELECT seq, hash FROM ${S}.jw_events WHERE session_id = $1 AND seq = ANY($2::bigint[])`,
    existingEventIds: `SELECT DISTINCT event_id FROM ${S}.jw_events WHERE session_id = $1 AND event_id = ANY($2::text[])`,
    earlierEpochSince: `SELECT seq FROM ${S}.jw_events WHERE session_id = $1 AND seq > $2 AND epoch < $3 ORDER BY seq LIMIT 1`,
    task: `SELECT ${taskCols} FROM ${S}.jw_tasks WHERE session_id = $1 AND task_id = $2`,
    lockTask: `SELECT ${taskCols} FROM ${S}.jw_tasks WHERE session_id = $1 AND task_id = $2 FOR UPDATE`,
    operation: `SELECT session_id, call_id, event_id FROM ${S}.jw_operations WHERE session_id = $1 AND task_id = $2 AND key = $3`,
    withoutOwnerRow: `SELECT session_id FROM (SELECT session_id FROM ${S}.jw_events UNION SELECT session_id FROM ${S}.jw_tasks UNION SELECT session_id FROM ${S}.jw_operations UNION SELECT session_id FROM ${S}.jw_attention EXCEPT SELECT session_id FROM ${S}.jw_sessions) o ORDER BY session_id COLLATE "C"`,
    sessionOperations: `SELECT task_id, key, session_id, call_id, event_id FROM ${S}.jw_operations WHERE session_id = $1`,
    lockOperation: `SELECT session_id, call_id, event_id FROM ${S}.jw_operations WHERE session_id = $1 AND task_id = $2 AND key = $3 FOR UPDATE`,
    list:
      `SELECT ${sessionCols.split(', ').map((c) => `s.${c}`).join(', ')}, ` +
      `(SELECT count(*) FROM ${S}.jw_events e WHERE e.session_id = s.session_id) AS events ` +
      `FROM ${S}.jw_sessions s ORDER BY s.session_id COLLATE "C"`,
    attentionByCalls: attentionOfCalls(S, ATTENTION_COLUMNS, '$1', '$2::text[]'),
    attentionByBinding:
      `SELECT ${ATTENTION_COLUMNS} FROM ${S}.jw_attention WHERE session_id = $1 AND task_id = $2 AND tool = $3 AND args_digest = $4`,
  };
}

export type PostgresStatements = ReturnType<typeof postgresStatements>;
