#!/usr/bin/env node
/**
 * Two builds side by side in one process: the paired measurement behind "Optimisations made on the way" in
 * docs/benchmarks.md. On a shared machine two full runs of the same code can differ by as much as a code change;
 * alternating the two builds operation by operation in one process pairs them on the same machine state.
 *
 *   node bench/ab.mjs b3 OLD [NEW] [--rounds=N]   loadHistory + inspectToolRecovery on one 80,000-event file
 *   node bench/ab.mjs b6 OLD [NEW] [--rounds=N]   resumeAgent replaying the B6 run (each build its own run)
 *   node bench/ab.mjs b2 OLD [NEW] [--rounds=N]   a durable call on SQLite, 50 calls a round (each build its own
 *                                                 file); b2-cpu: the same on an in-memory database (the CPU path);
 *                                                 b2-approval: the call that asks an approver (three transactions)
 *   node bench/ab.mjs c16 OLD [NEW] [--rounds=N]  16 sessions on one SQLite store calling concurrently, 20 calls
 *                                                 each a round (each build its own file)
 *   node bench/ab.mjs pg OLD [NEW] [--rounds=N]   a durable call on PostgreSQL, 50 calls a round (each build its
 *                                                 own schema; needs JINGWEI_PG_URL, e.g. through
 *                                                 `node scripts/pg-test-cluster.mjs run -- node bench/ab.mjs pg OLD`)
 *
 * OLD and NEW are checkouts with dist/ built (NEW defaults to this one), e.g. a worktree of the parent commit:
 * `git worktree add --detach ../old HEAD~1 && cp -a node_modules ../old/ && (cd ../old && npx tsc -p tsconfig.json)`.
 * Prints each side's median and the median of the paired ratios new ÷ old (below 1: the new build is faster).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const [target, oldArg, newArg] = args;
const rounds = Number(process.argv.find((a) => a.startsWith('--rounds='))?.slice(9) ?? { b2: 40, 'b2-cpu': 40, 'b2-approval': 40, b3: 16, b6: 60, c16: 16, pg: 30 }[target]);
if (!['b2', 'b2-cpu', 'b2-approval', 'b3', 'b6', 'c16', 'pg'].includes(target) || !oldArg) {
  process.stderr.write('usage: node bench/ab.mjs b2|b2-cpu|b2-approval|b3|b6|c16|pg OLD [NEW] [--rounds=N]\n');
  process.exit(2);
}
if (target === 'pg' && !process.env.JINGWEI_PG_URL) {
  process.stderr.write('bench/ab.mjs pg needs JINGWEI_PG_URL (node scripts/pg-test-cluster.mjs run -- node bench/ab.mjs pg OLD)\n');
  process.exit(2);
}
/** Calls a round for b2 and pg, whose one call is a few ms at most: the round is the unit paired. */
const CALLS = 50;
/** Sessions, and calls a session makes in a round, for c16 (B2 with 16 sessions). */
const LANES = 16;
const LANE_CALLS = 20;
const roots = { old: resolve(oldArg), new: resolve(newArg ?? fileURLToPath(new URL('..', import.meta.url))) };
const scratch = mkdtempSync(join(tmpdir(), `jingwei-ab-${target}-`));
const closers = [];

/**
 * One operation per build: B3 reads one file written once by the new build; B6 gives each build its own run; c16
 * gives each build its own file and 16 sessions making 20 calls each; b2 and b2-approval give each build its own
 * file (b2-cpu its own in-memory database), pg its own schema (dropped at the end), and both make 50 calls an operation.
 */
async function sides() {
  const side = {};
  if (target === 'b3') {
    const path = join(scratch, 'b3.db');
    const { writeB3Session } = await import(`${roots.new}/bench/jingwei/b3.mjs`);
    const writer = (await import(`${roots.new}/dist/sqlite.js`)).openSqliteStore(path);
    const { lastCallId } = await writeB3Session(await writer.acquire('ab-b3', { owner: 'bench' }));
    await writer.close();
    for (const [name, root] of Object.entries(roots)) {
      const store = (await import(`${root}/dist/sqlite.js`)).openSqliteStore(path);
      const { inspectToolRecovery } = await import(`${root}/dist/index.js`);
      closers.push(() => store.close());
      side[name] = async () => inspectToolRecovery(await store.loadHistory('ab-b3'), lastCallId);
    }
  } else if (target === 'b6') {
    for (const [name, root] of Object.entries(roots)) {
      const rig = await (await import(`${root}/bench/jingwei/b6.mjs`)).openB6Rig(join(scratch, `b6-${name}.db`), { steps: 50, perStep: 10 });
      closers.push(() => rig.close());
      side[name] = rig.resume;
    }
  } else if (target === 'c16') {
    for (const [name, root] of Object.entries(roots)) {
      const store = (await import(`${root}/dist/sqlite.js`)).openSqliteStore(join(scratch, `c16-${name}.db`));
      closers.push(() => store.close());
      const { benchRuntime, NOOP, openRig } = await import(`${root}/bench/jingwei/rig.mjs`);
      const runtime = benchRuntime();
      const gateways = [];
      for (let k = 0; k < LANES; k++) gateways.push((await openRig(store, runtime, { sessionId: `ab-c16-${k}`, owner: `host-${k}` })).gateway);
      side[name] = () => Promise.all(gateways.map(async (gateway) => {
        for (let i = 0; i < LANE_CALLS; i++) await gateway.call(NOOP, {});
      }));
    }
  } else if (target.startsWith('b2')) {
    for (const [name, root] of Object.entries(roots)) {
      const store = (await import(`${root}/dist/sqlite.js`)).openSqliteStore(target === 'b2-cpu' ? ':memory:' : join(scratch, `b2-${name}.db`));
      closers.push(() => store.close());
      const { benchRuntime, NOOP, NOOP_APPROVED, openRig } = await import(`${root}/bench/jingwei/rig.mjs`);
      const { gateway } = await openRig(store, benchRuntime(), { sessionId: 'ab-b2' });
      const tool = target === 'b2-approval' ? NOOP_APPROVED : NOOP;
      side[name] = async () => {
        for (let i = 0; i < CALLS; i++) await gateway.call(tool, {});
      };
    }
  } else {
    for (const [name, root] of Object.entries(roots)) {
      const { openPostgresStore } = await import(`${root}/dist/postgres.js`);
      const { benchRuntime, NOOP, openRig } = await import(`${root}/bench/jingwei/rig.mjs`);
      const schema = `jw_ab_${process.pid}_${name}`;
      const store = await openPostgresStore(process.env.JINGWEI_PG_URL, { schema, poolSize: 2 });
      closers.push(async () => {
        await store.close();
        const { default: pg } = await import(`${root}/node_modules/pg/lib/index.js`);
        const admin = new pg.Client({ connectionString: process.env.JINGWEI_PG_URL });
        await admin.connect();
        await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
        await admin.end();
      });
      const { gateway } = await openRig(store, benchRuntime(), { sessionId: 'ab-pg' });
      side[name] = async () => {
        for (let i = 0; i < CALLS; i++) await gateway.call(NOOP, {});
      };
    }
  }
  return side;
}

try {
  const side = await sides();
  for (let i = 0; i < 3; i++) for (const name of ['old', 'new']) await side[name]();
  const times = { old: [], new: [] };
  for (let i = 0; i < rounds; i++) {
    for (const name of i % 2 ? ['old', 'new'] : ['new', 'old']) {
      const t0 = performance.now();
      await side[name]();
      times[name].push(performance.now() - t0);
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const ratio = median(times.new.map((t, i) => t / times.old[i]));
  const unit = target === 'pg' || target.startsWith('b2') ? ` (${CALLS} calls)` : target === 'c16' ? ` (${LANES} sessions × ${LANE_CALLS} calls)` : '';
  process.stdout.write(`${target}, ${rounds} rounds${unit}: old ${median(times.old).toFixed(1)} ms, new ${median(times.new).toFixed(1)} ms; ` +
    `median of paired new ÷ old ${ratio.toFixed(3)}\n  old: ${roots.old}\n  new: ${roots.new}\n`);
} finally {
  for (const close of closers) await close();
  rmSync(scratch, { recursive: true, force: true });
}
