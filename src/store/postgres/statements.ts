import { ATTENTION_COLUMNS, ATTENTION_UPDATE, SESSION_COLUMNS, TASK_COLUMNS } from '../sql-rows.js';
import { OPERATION_COLUMNS } from './known-rows.js';

/** `jsonb_build_object` over these columns: a row as the JSON object known-rows.ts builds for it. */
const asJson = (columns: string) => `jsonb_build_object(${columns.split(', ').map((c) => `'${c}', ${c}`).join(', ')})`;

/** The database's clock in epoch milliseconds. */
const CLOCK = 'floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint';

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
    insertEvents:
      `INSERT INTO ${S}.jw_events (session_id, seq, event_id, epoch, body, hash) ` +
      'SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[])',
    events: `SELECT seq, event_id, epoch, body, hash FROM ${S}.jw_events WHERE session_id = $1 ORDER BY seq`,
    existingEventIds: `SELECT DISTINCT event_id FROM ${S}.jw_events WHERE session_id = $1 AND event_id = ANY($2::text[])`,
    task: `SELECT ${taskCols} FROM ${S}.jw_tasks WHERE session_id = $1 AND task_id = $2`,
    lockTask: `SELECT ${taskCols} FROM ${S}.jw_tasks WHERE session_id = $1 AND task_id = $2 FOR UPDATE`,
    insertTask: `INSERT INTO ${S}.jw_tasks (${taskCols}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
    // Fails the same way as updateSession when the row it read FOR UPDATE is gone.
    updateTask:
      `WITH changed AS (UPDATE ${S}.jw_tasks SET state = $3, charged_tool_calls = $4, charged_output_bytes = $5, reserved_output_bytes = $6, ` +
      'stop_reason = $7, reservations = $8, charged_journal_bytes = $9 WHERE session_id = $2 AND task_id = $1 RETURNING 1) ' +
      'SELECT 1 / (SELECT count(*) FROM changed)::int AS changed',
    operation: `SELECT session_id, call_id, event_id FROM ${S}.jw_operations WHERE session_id = $1 AND task_id = $2 AND key = $3`,
    lockOperation: `SELECT session_id, call_id, event_id FROM ${S}.jw_operations WHERE session_id = $1 AND task_id = $2 AND key = $3 FOR UPDATE`,
    upsertOperations:
      `INSERT INTO ${S}.jw_operations (task_id, key, session_id, call_id, event_id) ` +
      'SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) ' +
      'ON CONFLICT (session_id, task_id, key) DO UPDATE SET call_id = EXCLUDED.call_id, event_id = EXCLUDED.event_id',
    list:
      `SELECT ${sessionCols.split(', ').map((c) => `s.${c}`).join(', ')}, ` +
      `(SELECT count(*) FROM ${S}.jw_events e WHERE e.session_id = s.session_id) AS events ` +
      `FROM ${S}.jw_sessions s ORDER BY s.session_id COLLATE "C"`,
    attentionByCalls: `SELECT ${ATTENTION_COLUMNS} FROM ${S}.jw_attention WHERE session_id = $1 AND call_id = ANY($2::text[]) FOR UPDATE`,
    attentionByBinding:
      `SELECT ${ATTENTION_COLUMNS} FROM ${S}.jw_attention WHERE session_id = $1 AND task_id = $2 AND tool = $3 AND args_digest = $4 AND revision = $5`,
    upsertAttention:
      `INSERT INTO ${S}.jw_attention (${ATTENTION_COLUMNS}) VALUES (${ATTENTION_COLUMNS.split(', ').map((_, i) => `$${i + 1}`).join(', ')}) ` +
      `ON CONFLICT (session_id, task_id, key) DO UPDATE SET ${ATTENTION_UPDATE}`,
    // A commit decided on known rows (known-rows.ts), in one batch. The owner row is written only where it is still
    // exactly the known row (the fencing check included); a renewed lease is set from the database's clock read by
    // this statement ($10: the lease length, null when the decision left the lease as it was). Changing no row fails
    // (22012) and aborts the batch. Each check below fails the same way where a stored row differs from the known one.
    speculateSession:
      `WITH changed AS (UPDATE ${S}.jw_sessions SET owner = $2, held = $3, epoch = $4, last_seq = $5, head_hash = $6, body_bytes = $7, ` +
      `recorded_at = $8, lease_expires_at = CASE WHEN $10::bigint IS NULL THEN $9::bigint ELSE ${CLOCK} + $10::bigint END ` +
      `WHERE session_id = $1 AND epoch = $11 AND last_seq = $12 AND ${asJson(SESSION_COLUMNS)} = $13::jsonb RETURNING lease_expires_at) ` +
      'SELECT (SELECT lease_expires_at FROM changed) AS lease_expires_at, 1 / (SELECT count(*) FROM changed)::int AS changed',
    checkTask:
      `SELECT 1 / (CASE WHEN (SELECT coalesce(jsonb_object_agg(r.task_id, r.j), '{}'::jsonb) FROM (SELECT task_id, ${asJson(TASK_COLUMNS)} AS j ` +
      `FROM ${S}.jw_tasks WHERE session_id = $1 AND task_id = $2 FOR UPDATE) r) = $3::jsonb THEN 1 ELSE 0 END) AS ok`,
    checkOperation:
      `SELECT 1 / (CASE WHEN (SELECT coalesce(jsonb_object_agg(r.key, r.j), '{}'::jsonb) FROM (SELECT key, ${asJson(OPERATION_COLUMNS)} AS j ` +
      `FROM ${S}.jw_operations WHERE session_id = $1 AND task_id = $2 AND key = $3 FOR UPDATE) r) = $4::jsonb THEN 1 ELSE 0 END) AS ok`,
    checkAttention:
      `SELECT 1 / (CASE WHEN (SELECT coalesce(jsonb_object_agg(r.call_id, r.j), '{}'::jsonb) FROM (SELECT call_id, ${asJson(ATTENTION_COLUMNS)} AS j ` +
      `FROM ${S}.jw_attention WHERE session_id = $1 AND call_id = ANY($2::text[]) FOR UPDATE) r) = $3::jsonb THEN 1 ELSE 0 END) AS ok`,
    checkNoEventIds:
      `SELECT 1 / (CASE WHEN EXISTS (SELECT 1 FROM ${S}.jw_events WHERE session_id = $1 AND event_id = ANY($2::text[])) THEN 0 ELSE 1 END) AS ok`,
  };
}

export type PostgresStatements = ReturnType<typeof postgresStatements>;
