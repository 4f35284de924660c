/**
 * Where a durable call's time goes on PostgreSQL (B4): the call, against its floor (B4's: the same event bytes in
 * two autocommit INSERTs) and against the rows the call leaves written with raw SQL (the owner row, the events, the
 * task row, the operation row and the attention row, in the store's own tables and indexes), each commit one
 * prepared statement in one round trip, as Jingwei's commits are, without the library and without the checks of
 * the known rows. Blocks of calls alternate between the variants; per variant the median over blocks of the p50 per
 * call and of the client's CPU per call: its JS thread's, and its other threads' (V8 compiles the call path's hot
 * functions on those for the first few thousand calls of a process; --warm=N untimed calls a variant first, 300 by
 * default, so --warm=5000 measures the settled code); and, when the server runs on this machine, its processes' CPU
 * per call.
 *
 *   JINGWEI_PG_URL=postgres://... node bench/split-pg.mjs [--blocks=N] [--calls=N] [--warm=N]   (`npm run build` first)
 *   node scripts/pg-test-cluster.mjs run -- node bench/split-pg.mjs                     (a throwaway server)
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { openPostgresStore } from '../dist/postgres.js';
import { ATTENTION_COLUMNS, ATTENTION_UPDATE } from '../dist/store/sql-rows.js';
import { sampleBodies } from './jingwei/b2.mjs';
import { benchRuntime, NOOP, openRig } from './jingwei/rig.mjs';
import { FAKE_HASH, numberArg, ROOT, scratchDir } from './lib/env.mjs';
import { alternateBlocks, fmtUs, median } from './lib/stats.mjs';

const url = process.env.JINGWEI_PG_URL;
if (!url) {
  process.stderr.write('bench/split-pg.mjs needs JINGWEI_PG_URL (node scripts/pg-test-cluster.mjs run -- node bench/split-pg.mjs)\n');
  process.exit(2);
}
const BLOCKS = numberArg('blocks', 12);
const CALLS = numberArg('calls', 50);
const WARMUP = numberArg('warm', 300);

/** Whether the server is reached on this machine, so that its process ids are this machine's. */
const LOCAL_SERVER = ['127.0.0.1', 'localhost', '[::1]', ''].includes(new URL(url).hostname);

/**
 * The CPU time in ns of the server's processes (every process in pg_stat_activity when the blocks start: the
 * backends and the WAL writer among them), read from /proc; null when the server is not on this machine or one of
 * them has gone (each must still be a `postgres` process).
 */
function serverCpuNs(pids) {
  if (!LOCAL_SERVER) return null;
  let total = 0;
  for (const pid of pids) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'latin1').startsWith('postgres')) return null;
      total += Number(readFileSync(`/proc/${pid}/schedstat`, 'latin1').split(' ')[0]);
    } catch {
      return null;
    }
  }
  return total;
}

const { Client } = createRequire(join(ROOT, 'package.json'))('pg');
const schemas = { call: `jw_split_call_${process.pid}`, rows: `jw_split_rows_${process.pid}`, floor: `jw_split_floor_${process.pid}` };
const client = new Client({ connectionString: url });
await client.connect();
const closers = [];
const scratch = scratchDir('split-pg');
try {
  const [first, second] = (await sampleBodies(scratch)).plain;
  if (first.length !== 2 || second.length !== 1) throw new Error('bench/split-pg.mjs: a call was expected to write two events, then one');

  const store = await openPostgresStore(url, { schema: schemas.call, poolSize: 2 });
  closers.push(() => store.close());
  const { gateway } = await openRig(store, benchRuntime(), { sessionId: 'split' });

  // The rows' tables are the store's: a store makes the schema, the session and its task, then writes nothing more.
  const rowsStore = await openPostgresStore(url, { schema: schemas.rows, poolSize: 1 });
  await openRig(rowsStore, benchRuntime(), { sessionId: 'rows', taskId: 'rows-task' });
  await rowsStore.close();
  const R = `"${schemas.rows}"`;
  const attention = (from) =>
    `a AS (INSERT INTO ${R}.jw_attention (${ATTENTION_COLUMNS}) VALUES (${ATTENTION_COLUMNS.split(', ').map((_, i) => `$${from + i}`).join(', ')}) ` +
    `ON CONFLICT (session_id, task_id, key) DO UPDATE SET ${ATTENTION_UPDATE})`;
  const owner = `s AS (UPDATE ${R}.jw_sessions SET last_seq = $1, head_hash = $2, body_bytes = body_bytes + 1000 WHERE session_id = 'rows' RETURNING 1)`;
  const task = `t AS (UPDATE ${R}.jw_tasks SET charged_journal_bytes = charged_journal_bytes + 1000 WHERE session_id = 'rows' AND task_id = 'rows-task')`;
  const callText = `WITH ${owner}, e AS (INSERT INTO ${R}.jw_events VALUES ('rows', $3, $4, 1, $5, $2), ('rows', $6, $7, 1, $8, $2)), ${task}, ` +
    `o AS (INSERT INTO ${R}.jw_operations VALUES ('rows-task', $9, 'rows', $10, $4)), ${attention(11)} SELECT count(*) FROM s`;
  const resultText = `WITH ${owner}, e AS (INSERT INTO ${R}.jw_events VALUES ('rows', $3, $4, 1, $5, $2)), ${task}, ${attention(6)} SELECT count(*) FROM s`;
  let seq = 1000;
  let call = 0;
  const attentionValues = (status, now, ended) =>
    ['rows', 'rows-task', `op_${call}`, `tc_${call}`, 'noop', 'read_only', 'bench-1', FAKE_HASH, true, true, status, null, now, now, ended, now, null];
  const rows = async () => {
    call++;
    const now = Date.now();
    seq += 2;
    await client.query({ name: 'split_rows_call', text: callText, values: [seq, FAKE_HASH, seq - 1, `evt_c${call}`, first[0], seq, `evt_s${call}`, first[1], `op_${call}`, `tc_${call}`, ...attentionValues('no_result', now, null)] });
    seq += 1;
    await client.query({ name: 'split_rows_result', text: resultText, values: [seq, FAKE_HASH, seq, `evt_r${call}`, second[0], ...attentionValues('completed', now, now)] });
  };

  const F = `"${schemas.floor}"`;
  await client.query(`CREATE SCHEMA ${F}`);
  await client.query(`CREATE TABLE ${F}.jw_events (session_id TEXT NOT NULL, seq BIGINT NOT NULL, event_id TEXT NOT NULL, epoch BIGINT NOT NULL, body TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (session_id, seq))`);
  let floorSeq = 0;
  const floor = async () => {
    await client.query({ name: 'split_floor_2', text: `INSERT INTO ${F}.jw_events VALUES ($1, $2, 'evt_floor', 1, $3, $4), ($1, $5, 'evt_floor', 1, $6, $4)`, values: ['floor', floorSeq++, first[0], FAKE_HASH, floorSeq++, first[1]] });
    await client.query({ name: 'split_floor_1', text: `INSERT INTO ${F}.jw_events VALUES ($1, $2, 'evt_floor', 1, $3, $4)`, values: ['floor', floorSeq++, second[0], FAKE_HASH] });
  };

  const variants = [
    { name: 'Jingwei call', call: () => gateway.call(NOOP, {}) },
    { name: 'rows, raw SQL', call: rows },
    { name: 'floor', call: floor },
  ];
  for (const v of variants) for (let i = 0; i < WARMUP; i++) await v.call();
  const serverPids = (await client.query('SELECT pid FROM pg_stat_activity')).rows.map((r) => r.pid);
  await alternateBlocks(variants, { blocks: BLOCKS, calls: CALLS, probe: () => serverCpuNs(serverPids) });
  const p = (name) => median(variants.find((v) => v.name === name).p50);
  process.stdout.write(`where a durable call's time goes on PostgreSQL: ${BLOCKS} blocks of ${CALLS} calls a variant after ${WARMUP} untimed, medians over blocks\n\n`);
  process.stdout.write('| variant | p50 a call | client JS thread CPU a call | client other threads CPU a call | server CPU a call |\n|---|---:|---:|---:|---:|\n');
  for (const v of variants) process.stdout.write(`| ${v.name} | ${fmtUs(median(v.p50))} | ${fmtUs(median(v.thread))} | ${fmtUs(median(v.others))} | ${fmtUs(median(v.probed))} |\n`);
  process.stdout.write(
    `\nrows ÷ floor ${(p('rows, raw SQL') / p('floor')).toFixed(2)}, Jingwei ÷ floor ${(p('Jingwei call') / p('floor')).toFixed(2)}, ` +
      `Jingwei ÷ rows ${(p('Jingwei call') / p('rows, raw SQL')).toFixed(2)}\n`,
  );
} finally {
  for (const close of closers) await close();
  for (const schema of Object.values(schemas)) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
  scratch.remove();
}
