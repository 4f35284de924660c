/**
 * A commit's writes as one statement (docs/design.md#one-round-trip-per-write-on-postgresql): the events, the task
 * row, the operation rows, the attention rows and the notification, each a data-modifying part of one `WITH`, so the
 * server parses, plans and answers one statement where it used to run one per table. On the known-rows path the same
 * statement first writes the owner row where it is still the known row and checks every other row the decision read,
 * and no row is written unless all of that held.
 *
 * Order inside one statement is not left to chance. The parts that change rows read earlier (the task update, the
 * operation and attention upserts) are gated on the checks (`WHERE (SELECT ok FROM c)`), and the checks on the owner
 * row's write, so the owner row is locked first (as every writer of the session locks it first) and each checked row
 * is locked and compared before anything changes it. A miss anywhere divides by zero (SQLSTATE 22012), which fails
 * the statement and with it the transaction.
 */
import type { EventRow, OperationRow, TaskRow, TxWrites } from '../rows.js';
import { ATTENTION_COLUMNS, ATTENTION_UPDATE, attentionValues, SESSION_COLUMNS, TASK_CHANGING_COLUMNS, TASK_COLUMNS, taskValues } from '../sql-rows.js';
import { type KnownReads, OPERATION_COLUMNS } from './known-rows.js';
import { attentionOfCalls, CLOCK } from './statements.js';

/** `jsonb_build_array` over these columns: a row as the JSON array known-rows.ts builds for it. */
const asJson = (columns: string) => `jsonb_build_array(${columns})`;

const SESSION_JSON = asJson(SESSION_COLUMNS);
const TASK_JSON = asJson(TASK_COLUMNS);
const OPERATION_JSON = asJson(OPERATION_COLUMNS);
const ATTENTION_JSON = asJson(ATTENTION_COLUMNS);
const TASK_COLUMN_LIST = TASK_COLUMNS.split(', ');
const OPERATION_UPDATE = OPERATION_COLUMNS.split(', ').slice(3).map((c) => `${c} = EXCLUDED.${c}`).join(', ');

const ATTENTION_TYPES = 'text text text text text text text text boolean boolean text text bigint bigint bigint bigint'.split(' ');
const EVENT_COLUMNS = 'session_id, seq, event_id, epoch, body, hash';
const EVENT_TYPES = ['text', 'bigint', 'text', 'bigint', 'text', 'text'];
const OPERATION_TYPES = OPERATION_COLUMNS.split(', ').map(() => 'text');

/** Up to this many rows go as one parameter a value; more as one array a column. */
const ROWS_AS_VALUES = 4;

type Param = (value: unknown, cast?: string) => string;

/**
 * `rows` (each one value per entry of `types`) as a row source named `v(columns)`, and the mark its shape adds: a
 * few rows as a VALUES list of one parameter a value, which the server binds without parsing an array and runs
 * without a function scan (the usual commit writes one to three rows a table); more rows as one array parameter a
 * column through unnest, so a large commit stays one statement of a bounded number of parameters.
 */
function rowSource(rows: readonly (readonly unknown[])[], types: readonly string[], columns: string, p: Param): { from: string; mark: string } {
  if (rows.length <= ROWS_AS_VALUES) {
    const list = rows.map((row) => `(${types.map((type, i) => p(row[i], `::${type}`)).join(', ')})`).join(', ');
    return { from: `(VALUES ${list}) AS v(${columns})`, mark: String(rows.length) };
  }
  return { from: `unnest(${types.map((type, i) => p(rows.map((row) => row[i]), `::${type}[]`)).join(', ')}) AS v(${columns})`, mark: 'n' };
}

/** The owner-row write of the known-rows path: its new values and what the stored row must still be. */
export interface SpeculatedSession {
  /** sessionValues of the new row. */
  readonly values: readonly unknown[];
  /** The lease length to renew from the database's clock, or null to keep the row's value. */
  readonly leaseMs: number | null;
  readonly expect: { readonly epoch: number; readonly lastSeq: number };
  /** The known row as JSON (sessionJson). */
  readonly knownJson: string;
}

export interface CommitStatement {
  /** Names the statement's shape: one prepared statement per shape. */
  readonly shape: string;
  readonly text: string;
  readonly values: unknown[];
}

/**
 * Whether the rows `source` selects (locked FOR UPDATE), as a JSON object of their `j` by `keyColumn`, are exactly
 * `expected` ('{}' when no row may match).
 */
function storedRowsAre(keyColumn: string, source: string, expected: string): string {
  return `(SELECT coalesce(jsonb_object_agg(r.${keyColumn}, r.j), '{}'::jsonb) FROM (${source}) r) = ${expected}`;
}

/** Keeps the last of several rows of one operation (session, task, key), as sequential upserts would. */
function lastPerOperation<T extends { readonly sessionId: string; readonly taskId: string; readonly key: string }>(rows: readonly T[]): T[] {
  const byKey = new Map<string, T>();
  for (const r of rows) {
    const k = `${r.sessionId}\u0000${r.taskId}\u0000${r.key}`;
    byKey.delete(k);
    byKey.set(k, r);
  }
  return [...byKey.values()];
}

/**
 * The statement for `writes` (all but the owner row and the inbox rows, which the caller writes) in schema `S`.
 * With `session` and `checks` it is the whole known-rows commit. Its one result row has `lease_expires_at` (the
 * owner row's lease as written, known-rows path only).
 */
export function commitStatement(
  S: string,
  writes: TxWrites<unknown>,
  channel: string,
  known?: { readonly session: SpeculatedSession; readonly checks: KnownReads },
): CommitStatement {
  const values: unknown[] = [];
  const p: Param = (value, cast = '') => {
    values.push(value);
    return `$${values.length}${cast}`;
  };
  const parts: string[] = [];
  const conditions: string[] = [];
  const shape: string[] = [];
  // On the known-rows path, every part that changes a row the checks read waits for them.
  let ok: string | null = null;
  let lease = 'NULL::bigint';
  if (known) {
    const { session, checks } = known;
    const v = session.values;
    const sid = p(v[0], '::text');
    const leaseMs = p(session.leaseMs, '::bigint');
    parts.push(
      `s AS (UPDATE ${S}.jw_sessions SET owner = ${p(v[1])}, held = ${p(v[2])}, epoch = ${p(v[3])}, last_seq = ${p(v[4])}, ` +
        `head_hash = ${p(v[5])}, body_bytes = ${p(v[6])}, recorded_at = ${p(v[7], '::bigint')}, lease_expires_at = ` +
        `CASE WHEN ${leaseMs} IS NULL THEN ${p(v[8], '::bigint')} ELSE ${CLOCK} + ${leaseMs} END ` +
        `WHERE session_id = ${sid} AND epoch = ${p(session.expect.epoch, '::bigint')} AND last_seq = ${p(session.expect.lastSeq, '::bigint')} ` +
        `AND ${SESSION_JSON} = ${p(session.knownJson, '::jsonb')} RETURNING lease_expires_at)`,
    );
    const tests = ['EXISTS (SELECT 1 FROM s)'];
    if (checks.task) {
      const c = checks.task;
      const source = `SELECT task_id, ${TASK_JSON} AS j FROM ${S}.jw_tasks WHERE session_id = ${sid} AND task_id = ${p(c.taskId)} FOR UPDATE`;
      tests.push(storedRowsAre('task_id', source, p(c.expected, '::jsonb')));
    }
    if (checks.operation) {
      const c = checks.operation;
      const where = `session_id = ${sid} AND task_id = ${p(c.taskId)} AND key = ${p(c.key)}`;
      const source = `SELECT key, ${OPERATION_JSON} AS j FROM ${S}.jw_operations WHERE ${where} FOR UPDATE`;
      tests.push(storedRowsAre('key', source, p(c.expected, '::jsonb')));
    }
    if (checks.attention) {
      const c = checks.attention;
      const source = attentionOfCalls(S, `call_id, ${ATTENTION_JSON} AS j`, sid, p(c.callIds, '::text[]'));
      tests.push(storedRowsAre('call_id', source, p(c.expected, '::jsonb')));
    }
    if (checks.eventIds) {
      tests.push(`NOT EXISTS (SELECT 1 FROM ${S}.jw_events WHERE session_id = ${sid} AND event_id = ANY(${p(checks.eventIds, '::text[]')}))`);
    }
    // A target list's AND is evaluated left to right, each sub-select when first needed: the owner row first.
    parts.push(`c AS (SELECT (${tests.join(' AND ')}) AS ok)`);
    ok = '(SELECT ok FROM c)';
    conditions.push(ok);
    lease = '(SELECT lease_expires_at FROM s)';
    shape.push(`k${Object.keys(checks).sort().map((k) => k[0]).join('')}`);
  }
  const gate = ok === null ? '' : ` WHERE ${ok}`;
  const events: readonly EventRow[] = writes.events ?? [];
  if (events.length > 0) {
    const rows = events.map((e) => [e.sessionId, e.seq, e.eventId, e.epoch, e.body, e.hash]);
    const { from, mark } = rowSource(rows, EVENT_TYPES, EVENT_COLUMNS, p);
    parts.push(`e AS (INSERT INTO ${S}.jw_events (${EVENT_COLUMNS}) SELECT * FROM ${from}${gate})`);
    shape.push(`e${mark}`);
  }
  if (writes.task) {
    parts.push(taskPart(S, writes.task.row, writes.task.insert, p, ok));
    conditions.push('(SELECT count(*) FROM t) = 1');
    shape.push(writes.task.insert ? 'ti' : 'tu');
  }
  const ops: OperationRow[] = lastPerOperation(writes.operations ?? []);
  if (ops.length > 0) {
    const rows = ops.map((x) => [x.taskId, x.key, x.sessionId, x.callId, x.eventId]);
    const { from, mark } = rowSource(rows, OPERATION_TYPES, OPERATION_COLUMNS, p);
    parts.push(
      `o AS (INSERT INTO ${S}.jw_operations (${OPERATION_COLUMNS}) SELECT * FROM ${from}${gate} ` +
        `ON CONFLICT (session_id, task_id, key) DO UPDATE SET ${OPERATION_UPDATE})`,
    );
    shape.push(`o${mark}`);
  }
  const attention = lastPerOperation(writes.attention ?? []);
  if (attention.length > 0) {
    const rows = attention.map((a) => attentionValues(a, (b) => b));
    const { from, mark } = rowSource(rows, ATTENTION_TYPES, ATTENTION_COLUMNS, p);
    parts.push(
      `a AS (INSERT INTO ${S}.jw_attention (${ATTENTION_COLUMNS}) SELECT * FROM ${from}${gate} ` +
        `ON CONFLICT (session_id, task_id, key) DO UPDATE SET ${ATTENTION_UPDATE})`,
    );
    // Delivered only if the transaction commits (docs/design.md#the-review-console).
    const channelParam = p(channel, '::text');
    const sessions = rowSource([...new Set(attention.map((a) => a.sessionId))].map((x) => [x]), ['text'], 'x', p);
    parts.push(`n AS (SELECT pg_notify(${channelParam}, x) FROM ${sessions.from}${gate})`);
    conditions.push('(SELECT count(*) FROM n) >= 0');
    shape.push(`a${mark}n${sessions.mark}`);
  }
  const test = conditions.length > 0 ? conditions.join(' AND ') : 'true';
  const text =
    `WITH ${parts.join(', ')} SELECT ${lease} AS lease_expires_at, 1 / (CASE WHEN ${test} THEN 1 ELSE 0 END) AS changed`;
  return { shape: shape.join('_'), text, values };
}

/** The task row's write: an insert (a new row cannot be one the checks locked), or an update gated on `ok`. */
function taskPart(S: string, row: TaskRow, insert: boolean, p: Param, ok: string | null): string {
  const v = taskValues(row);
  if (insert) return `t AS (INSERT INTO ${S}.jw_tasks (${TASK_COLUMNS}) VALUES (${v.map((x) => p(x)).join(', ')}) RETURNING 1)`;
  const set = TASK_CHANGING_COLUMNS.map((c) => `${c} = ${p(v[TASK_COLUMN_LIST.indexOf(c)])}`).join(', ');
  const where = ok === null ? '' : ` AND ${ok}`;
  return `t AS (UPDATE ${S}.jw_tasks SET ${set} WHERE session_id = ${p(row.sessionId)} AND task_id = ${p(row.taskId)}${where} RETURNING 1)`;
}
