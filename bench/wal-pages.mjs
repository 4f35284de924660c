/**
 * Which pages a durable call's commits write to SQLite's log, by the B-tree each page belongs to: after 300 untimed
 * calls, the log emptied and automatic checkpoints held off, the WAL of the next `--calls` calls (100), each frame
 * named from SQLite's `dbstat` table. Prints the pages a call writes per B-tree (mean over the calls) and the pages
 * of the last call's commits one by one. A diagnostic, not a benchmark: it counts pages, it times nothing.
 *
 *   node bench/wal-pages.mjs [noop | noop_approved] [--calls=N]      (run `npm run build` first)
 *
 * Like bench/split.mjs it reaches the store's connection through the store's private fields.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { openSqliteStore } from '../dist/sqlite.js';
import { JOURNAL_PAGE_SIZE } from '../dist/store/sqlite/schema.js';
import { benchRuntime, NOOP, NOOP_APPROVED, openRig } from './jingwei/rig.mjs';
import { numberArg, scratchDir } from './lib/env.mjs';

const Database = createRequire(import.meta.url)('better-sqlite3');
const tool = process.argv.slice(2).find((a) => !a.startsWith('--')) ?? NOOP;
const CALLS = numberArg('calls', 100);
if (![NOOP, NOOP_APPROVED].includes(tool)) {
  process.stderr.write(`usage: node bench/wal-pages.mjs [${NOOP} | ${NOOP_APPROVED}]\n`);
  process.exit(2);
}
/** The WAL's header and each frame's header, in bytes (sqlite.org/fileformat2.html#walformat). */
const WAL_HEADER = 32;
const FRAME_HEADER = 24;

const scratch = scratchDir('wal-pages');
const path = scratch.path('journal.db');
const store = openSqliteStore(path);
try {
  const { gateway } = await openRig(store, benchRuntime(), { sessionId: 'wal-pages' });
  for (let i = 0; i < 300; i++) await gateway.call(tool, {});
  const db = store.backend?.db;
  if (typeof db?.pragma !== 'function') throw new Error('bench/wal-pages.mjs: the SQLite store no longer keeps its connection at backend.db');
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.pragma('wal_autocheckpoint = 0');
  for (let i = 0; i < CALLS; i++) await gateway.call(tool, {});
  const wal = readFileSync(`${path}-wal`);
  const reader = new Database(path, { readonly: true });
  const pageOwner = new Map(reader.prepare('SELECT name, pageno, pagetype FROM dbstat').all().map((r) => [r.pageno, `${r.name} (${r.pagetype})`]));
  reader.close();
  const perTree = new Map();
  const commits = [];
  let commit = [];
  for (let at = WAL_HEADER; at + FRAME_HEADER + JOURNAL_PAGE_SIZE <= wal.length; at += FRAME_HEADER + JOURNAL_PAGE_SIZE) {
    const page = wal.readUInt32BE(at);
    const owner = pageOwner.get(page) ?? `page ${page}`;
    const tree = owner.replace(/ \(.*\)$/, '');
    perTree.set(tree, (perTree.get(tree) ?? 0) + 1);
    commit.push(owner);
    if (wal.readUInt32BE(at + 4) !== 0) {
      commits.push(commit);
      commit = [];
    }
  }
  const total = [...perTree.values()].reduce((a, b) => a + b, 0);
  const perCall = commits.length / CALLS;
  process.stdout.write(`${tool}: ${CALLS} calls, ${commits.length} commits (${perCall} a call), ${(total / CALLS).toFixed(1)} pages a call\n`);
  for (const [tree, n] of [...perTree].sort((a, b) => b[1] - a[1])) process.stdout.write(`  ${(n / CALLS).toFixed(2).padStart(6)}  ${tree}\n`);
  process.stdout.write('the last call, commit by commit:\n');
  for (const [i, pages] of commits.slice(-perCall).entries()) process.stdout.write(`  commit ${i + 1}: ${pages.join(', ')}\n`);
} finally {
  await store.close();
  scratch.remove();
}
