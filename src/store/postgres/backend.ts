import { createHash } from 'node:crypto';
import { faultPoint } from '../../fault.js';
import { InvalidInputError, JournalCorruptError, StaleOwnerError, StoreBusyError, StoreClosedError, StoreUnavailableError } from '../../errors.js';
import type { SessionId } from '../../ids.js';
import { POSTGRES_DEFAULTS } from '../../limits.js';
import { JournalStore } from '../journal-store.js';
import type { AttentionRow, AttentionScan, EventRow, JournalBackend, OperationBinding, SessionRow, TxReads, TxState, TxWrites } from '../rows.js';
import {
  attentionScanSql, int, sessionValues, toAttention, toOperation, toSession, toTask,
  type AttentionRecord, type OperationRecord, type SessionRecord, type TaskRecord,
} from '../sql-rows.js';
import type { SessionStore } from '../types.js';
import { Pool, type PoolClient, type QueryResult, type QueryResultRow } from './driver.js';
import type { PgPool } from './driver-types.js';
import { Passthrough } from '../passthrough.js';
import { listenForDriverErrors, LostCreationRace, mapPostgresError } from './errors.js';
import { releasing } from './checked-out.js';
import { beforeCommitHooks } from './hooks.js';
import { checkMs, connectionAndSchema, type PostgresStoreOptions } from './options.js';
import { drawJournalId, IDENTIFIER, migrate, POSTGRES_SCHEMA_VERSION } from './schema.js';
import { postgresStatements, type PostgresStatements } from './statements.js';
import { commitStatement, type CommitStatement } from './commit-statement.js';
import { PostgresInbox } from './inbox.js';
import { channelName, SharedListener } from './notify.js';
import { KnownSessions, sessionJson } from './known-rows.js';
import { afterLostWrites, connectOnceRestarted, headProbe, Landed, LostConnectionRetry, type Attempt, type HeadProbe, type LostWrites } from './lost-connection.js';
import type { DecisionRow } from '../inbox-rows.js';

/** A check of the known-rows path failed: a stored row is not the known one. */
const MISSED = Symbol('known rows differ');

/** A check or the owner-row write of the known-rows path: changing or matching no row is a miss, not an error. */
function missOn<T>(query: Promise<T>): Promise<T> {
  return query.catch((error: unknown) => {
    const code = (error as { code?: unknown }).code;
    // 40001: a server whose default isolation is stricter than READ COMMITTED refused the statement's snapshot.
    if (code === NO_ROW_CHANGED || code === SERIALIZATION_FAILURE) throw new Passthrough(MISSED);
    throw error;
  });
}

/** One statement of a batch, started when the batch sends it. */
type Step = () => Promise<unknown>;

/** The SQLSTATE of a conditional update that changed no row (the statements divide by the count of changed rows). */
const NO_ROW_CHANGED = '22012';
const SERIALIZATION_FAILURE = '40001';

/**
 * Runs statements of one transaction. On a pipelining connection (a pool made with `pipeline: true`, as the store
 * makes its own) all are sent at once and cost one round trip; otherwise each waits for the one before. Either way
 * it rejects with the first statement's failure in order (the ones after an error fail as "transaction aborted").
 */
async function batch(client: PoolClient, steps: readonly Step[]): Promise<void> {
  if ((client as { pipeline?: unknown }).pipeline !== true) {
    for (const step of steps) await step();
    return;
  }
  const settled = await Promise.allSettled(steps.map((step) => step()));
  for (const r of settled) if (r.status === 'rejected') throw r.reason;
}

/**
 * The journal's own id, drawn once when its tables were made (schema version 9): the same however the pool reaches
 * it (a host name or an address, a pooler, another user or pool) and across restarts of the server, and another for
 * every other journal, whatever its server, database or schema are called (every role may read it: the migration
 * grants it). A row removed since is drawn again. A journal whose id cannot be read is not opened: as a view of its
 * own it would not see another handle's running calls.
 */
async function journalKey(pool: Pool, schema: string): Promise<string> {
  const read = async () => (await pool.query<{ id: string | null }>(`SELECT id FROM "${schema}".jw_journal`)).rows[0]?.id;
  let id = await read();
  if (!id) {
    await pool.query(drawJournalId(`"${schema}"`));
    id = await read();
  }
  if (!id) throw new StoreUnavailableError('store_failure', `schema ${schema}: the journal has no id in jw_journal`);
  return `journal:${id}`;
}

class PostgresBackend implements JournalBackend {
  readonly kind = 'postgres';
  readonly location: string;
  private closed = false;
  private readonly sql: PostgresStatements;
  private readonly beginWrite: string;
  private readonly beginRead: string;
  /** Prefix of this schema's statement names (the SQL differs per schema; names are at most 63 bytes). */
  private readonly statementPrefix: string | undefined;
  /** The quoted schema name. */
  private readonly schemaName: string;
  readonly inbox: PostgresInbox;
  /** Whether the pool's connections pipeline (then a commit on known rows costs one round trip). */
  private readonly pipelining: boolean;
  /**
   * Whether a commit on known rows is one statement on its own (the store's own pool, whose connections carry the
   * store's lock and statement timeouts): the server commits it as it answers, with no BEGIN or COMMIT to send.
   */
  private readonly singleStatementCommits: boolean;
  private readonly known = new KnownSessions();
  /** The database's clock minus this process's, as last read. */
  private clockOffset = 0;
  /** Where commits that change the attention index are announced (docs/design.md#the-review-console). */
  private readonly attentionChannel: string;
  /** One LISTEN connection for every live view of this store. */
  private readonly attentionListener: SharedListener;

  constructor(
    private readonly pool: Pool,
    private readonly ownsPool: boolean,
    schema: string,
    timeouts: { lock: number; statement: number; idle: number },
    prepare: boolean,
    /** The journal's own id (journalKey). */
    readonly scopeKey: string,
  ) {
    const S = `"${schema}"`;
    this.schemaName = S;
    this.location = `schema ${schema}`;
    this.statementPrefix = prepare
      ? `jw${POSTGRES_SCHEMA_VERSION}_${createHash('sha256').update(schema).digest('hex').slice(0, 16)}_`
      : undefined;
    const idle = timeouts.idle > 0 ? `; SET LOCAL idle_in_transaction_session_timeout = ${timeouts.idle}` : '';
    this.beginWrite =
      `BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE; SET LOCAL lock_timeout = ${timeouts.lock}; ` +
      `SET LOCAL statement_timeout = ${timeouts.statement}${idle}`;
    this.beginRead =
      `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL lock_timeout = ${timeouts.lock}; ` +
      `SET LOCAL statement_timeout = ${timeouts.statement}${idle}`;
    this.sql = postgresStatements(S);
    this.pipelining = (pool as unknown as { options?: { pipeline?: unknown } }).options?.pipeline === true;
    this.singleStatementCommits = this.pipelining && ownsPool;
    this.attentionChannel = channelName('jw_attention', schema);
    this.attentionListener = new SharedListener(this.pool, this.attentionChannel, 'listen for attention changes');
    this.inbox = new PostgresInbox(S, schema, pool,
      (context, body) => this.rerunning(this.beginWrite, context, body, 'before BEGIN'),
      (context, body) => this.reading(this.beginRead, context, body));
  }

  /** Runs one of the store's statements, as a named prepared statement unless `prepare: false`. */
  private run<T extends QueryResultRow>(client: PoolClient, key: keyof PostgresStatements, values: unknown[]): Promise<QueryResult<T>> {
    const text = this.sql[key];
    return this.statementPrefix === undefined
      ? client.query<T>(text, values)
      : client.query<T>({ name: this.statementPrefix + key, text, values });
  }

  private async connect(context: string): Promise<PoolClient> {
    if (this.closed) throw new StoreClosedError(this.kind, this.location);
    try {
      return await this.pool.connect();
    } catch (error) {
      const max = this.pool.options.max;
      if (error instanceof Error && /timeout exceeded when trying to connect/.test(error.message) && typeof max === 'number' && this.pool.totalCount >= max) {
        const listening = [this.inbox.listening && 'a wait for a decision', this.attentionListener.listening && 'a live view'].filter((what) => what !== false);
        const held = listening.length === 0 ? '' : ` (${listening.length} of them held to listen: ${listening.join(' and ')}; give the pool room for those besides the writes, docs/guide.md)`;
        throw new StoreBusyError(`${context}: all ${max} pool connections stayed busy${held}`, { cause: error });
      }
      throw mapPostgresError(error, context);
    }
  }

  /**
   * Runs `body` in one transaction on one pooled connection. Driver errors roll back and map to typed errors;
   * a connection that failed is destroyed rather than returned to the pool.
   */
  private async inTransaction<T>(begin: string | null, context: string, body: (client: PoolClient) => Promise<T>, attempt?: { connected: boolean; begun?: boolean }): Promise<T> {
    const client = await this.connect(context);
    if (attempt) attempt.connected = true;
    try {
      return await releasing(client, async () => {
        // With `begin` null the body sends BEGIN and COMMIT itself, in the batches it pipelines around its own queries.
        if (begin !== null) await client.query(begin);
        if (attempt) attempt.begun = true;
        const result = await body(client);
        if (begin !== null) await client.query('COMMIT');
        return result;
      });
    } catch (error) {
      if (error instanceof Passthrough || error instanceof LostCreationRace) throw error;
      if ((error as { code?: unknown }).code === '23505') throw new LostCreationRace(error);
      throw mapPostgresError(error, context);
    }
  }

  /**
   * How many times a transaction runs again after losing its connection: every pooled connection may have been ended
   * at once (a restart), and each fails its first statement; then a new one is made.
   */
  private lostConnectionRetries(): number {
    const max = this.pool.options.max;
    return (typeof max === 'number' && max > 0 ? max : 10) + 1;
  }

  /** Runs a read-only transaction, again on another connection when its connection was lost (nothing was written). */
  private reading<T>(begin: string | null, context: string, body: (client: PoolClient) => Promise<T>): Promise<T> {
    return this.rerunning(begin, context, body, 'always');
  }

  /**
   * Runs a transaction, again on another connection when its connection was lost or none could be made while the
   * server restarts: `always` for a read; `before BEGIN` for a write of the decision inbox, which runs again only when
   * nothing of it was sent (its connection lost before BEGIN was answered): lost later, its outcome is unknown, and so
   * reported.
   */
  private async rerunning<T>(begin: string | null, context: string, body: (client: PoolClient) => Promise<T>, again: 'always' | 'before BEGIN'): Promise<T> {
    const retry = new LostConnectionRetry(this.lostConnectionRetries());
    for (;;) {
      const attempt = { connected: false, begun: false };
      try {
        return await this.inTransaction(begin, context, body, attempt);
      } catch (error) {
        if ((again === 'before BEGIN' && attempt.begun) || !(await retry.again(error, attempt))) throw error;
      }
    }
  }

  async transact<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>): Promise<R> {
    const context = `session ${sessionId}`;
    // Made at the first failure: a transaction that succeeds at once (nearly all) carries none of this.
    let retry: LostConnectionRetry | undefined;
    // After an attempt lost its connection having decided writes, the next decides on what the stored rows say of them.
    let deciding = decide;
    // Every attempt lost after sending its writes: an earlier one may still land (below, afterLostWrites).
    const lost: LostWrites<R>[] = [];
    const onFailure = async (error: unknown, attempt: Attempt<R>): Promise<void> => {
      retry ??= new LostConnectionRetry(this.lostConnectionRetries());
      if (!(await retry.again(error, attempt))) throw retry.report(context, error);
      if (attempt.connected && attempt.writes) {
        lost.push({ writes: attempt.writes, probe: headProbe(attempt.writes) });
        deciding = afterLostWrites(context, lost, error, decide);
      }
    };
    if (this.pipelining && !beforeCommitHooks.get(this)) {
      const attempt: Attempt<R> = { connected: false };
      try {
        const done = await this.onKnownRows(sessionId, reads, decide, attempt);
        if (done) return done.result;
      } catch (error) {
        await onFailure(error, attempt);
      }
    }
    for (let race = 1; ; ) {
      const attempt: Attempt<R> = { connected: false };
      try {
        return await this.inTransaction(null, context, (client) => this.readDecideWrite(client, sessionId, reads, deciding, attempt, lost.flatMap((l) => l.probe ?? [])), attempt);
      } catch (error) {
        this.known.forget(sessionId);
        if (error instanceof Passthrough) {
          if (error.error instanceof Landed) return (error.error as Landed<R>).result;
          throw error.error;
        }
        if (error instanceof LostCreationRace) {
          // A concurrent creator committed the same session or task row first. Run read → decide → write again:
          // this time the decision sees that row (and says SessionBusy, takes over, or reuses the task).
          if (race++ < 2) continue;
          const busy = new StoreBusyError(`${context}: a concurrent transaction kept creating the same rows`, { cause: error.error });
          throw retry === undefined ? busy : retry.report(context, busy);
        }
        await onFailure(error, attempt);
      }
    }
  }

  /**
   * One write transaction in two round trips (docs/design.md#one-round-trip-per-write-on-postgresql): BEGIN, the
   * locking reads and the clock go out together; then the decision runs; then the owner row's write, the commit
   * statement holding every other write (commit-statement.ts) and COMMIT go out together. A write that fails (the
   * fencing check included) aborts the transaction, so the COMMIT behind it commits nothing. Without a pipelining
   * connection the same statements run one after another.
   */
  private async readDecideWrite<R>(
    client: PoolClient,
    sessionId: SessionId,
    reads: TxReads,
    decide: (state: TxState) => TxWrites<R>,
    attempt: Attempt<R>,
    /** After lost commits of events: the event rows at their heads, read with the locks. */
    probes: readonly HeadProbe[],
  ): Promise<R> {
    // The owner row lock serialises every writer of this session; a missing row is created by the decision's
    // INSERT, and a concurrent creator surfaces as a unique violation (retried once by transact). The clock is read
    // after the locks, by the last statement of the batch.
    let sessionRes: QueryResult<SessionRecord> | undefined;
    let taskRes: QueryResult<TaskRecord> | undefined;
    let opRes: QueryResult<OperationRecord> | undefined;
    let idsRes: QueryResult<{ event_id: string }> | undefined;
    let attentionRes: QueryResult<AttentionRecord> | undefined;
    let approvals: DecisionRow[] | undefined;
    let reviews: DecisionRow[] | undefined;
    let sinceRes: QueryResult<{ seq: string | number }> | undefined;
    let nowRes: QueryResult<{ now_ms: string | number }> | undefined;
    const readSteps: Step[] = [
      () => client.query(this.beginWrite),
      async () => { sessionRes = await this.run<SessionRecord>(client, 'lockSession', [sessionId]); },
    ];
    if (reads.taskId !== undefined) {
      const taskId = reads.taskId;
      readSteps.push(async () => { taskRes = await this.run<TaskRecord>(client, 'lockTask', [sessionId, taskId]); });
    }
    if (reads.operation) {
      const op = reads.operation;
      readSteps.push(async () => { opRes = await this.run<OperationRecord>(client, 'lockOperation', [sessionId, op.taskId, op.key]); });
    }
    if (reads.eventIds?.length) {
      const ids = [...reads.eventIds];
      readSteps.push(async () => { idsRes = await this.run<{ event_id: string }>(client, 'existingEventIds', [sessionId, ids]); });
    }
    if (reads.attentionCalls?.length) {
      const calls = [...reads.attentionCalls];
      readSteps.push(async () => { attentionRes = await this.run<AttentionRecord>(client, 'attentionByCalls', [sessionId, calls]); });
    }
    if (reads.approvals) {
      const op = reads.approvals;
      readSteps.push(async () => { approvals = await this.inbox.approvalsOf(client, sessionId, op); });
    }
    if (reads.writtenSince) {
      const { seq, epoch } = reads.writtenSince;
      readSteps.push(async () => { sinceRes = await this.run<{ seq: string | number }>(client, 'earlierEpochSince', [sessionId, seq, epoch]); });
    }
    if (reads.reviews) {
      const calls = reads.reviews;
      readSteps.push(async () => { reviews = await this.inbox.reviewsOf(client, sessionId, calls); });
    }
    if (probes.length > 0) {
      for (const probe of probes) probe.hash = undefined;
      readSteps.push(async () => {
        const found = await this.run<{ seq: string | number; hash: string }>(client, 'eventHashesAt', [sessionId, probes.map((p) => p.seq)]);
        const bySeq = new Map(found.rows.map((r) => [int(r.seq, 'seq', sessionId), r.hash]));
        for (const probe of probes) probe.hash = bySeq.get(probe.seq) ?? null;
      });
    }
    readSteps.push(async () => { nowRes = await this.run<{ now_ms: string | number }>(client, 'now', []); });
    await batch(client, readSteps);
    const s = sessionRes?.rows[0];
    const t = taskRes?.rows[0];
    const o = opRes?.rows[0];
    const now = int(nowRes!.rows[0]!.now_ms, 'now', sessionId);
    this.clockOffset = now - Date.now();
    const state: TxState = {
      session: s ? toSession(s) : undefined,
      task: t ? toTask(t) : undefined,
      operation: o && reads.operation ? toOperation(reads.operation, o) : undefined,
      existingEventIds: idsRes?.rows.map((r) => r.event_id) ?? [],
      attention: attentionRes?.rows.map(toAttention) ?? [],
      ...(approvals ? { approvals } : {}),
      ...(reviews ? { reviews } : {}),
      ...(sinceRes ? { writtenSince: sinceRes.rows[0] ? int(sinceRes.rows[0].seq, 'seq', sessionId) : null } : {}),
      now,
    };
    let writes: TxWrites<R>;
    try {
      writes = decide(state);
    } catch (error) {
      throw new Passthrough(error);
    }
    attempt.writes = writes;
    const steps: Step[] = [];
    if (writes.session) steps.push(this.writeSession(client, writes.session.row, writes.session.expect));
    steps.push(...this.writeSteps(client, writes));
    faultPoint('commit:before');
    const beforeCommit = beforeCommitHooks.get(this);
    if (!beforeCommit) {
      await batch(client, [...steps, () => client.query('COMMIT')]);
    } else {
      await batch(client, steps);
      const pid = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      try {
        await beforeCommit({ sessionId, backendPid: pid.rows[0]!.pid });
      } catch (error) {
        throw new Passthrough(error);
      }
      await client.query('COMMIT');
    }
    if (this.pipelining) this.known.record(sessionId, state, reads, writes, now);
    return writes.result;
  }

  /** Every write of a decision but the owner row's: one statement (commit-statement.ts), then the inbox rows. */
  private writeSteps(client: PoolClient, writes: TxWrites<unknown>): Step[] {
    const steps: Step[] = [];
    if (writes.events?.length || writes.task || writes.operations?.length || writes.attention?.length) {
      const statement = commitStatement(this.schemaName, writes, this.attentionChannel);
      steps.push(() => this.runCommit(client, statement, writes).catch((error: unknown) => {
        // The task row was read FOR UPDATE in this transaction, so only an outside actor can make its update miss.
        if ((error as { code?: unknown }).code === NO_ROW_CHANGED) throw new Passthrough(new StoreBusyError(`task ${writes.task?.row.taskId} changed outside the store; try again`));
        throw error;
      }));
    }
    if (writes.decisions?.length) steps.push(...this.inbox.writeSteps(client, writes.decisions));
    return steps;
  }

  /**
   * Runs the commit statement of `writes`, prepared once per shape unless `prepare: false`. Event rows already
   * beyond the head on the owner row mean the journal was tampered with: never overwritten, never retried.
   */
  private async runCommit(client: PoolClient, statement: CommitStatement, writes: TxWrites<unknown>): Promise<QueryResult<{ lease_expires_at: string | number | null }>> {
    const { text, values } = statement;
    try {
      return await (this.statementPrefix === undefined
        ? client.query(text, values)
        : client.query({ name: `${this.statementPrefix}c_${statement.shape}`, text, values }));
    } catch (error) {
      const first = writes.events?.[0];
      const e = error as { code?: unknown; constraint?: unknown };
      if (first === undefined || e.code !== '23505' || e.constraint !== 'jw_events_pkey') throw error;
      throw new Passthrough(new JournalCorruptError(first.sessionId, first.seq, 'head_mismatch',
        'event rows already exist beyond the head recorded on the owner row', { cause: error }));
    }
  }

  /**
   * A commit decided on the rows this backend knows (known-rows.ts) and sent as one statement (commit-statement.ts):
   * the owner row written only where it is still the known row, a check of every other row the decision read, the
   * writes. On the store's own pool the statement is the transaction; on a pool passed in, BEGIN and COMMIT go out
   * in the same batch. Undefined when the rows are not known, the decision is not a commit of events, or a stored row
   * differed (nothing was written then): the caller runs the ordinary path, which reads the rows and decides again.
   */
  private async onKnownRows<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>, attempt: Attempt<R>): Promise<{ result: R } | undefined> {
    const known = this.known.state(sessionId, reads, Date.now() + this.clockOffset);
    if (!known) return undefined;
    let writes: TxWrites<R>;
    try {
      writes = decide(known.state);
    } catch {
      return undefined; // decided on rows that may be stale: the ordinary path decides on the stored ones
    }
    const session = writes.session;
    const knownSession = known.state.session!;
    // Only a commit of events: its result does not depend on the clock, which only renews the lease.
    if (!session?.expect || !writes.events?.length || writes.decisions?.length) return undefined;
    const expect = session.expect;
    const row = session.row;
    const leaseMs = typeof row.leaseExpiresAt === 'number' && row.leaseExpiresAt !== knownSession.leaseExpiresAt ? row.leaseExpiresAt - known.state.now! : null;
    let lease: number | null;
    attempt.writes = writes;
    try {
      lease = await this.inTransaction(null, `session ${sessionId}`, async (client) => {
        let written: QueryResult<{ lease_expires_at: string | number | null }> | undefined;
        const statement = commitStatement(this.schemaName, writes, this.attentionChannel, {
          session: { values: sessionValues(row, (h) => h), leaseMs, expect, knownJson: sessionJson(knownSession) },
          checks: known.checks,
        });
        const commit = async () => {
          written = await missOn(this.runCommit(client, statement, writes));
        };
        faultPoint('commit:before');
        if (this.singleStatementCommits) await commit();
        else await batch(client, [() => client.query(this.beginWrite), commit, () => client.query('COMMIT')]);
        const value = written!.rows[0]!.lease_expires_at;
        return value === null ? null : int(value, 'lease_expires_at', sessionId);
      }, attempt);
    } catch (error) {
      this.known.forget(sessionId);
      if (error instanceof Passthrough && error.error === MISSED) return undefined;
      if (error instanceof LostCreationRace) return undefined;
      if (error instanceof Passthrough) throw error.error;
      throw error;
    }
    const clock = leaseMs !== null && lease !== null ? lease - leaseMs : known.clock;
    this.known.record(sessionId, known.state, reads, { ...writes, session: { row: { ...row, leaseExpiresAt: lease }, expect } }, clock);
    return { result: writes.result };
  }

  private writeSession(client: PoolClient, row: SessionRow, expect: { epoch: number; lastSeq: number } | null): Step {
    const values = sessionValues(row, (held) => held);
    if (expect === null) return () => this.run(client, 'insertSession', values);
    // The fencing check: the statement fails (22012) where epoch and head are no longer what this decision read.
    return () => this.run(client, 'updateSession', [...values, expect.epoch, expect.lastSeq]).catch((error: unknown) => {
      if ((error as { code?: unknown }).code === NO_ROW_CHANGED) throw new Passthrough(new StaleOwnerError(row.sessionId, expect.epoch, 'the owner row changed'));
      throw error;
    });
  }

  async snapshot(sessionId: SessionId) {
    return this.reading(null, `session ${sessionId}`, async (client) => {
      let sessionRes: QueryResult<SessionRecord> | undefined;
      let eventsRes: QueryResult<[string, string, string, string, string]> | undefined;
      await batch(client, [
        () => client.query(this.beginRead),
        async () => { sessionRes = await this.run<SessionRecord>(client, 'session', [sessionId]); },
        async () => { eventsRes = await client.query<[string, string, string, string, string]>({ text: this.sql.events, values: [sessionId], rowMode: 'array' }); },
        () => client.query('COMMIT'),
      ]);
      const s = sessionRes!.rows[0];
      const events: EventRow[] = new Array<EventRow>(eventsRes!.rows.length);
      eventsRes!.rows.forEach(([seq, eventId, epoch, body, hash], i) => {
        events[i] = { sessionId, seq: int(seq, 'seq', sessionId), eventId, epoch: int(epoch, 'epoch', sessionId), body, hash };
      });
      return { session: s ? toSession(s) : undefined, events };
    });
  }

  async readTask(sessionId: SessionId, taskId: string) {
    return this.reading(this.beginRead, `task ${taskId} of session ${sessionId}`, async (client) => {
      const row = (await this.run<TaskRecord>(client, 'task', [sessionId, taskId])).rows[0];
      return row ? toTask(row) : undefined;
    });
  }

  async readOperation(sessionId: SessionId, taskId: string, key: string) {
    return this.reading(this.beginRead, `session ${sessionId}`, async (client) => {
      const row = (await this.run<OperationRecord>(client, 'operation', [sessionId, taskId, key])).rows[0];
      return row && row.session_id === sessionId ? toOperation({ taskId, key }, row) : undefined;
    });
  }

  async sessionsWithoutOwnerRow() {
    return this.reading(this.beginRead, 'list sessions', async (client) =>
      (await client.query<{ session_id: string }>(this.sql.withoutOwnerRow)).rows.map((r) => r.session_id));
  }

  async scanOperations(sessionId: SessionId) {
    return this.reading(this.beginRead, `session ${sessionId}`, async (client) =>
      (await this.run<OperationRecord & { task_id: string; key: string }>(client, 'sessionOperations', [sessionId])).rows.map((r) => toOperation({ taskId: r.task_id, key: r.key }, r)));
  }

  /** The database's clock, read after the row lock of a write and here: every host measures leases on it. */
  async now(): Promise<number> {
    return this.reading(this.beginRead, 'read the clock', async (client) => {
      const res = await this.run<{ now_ms: string | number }>(client, 'now', []);
      return int(res.rows[0]!.now_ms, 'now', '*');
    });
  }

  async listSessions() {
    return this.reading(this.beginRead, 'list sessions', async (client) => {
      const res = await client.query<SessionRecord & { events: string }>(this.sql.list);
      return res.rows.map((r) => ({ session: toSession(r), events: int(r.events, 'count', r.session_id) }));
    });
  }

  /** Calls `onChange(sessionId)` after any process commits a change to that session's attention rows. */
  watchAttention(onChange: (sessionId: string) => void): Promise<() => Promise<void>> {
    return this.attentionListener.subscribe(onChange);
  }

  async scanAttention(scan: AttentionScan): Promise<AttentionRow[]> {
    return this.reading(this.beginRead, 'attention queue', async (client) => {
      const { text, values } = attentionScanSql(`${this.schemaName}.jw_attention`, scan, (i) => `$${i}`, ' COLLATE "C"');
      const res = await client.query<AttentionRecord>(text, values);
      return res.rows.map(toAttention);
    });
  }

  async findAttention(sessionId: SessionId, b: OperationBinding): Promise<AttentionRow[]> {
    return this.reading(this.beginRead, `session ${sessionId}`, async (client) => {
      const res = await this.run<AttentionRecord>(client, 'attentionByBinding', [sessionId, b.taskId, b.tool, b.argsDigest]);
      return res.rows.map(toAttention);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.known.clear();
    // Both listening connections go back before the pool ends: a queue watcher still subscribed would otherwise
    // hold one checked out, and pool.end() (the store's own, or the host's on its own pool) would wait for ever.
    await Promise.all([
      this.inbox.stopWatching().catch(() => undefined),
      this.attentionListener.shutdown().catch(() => undefined),
    ]);
    if (this.ownsPool) await this.pool.end();
  }
}

/**
 * Opens (creating or upgrading its tables if needed) a PostgreSQL journal. Asynchronous because the schema
 * migrations run on open. Pass a connection URL (the store creates, and on close() ends, its own pool) or a
 * `pg.Pool` you own (close() leaves it open; give it the two error listeners and the client-side `query_timeout`
 * that docs/guide.md names).
 *
 * Every write is one READ COMMITTED transaction that locks the session's owner row (`SELECT ... FOR UPDATE`), runs
 * the store's pure decision, and updates the owner row only `WHERE epoch = <read epoch> AND last_seq = <read head>`
 * in the same transaction as the event inserts: a fenced owner's write changes 0 rows and fails with
 * StaleOwnerError, writing nothing. Lock waits and statements are bounded (`lockTimeoutMs`, `statementTimeoutMs`)
 * and fail with StoreBusyError; lost connections fail with StoreUnavailableError('store_failure'); a schema newer
 * than this code fails with StoreUnavailableError('schema_too_new'). With `mustExist` a schema that is missing or
 * holds no journal fails with StorePathError ('store_not_found', 'store_not_journal') and nothing is created.
 */
export async function openPostgresStore(urlOrPool: string | PgPool, options: PostgresStoreOptions = {}): Promise<SessionStore> {
  const target = typeof urlOrPool === 'string' ? connectionAndSchema(urlOrPool, options.schema) : null;
  const schema = target?.schema ?? options.schema ?? 'public';
  if (typeof schema !== 'string' || !IDENTIFIER.test(schema)) {
    throw new InvalidInputError('schema', 'must be a plain identifier (letters, digits, underscores; at most 63 bytes)');
  }
  const lock = checkMs('lockTimeoutMs', options.lockTimeoutMs, POSTGRES_DEFAULTS.lockTimeoutMs, 1);
  const statement = checkMs('statementTimeoutMs', options.statementTimeoutMs, POSTGRES_DEFAULTS.statementTimeoutMs, 1);
  const idle = checkMs('idleInTransactionTimeoutMs', options.idleInTransactionTimeoutMs, POSTGRES_DEFAULTS.idleInTransactionTimeoutMs, 0);
  let pool: Pool;
  let ownsPool: boolean;
  if (target !== null) {
    pool = new Pool({
      connectionString: target.url,
      max: checkMs('poolSize', options.poolSize, POSTGRES_DEFAULTS.poolSize, 1),
      connectionTimeoutMillis: checkMs('connectTimeoutMs', options.connectTimeoutMs, POSTGRES_DEFAULTS.connectTimeoutMs, 1),
      application_name: 'jingwei',
      // Every connection carries the store's bounds, so a statement that is a transaction of its own keeps them too.
      statement_timeout: statement,
      lock_timeout: lock,
      ...(idle > 0 ? { idle_in_transaction_session_timeout: idle } : {}),
      // Statements of one transaction go out together where they do not wait on each other's answers.
      pipeline: true,
      // Bounded on the client too: a partitioned server enforces no statement timeout (POSTGRES_DEFAULTS.answerMarginMs).
      query_timeout: statement + POSTGRES_DEFAULTS.answerMarginMs,
      keepAlive: true,
    } as ConstructorParameters<typeof Pool>[0]);
    listenForDriverErrors(pool);
    ownsPool = true;
  } else if (urlOrPool && typeof urlOrPool === 'object' && typeof (urlOrPool as PgPool).connect === 'function') {
    // A caller's pool is a pg.Pool; its structural type only keeps the driver's types out of ours.
    pool = urlOrPool as unknown as Pool;
    ownsPool = false;
  } else {
    throw new InvalidInputError('urlOrPool', 'must be a PostgreSQL connection URL or a pg.Pool');
  }
  try {
    await connectOnceRestarted(pool, `open schema ${schema}`);
    await migrate(pool, schema, lock, statement, options.mustExist === true);
  } catch (error) {
    if (ownsPool) await pool.end().catch(() => {});
    throw mapPostgresError(error, `open schema ${schema}`);
  }
  let scopeKey: string;
  try {
    scopeKey = await journalKey(pool, schema);
  } catch (error) {
    if (ownsPool) await pool.end().catch(() => {});
    throw error instanceof StoreUnavailableError ? error : mapPostgresError(error, `read the journal's id in schema ${schema}`);
  }
  const backend = new PostgresBackend(pool, ownsPool, schema, { lock, statement, idle }, options.prepare !== false, scopeKey);
  return new JournalStore(backend, options.clock ? { clock: options.clock } : {});
}
