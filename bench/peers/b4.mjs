/**
 * B4: the peers a user would pick instead, side by side in one run, each calling the same no-op tool durably:
 *   - Jingwei on SQLite (synchronous=FULL) and on PostgreSQL (the throwaway cluster, synchronous_commit=on);
 *   - LangGraph.js: a StateGraph whose only node is a prebuilt ToolNode, compiled with its SQLite checkpointer
 *     (@langchain/langgraph-checkpoint-sqlite), invoked with durability 'sync' on a fresh thread per call (the
 *     peer's cheapest case: its checkpoint does not grow). Measured as shipped (WAL with better-sqlite3's default
 *     synchronous=NORMAL: commits are not fsynced) and with synchronous=FULL (Jingwei's durability);
 *   - DBOS Transact: the tool as a step (DBOS.registerStep) on the same PostgreSQL, measured per step inside one
 *     long-running workflow (one checkpoint write per step, after it runs) and as one workflow per call (workflow
 *     status, step output, completion).
 * Ratios are peer ÷ Jingwei on the same engine: above 1× Jingwei is faster. For context, Jingwei on PostgreSQL is
 * also measured against its PostgreSQL floor: the same bytes in two raw autocommit INSERTs (two synced commits,
 * one round trip each), and the loopback round trip (SELECT 1) is reported.
 *
 * Needs the bench/ package install (the peers are its dependencies, never the library's).
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import Database from 'better-sqlite3';
import { z } from 'zod';
import { DBOS } from '@dbos-inc/dbos-sdk';
import { AIMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { openSqliteStore } from '../../dist/sqlite.js';
import { openPostgresStore } from '../../dist/postgres.js';
import { benchRuntime, bodiesOf, checkedCall, NOOP, openRig } from '../jingwei/rig.mjs';
import { FAKE_HASH, scratchDir } from '../lib/env.mjs';
import { compare, timeSerial } from '../lib/stats.mjs';

/** Installed versions, read from bench/node_modules (some packages do not export their package.json). */
export function peerVersions() {
  const v = (name) => {
    try {
      return JSON.parse(readFileSync(new URL(`../node_modules/${name}/package.json`, import.meta.url), 'utf8')).version;
    } catch {
      return 'unknown';
    }
  };
  return {
    '@langchain/langgraph': v('@langchain/langgraph'),
    '@langchain/langgraph-checkpoint-sqlite': v('@langchain/langgraph-checkpoint-sqlite'),
    '@langchain/core': v('@langchain/core'),
    '@dbos-inc/dbos-sdk': v('@dbos-inc/dbos-sdk'),
    'better-sqlite3 (LangGraph saver)': v('better-sqlite3'),
  };
}

/**
 * What "as shipped" means for the saver's durability, measured rather than read back: `PRAGMA synchronous` reports
 * 2 (FULL) on a fresh WAL file, yet better-sqlite3 builds SQLite with SQLITE_DEFAULT_WAL_SYNCHRONOUS=1, and a
 * commit then takes microseconds (no fsync). Times 100 one-row autocommit inserts on a connection opened as the
 * saver opens it, and on one with synchronous=FULL set explicitly, as Jingwei does.
 */
function probeCommit(path, full) {
  const db = new Database(path);
  try {
    db.pragma('journal_mode = WAL');
    if (full) db.pragma('synchronous = FULL');
    db.exec('CREATE TABLE IF NOT EXISTS probe (x INTEGER)');
    const insert = db.prepare('INSERT INTO probe VALUES (?)');
    const samples = [];
    for (let i = 0; i < 110; i++) {
      const t = process.hrtime.bigint();
      insert.run(i);
      if (i >= 10) samples.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    samples.sort((a, b) => a - b);
    return samples[samples.length >> 1];
  } finally {
    db.close();
  }
}

const noopTool = tool(async () => 'ok', { name: 'noop', description: 'does nothing and returns "ok"', schema: z.object({}) });

/** A one-node LangGraph (START → ToolNode → END) on a SQLite checkpointer; `full` sets synchronous=FULL. */
function langGraph(path, full) {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  if (full) db.pragma('synchronous = FULL');
  const saver = new SqliteSaver(db);
  const counts = { put: 0, putWrites: 0 };
  const put = saver.put.bind(saver);
  const putWrites = saver.putWrites.bind(saver);
  saver.put = (...args) => { counts.put++; return put(...args); };
  saver.putWrites = (...args) => { counts.putWrites++; return putWrites(...args); };
  const graph = new StateGraph(MessagesAnnotation)
    .addNode('tools', new ToolNode([noopTool]))
    .addEdge(START, 'tools')
    .addEdge('tools', END)
    .compile({ checkpointer: saver });
  let thread = 0;
  const call = async () => {
    thread++;
    const out = await graph.invoke(
      { messages: [new AIMessage({ content: '', tool_calls: [{ id: `call_${thread}`, name: 'noop', args: {} }] })] },
      { configurable: { thread_id: `thread-${thread}` }, durability: 'sync' },
    );
    const last = out.messages[out.messages.length - 1];
    if (last?.content !== 'ok') throw new Error(`LangGraph: unexpected tool output ${JSON.stringify(last?.content)}`);
  };
  return { db, call, counts };
}

let dbosFns;
/** Registers the DBOS functions (before launch, once per process) and launches DBOS on `url`. */
async function launchDbos(url) {
  if (!dbosFns) {
    const step = DBOS.registerStep(async () => 'ok', { name: 'noop' });
    dbosFns = {
      step,
      single: DBOS.registerWorkflow(async () => step(), { name: 'benchSingle' }),
      loop: DBOS.registerWorkflow(
        async (n, warmup) => {
          for (let i = 0; i < warmup; i++) await step();
          const samples = [];
          const start = process.hrtime.bigint();
          for (let i = 0; i < n; i++) {
            const t = process.hrtime.bigint();
            const out = await step();
            samples.push(Number(process.hrtime.bigint() - t) / 1e6);
            if (out !== 'ok') throw new Error('DBOS: unexpected step output');
          }
          return { samples, wallMs: Number(process.hrtime.bigint() - start) / 1e6 };
        },
        { name: 'benchLoop' },
      ),
    };
  }
  DBOS.setConfig({ name: 'jingwei-bench', systemDatabaseUrl: url, logLevel: 'error', enableOTLP: false });
  await DBOS.launch();
  return dbosFns;
}

/** The URL of another database on the same server (DBOS wants a system database of its own). */
function siblingDatabase(url, name) {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

export async function runB4({ runs, n, warmup, pgUrl, log }) {
  const scratch = scratchDir('b4');
  const admin = new pg.Pool({ connectionString: pgUrl, max: 2 });
  admin.on('error', () => {});
  const schemas = [];
  let dbosUp = false;
  const notes = {};
  try {
    const dbos = await launchDbos(siblingDatabase(pgUrl, 'jingwei_bench_dbos'));
    dbosUp = true;
    const floorSchema = `jw_bench_floor_${process.pid}`;
    schemas.push(floorSchema);
    await admin.query(`CREATE SCHEMA "${floorSchema}"`);
    await admin.query(
      `CREATE TABLE "${floorSchema}".jw_events (session_id TEXT NOT NULL, seq BIGINT NOT NULL, event_id TEXT NOT NULL, ` +
        'epoch BIGINT NOT NULL, body TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (session_id, seq))',
    );
    // The bytes one Jingwei call writes, per transaction, from a sample call.
    const sampleStore = openSqliteStore(scratch.path('sample.db'));
    const groups = bodiesOf(await checkedCall((await openRig(sampleStore, benchRuntime(), { sessionId: 'bench-b4-sample' })).gateway, NOOP), false);
    await sampleStore.close();
    {
      const client = await admin.connect();
      const rtt = [];
      for (let i = 0; i < 220; i++) {
        const t = process.hrtime.bigint();
        await client.query('SELECT 1');
        if (i >= 20) rtt.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
      client.release();
      rtt.sort((a, b) => a - b);
      notes.pgRoundTripMs = { p50: rtt[rtt.length >> 1], p99: rtt[Math.ceil(rtt.length * 0.99) - 1] };
    }
    notes.commitMs = { shipped: probeCommit(scratch.path('probe-shipped.db'), false), full: probeCommit(scratch.path('probe-full.db'), true) };
    const lg = langGraph(scratch.path('lg-probe.db'), true);
    await lg.call();
    notes.langGraphWritesPerCall = { ...lg.counts };
    lg.db.close();
    const result = await compare({
      runs,
      log,
      variants: [
        {
          name: 'b4-jingwei-sqlite',
          label: 'Jingwei on SQLite (FULL)',
          prepare: async (r) => {
            const store = openSqliteStore(scratch.path(`jingwei-${r}.db`));
            const { gateway } = await openRig(store, benchRuntime(), { sessionId: 'bench-b4' });
            await checkedCall(gateway, NOOP);
            return { measure: () => timeSerial(() => gateway.call(NOOP, {}), { n, warmup }), close: () => store.close() };
          },
        },
        {
          name: 'b4-langgraph-full',
          label: 'LangGraph ToolNode + SqliteSaver, synchronous=FULL',
          against: 'b4-jingwei-sqlite',
          prepare: async (r) => {
            const g = langGraph(scratch.path(`lg-full-${r}.db`), true);
            return { measure: () => timeSerial(g.call, { n, warmup }), close: () => g.db.close() };
          },
        },
        {
          name: 'b4-langgraph-shipped',
          label: 'LangGraph ToolNode + SqliteSaver, as shipped (WAL, synchronous=NORMAL)',
          against: 'b4-jingwei-sqlite',
          prepare: async (r) => {
            const g = langGraph(scratch.path(`lg-default-${r}.db`), false);
            return { measure: () => timeSerial(g.call, { n, warmup }), close: () => g.db.close() };
          },
        },
        {
          name: 'b4-pg-floor',
          label: 'PostgreSQL floor: 2 raw synced INSERT commits, same bytes',
          prepare: async (r) => {
            const client = await admin.connect();
            let seq = 0;
            const text = `INSERT INTO "${floorSchema}".jw_events VALUES ($1, $2, $3, $4, $5, $6)`;
            const insert = (body) => client.query({ name: `floor_${r}`, text, values: [`floor-${r}`, seq++, 'evt_floor', 1, body, FAKE_HASH] });
            return {
              // One autocommit statement per transaction: a multi-row group goes in as one INSERT ... VALUES list.
              measure: () =>
                timeSerial(async () => {
                  for (const bodies of groups) {
                    if (bodies.length === 1) await insert(bodies[0]);
                    else {
                      const values = bodies.map((_, i) => `($${6 * i + 1}, $${6 * i + 2}, $${6 * i + 3}, $${6 * i + 4}, $${6 * i + 5}, $${6 * i + 6})`).join(', ');
                      await client.query({
                        name: `floor_${r}_${bodies.length}`,
                        text: `INSERT INTO "${floorSchema}".jw_events VALUES ${values}`,
                        values: bodies.flatMap((body) => [`floor-${r}`, seq++, 'evt_floor', 1, body, FAKE_HASH]),
                      });
                    }
                  }
                }, { n, warmup }),
              close: () => client.release(),
            };
          },
        },
        {
          name: 'b4-jingwei-pg',
          label: 'Jingwei on PostgreSQL',
          against: 'b4-pg-floor',
          prepare: async (r) => {
            const schema = `jw_bench_${process.pid}_${r}`;
            schemas.push(schema);
            const store = await openPostgresStore(pgUrl, { schema, poolSize: 2 });
            const { gateway } = await openRig(store, benchRuntime(), { sessionId: 'bench-b4' });
            await checkedCall(gateway, NOOP);
            return { measure: () => timeSerial(() => gateway.call(NOOP, {}), { n, warmup }), close: () => store.close() };
          },
        },
        {
          name: 'b4-dbos-step',
          label: 'DBOS step inside one running workflow',
          against: 'b4-jingwei-pg',
          prepare: async () => ({
            measure: async () => {
              const loop = dbos.loop; // called unbound: DBOS treats a receiver as a configured instance
              const { samples, wallMs } = await loop(n, warmup);
              return { samples: Float64Array.from(samples), wallMs };
            },
          }),
        },
        {
          name: 'b4-dbos-workflow',
          label: 'DBOS workflow of one step, per call',
          against: 'b4-jingwei-pg',
          prepare: async () => ({
            measure: () => {
              const single = dbos.single;
              return timeSerial(async () => { if ((await single()) !== 'ok') throw new Error('DBOS: unexpected output'); }, { n, warmup });
            },
          }),
        },
      ],
    });
    return { id: 'B4', title: 'The peers, side by side: one durable no-op tool call', notes, versions: peerVersions(), ...result };
  } finally {
    if (dbosUp) await DBOS.shutdown().catch(() => {});
    for (const schema of schemas) await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
    await admin.end().catch(() => {});
    scratch.remove();
  }
}
