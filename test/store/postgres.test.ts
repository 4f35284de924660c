import assert from 'node:assert/strict';
import { it, describe } from 'node:test';
import pg from 'pg';
import type { EventDraft } from '../../src/event/types.js';
import { JournalCorruptError } from '../../src/errors.js';
import { newCallId, newOperationKey, newTurnId, type CallId, type EventId, type OperationKey, type SessionId, type TaskId, type TurnId } from '../../src/ids.js';
import { POSTGRES_SCHEMA_VERSION } from '../../src/postgres.js';
import { decideCommit } from '../../src/store/decisions.js';
import { commitStatement } from '../../src/store/postgres/commit-statement.js';
import { postgresStatements } from '../../src/store/postgres/statements.js';
import type { JournalStore } from '../../src/store/journal-store.js';
import { createMemoryStore } from '../../src/store/memory.js';
import type { SessionStore } from '../../src/store/types.js';
import { adminPool, backToVersion, describePostgres, freshSchema, openPostgresStore } from '../support/postgres.js';
import { runStoreConformance, setPostgresBeforeCommit } from '../../src/testing/index.js';
import { commitAs } from '../../src/store/owner-commit.js';
import { checkIndexFilled, checkReviewedListed, MAIL_SESSION, reviewNotExecuted, writeMails } from '../support/pre-index-journal.js';

const turn = newTurnId();
const message = (text: string): EventDraft => ({ turnId: turn, kind: { type: 'user_message', text } });
const callDraft = (taskId: string): EventDraft => ({
  turnId: turn,
  kind: {
    type: 'tool_call',
    call: {
      id: newCallId(),
      name: 'probe',
      arguments: {},
      operation: { taskId: taskId as TaskId, key: newOperationKey(), contract: { effect: 'idempotent', revision: 'v1' }, retry: null },
    },
  },
});
const texts = (events: readonly { kind: unknown }[]) => events.map((e) => (e.kind as { text?: string }).text);

async function rejects(promise: Promise<unknown>, code: string): Promise<unknown> {
  let caught: unknown;
  await assert.rejects(promise, (error: unknown) => {
    assert.equal((error as { code?: string }).code, code, `expected ${code}, got ${String(error)}`);
    caught = error;
    return true;
  });
  return caught;
}

describePostgres('PostgreSQL conformance', (url) => {
  const schemas = new WeakMap<SessionStore, string>();
  runStoreConformance({
    name: 'postgres',
    open: async () => {
      const schema = freshSchema();
      const store = await openPostgresStore(url, { schema });
      schemas.set(store, schema);
      return store;
    },
    reopen: (store) => openPostgresStore(url, { schema: schemas.get(store)! }),
  });
});

describePostgres('PostgreSQL store', (url) => {
  const admin = adminPool(url);

  describe('schema', () => {
    it('creates a versioned schema on open; concurrent openers migrate once under the advisory lock', async () => {
      const schema = freshSchema();
      const stores = await Promise.all(Array.from({ length: 5 }, () => openPostgresStore(url, { schema })));
      const version = await admin.query(`SELECT version FROM "${schema}".jw_schema_version`);
      assert.deepEqual(version.rows, [{ version: POSTGRES_SCHEMA_VERSION }]);
      const tables = await admin.query<{ t: string }>(
        `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`, [schema]);
      assert.deepEqual(tables.rows.map((r) => r.t), ['jw_attention', 'jw_decisions', 'jw_events', 'jw_journal', 'jw_operations', 'jw_schema_version', 'jw_sessions', 'jw_tasks']);
      // The journal's id is drawn once, by the one migration, and another schema's is another.
      const ids = await admin.query<{ id: string }>(`SELECT id FROM "${schema}".jw_journal`);
      assert.equal(ids.rows.length, 1);
      assert.match(ids.rows[0]!.id, /^[0-9a-f]{32}$/);
      const other = freshSchema();
      await (await openPostgresStore(url, { schema: other })).close();
      assert.notEqual((await admin.query<{ id: string }>(`SELECT id FROM "${other}".jw_journal`)).rows[0]!.id, ids.rows[0]!.id);
      // Any role that may read the journal may read its id: a role granted the tables before an upgrade too.
      assert.equal((await admin.query<{ ok: boolean }>(`SELECT has_table_privilege('public', '"${schema}".jw_journal', 'SELECT') AS ok`)).rows[0]!.ok, true);
      const owner = await stores[0]!.acquire('s-schema', { owner: 'h' });
      await owner.append([message('one')]);
      assert.equal((await stores[4]!.loadHistory('s-schema')).length, 1);
      await Promise.all(stores.map((s) => s.close()));
    });

    // u125 #6: a schema whose version row was lost was called "no journal" by the CLI and failed to open with a raw
    // "relation already exists"; either way an operator was sent to start a new journal beside the one holding the calls.
    it('refuses a schema holding the journal with its version row or table gone as a damaged journal, and changes nothing', async () => {
      for (const loss of ['DELETE FROM {S}.jw_schema_version', 'DROP TABLE {S}.jw_schema_version']) {
        const schema = freshSchema();
        const S = `"${schema}"`;
        const store = await openPostgresStore(url, { schema });
        await (await store.acquire('s', { owner: 'h' })).release();
        await store.close();
        await admin.query(loss.replace('{S}', S));
        for (const mustExist of [false, true]) {
          await assert.rejects(openPostgresStore(url, { schema, mustExist }), (error: unknown) => {
            assert.equal((error as { code?: unknown }).code, 'store_failure', String(error));
            assert.match((error as Error).message, /holds a jingwei journal's tables \(jw_sessions\) but no schema version .* It is a damaged journal, not an empty schema, and is not opened: do not start a new journal in its place/);
            return true;
          });
        }
        assert.equal((await admin.query(`SELECT count(*)::int AS n FROM ${S}.jw_sessions`)).rows[0].n, 1, 'the journal is still there');
      }
    });

    it('migrates a version-2 schema (tasks and operations keyed store-wide) to per-session keys, keeping every row', async () => {
      const schema = freshSchema();
      const S = `"${schema}"`;
      await admin.query(`CREATE SCHEMA ${S};
        CREATE TABLE ${S}.jw_schema_version (singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton), version INTEGER NOT NULL);
        INSERT INTO ${S}.jw_schema_version (version) VALUES (2);
        CREATE TABLE ${S}.jw_sessions (session_id TEXT NOT NULL, owner TEXT, held BOOLEAN NOT NULL, epoch BIGINT NOT NULL,
          last_seq BIGINT NOT NULL, head_hash TEXT NOT NULL, body_bytes BIGINT NOT NULL, CONSTRAINT jw_sessions_pkey PRIMARY KEY (session_id));
        CREATE TABLE ${S}.jw_events (session_id TEXT NOT NULL, seq BIGINT NOT NULL, event_id TEXT NOT NULL, epoch BIGINT NOT NULL,
          body TEXT NOT NULL, hash TEXT NOT NULL, CONSTRAINT jw_events_pkey PRIMARY KEY (session_id, seq));
        CREATE TABLE ${S}.jw_tasks (task_id TEXT NOT NULL, session_id TEXT NOT NULL, state TEXT NOT NULL,
          limit_tool_calls BIGINT NOT NULL, limit_output_bytes BIGINT NOT NULL, charged_tool_calls BIGINT NOT NULL,
          charged_output_bytes BIGINT NOT NULL, reserved_output_bytes BIGINT NOT NULL, stop_reason TEXT,
          reservations TEXT NOT NULL DEFAULT '[]', CONSTRAINT jw_tasks_pkey PRIMARY KEY (task_id));
        CREATE TABLE ${S}.jw_operations (task_id TEXT NOT NULL, key TEXT NOT NULL, session_id TEXT NOT NULL, call_id TEXT NOT NULL,
          event_id TEXT NOT NULL, CONSTRAINT jw_operations_pkey PRIMARY KEY (task_id, key));
        INSERT INTO ${S}.jw_sessions VALUES ('s', 'old-host', false, 1, -1, '${'0'.repeat(64)}', 0);
        INSERT INTO ${S}.jw_tasks VALUES ('t', 's', 'running', 128, 1000, 2, 10, 0, NULL, '[]');
        INSERT INTO ${S}.jw_operations VALUES ('t', 'op-k', 's', 'call-old', 'evt-old');`);
      const store = await openPostgresStore(url, { schema });
      const version = await admin.query(`SELECT version FROM ${S}.jw_schema_version`);
      assert.deepEqual(version.rows, [{ version: POSTGRES_SCHEMA_VERSION }]);
      const owner = await store.acquire('s', { owner: 'new-host' });
      assert.deepEqual((await owner.task('t')).charged, { toolCalls: 2, toolOutputBytes: 10, journalBytes: 0 });
      assert.equal((await owner.task('t')).limits.journalBytes, 8 * 1024 * 1024, 'an existing task takes the default journal limit');
      const latest = { taskId: 't' as TaskId, key: 'op-k' as OperationKey };
      await commitAs(owner, { events: [], expectLatestAttempt: { ...latest, callId: 'call-old' as CallId } });
      await rejects(commitAs(owner, { events: [], expectLatestAttempt: { ...latest, callId: 'call-new' as CallId } }), 'not_latest_attempt');
      const other = await store.acquire('s-other', { owner: 'new-host' });
      assert.equal((await other.startTask('t')).sessionId, 's-other');
      await rejects(commitAs(other, { events: [], expectLatestAttempt: { ...latest, callId: 'call-old' as CallId } }), 'not_latest_attempt');
      await store.close();
      const tasks = await admin.query(`SELECT session_id, task_id FROM ${S}.jw_tasks ORDER BY session_id`);
      assert.deepEqual(tasks.rows, [{ session_id: 's', task_id: 't' }, { session_id: 's-other', task_id: 't' }]);
      const ops = await admin.query(`SELECT session_id, task_id, key, call_id FROM ${S}.jw_operations`);
      assert.deepEqual(ops.rows, [{ session_id: 's', task_id: 't', key: 'op-k', call_id: 'call-old' }]);
    });

    it('fills the attention index from the journal when it upgrades a version-3 schema: the queue lists, and the guard refuses to repeat, a mail left in doubt', async () => {
      const schema = freshSchema();
      const S = `"${schema}"`;
      const writer = await openPostgresStore(url, { schema });
      const inDoubt = await writeMails(writer);
      await writer.close();
      // Version 3's layout: no attention index, no inbox, no recorded or lease times, no index of events by id.
      await admin.query(`DROP TABLE ${S}.jw_attention; DROP TABLE ${S}.jw_decisions; DROP INDEX ${S}.jw_events_event_id;
        ALTER TABLE ${S}.jw_sessions DROP COLUMN lease_expires_at, DROP COLUMN recorded_at;
        UPDATE ${S}.jw_schema_version SET version = 3`);
      const store = await openPostgresStore(url, { schema });
      await checkIndexFilled(store, inDoubt);
      await store.close();
    });

    it('migrates a version-7 schema to the index of attention rows by call id, and commits naming a stored call still find its row', async () => {
      const schema = freshSchema();
      const S = `"${schema}"`;
      const first = await openPostgresStore(url, { schema });
      const owner = await first.acquire('s-v7', { owner: 'a' });
      await owner.startTask('t-v7');
      const call = callDraft('t-v7');
      await commitAs(owner, { events: [call] });
      await owner.release();
      await first.close();
      // The version-7 layout: attention rows by (session_id, call_id).
      await admin.query(`DROP INDEX ${S}.jw_attention_call_id; CREATE INDEX jw_attention_call ON ${S}.jw_attention (session_id, call_id);
        ${backToVersion(S, 7)}`);
      const store = await openPostgresStore(url, { schema });
      const version = await admin.query(`SELECT version FROM ${S}.jw_schema_version`);
      assert.deepEqual(version.rows, [{ version: POSTGRES_SCHEMA_VERSION }]);
      const indexes = await admin.query<{ n: string }>(`SELECT indexname AS n FROM pg_indexes WHERE schemaname = $1 AND tablename = 'jw_attention' ORDER BY 1`, [schema]);
      assert.deepEqual(indexes.rows.map((r) => r.n), ['jw_attention_binding', 'jw_attention_call_id', 'jw_attention_pkey', 'jw_attention_status']);
      const again = await store.acquire('s-v7', { owner: 'b' });
      const callId = (call.kind as { call: { id: CallId } }).call.id;
      await commitAs(again, { events: [{ turnId: turn, kind: { type: 'tool_started', callId } }] });
      const row = await admin.query(`SELECT call_id, started FROM ${S}.jw_attention WHERE session_id = 's-v7'`);
      assert.deepEqual(row.rows, [{ call_id: callId, started: true }]);
      await store.close();
    });

    it('computes the attention index again when it upgrades the previous version: a row an older release kept by rules since corrected is replaced', async () => {
      const schema = freshSchema();
      const S = `"${schema}"`;
      const writer = await openPostgresStore(url, { schema });
      const inDoubt = await writeMails(writer);
      await writer.close();
      // The previous release, whose rules left this mail's row settled (its index said so; its journal never did).
      await admin.query(`UPDATE ${S}.jw_attention SET status = 'resolved' WHERE call_id = $1`, [inDoubt]);
      await admin.query(backToVersion(S, POSTGRES_SCHEMA_VERSION - 1));
      const store = await openPostgresStore(url, { schema });
      await checkIndexFilled(store, inDoubt);
      await store.close();
    });

    it('an upgrade from the previous version lists a call a not_executed review left resolved there as reviewed_not_executed', async () => {
      const schema = freshSchema();
      const S = `"${schema}"`;
      const writer = await openPostgresStore(url, { schema });
      const mail = await writeMails(writer);
      await reviewNotExecuted(writer, mail);
      await checkReviewedListed(writer, mail);
      await writer.close();
      // What the last release before the status (schema version 10) kept for that review.
      await admin.query(`UPDATE ${S}.jw_attention SET status = 'resolved' WHERE call_id = $1`, [mail]);
      await admin.query(backToVersion(S, 10));
      const store = await openPostgresStore(url, { schema });
      await checkReviewedListed(store, mail);
      await store.close();
    });

    it('keeps the rows its commits kept for a journal damaged since, when it computes the index again on an upgrade', async () => {
      const schema = freshSchema();
      const S = `"${schema}"`;
      const writer = await openPostgresStore(url, { schema });
      const inDoubt = await writeMails(writer);
      await writer.close();
      const marker = await admin.query<{ seq: string }>(`SELECT seq FROM ${S}.jw_events WHERE body LIKE '%tool_started%' AND body LIKE $1 ORDER BY seq LIMIT 1`, [`%${inDoubt}%`]);
      assert.equal(marker.rows.length, 1);
      await admin.query(`UPDATE ${S}.jw_events SET body = '{"damaged":' WHERE seq = $1`, [marker.rows[0]!.seq]);
      await admin.query(backToVersion(S, POSTGRES_SCHEMA_VERSION - 1));
      const store = await openPostgresStore(url, { schema });
      const queue = await store.attention();
      assert.deepEqual(queue.items.map((i) => [i.callId, i.status, i.inDoubt]), [[inDoubt, 'outcome_unknown', true]], 'still listed, in doubt');
      await store.close();
    });

    it('an upgrade keeps the rows of a session whose owner row is missing or unreadable, and still computes the others', async () => {
      const schema = freshSchema();
      const S = `"${schema}"`;
      const writer = await openPostgresStore(url, { schema });
      const inDoubt = await writeMails(writer);
      await (await writer.acquire('other', { owner: 'h' })).release();
      await writer.close();
      await admin.query(`DELETE FROM ${S}.jw_sessions WHERE session_id = $1`, [MAIL_SESSION]);
      await admin.query(`UPDATE ${S}.jw_sessions SET epoch = 9007199254740993 WHERE session_id = 'other'`);
      await admin.query(backToVersion(S, POSTGRES_SCHEMA_VERSION - 1));
      const store = await openPostgresStore(url, { schema });
      assert.deepEqual((await store.attention()).items.map((i) => [i.callId, i.status]), [[inDoubt, 'outcome_unknown']], 'the mail in doubt is still listed');
      await store.close();
    });

    it('refuses a schema newer than the code with schema_too_new, touching nothing', async () => {
      const schema = freshSchema();
      await (await openPostgresStore(url, { schema })).close();
      await admin.query(`UPDATE "${schema}".jw_schema_version SET version = $1`, [POSTGRES_SCHEMA_VERSION + 1]);
      const refused = await rejects(openPostgresStore(url, { schema }), 'schema_too_new');
      assert.match(String((refused as Error).message), /a newer release of jingwei has opened it.*open it with that release or a later one/);
      const version = await admin.query(`SELECT version FROM "${schema}".jw_schema_version`);
      assert.deepEqual(version.rows, [{ version: POSTGRES_SCHEMA_VERSION + 1 }]);
    });

    it('rejects a bad schema name and bad timeouts before connecting', async () => {
      await rejects(openPostgresStore(url, { schema: 'x"; DROP TABLE y; --' }), 'invalid_input');
      await rejects(openPostgresStore(url, { lockTimeoutMs: 0 }), 'invalid_input');
      await rejects(openPostgresStore(url, { statementTimeoutMs: 1.5 }), 'invalid_input');
    });
  });

  describe('connections', () => {
    it('an unreachable server is store_failure; a closed store is store_closed', async () => {
      const error = await rejects(openPostgresStore('postgres://postgres@127.0.0.1:1/nowhere', { connectTimeoutMs: 2_000 }), 'store_failure');
      assert.ok(error instanceof Error);
      const store = await openPostgresStore(url, { schema: freshSchema() });
      await store.close();
      await store.close();
      await rejects(store.loadHistory('s'), 'store_closed');
      await rejects(store.acquire('s', { owner: 'h' }), 'store_closed');
    });

    it('works on a pool the caller owns, and close() leaves that pool open', async () => {
      const pool = new pg.Pool({ connectionString: url, max: 2 });
      const store = await openPostgresStore(pool, { schema: freshSchema() });
      const owner = await store.acquire('s-pool', { owner: 'h' });
      await owner.append([message('on a borrowed pool')]);
      await store.close();
      assert.deepEqual((await pool.query('SELECT 1 AS one')).rows, [{ one: 1 }]);
      await pool.end();
    });

    it('text PostgreSQL cannot hold (U+0000) is invalid_input, and nothing is written', async () => {
      const store = await openPostgresStore(url, { schema: freshSchema() });
      await rejects(store.acquire('nul\u0000session', { owner: 'h' }), 'invalid_input');
      const owner = await store.acquire('s-nul', { owner: 'h' });
      await rejects(owner.startTask('task\u0000x'), 'invalid_input');
      const [event] = await owner.append([message('a NUL inside JSON text is escaped: \u0000')]);
      assert.equal(event!.seq, 0);
      assert.deepEqual(texts(await store.loadHistory('s-nul')), ['a NUL inside JSON text is escaped: \u0000']);
      assert.deepEqual((await store.listSessions()).map((s) => s.sessionId), ['s-nul']);
      await store.close();
    });
  });

  describe('one statement per commit', () => {
    it('a commit of many rows a table (one array a column) and one of a few (one parameter a value) write every row', async () => {
      const schema = freshSchema();
      const store = await openPostgresStore(url, { schema });
      const a = await store.acquire('s-rows', { owner: 'a' });
      const task = 't-rows' as TaskId;
      await a.startTask(task);
      const many = Array.from({ length: 7 }, () => callDraft(task));
      const few = Array.from({ length: 2 }, () => callDraft(task));
      await commitAs(a, { events: many });
      await commitAs(a, { events: [...few, message('after')] });
      const counts = await admin.query<{ events: number; operations: number; attention: number }>(
        `SELECT (SELECT count(*)::int FROM "${schema}".jw_events WHERE session_id = 's-rows') AS events,
          (SELECT count(*)::int FROM "${schema}".jw_operations WHERE session_id = 's-rows') AS operations,
          (SELECT count(*)::int FROM "${schema}".jw_attention WHERE session_id = 's-rows') AS attention`,
      );
      // startTask's ledger event, 9 calls and the message.
      assert.deepEqual(counts.rows[0], { events: 11, operations: 9, attention: 9 });
      for (const draft of [...many, ...few]) {
        const call = (draft.kind as { call: { id: string; operation: { key: OperationKey } } }).call;
        assert.equal((await a.readOperation!(task, call.operation.key))?.callId, call.id);
      }
      const stored = await admin.query<{ call_id: string; tool: string; effect: string; start_marker: boolean; status: string }>(
        `SELECT call_id, tool, effect, start_marker, status FROM "${schema}".jw_attention WHERE session_id = 's-rows' ORDER BY call_id`,
      );
      const calls = [...many, ...few].map((d) => (d.kind as { call: { id: string } }).call.id).sort();
      assert.deepEqual(stored.rows.map((r) => r.call_id), calls);
      for (const row of stored.rows) assert.deepEqual({ ...row, call_id: undefined }, { call_id: undefined, tool: 'probe', effect: 'idempotent', start_marker: false, status: 'no_result' });
      await store.close();
    });

    it('finds attention rows by call id through the call-id index, in plans made while the tables are empty and unanalyzed', async () => {
      // A connection plans a statement once and keeps the plan; made on empty tables, a plan that looked the rows up by
      // an index on session_id and filtered call_id scanned the whole session on every later commit.
      const schema = freshSchema();
      const store = await openPostgresStore(url, { schema });
      const S = `"${schema}"`;
      const session = { values: ['s-plan', 'a', true, 1, 0, 'h', 0, 0, 0], leaseMs: 30_000, expect: { epoch: 1, lastSeq: 0 }, knownJson: '{}' };
      const check = commitStatement(S, { result: undefined }, 'jw_plan', { session, checks: { attention: { callIds: ['c-1'], expected: '{}' } } });
      const lookups = [
        { name: 'by_calls', text: postgresStatements(S).attentionByCalls, values: ['s-plan', ['c-1', 'c-2']] },
        { name: 'commit_check', text: check.text, values: check.values },
      ];
      const client = await admin.connect();
      try {
        await client.query('SET plan_cache_mode = force_generic_plan');
        // EXECUTE inside EXPLAIN takes no bound parameters: the values go in as literals.
        const literal = (v: unknown): string => Array.isArray(v) ? `ARRAY[${v.map(literal).join(', ')}]::text[]`
          : typeof v === 'string' ? client.escapeLiteral(v) : v === null || v === undefined ? 'NULL' : String(v);
        const plans = async () => {
          const out: string[] = [];
          for (const l of lookups) {
            const res = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN EXECUTE ${l.name}(${l.values.map(literal).join(', ')})`);
            out.push(res.rows.map((r) => r['QUERY PLAN']).join('\n'));
          }
          return out;
        };
        for (const l of lookups) await client.query(`PREPARE ${l.name} AS ${l.text}`);
        const first = await plans();
        await admin.query(`INSERT INTO ${S}.jw_attention (session_id, task_id, key, call_id, tool, effect, revision, args_digest,
          start_marker, started, status) SELECT 's-plan', 't', 'k' || i, 'c' || i, 'noop', 'read_only', 'r', 'd', true, true, 'completed'
          FROM generate_series(1, 2000) AS i`);
        for (const plan of [...first, ...(await plans())]) {
          // An index scan or a bitmap scan of it: which one depends on statistics autovacuum may gather meanwhile.
          assert.match(plan, /(Index Scan using|Bitmap Index Scan on) jw_attention_call_id\b/, plan);
          assert.doesNotMatch(plan, /Seq Scan on jw_attention|jw_attention_(binding|pkey|status)/, plan);
        }
      } finally {
        client.release();
      }
      await store.close();
    });

    it('a commit on rows the store knows, unchanged since, is one statement: the known rows match the stored ones', async () => {
      const schema = freshSchema();
      const store = await openPostgresStore(url, { schema });
      // Closed whatever happens: a pool left open would keep this file's process from ever exiting.
      try {
        const a = await store.acquire('s-hit', { owner: 'a' });
        const task = 't-hit' as TaskId;
        await a.startTask(task);
        const admit = () => commitAs(a, { events: [callDraft(task), message('with it')], budget: { taskId: task, admit: { maxOutputBytes: 16 } } });
        await admit();
        const query = pg.Client.prototype.query;
        let queries = 0;
        pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
          queries += 1;
          return (query as (...a: unknown[]) => unknown).apply(this, args);
        } as typeof query;
        try {
          await admit();
          await a.append([message('alone')]);
        } finally {
          pg.Client.prototype.query = query;
        }
        assert.equal(queries, 2, 'each commit decided on the known owner, task, operation and attention rows and sent one statement');
        assert.equal((await a.task(task)).charged.toolCalls, 2);
        assert.equal((await store.loadHistory('s-hit')).length, 6);
      } finally {
        await store.close();
      }
    });

    it('a task row changed behind the store between two commits is seen: the commit decides again on the stored row', async () => {
      const schema = freshSchema();
      const store = await openPostgresStore(url, { schema });
      const a = await store.acquire('s-known', { owner: 'a' });
      const task = 't-known' as TaskId;
      await a.startTask(task);
      const admit = () => commitAs(a, { events: [callDraft(task)], budget: { taskId: task, admit: { maxOutputBytes: 16 } } });
      await admit();
      await admit();
      assert.equal((await a.task(task)).charged.toolCalls, 2);
      // The store last wrote 2; a commit decided on that known row would write 3.
      await admin.query(`UPDATE "${schema}".jw_tasks SET charged_tool_calls = 7 WHERE task_id = 't-known'`);
      await admit();
      assert.equal((await a.task(task)).charged.toolCalls, 8);
      await admin.query(`UPDATE "${schema}".jw_operations SET call_id = 'changed' WHERE session_id = 's-known'`);
      await admit();
      assert.equal((await a.task(task)).charged.toolCalls, 9);
      assert.equal((await store.loadHistory('s-known')).length, 5);
      await store.close();
    });

    it('on a server whose default isolation is serializable, a commit that meets a concurrent update of its owner row runs again the ordinary way', async () => {
      const schema = freshSchema();
      const serializable = new URL(url);
      serializable.searchParams.set('options', '-c default_transaction_isolation=serializable');
      const store = await openPostgresStore(serializable.toString(), { schema });
      const a = await store.acquire('s-serial', { owner: 'a' });
      await a.append([message('one')]);
      await a.append([message('two')]);
      const blocker = await admin.connect();
      try {
        await blocker.query('BEGIN');
        await blocker.query(`UPDATE "${schema}".jw_sessions SET owner = owner WHERE session_id = 's-serial'`);
        const pending = a.append([message('three')]);
        // Wait until the commit's statement is queued behind the blocker's row lock, then let it through.
        for (let i = 0; ; i++) {
          const waiting = await admin.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
          );
          if (waiting.rows[0]!.n > 0) break;
          assert.ok(i < 500, 'the commit never waited on the owner row');
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        await blocker.query('COMMIT');
        const [event] = await pending;
        assert.equal(event!.seq, 2);
      } finally {
        blocker.release();
      }
      assert.deepEqual(texts(await store.loadHistory('s-serial')), ['one', 'two', 'three']);
      await store.close();
    });
  });

  describe('fencing', () => {
    it('a writer whose connection is killed mid-transaction leaves nothing partial, and cannot append after a takeover even on a new connection', async () => {
      const schema = freshSchema();
      let killing = false;
      let killed = 0;
      const store = await openPostgresStore(url, {
        schema,
      });
      setPostgresBeforeCommit(store, async ({ backendPid }) => {
        if (!killing) return;
        killed += 1;
        const res = await admin.query<{ done: boolean }>('SELECT pg_terminate_backend($1, 10000) AS done', [backendPid]);
        assert.equal(res.rows[0]!.done, true, 'the backend exited');
      });
      const a = await store.acquire('s-killed', { owner: 'a' });
      const task = 't-killed' as TaskId;
      await a.startTask(task);
      await a.append([message('committed')]);
      killing = true;
      // Events, a budget charge and an operation row, all in the transaction whose connection dies before COMMIT,
      // and again on each connection it runs again on (the owner row shows it did not land), until the store gives up.
      await rejects(commitAs(a, { events: [callDraft(task), message('lost')], budget: { taskId: task, admit: { maxOutputBytes: 16 } } }), 'store_failure');
      killing = false;
      assert.ok(killed > 1, `run again after the first loss (${killed} connections killed)`);

      // seq 0 is the task's start (its task_ledger event, written with the task row), seq 1 the message.
      assert.deepEqual(texts(await store.loadHistory('s-killed')), [undefined, 'committed']);
      assert.equal((await store.loadHistory('s-killed'))[0]!.kind.type, 'task_ledger');
      assert.deepEqual((await a.task(task)).charged, { toolCalls: 0, toolOutputBytes: 0, journalBytes: 0 });
      const raw = await admin.query(
        `SELECT (SELECT last_seq FROM "${schema}".jw_sessions) AS last_seq, (SELECT count(*)::int FROM "${schema}".jw_events) AS events, ` +
          `(SELECT count(*)::int FROM "${schema}".jw_operations) AS ops, (SELECT reserved_output_bytes FROM "${schema}".jw_tasks) AS reserved`,
      );
      assert.deepEqual(raw.rows[0], { last_seq: '1', events: 2, ops: 0, reserved: '0' });

      const other = await openPostgresStore(url, { schema });
      const b = await other.acquire('s-killed', { owner: 'b', takeover: true });
      assert.equal(b.epoch, a.epoch + 1);
      // A's own store reconnects (the pool replaced the dead connection): still fenced.
      await rejects(a.append([message('after reconnect')]), 'stale_owner');
      await rejects(commitAs(a, { events: [callDraft(task)], budget: { taskId: task, admit: { maxOutputBytes: 16 } } }), 'stale_owner');
      // A brand-new pool writing with the old epoch: fenced by the same conditional update.
      const third = await openPostgresStore(url, { schema });
      const backend = (third as JournalStore).backend;
      await rejects(backend.transact('s-killed' as SessionId, {}, decideCommit({ sessionId: 's-killed' as SessionId, epoch: a.epoch }, { events: [message('old epoch')] }, Date.now())), 'stale_owner');
      const [next] = await b.append([message('by b')]);
      assert.equal(next!.seq, 2, 'no seq was consumed by the lost or stale writes (seq 0 is the task\'s start, 1 the message)');
      assert.deepEqual(texts(await other.loadHistory('s-killed')), [undefined, 'committed', 'by b']);
      assert.deepEqual((await b.task(task)).charged, { toolCalls: 0, toolOutputBytes: 0, journalBytes: 0 });
      await Promise.all([store.close(), other.close(), third.close()]);
    });

    it('a fence attempt while a writer holds the owner row lock fails with store_busy within the lock timeout, not a hang', async () => {
      const schema = freshSchema();
      let hold = false;
      let entered!: () => void;
      const inside = new Promise<void>((resolve) => { entered = resolve; });
      let letGo!: () => void;
      const gate = new Promise<void>((resolve) => { letGo = resolve; });
      const store = await openPostgresStore(url, {
        schema,
      });
      setPostgresBeforeCommit(store, async () => {
        if (!hold) return;
        hold = false;
        entered();
        await gate;
      });
      const a = await store.acquire('s-locked', { owner: 'a' });
      hold = true;
      const slow = a.append([message('slow but committed')]);
      await inside;

      const fencer = await openPostgresStore(url, { schema, lockTimeoutMs: 300 });
      const started = Date.now();
      await rejects(fencer.acquire('s-locked', { owner: 'b', takeover: true }), 'store_busy');
      const waited = Date.now() - started;
      assert.ok(waited >= 250 && waited < 5_000, `waited ${waited} ms for a 300 ms lock timeout`);
      // Readers are never blocked by the writer (MVCC) and see only committed events.
      assert.deepEqual(await fencer.loadHistory('s-locked'), []);

      letGo();
      assert.equal((await slow)[0]!.seq, 0);
      const b = await fencer.acquire('s-locked', { owner: 'b', takeover: true });
      assert.equal(b.epoch, 2);
      await rejects(a.append([message('stale')]), 'stale_owner');
      await b.append([message('by b')]);
      assert.deepEqual(texts(await store.loadHistory('s-locked')), ['slow but committed', 'by b']);
      await Promise.all([store.close(), fencer.close()]);
    });

    it('a writer stalled inside its transaction is cut off by idle_in_transaction_session_timeout, freeing the lock for a takeover', async () => {
      const schema = freshSchema();
      let stall = false;
      let entered!: () => void;
      const inside = new Promise<void>((resolve) => { entered = resolve; });
      let resume!: () => void;
      const paused = new Promise<void>((resolve) => { resume = resolve; });
      const store = await openPostgresStore(url, {
        schema,
        idleInTransactionTimeoutMs: 1_000,
      });
      setPostgresBeforeCommit(store, async () => {
        if (!stall) return;
        stall = false;
        entered();
        await paused; // like a SIGSTOP between the last write and COMMIT
      });
      const a = await store.acquire('s-stalled', { owner: 'a' });
      await a.append([message('before the stall')]);
      stall = true;
      const stalled = a.append([message('never committed')]);
      await inside;
      const fencer = await openPostgresStore(url, { schema, lockTimeoutMs: 5_000 });
      const b = await fencer.acquire('s-stalled', { owner: 'b', takeover: true });
      assert.equal(b.epoch, 2);
      resume(); // the writer wakes up and tries to COMMIT on a connection the server has ended
      // It runs again on another connection, where the event row at its head shows it never landed, and the session's
      // owner row that it is fenced: it fails as the stale owner it is (before the run again, store_failure).
      await rejects(stalled, 'stale_owner');
      await rejects(a.append([message('stale')]), 'stale_owner');
      await b.append([message('by b')]);
      assert.deepEqual(texts(await fencer.loadHistory('s-stalled')), ['before the stall', 'by b']);
      await Promise.all([store.close(), fencer.close()]);
    });

    it('racing creators of one new session: exactly one wins, the others see session_busy (the unique violation is retried)', async () => {
      const schema = freshSchema();
      const stores = await Promise.all(Array.from({ length: 4 }, () => openPostgresStore(url, { schema })));
      const results = await Promise.allSettled(stores.map((s, i) => s.acquire('s-create', { owner: `h${i}` })));
      const won = results.filter((r) => r.status === 'fulfilled');
      assert.equal(won.length, 1);
      for (const r of results) if (r.status === 'rejected') assert.equal((r.reason as { code: string }).code, 'session_busy', String(r.reason));
      const taken = await Promise.all(stores.map((s, i) => s.acquire('s-create-2', { owner: `h${i}`, takeover: true })));
      assert.deepEqual(taken.map((o) => o.epoch).sort(), [1, 2, 3, 4]);
      // A task id is unique within its session only: two sessions starting the same id concurrently each get their own.
      const [x, y] = [await stores[0]!.acquire('s-task-x', { owner: 'x' }), await stores[1]!.acquire('s-task-y', { owner: 'y' })];
      const starts = await Promise.all([x.startTask('t-shared'), y.startTask('t-shared')]);
      assert.deepEqual(starts.map((t) => t.sessionId), ['s-task-x', 's-task-y']);
      // One owner starting the same task twice at once: one row, both calls see it.
      const twice = await Promise.all([x.startTask('t-twice'), x.startTask('t-twice', { limits: { toolCalls: 3 } })]);
      assert.deepEqual(twice[0], twice[1]);
      await Promise.all(stores.map((s) => s.close()));
    });
  });

  describe('integrity', () => {
    it('detects tampering: a changed body, a deleted last row, rows beyond the head, an epoch beyond a safe integer', async () => {
      const schema = freshSchema();
      const store = await openPostgresStore(url, { schema });
      const owner = await store.acquire('s-tamper', { owner: 'h' });
      for (let i = 0; i < 5; i++) await owner.append([message(`msg-${i}`)]);
      const expectCorrupt = async (reason: string, seq: number) => {
        await assert.rejects(store.loadHistory('s-tamper'), (error: unknown) => {
          assert.ok(error instanceof JournalCorruptError, String(error));
          assert.equal(error.reason, reason, error.message);
          assert.equal(error.seq, seq, error.message);
          return true;
        });
      };
      const E = `"${schema}".jw_events`;
      await admin.query(`UPDATE ${E} SET body = replace(body, 'msg-3', 'msg-X') WHERE seq = 3`);
      await expectCorrupt('hash_mismatch', 3);
      await admin.query(`UPDATE ${E} SET body = replace(body, 'msg-X', 'msg-3') WHERE seq = 3`);
      assert.equal((await store.loadHistory('s-tamper')).length, 5);

      const last = await admin.query(`DELETE FROM ${E} WHERE seq = 4 RETURNING *`);
      await expectCorrupt('head_mismatch', 4);
      const r = last.rows[0] as Record<string, unknown>;
      await admin.query(`INSERT INTO ${E} VALUES ($1, $2, $3, $4, $5, $6)`, [r.session_id, r.seq, r.event_id, r.epoch, r.body, r.hash]);
      assert.equal((await store.loadHistory('s-tamper')).length, 5);

      // A row planted beyond the head: the next append refuses to overwrite or skip it.
      await admin.query(`INSERT INTO ${E} SELECT session_id, 5, 'evt_planted', epoch, body, hash FROM ${E} WHERE seq = 4`);
      await rejects(owner.append([message('collides')]), 'journal_corrupt');
      await admin.query(`DELETE FROM ${E} WHERE seq = 5`);
      await owner.append([message('msg-5')]);

      await admin.query(`UPDATE "${schema}".jw_sessions SET epoch = 9007199254740993`);
      await rejects(store.loadHistory('s-tamper'), 'journal_corrupt');
      await rejects(owner.append([message('x')]), 'journal_corrupt');
      await store.close();
    });

    it('loads and verifies a 100,000-event journal in one snapshot', async (t) => {
      const memory = createMemoryStore();
      const writer = await memory.acquire('s-big', { owner: 'h' });
      const batch: EventDraft[] = [];
      // Short ids keep 100,000 events, each with its recorded time, within the 16 MiB history limit.
      const shortTurn = 't' as TurnId;
      for (let i = 0; i < 100_000; i++) {
        batch.push({ eventId: `e${i}` as EventId, turnId: shortTurn, kind: { type: 'user_message', text: String(i % 10) } });
        if (batch.length === 5_000) await writer.append(batch.splice(0));
      }
      const jsonl = await memory.exportJsonl('s-big');
      const store = await openPostgresStore(url, { schema: freshSchema() });
      let started = performance.now();
      assert.deepEqual(await store.importJsonl(jsonl, { owner: 'importer' }), { sessionId: 's-big', events: 100_000 });
      const importMs = performance.now() - started;
      started = performance.now();
      const history = await store.loadHistory('s-big');
      const loadMs = performance.now() - started;
      assert.equal(history.length, 100_000);
      assert.equal(history[99_999]!.seq, 99_999);
      t.diagnostic(`import ${importMs.toFixed(0)} ms, load + verify ${loadMs.toFixed(0)} ms`);
      const owner = await store.acquire('s-big', { owner: 'h' });
      await rejects(owner.append([message('one too many')]), 'journal_full');
      await store.close();
    });
  });
});

describe('openPostgresStore reads its URL before connecting', () => {
  it('a URL of another database, or text that is not a URL, is invalid_input naming what it got, not "unreachable"', async () => {
    const { openPostgresStore: open } = await import('../../src/postgres.js');
    await assert.rejects(open('mysql://x@localhost/db'), { code: 'invalid_input', message: /must be a PostgreSQL connection URL \(postgres:\/\/user@host:5432\/db\), got a mysql: URL/ });
    await assert.rejects(open('not a url'), { code: 'invalid_input', message: /got text that is not one/ });
    await assert.rejects(open(''), { code: 'invalid_input' });
  });
});
