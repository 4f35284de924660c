#!/usr/bin/env node
/**
 * `npm run bench` (from the repository root) runs this file, which
 *   1. installs the root's dependencies (`npm ci`) if they are missing, as on a fresh clone, and builds the
 *      library (`tsc -p tsconfig.json`); the benchmarks import it from dist/;
 *   2. installs the bench/ package (`npm ci --prefix bench`, its own lockfile) if B4 is selected and the peers are
 *      missing;
 *   3. starts a throwaway PostgreSQL (scripts/pg-test-cluster.mjs) for B4 unless JINGWEI_PG_URL is given;
 *   4. runs B1–B6, prints the table, and in full mode writes it into docs/benchmarks.md (between markers).
 *
 * Options (after `npm run bench --`):
 *   --quick            tiny counts (also BENCH_QUICK=1); writes nothing unless --write
 *   --only=B1,B3       run a subset (B1, B2, B3, B4, B5, B6)
 *   --no-peers         skip B4 (no install of bench/ needed)
 *   --write / --no-write   force or suppress writing docs/benchmarks.md
 *   --json=FILE        also write the raw results as JSON
 *   --render=FILE      only rewrite docs/benchmarks.md from a run saved with --json
 *   --no-build         use dist/ as it is (the smoke test does: `npm test` has just built it)
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { machine, ROOT } from './lib/env.mjs';
import { renderBlock, resultsTable, evaluateTargets, targetsTable, writeBlock } from './lib/report.mjs';

const BENCH = join(ROOT, 'bench');
const args = process.argv.slice(2);
const flag = (name) => args.includes(`--${name}`);
const option = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const quick = flag('quick') || process.env.BENCH_QUICK === '1';
let only = (option('only') ?? 'B1,B2,B3,B5,B6,B4').split(',').map((s) => s.trim().toUpperCase()).filter(Boolean);
if (flag('no-peers')) only = only.filter((b) => b !== 'B4');
const write = flag('write') || (!quick && !flag('no-write'));
const log = (line) => process.stderr.write(`[bench] ${line}\n`);
const skipped = [];

/** Runs npm with `argv` (the npm that runs this script, if any), output to the terminal. */
function npm(argv) {
  const npmCli = process.env.npm_execpath;
  const [cmd, full] = npmCli && /npm-cli\.js$/.test(npmCli) ? [process.execPath, [npmCli, ...argv]] : ['npm', argv];
  const result = spawnSync(cmd, full, { stdio: ['ignore', 'inherit', 'inherit'], cwd: ROOT });
  if (result.status !== 0) log(`npm ${argv.join(' ')} failed (${result.error?.message ?? `exit ${result.status}`})`);
  return result.status === 0;
}

const renderFrom = option('render');
if (renderFrom) {
  // Re-render docs/benchmarks.md from a saved --json run (after a change to the report's wording), measuring nothing.
  const saved = JSON.parse(readFileSync(renderFrom, 'utf8'));
  const path = join(ROOT, 'docs', 'benchmarks.md');
  writeBlock(path, renderBlock({ skipped: [], extras: {}, ...saved, started: new Date(saved.started), finished: new Date(saved.finished) }));
  log(`wrote ${path} from ${renderFrom}`);
  process.exit(0);
}

if (!flag('no-build')) {
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  if (!existsSync(tsc)) {
    log('the root dependencies are missing: npm ci');
    if (!npm(['ci', '--no-audit', '--no-fund'])) process.exit(2);
  }
  log('building the library: tsc -p tsconfig.json');
  const built = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json'], { stdio: ['ignore', 'inherit', 'inherit'], cwd: ROOT });
  if (built.status !== 0) process.exit(2);
}
if (!existsSync(join(ROOT, 'dist', 'index.js'))) {
  log('dist/ is missing: run without --no-build, or `npm run build` first');
  process.exit(2);
}

/** True when every dependency of bench/package.json resolves from bench/. */
function peersInstalled() {
  const pkg = JSON.parse(readFileSync(join(BENCH, 'package.json'), 'utf8'));
  const require = createRequire(join(BENCH, 'package.json'));
  return Object.keys(pkg.dependencies ?? {}).every((name) => {
    try {
      require.resolve(`${name}/package.json`);
      return true;
    } catch {
      return existsSync(join(BENCH, 'node_modules', name, 'package.json'));
    }
  });
}

function installPeers() {
  if (peersInstalled()) return true;
  log('installing the bench/ package: npm ci --prefix bench');
  return npm(['ci', '--prefix', BENCH, '--no-audit', '--no-fund']) && peersInstalled();
}

let cluster;
const stopCluster = () => {
  if (cluster) {
    const c = cluster;
    cluster = undefined;
    log('stopping the throwaway PostgreSQL cluster');
    c.stop();
  }
};
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    stopCluster();
    process.exit(130);
  });
}

const started = new Date();
const loadBefore = loadavg().map((l) => l.toFixed(2)).join(' ');
const extras = {};
const results = [];
let calibration;
let code = 0;
try {
  const jingwei = only.filter((b) => b !== 'B4');
  if (jingwei.length > 0) {
    const { runJingweiSuite } = await import('./jingwei/suite.mjs');
    const out = await runJingweiSuite({ quick, only: jingwei, log });
    calibration = out.calibration;
    results.push(...out.results);
  }
  if (only.includes('B4')) {
    if (!installPeers()) {
      skipped.push('B4 (the bench/ package could not be installed; see the log)');
      code = 1;
    } else {
      let pgUrl = process.env.JINGWEI_PG_URL;
      if (pgUrl) {
        extras.pg = 'JINGWEI_PG_URL (given)';
      } else {
        const { findPgBin, startPgCluster } = await import('../scripts/pg-test-cluster.mjs');
        const bin = findPgBin();
        if (!bin) throw new Error('B4 needs PostgreSQL: set JINGWEI_PG_URL or install the server (no /usr/lib/postgresql/*/bin)');
        cluster = await startPgCluster({ bin, log });
        pgUrl = cluster.url;
        const version = spawnSync(join(bin, 'postgres'), ['--version'], { encoding: 'utf8' }).stdout?.trim();
        extras.pg = `throwaway cluster on 127.0.0.1 (${version ?? bin}; fsync=on, synchronous_commit=on, data in ${cluster.dir.replace(/\/[^/]*$/, "")})`;
      }
      log('B4: the peers');
      const { runB4 } = await import('./peers/b4.mjs');
      const { SETTINGS } = await import('./peers/settings.mjs');
      results.push(await runB4({ ...(quick ? SETTINGS.quick : SETTINGS.full), pgUrl, log }));
    }
  }
} catch (error) {
  log(`failed: ${error?.stack ?? error}`);
  skipped.push(`the run stopped with an error: ${String(error?.message ?? error).split('\n')[0]}`);
  code = 1;
} finally {
  stopCluster();
}

const finished = new Date();
const loadAfter = loadavg().map((l) => l.toFixed(2)).join(' ');
const command = `npm run bench${quick ? ' -- --quick' : ''}${option('only') ? ` -- --only=${option('only')}` : ''}`;
process.stdout.write(`\n${resultsTable(results)}\n\n`);
if (quick) process.stdout.write('quick mode: tiny counts to show that every benchmark runs; these ratios are not measurements.\n\n');
const targets = evaluateTargets(results);
if (targets.length > 0) process.stdout.write(`${targetsTable(targets)}\n\n`);
process.stdout.write(`load average before: ${loadBefore}; after: ${loadAfter}\n`);

const run = { command, quick, started, finished, machine: machine(), loadBefore, loadAfter, calibration, results, skipped, extras };
const jsonPath = option('json');
if (jsonPath) writeFileSync(jsonPath, JSON.stringify(run, null, 2));
if (write && results.length > 0) {
  const path = join(ROOT, 'docs', 'benchmarks.md');
  writeBlock(path, renderBlock(run));
  log(`wrote ${path}`);
}
process.exit(code);
