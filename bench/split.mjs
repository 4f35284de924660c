/**
 * Where a durable call's time goes on disk (B2): the call, the rows it touches written with raw SQL (B2's
 * diagnostic, attention row included) and its floor (the same bytes in the same two transactions), each measured
 * with synchronous=FULL, as the store runs, and with synchronous=OFF, the same writes without their fsyncs; and the
 * call on an in-memory database. Blocks of calls alternate between the variants (in a rotating order); per
 * variant the report gives the median over blocks of the p50 per call and of the CPU per call (the JS thread's,
 * and the other threads': V8's compiler and collector), and the WAL frames a call writes (counted once per variant
 * with automatic checkpoints held off).
 *
 *   node bench/split.mjs [--blocks=N] [--calls=N]      (run `npm run build` first)
 *
 * bench/split-pg.mjs does the same on PostgreSQL.
 *
 * A diagnostic, not a benchmark: to time the call without fsync it sets synchronous=OFF on the store's own
 * connection, reached through the store's private fields; nothing else ever does that.
 */
import { statSync } from 'node:fs';
import { openSqliteStore } from '../dist/sqlite.js';
import { JOURNAL_PAGE_SIZE } from '../dist/store/sqlite/schema.js';
import { floorCall, openRawShape, sampleBodies } from './jingwei/b2.mjs';
import { benchRuntime, NOOP, openRig } from './jingwei/rig.mjs';
import { numberArg, openFloor, scratchDir } from './lib/env.mjs';
import { alternateBlocks, fmtUs, median } from './lib/stats.mjs';

const BLOCKS = numberArg('blocks', 24);
const CALLS = numberArg('calls', 50);
const WARMUP = 1500;

/** The store's connection: a diagnostic's reach into private fields, checked so a renamed field fails loudly. */
function connectionOf(store) {
  const db = store.backend?.db;
  if (typeof db?.pragma !== 'function') throw new Error('bench/split.mjs: the SQLite store no longer keeps its connection at backend.db');
  return db;
}

const scratch = scratchDir('split');
const closers = [];
try {
  const groups = (await sampleBodies(scratch)).plain;
  const variants = [];
  const onDisk = (name, db, walPath, call) => {
    for (const sync of ['FULL', 'OFF']) variants.push({ name: `${name}, synchronous=${sync}`, db, walPath, sync, call });
  };
  {
    const store = openSqliteStore(scratch.path('jingwei.db'));
    closers.push(() => store.close());
    const { gateway } = await openRig(store, benchRuntime(), { sessionId: 'split' });
    onDisk('Jingwei call', connectionOf(store), scratch.path('jingwei.db-wal'), () => gateway.call(NOOP, {}));
  }
  {
    const { db, txns } = await openRawShape(scratch.path('rows.db'), groups);
    closers.push(() => db.close());
    onDisk('rows, raw SQL', db, scratch.path('rows.db-wal'), async () => { for (const t of txns) t.immediate(); });
  }
  {
    const { db, insert } = openFloor(scratch.path('floor.db'), { pageSize: JOURNAL_PAGE_SIZE });
    closers.push(() => db.close());
    const txns = floorCall(db, insert, groups, 'split-floor');
    onDisk('floor', db, scratch.path('floor.db-wal'), async () => { for (const t of txns) t.immediate(); });
  }
  {
    const store = openSqliteStore(':memory:');
    closers.push(() => store.close());
    const { gateway } = await openRig(store, benchRuntime(), { sessionId: 'split' });
    variants.push({ name: 'Jingwei call, in memory', db: null, walPath: null, sync: null, call: () => gateway.call(NOOP, {}) });
  }
  for (const v of variants) {
    if (v.db) v.db.pragma(`synchronous = ${v.sync}`);
    for (let i = 0; i < WARMUP / 2; i++) await v.call();
  }
  await alternateBlocks(variants, { blocks: BLOCKS, calls: CALLS, before: (v) => v.db?.pragma(`synchronous = ${v.sync}`) });
  for (const v of variants) {
    if (!v.db) continue;
    v.db.pragma(`synchronous = ${v.sync}`);
    v.db.pragma('wal_checkpoint(TRUNCATE)');
    v.db.pragma('wal_autocheckpoint = 0');
    const before = statSync(v.walPath).size;
    for (let i = 0; i < CALLS; i++) await v.call();
    v.frames = (statSync(v.walPath).size - before) / (JOURNAL_PAGE_SIZE + 24) / CALLS;
    v.db.pragma('wal_autocheckpoint = 1000');
  }
  process.stdout.write(`where a durable call's time goes: ${BLOCKS} blocks of ${CALLS} calls a variant, medians over blocks\n\n`);
  process.stdout.write('| variant | p50 a call | JS thread CPU a call | other threads CPU a call | WAL frames a call |\n|---|---:|---:|---:|---:|\n');
  for (const v of variants) {
    process.stdout.write(`| ${v.name} | ${fmtUs(median(v.p50))} | ${fmtUs(median(v.thread))} | ${fmtUs(median(v.others))} | ${v.frames === undefined ? '—' : v.frames.toFixed(1)} |\n`);
  }
  const p = (name) => median(variants.find((v) => v.name === name).p50);
  const fsyncOf = (name) => p(`${name}, synchronous=FULL`) - p(`${name}, synchronous=OFF`);
  process.stdout.write(
    `\nfsync share of a call (FULL − OFF): Jingwei ${fmtUs(fsyncOf('Jingwei call'))}, rows ${fmtUs(fsyncOf('rows, raw SQL'))}, floor ${fmtUs(fsyncOf('floor'))}\n` +
      `without fsync: Jingwei ${fmtUs(p('Jingwei call, synchronous=OFF'))}, rows ${fmtUs(p('rows, raw SQL, synchronous=OFF'))}, floor ${fmtUs(p('floor, synchronous=OFF'))}, ` +
      `Jingwei in memory ${fmtUs(p('Jingwei call, in memory'))}\n`,
  );
} finally {
  for (const close of closers) await close();
  scratch.remove();
}
