#!/usr/bin/env node
/**
 * Where the time goes: profiles one benchmark operation with V8's CPU profiler (the profiler behind
 * `node --cpu-prof`, started through node:inspector so only the timed operations are sampled, not the setup) and
 * prints the functions with the most self time, grouped by the library file they live in.
 *
 *   node bench/profile.mjs b3 [--out=DIR]     loadHistory + inspectToolRecovery on the 100,000-event session
 *   node bench/profile.mjs b3-floor           the B3 floor (raw SELECT + JSON.parse)
 *   node bench/profile.mjs b2 | b2-approval   durable no-op calls on SQLite
 *   node bench/profile.mjs b2-cpu             the same calls on an in-memory database: the CPU path alone
 *   node bench/profile.mjs b1                 single-event appends
 *   node bench/profile.mjs b6                 resumeAgent replaying a run of 500 completed calls (B6)
 *   node bench/profile.mjs b6-restarted       the same in a host just started: a store opened and the session taken over first
 *   node bench/profile.mjs pg                 Jingwei on PostgreSQL: round trips and time inside queries per call
 *                                             (needs JINGWEI_PG_URL, e.g. via scripts/pg-test-cluster.mjs run -- ...)
 *
 * --top=N and --files=N set how many functions and files the report lists. --warm=N runs N untimed operations first
 * (1 by default; a few thousand let V8 finish compiling the call path, so the profile shows the settled code) and
 * --repeat=N profiles N operations instead of the target's default. Run `npm run build` first. --out=DIR also writes the .cpuprofile (open it in Chrome DevTools or speedscope).
 * Needs only dist/ and the root's better-sqlite3.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { inspectToolRecovery } from '../dist/index.js';
import { openSqliteStore } from '../dist/sqlite.js';
import { writeB3Session } from './jingwei/b3.mjs';
import { openB6Rig } from './jingwei/b6.mjs';
import { benchRuntime, NOOP, NOOP_APPROVED, openRig } from './jingwei/rig.mjs';
import { floorRead, numberArg, openFloor, ROOT, scratchDir } from './lib/env.mjs';

const target = process.argv[2];
const out = process.argv.find((a) => a.startsWith('--out='))?.slice(6);
const top = numberArg('top', 25);
const files = numberArg('files', 15);
const warm = numberArg('warm', 1);
const repeatArg = numberArg('repeat', 0);

async function prepare(scratch) {
  switch (target) {
    case 'b1': {
      const store = openSqliteStore(scratch.path('b1.db'));
      const owner = await store.acquire('p-b1', { owner: 'bench' });
      const draft = { turnId: 'turn-b1', kind: { type: 'user_message', text: 'x'.repeat(900) } };
      return { repeat: 1000, op: () => owner.append([draft]), close: () => store.close() };
    }
    case 'b2':
    case 'b2-approval':
    case 'b2-cpu': {
      // b2-cpu: the same calls on an in-memory database, so the profile shows the CPU path without fsync waits.
      const store = openSqliteStore(target === 'b2-cpu' ? ':memory:' : scratch.path('b2.db'));
      const { gateway } = await openRig(store, benchRuntime(), { sessionId: 'p-b2' });
      const tool = target === 'b2-approval' ? NOOP_APPROVED : NOOP;
      return { repeat: target === 'b2-cpu' ? 8000 : 1000, op: () => gateway.call(tool, {}), close: () => store.close() };
    }
    case 'b3':
    case 'b3-floor': {
      const store = openSqliteStore(scratch.path('b3.db'));
      const { lastCallId } = await writeB3Session(await store.acquire('p-b3', { owner: 'bench' }));
      if (target === 'b3') {
        return {
          repeat: 5,
          op: async () => inspectToolRecovery(await store.loadHistory('p-b3'), lastCallId),
          close: () => store.close(),
        };
      }
      const floor = openFloor(scratch.path('b3.db'));
      const read = floorRead(floor.db);
      return {
        repeat: 5,
        op: () => read('p-b3'),
        close: async () => { floor.db.close(); await store.close(); },
      };
    }
    case 'b6':
    case 'b6-restarted': {
      const rig = await openB6Rig(scratch.path('b6.db'), { steps: 50, perStep: 10 });
      // b6-restarted: each resume in a host just started (a store opened and the session taken over first, in the profile too).
      const op = target === 'b6' ? () => rig.resume() : async () => { await rig.restart(); await rig.resume(); };
      return { repeat: 20, op, close: () => rig.close() };
    }
    case 'pg': {
      // Jingwei on PostgreSQL (JINGWEI_PG_URL): where a call waits. Counts the driver's queries per call and the
      // time spent inside them (each is one round trip; COMMIT also waits for the WAL flush).
      const url = process.env.JINGWEI_PG_URL;
      if (!url) throw new Error('profile pg needs JINGWEI_PG_URL (node scripts/pg-test-cluster.mjs run -- node bench/profile.mjs pg)');
      const require = createRequire(join(ROOT, 'package.json'));
      const { Client } = require('pg');
      const original = Client.prototype.query;
      // A round trip is a wait on the server: a query sent while this client has none in flight starts one; queries
      // pipelined behind it (sent before it answered) ride on the same one.
      const stats = { queries: 0, trips: 0, ms: 0, commits: 0, commitMs: 0 };
      const inflight = new WeakMap();
      let counting = false;
      Client.prototype.query = function (config, ...rest) {
        const text = typeof config === 'string' ? config : config?.text ?? '';
        const t = process.hrtime.bigint();
        const result = original.call(this, config, ...rest);
        if (result && typeof result.then === 'function' && counting) {
          stats.queries++;
          const flight = inflight.get(this) ?? { pending: 0, since: t };
          if (flight.pending === 0) { stats.trips++; flight.since = t; }
          flight.pending++;
          inflight.set(this, flight);
          const done = () => {
            const now = process.hrtime.bigint();
            if (--flight.pending === 0) stats.ms += Number(now - flight.since) / 1e6;
            if (/^COMMIT$/.test(text)) { stats.commits++; stats.commitMs += Number(now - t) / 1e6; }
          };
          result.then(done, done);
        }
        return result;
      };
      const { openPostgresStore } = await import('../dist/postgres.js');
      const schema = `jw_profile_${process.pid}`;
      const store = await openPostgresStore(url, { schema, poolSize: 2 });
      const { gateway } = await openRig(store, benchRuntime(), { sessionId: 'p-pg' });
      return {
        repeat: 300,
        op: () => gateway.call(NOOP, {}),
        start: () => { counting = true; },
        report: (repeat, wall) =>
          `per call: ${(stats.trips / repeat).toFixed(1)} round trips (${(stats.queries / repeat).toFixed(1)} queries), ${(stats.ms / repeat).toFixed(2)} ms waiting on them ` +
          `(of which ${(stats.commits / repeat).toFixed(1)} explicit COMMITs, ${(stats.commitMs / repeat).toFixed(2)} ms; a statement sent on its own commits as it answers), ` +
          `${((wall - stats.ms) / repeat).toFixed(2)} ms outside queries, ${(wall / repeat).toFixed(2)} ms wall\n`,
        close: async () => {
          await store.close();
          const admin = new (require('pg').Pool)({ connectionString: url, max: 1 });
          await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
          await admin.end();
        },
      };
    }
    default:
      process.stderr.write('usage: node bench/profile.mjs b1|b2|b2-approval|b2-cpu|b3|b3-floor|b6|b6-restarted|pg [--out=DIR] [--top=N] [--files=N]\n');
      process.exit(2);
  }
}

/** Self time per function (ms), from the profile's samples and time deltas. */
function selfTimes(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i];
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000);
  }
  const rows = new Map();
  let total = 0;
  for (const [id, t] of self) {
    const { functionName, url, lineNumber } = byId.get(id).callFrame;
    const file = url ? relative(ROOT, url.replace(/^file:\/\//, '')) : '';
    const key = `${functionName || '(anonymous)'}\u0000${file}${file ? `:${lineNumber + 1}` : ''}`;
    rows.set(key, (rows.get(key) ?? 0) + t);
    total += t;
  }
  return { total, rows: [...rows].map(([k, t]) => ({ fn: k.split('\u0000')[0], where: k.split('\u0000')[1], ms: t })).sort((a, b) => b.ms - a.ms) };
}

/** The same self time, summed per file (native and V8 frames under their own names). */
function byFile(rows) {
  const files = new Map();
  for (const r of rows) {
    const file = r.where ? r.where.replace(/:\d+$/, '') : r.fn.startsWith('(') ? r.fn : `native: ${r.fn}`;
    files.set(file, (files.get(file) ?? 0) + r.ms);
  }
  return [...files].sort((a, b) => b[1] - a[1]);
}

const scratch = scratchDir(`profile-${target}`);
try {
  const prepared = await prepare(scratch);
  const { op, close, start, report } = prepared;
  for (let i = 0; i < warm; i++) await op(); // warm up outside the profile
  const repeat = repeatArg || prepared.repeat;
  start?.();
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < repeat; i++) await op();
  const wall = Number(process.hrtime.bigint() - t0) / 1e6;
  const { profile } = await session.post('Profiler.stop');
  session.disconnect();
  await close();
  if (out) {
    const file = join(out, `${target}.cpuprofile`);
    writeFileSync(file, JSON.stringify(profile));
    process.stderr.write(`wrote ${file}\n`);
  }
  const { total, rows } = selfTimes(profile);
  const pct = (ms) => `${((ms / total) * 100).toFixed(1)}%`;
  process.stdout.write(`${target}: ${repeat} operations, ${wall.toFixed(0)} ms wall (${(wall / repeat).toFixed(2)} ms each), ${total.toFixed(0)} ms sampled\n\n`);
  if (report) process.stdout.write(`${report(repeat, wall)}\n`);
  process.stdout.write('Self time by file:\n');
  for (const [file, ms] of byFile(rows).slice(0, files)) process.stdout.write(`  ${pct(ms).padStart(6)}  ${(ms / repeat).toFixed(3).padStart(9)} ms/op  ${file}\n`);
  process.stdout.write(`\nTop ${top} functions by self time:\n`);
  for (const r of rows.slice(0, top)) process.stdout.write(`  ${pct(r.ms).padStart(6)}  ${(r.ms / repeat).toFixed(3).padStart(9)} ms/op  ${r.fn}  ${r.where}\n`);
} finally {
  scratch.remove();
}
