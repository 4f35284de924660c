/**
 * What B1–B3 share: the library (imported from the root's dist/, built by `npm run bench` or `npm run build`),
 * the root's own better-sqlite3 (so the floor runs exactly the driver and SQLite build the library runs), scratch
 * directories, and the raw floor connection with the store's pragmas. Imports nothing from bench/node_modules.
 */
import { closeSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, freemem, loadavg, release, tmpdir, totalmem, type as osType } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import { percentile } from './stats.mjs';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const requireFromRoot = createRequire(join(ROOT, 'package.json'));

/** The root's better-sqlite3: the driver the library itself uses. */
export const Database = requireFromRoot('better-sqlite3');

export function scratchDir(label) {
  const base = process.env.BENCH_TMPDIR ?? tmpdir();
  const dir = mkdtempSync(join(base, `jingwei-bench-${label}-`));
  return { dir, path: (name) => join(dir, name), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The store's event table, column for column (src/store/sqlite/schema.ts). */
export const EVENTS_DDL = `CREATE TABLE IF NOT EXISTS jw_events (
  session_id TEXT NOT NULL, seq INTEGER NOT NULL, event_id TEXT NOT NULL, epoch INTEGER NOT NULL,
  body TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (session_id, seq)
) STRICT`;

/**
 * A raw better-sqlite3 connection with the same pragmas as openSqliteStore: WAL, synchronous=FULL,
 * foreign_keys=ON, trusted_schema=OFF, 5 s busy timeout, and on a new file the page size the store gives its new
 * journals (`pageSize`, the library's JOURNAL_PAGE_SIZE, passed by the callers that import the library; a file
 * that already exists keeps its pages). Writes go through `.immediate()` transactions, as the store's do.
 */
export function openFloor(path, { pageSize } = {}) {
  const db = new Database(path, { timeout: 5000 });
  if (pageSize !== undefined) db.pragma(`page_size = ${pageSize}`);
  const mode = db.pragma('journal_mode = WAL', { simple: true });
  if (mode !== 'wal') throw new Error(`floor: SQLite refused WAL (${mode})`);
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  db.pragma('trusted_schema = OFF');
  db.exec(EVENTS_DDL);
  const insert = db.prepare('INSERT INTO jw_events VALUES (?, ?, ?, ?, ?, ?)');
  return { db, insert };
}

export const FAKE_HASH = 'f'.repeat(64);

/**
 * The read floor of B3 and B6: the store's own SELECT of one session's rows on the floor's raw connection (the
 * columns the store's read selects: seq, event_id, epoch, body, hash), then JSON.parse of every body. Returns the
 * parsed bodies in seq order.
 */
export function floorRead(db) {
  const select = db.prepare('SELECT seq, event_id, epoch, body, hash FROM jw_events WHERE session_id = ? ORDER BY seq').raw(true);
  return (sessionId) => {
    const rows = select.all(sessionId);
    const out = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) out[i] = JSON.parse(rows[i][3]);
    return out;
  };
}

/**
 * The calibration the test plan asks for first: 300 appends of 1 KiB to a file, each followed by fdatasync.
 * One synced SQLite commit costs about one of these.
 */
export function calibrateFsync(count = 300) {
  const scratch = scratchDir('fsync');
  try {
    const fd = openSync(scratch.path('calibrate.bin'), 'w');
    const block = Buffer.alloc(1024, 0x61);
    const samples = new Float64Array(count);
    try {
      for (let i = 0; i < count; i++) {
        const t = process.hrtime.bigint();
        writeSync(fd, block);
        fdatasyncSync(fd);
        samples[i] = Number(process.hrtime.bigint() - t) / 1e6;
      }
    } finally {
      closeSync(fd);
    }
    const sorted = samples.sort();
    return { count, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99) };
  } finally {
    scratch.remove();
  }
}

function tryRun(file, args) {
  try {
    return execFileSync(file, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}

/** The machine, as the report prints it. */
export function machine() {
  const cpu = cpus();
  const db = new Database(':memory:');
  const sqliteVersion = db.prepare('select sqlite_version() as v').get().v;
  db.close();
  const base = process.env.BENCH_TMPDIR ?? tmpdir();
  const fs = tryRun('df', ['-T', '--output=fstype,source', base])?.split('\n')[1]?.trim().replace(/\s+/g, ' ');
  const driver = requireFromRoot('better-sqlite3/package.json').version;
  return {
    cpu: `${cpu.length} × ${cpu[0]?.model?.trim() ?? 'unknown CPU'}`,
    memory: `${(totalmem() / 2 ** 30).toFixed(0)} GiB (${(freemem() / 2 ** 30).toFixed(1)} GiB free)`,
    os: `${osType()} ${release()}`,
    node: process.version,
    sqlite: `SQLite ${sqliteVersion} (better-sqlite3 ${driver})`,
    scratch: `${base}${fs ? ` (${fs})` : ''}`,
    load: loadavg().map((l) => l.toFixed(2)).join(' '),
  };
}

/** 1-minute load average now, for before/after notes. */
export const load1 = () => loadavg()[0];

/** The number given as `--name=N` on the command line, or `fallback` without one. */
export function numberArg(name, fallback) {
  const given = process.argv.find((a) => a.startsWith(`--${name}=`));
  return Number(given === undefined ? fallback : given.slice(name.length + 3));
}
