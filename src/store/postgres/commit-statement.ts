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
import { setNewest } from '../../bounded-map.js';
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
const TASK_COLUMN_INDEX = Object.fromEntries(TASK_COLUMNS.split(', ').map((c, i) => [c, i])) as Record<string, number>;
const OPERATION_UPDATE = OPERATION_COLUMNS.split(', ').slice(3).map((c) => `${c} = EXCLUDED.${c}`).join(', ');

/** The cast of each column's parameter, in the order of the column list. */
const casts = (types: string) => types.split(' ').map((t) => `::${t}`);
const ATTENTION_CASTS = casts('text text text text text text text text boolean boolean text text bigint bigint bigint bigint bigint');
const EVENT_COLUMNS = 'session_id, seq, event_id, epoch, body, hash';
const EVENT_CASTS = casts('text bigint text bigint text text');
const OPERATION_CASTS = OPERATION_COLUMNS.split(', ').map(() => '::text');
const TEXT_CAST = ['::text'];

/** Up to this many rows go as one parameter a value; more as one array a column. */
const ROWS_AS_VALUES = 4;

/**
 * Collects a statement's parameters in order. Only a builder made with `sql` writes text: the text of a statement
 * depends on its shape alone, so it is written once per shape and cached, and later statements of that shape only
 * collect their values, through the same code in the same order.
 */
class Params {
  readonly values: unknown[] = [];
  constructor(readonly sql: boolean) {}

  /** The next parameter's placeholder (`$n` and its cast), or '' when no text is written. */
  p(value: unknown, cast = ''): string {
    this.values.push(value);
    return this.sql ? `$${this.values.length}${cast}` : '';
  }
}

/**
 * `rows` (each one value per entry of `casts`, the casts of its columns' parameters) as a row source named
 * `v(columns)`, and the mark its shape adds: a few rows as a VALUES list of one parameter a value, which the server
 * binds without parsing an array and runs without a function scan (the usual commit writes one to three rows a
 * table); more rows as one array parameter a column through unnest, so a large commit stays one statement of a
 * bounded number of parameters.
 */
function rowSource(rows: readonly (readonly unknown[])[], casts: readonly string[], columns: string, b: Params): { from: string; mark: string } {
  if (rows.length <= ROWS_AS_VALUES) {
    const tuples: string[] = [];
    for (const row of rows) {
      let tuple = '';
      for (let i = 0; i < casts.length; i++) {
        const placeholder = b.p(row[i], casts[i]);
        if (b.sql) tuple += i === 0 ? placeholder : `, ${placeholder}`;
      }
      if (b.sql) tuples.push(`(${tuple})`);
    }
    return { from: b.sql ? `(VALUES ${tuples.join(', ')}) AS v(${columns})` : '', mark: String(rows.length) };
  }
  const arrays: string[] = [];
  for (let i = 0; i < casts.length; i++) arrays.push(b.p(rows.map((row) => row[i]), b.sql ? `${casts[i]}[]` : ''));
  return { from: b.sql ? `unnest(${arrays.join(', ')}) AS v(${columns})` : '', mark: 'n' };
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

/** Statement texts by schema and shape: a text depends on nothing else, so each is written once. */
const TEXTS = new Map<string, string>();
const MAX_TEXTS = 512;

/**
 * The statement for `writes` (all but the owner row and the inbox rows, which the caller writes) in schema `S`.
 * With `session` and `checks` it is the whole known-rows commit. Its one result row has `lease_expires_at` (the
 * owner row's lease as written, known-rows path only).
 */
export function commitStatement(S: string, writes: TxWrites<unknown>, channel: string, known?: KnownCommit): CommitStatement {
  const quick = new Params(false);
  const shape = build(S, writes, channel, known, quick).shape;
  const cacheKey = `${S}\u0000${shape}`;
  const cached = TEXTS.get(cacheKey);
  if (cached !== undefined) return { shape, text: cached, values: quick.values };
  const full = new Params(true);
  const { text } = build(S, writes, channel, known, full);
  setNewest(TEXTS, cacheKey, text, MAX_TEXTS);
  return { shape, text, values: full.values };
}

type KnownCommit = { readonly session: SpeculatedSession; readonly checks: KnownReads };

/** Builds the statement's parameters and shape, and its text when `b.sql` (else the text is ''). */
function build(S: string, writes: TxWrites<unknown>, channel: string, known: KnownCommit | undefined, b: Params): { shape: string; text: string } {
  const parts: string[] = [];
  const conditions: string[] = [];
  const shape: string[] = [];
  // On the known-rows path, every part that changes a row the checks read waits for them.
  let ok: string | null = null;
  let lease = 'NULL::bigint';
  if (known) {
    const { session, checks } = known;
    const v = session.values;
    const sid = b.p(v[0], '::text');
    const leaseMs = b.p(session.leaseMs, '::bigint');
    const owner = b.p(v[1]);
    const held = b.p(v[2]);
    const epoch = b.p(v[3]);
    const lastSeq = b.p(v[4]);
    const head = b.p(v[5]);
    const bytes = b.p(v[6]);
    const recordedAt = b.p(v[7], '::bigint');
    const keptLease = b.p(v[8], '::bigint');
    const expectEpoch = b.p(session.expect.epoch, '::bigint');
    const expectLastSeq = b.p(session.expect.lastSeq, '::bigint');
    const knownRow = b.p(session.knownJson, '::jsonb');
    if (b.sql) {
      parts.push(
        `s AS (UPDATE ${S}.jw_sessions SET owner = ${owner}, held = ${held}, epoch = ${epoch}, last_seq = ${lastSeq}, ` +
          `head_hash = ${head}, body_bytes = ${bytes}, recorded_at = ${recordedAt}, lease_expires_at = ` +
          `CASE WHEN ${leaseMs} IS NULL THEN ${keptLease} ELSE ${CLOCK} + ${leaseMs} END ` +
          `WHERE session_id = ${sid} AND epoch = ${expectEpoch} AND last_seq = ${expectLastSeq} ` +
          `AND ${SESSION_JSON} = ${knownRow} RETURNING lease_expires_at)`,
      );
    }
    const tests = ['EXISTS (SELECT 1 FROM s)'];
    if (checks.task) {
      const c = checks.task;
      const taskId = b.p(c.taskId);
      const expected = b.p(c.expected, '::jsonb');
      if (b.sql) {
        const source = `SELECT task_id, ${TASK_JSON} AS j FROM ${S}.jw_tasks WHERE session_id = ${sid} AND task_id = ${taskId} FOR UPDATE`;
        tests.push(storedRowsAre('task_id', source, expected));
      }
    }
    if (checks.operation) {
      const c = checks.operation;
      const taskId = b.p(c.taskId);
      const key = b.p(c.key);
      const expected = b.p(c.expected, '::jsonb');
      if (b.sql) {
        const source = `SELECT key, ${OPERATION_JSON} AS j FROM ${S}.jw_operations WHERE session_id = ${sid} AND task_id = ${taskId} AND key = ${key} FOR UPDATE`;
        tests.push(storedRowsAre('key', source, expected));
      }
    }
    if (checks.attention) {
      const c = checks.attention;
      const ids = b.p(c.callIds, '::text[]');
      const expected = b.p(c.expected, '::jsonb');
      if (b.sql) tests.push(storedRowsAre('call_id', attentionOfCalls(S, `call_id, ${ATTENTION_JSON} AS j`, sid, ids), expected));
    }
    if (checks.eventIds) {
      const ids = b.p(checks.eventIds, '::text[]');
      if (b.sql) tests.push(`NOT EXISTS (SELECT 1 FROM ${S}.jw_events WHERE session_id = ${sid} AND event_id = ANY(${ids}))`);
    }
    // A target list's AND is evaluated left to right, each sub-select when first needed: the owner row first.
    if (b.sql) parts.push(`c AS (SELECT (${tests.join(' AND ')}) AS ok)`);
    ok = '(SELECT ok FROM c)';
    conditions.push(ok);
    lease = '(SELECT lease_expires_at FROM s)';
    shape.push(`k${Object.keys(checks).sort().map((k) => k[0]).join('')}`);
  }
  const gate = ok === null ? '' : ` WHERE ${ok}`;
  const events: readonly EventRow[] = writes.events ?? [];
  if (events.length > 0) {
    const rows = events.map((e) => [e.sessionId, e.seq, e.eventId, e.epoch, e.body, e.hash]);
    const { from, mark } = rowSource(rows, EVENT_CASTS, EVENT_COLUMNS, b);
    if (b.sql) parts.push(`e AS (INSERT INTO ${S}.jw_events (${EVENT_COLUMNS}) SELECT * FROM ${from}${gate})`);
    shape.push(`e${mark}`);
  }
  if (writes.task) {
    const part = taskPart(S, writes.task.row, writes.task.insert, b, ok);
    if (b.sql) parts.push(part);
    conditions.push('(SELECT count(*) FROM t) = 1');
    shape.push(writes.task.insert ? 'ti' : 'tu');
  }
  const ops: OperationRow[] = lastPerOperation(writes.operations ?? []);
  if (ops.length > 0) {
    const rows = ops.map((x) => [x.taskId, x.key, x.sessionId, x.callId, x.eventId]);
    const { from, mark } = rowSource(rows, OPERATION_CASTS, OPERATION_COLUMNS, b);
    if (b.sql) {
      parts.push(
        `o AS (INSERT INTO ${S}.jw_operations (${OPERATION_COLUMNS}) SELECT * FROM ${from}${gate} ` +
          `ON CONFLICT (session_id, task_id, key) DO UPDATE SET ${OPERATION_UPDATE})`,
      );
    }
    shape.push(`o${mark}`);
  }
  const attention = lastPerOperation(writes.attention ?? []);
  if (attention.length > 0) {
    const rows = attention.map((a) => attentionValues(a, (x) => x));
    const { from, mark } = rowSource(rows, ATTENTION_CASTS, ATTENTION_COLUMNS, b);
    // Delivered only if the transaction commits (docs/design.md#the-review-console).
    const channelParam = b.p(channel, '::text');
    const sessions = rowSource([...new Set(attention.map((a) => a.sessionId))].map((x) => [x]), TEXT_CAST, 'x', b);
    if (b.sql) {
      parts.push(
        `a AS (INSERT INTO ${S}.jw_attention (${ATTENTION_COLUMNS}) SELECT * FROM ${from}${gate} ` +
          `ON CONFLICT (session_id, task_id, key) DO UPDATE SET ${ATTENTION_UPDATE})`,
        `n AS (SELECT pg_notify(${channelParam}, x) FROM ${sessions.from}${gate})`,
      );
    }
    conditions.push('(SELECT count(*) FROM n) >= 0');
    shape.push(`a${mark}n${sessions.mark}`);
  }
  const test = conditions.length > 0 ? conditions.join(' AND ') : 'true';
  const text = b.sql
    ? `WITH ${parts.join(', ')} SELECT ${lease} AS lease_expires_at, 1 / (CASE WHEN ${test} THEN 1 ELSE 0 END) AS changed`
    : '';
  return { shape: shape.join('_'), text };
}

/** The task row's write: an insert (a new row cannot be one the checks locked), or an update gated on `ok`. */
function taskPart(S: string, row: TaskRow, insert: boolean, b: Params, ok: string | null): string {
  const v = taskValues(row);
  if (insert) {
    const values = v.map((x) => b.p(x));
    return b.sql ? `t AS (INSERT INTO ${S}.jw_tasks (${TASK_COLUMNS}) VALUES (${values.join(', ')}) RETURNING 1)` : '';
  }
  const changed = TASK_CHANGING_COLUMNS.map((c) => b.p(v[TASK_COLUMN_INDEX[c]!]));
  const sessionId = b.p(row.sessionId);
  const taskId = b.p(row.taskId);
  if (!b.sql) return '';
  const set = TASK_CHANGING_COLUMNS.map((c, i) => `${c} = ${changed[i]}`).join(', ');
  const where = ok === null ? '' : ` AND ${ok}`;
  return `t AS (UPDATE ${S}.jw_tasks SET ${set} WHERE session_id = ${sessionId} AND task_id = ${taskId}${where} RETURNING 1)`;
}
