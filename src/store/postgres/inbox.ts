/**
 * The PostgreSQL decision inbox: rows in `jw_decisions`, locked `FOR UPDATE` by every writer, and a
 * `pg_notify` in the writing transaction so that a waiting host wakes as soon as it commits (LISTEN/NOTIFY).
 */
import type { SessionId } from '../../ids.js';
import { DECISION_COLUMNS, decisionValues, toDecision, type CallProgress, type DecisionQuery, type DecisionRecord, type DecisionRow, type InboxBackend } from '../inbox-rows.js';
import type { AttentionStatus } from '../rows.js';
import type { Pool, PoolClient } from './driver.js';
import { Passthrough } from '../passthrough.js';
import { channelName, SharedListener } from './notify.js';

/** The inbox table's DDL for schema `S` (already quoted): the fresh schema and the migration step share it. */
export const INBOX_DDL = (S: string): string => `
CREATE TABLE ${S}.jw_decisions (
  id TEXT NOT NULL, kind TEXT NOT NULL, session_id TEXT NOT NULL, call_id TEXT NOT NULL, state TEXT NOT NULL,
  task_id TEXT, op_key TEXT, detail TEXT NOT NULL,
  CONSTRAINT jw_decisions_pkey PRIMARY KEY (id)
);
CREATE INDEX jw_decisions_by_session ON ${S}.jw_decisions (session_id, id);
CREATE INDEX jw_decisions_by_operation ON ${S}.jw_decisions (task_id, op_key) WHERE task_id IS NOT NULL;`;

type Tx = <T>(context: string, body: (client: PoolClient) => Promise<T>) => Promise<T>;
type Read = <T>(context: string, body: (client: PoolClient) => Promise<T>) => Promise<T>;

export class PostgresInbox implements InboxBackend {
  /** The notification channel of this schema (a hash keeps it a short plain identifier). */
  private readonly channel: string;
  /** One LISTEN connection for every waiter and view of this store. */
  private readonly listener: SharedListener;
  constructor(
    private readonly S: string,
    schema: string,
    pool: Pool,
    private readonly tx: Tx,
    private readonly read: Read,
  ) {
    this.channel = channelName('jw_inbox', schema);
    this.listener = new SharedListener(pool, this.channel, 'listen for decisions');
  }

  /** Whether a wait for a decision holds a pool connection to listen on. */
  get listening(): boolean {
    return this.listener.listening;
  }

  /** Inside the caller's transaction: the approval rows a commit's approval change reads (TxReads.approvals), locked. */
  async approvalsOf(client: PoolClient, sessionId: SessionId, op: { taskId: string; key: string; spent?: string }): Promise<DecisionRow[]> {
    const res = await client.query<DecisionRecord>(
      `SELECT ${DECISION_COLUMNS} FROM ${this.S}.jw_decisions WHERE session_id = $1 AND task_id = $2 AND op_key = $3 ` +
        "AND kind = 'approval' AND (state IN ('open', 'decided') OR id = $4) ORDER BY id FOR UPDATE",
      [sessionId, op.taskId, op.key, op.spent ?? null],
    );
    return res.rows.map(toDecision);
  }

  /** Inside the caller's transaction: the review decisions about these calls waiting to be journaled. */
  async reviewsOf(client: PoolClient, sessionId: SessionId, callIds: readonly string[]): Promise<DecisionRow[]> {
    const res = await client.query<DecisionRecord>(
      `SELECT ${DECISION_COLUMNS} FROM ${this.S}.jw_decisions WHERE session_id = $1 AND call_id = ANY($2::text[]) AND kind = 'review' AND state = 'decided' ORDER BY id`,
      [sessionId, [...callIds]],
    );
    return res.rows.map(toDecision);
  }

  /** Inside the caller's transaction: upserts the rows and notifies waiters (delivered at commit). */
  async write(client: PoolClient, rows: readonly DecisionRow[]): Promise<void> {
    for (const step of this.writeSteps(client, rows)) await step();
  }

  /** The statements of `write`, one by one, for a caller that pipelines them with its own. */
  writeSteps(client: PoolClient, rows: readonly DecisionRow[]): Array<() => Promise<unknown>> {
    return rows.flatMap((row) => [
      () => client.query(
        `INSERT INTO ${this.S}.jw_decisions (${DECISION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO UPDATE SET ` +
          'state = excluded.state, task_id = excluded.task_id, op_key = excluded.op_key, detail = excluded.detail',
        decisionValues(row),
      ),
      () => client.query('SELECT pg_notify($1, $2)', [this.channel, row.id]),
    ]);
  }

  async transactDecision<R>(
    id: string,
    decide: (row: DecisionRow | undefined, taskApprovals?: readonly DecisionRow[]) => { readonly write?: DecisionRow; readonly result: R },
    options?: { readonly taskApprovals?: boolean },
  ): Promise<R> {
    return this.transactRows(
      `decision ${id}`,
      async (client) => {
        const res = await client.query<DecisionRecord>(`SELECT ${DECISION_COLUMNS} FROM ${this.S}.jw_decisions WHERE id = $1 FOR UPDATE`, [id]);
        const row = res.rows[0] ? toDecision(res.rows[0]) : undefined;
        if (options?.taskApprovals !== true || row?.kind !== 'approval' || row.binding === null) return { row, related: undefined };
        // One decision with its task's approvals at a time in a session: the lock is held to commit, so the rows read
        // after it include what the transaction before it decided.
        await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`${this.channel}:approvals:${row.sessionId}`]);
        const related = await client.query<DecisionRecord>(
          `SELECT ${DECISION_COLUMNS} FROM ${this.S}.jw_decisions WHERE session_id = $1 AND task_id = $2 AND kind = 'approval' ORDER BY id`,
          [row.sessionId, row.binding.taskId],
        );
        return { row, related: related.rows.map(toDecision) };
      },
      ({ row, related }) => {
        const { write, result } = decide(row, related);
        return { writes: write ? [write] : [], result };
      },
    );
  }

  async transactReview<R>(
    sessionId: SessionId,
    callId: string,
    decide: (waiting: readonly DecisionRow[], progress?: CallProgress | null) => { readonly writes: readonly DecisionRow[]; readonly result: R },
  ): Promise<R> {
    return this.transactRows(
      `review of call ${callId}`,
      async (client) => {
        // Two first reviews of a call have no row to lock: a transaction-scoped lock on the call serializes them.
        await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`${this.channel}:review:${sessionId}:${callId}`]);
        // The owner row, shared: a commit of the session (which locks it for update first) either committed before
        // the call's attention row is read below, or waits for this transaction and then reads its review.
        await client.query(`SELECT 1 FROM ${this.S}.jw_sessions WHERE session_id = $1 FOR SHARE`, [sessionId]);
        const attention = await client.query<{ started: boolean; status: string }>(
          `SELECT started, status FROM ${this.S}.jw_attention WHERE session_id = $1 AND call_id = $2`,
          [sessionId, callId],
        );
        const res = await client.query<DecisionRecord>(
          `SELECT ${DECISION_COLUMNS} FROM ${this.S}.jw_decisions WHERE session_id = $1 AND call_id = $2 AND kind = 'review' AND state = 'decided' ` +
            'ORDER BY id FOR UPDATE',
          [sessionId, callId],
        );
        const row = attention.rows[0];
        const progress = row ? { started: row.started === true, status: row.status as AttentionStatus } : null;
        return { waiting: res.rows.map(toDecision), progress };
      },
      ({ waiting, progress }) => decide(waiting, progress),
    );
  }

  /** One transaction: read the rows (locked), decide, write what was decided; an error `decide` throws passes through. */
  private async transactRows<S, R>(
    context: string,
    read: (client: PoolClient) => Promise<S>,
    decide: (state: S) => { readonly writes: readonly DecisionRow[]; readonly result: R },
  ): Promise<R> {
    try {
      return await this.tx(context, async (client) => {
        const state = await read(client);
        let outcome: { readonly writes: readonly DecisionRow[]; readonly result: R };
        try {
          outcome = decide(state);
        } catch (error) {
          throw new Passthrough(error);
        }
        await this.write(client, outcome.writes);
        return outcome.result;
      });
    } catch (error) {
      if (error instanceof Passthrough) throw error.error;
      throw error;
    }
  }

  async listDecisions(q: DecisionQuery): Promise<DecisionRow[]> {
    const where: string[] = [];
    const values: unknown[] = [];
    const add = (column: string, value: unknown, op = '=') => {
      values.push(value);
      where.push(`${column} ${op} $${values.length}`);
    };
    if (q.sessionId !== undefined) add('session_id', q.sessionId);
    if (q.kind !== undefined) add('kind', q.kind);
    if (q.taskId !== undefined) add('task_id', q.taskId);
    if (q.key !== undefined) add('op_key', q.key);
    if (q.after !== undefined) add('id', q.after, '>');
    if (q.states !== undefined) {
      values.push([...q.states]);
      where.push(`state = ANY($${values.length}::text[])`);
    }
    let sql = `SELECT ${DECISION_COLUMNS} FROM ${this.S}.jw_decisions${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY id`;
    if (Number.isFinite(q.limit)) {
      values.push(q.limit);
      sql += ` LIMIT $${values.length}`;
    }
    return this.read('list decisions', async (client) => (await client.query<DecisionRecord>(sql, values)).rows.map(toDecision));
  }

  /** A dedicated connection LISTENs on the schema's channel until the returned function is called. */
  watchDecisions(onChange: (id: string) => void): Promise<() => Promise<void>> {
    return this.listener.subscribe(onChange);
  }

  /** The store is closing: every watcher hears `''` at once, then the listening connection is released. */
  stopWatching(): Promise<void> {
    return this.listener.shutdown();
  }
}
