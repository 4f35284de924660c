/**
 * Smoke test of `npm run bench`: its quick mode runs B1–B3 (Jingwei against the storage floor) end to end through
 * bench/run.mjs and reports numbers. It asserts that the benchmarks run and report finite figures, never a time:
 * timings on a shared CI machine prove nothing. B4 (the peers) needs the bench/ package install and PostgreSQL,
 * so it is left to `npm run bench`. Also runs bench/ab.mjs (two builds paired in one process) once per SQLite
 * target it has, on this build, and the split of a call's time (bench/split.mjs) once, briefly.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { adminPool, describePostgres } from '../support/postgres.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

interface Summary { n: number; p50: number; p99: number; mean: number; opsPerSec: number }
interface Spread { median: number; min: number; max: number }
interface Variant { name: string; label: string; against: string | null; n: number; runs: Summary[]; median: Summary; ratio: { p50: Spread; p99: Spread; time: Spread } | null }
interface Bench { id: string; runs: number; variants: Variant[] }

const finitePositive = (value: number, what: string) => assert.ok(Number.isFinite(value) && value > 0, `${what} is ${value}`);

describe('npm run bench -- --quick (B1–B3, B5, B6)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jingwei-bench-smoke-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('runs every benchmark of B1–B3, B5 and B6 and reports p50, p99, throughput and ratios', { timeout: 120_000 }, () => {
    const json = join(dir, 'results.json');
    const stdout = execFileSync(process.execPath, [join(root, 'bench', 'run.mjs'), '--quick', '--no-peers', '--no-write', '--no-build', `--json=${json}`], {
      encoding: 'utf8',
      env: { ...process.env, BENCH_TMPDIR: dir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const report = JSON.parse(readFileSync(json, 'utf8')) as { quick: boolean; calibration: { p50: number }; results: Bench[] };
    assert.equal(report.quick, true);
    finitePositive(report.calibration.p50, 'fdatasync calibration p50');
    assert.deepEqual(report.results.map((b) => b.id), ['B1', 'B2', 'B2-approval', 'B2-c16', 'B3', 'B5', 'B5-cli', 'B6']);
    for (const bench of report.results) {
      assert.ok(bench.variants.length >= 2, `${bench.id} compares Jingwei with a floor`);
      for (const v of bench.variants) {
        assert.equal(v.runs.length, bench.runs, `${v.name} measured in every run`);
        assert.ok(v.n > 0, `${v.name} timed some operations`);
        finitePositive(v.median.p50, `${v.name} p50`);
        finitePositive(v.median.p99, `${v.name} p99`);
        finitePositive(v.median.opsPerSec, `${v.name} ops/s`);
        assert.ok(v.median.p99 >= v.median.p50 || v.runs.length > 1, `${v.name}: p99 below p50`);
      }
      const measured = bench.variants.filter((v) => v.ratio !== null);
      assert.ok(measured.some((v) => v.name.includes('jingwei')), `${bench.id} measures Jingwei against a floor`);
      for (const v of measured) {
        assert.ok(bench.variants.some((x) => x.name === v.against), `${v.name} names a variant of the same benchmark`);
        for (const key of ['p50', 'p99', 'time'] as const) finitePositive(v.ratio![key].median, `${v.name} ratio ${key}`);
      }
    }
    // The printed table names every benchmark.
    for (const id of ['B1', 'B2', 'B2-approval', 'B2-c16', 'B3', 'B5', 'B5-cli', 'B6']) assert.match(stdout, new RegExp(`^\\| ${id} \\|`, 'm'));
  });

  // b6 resumes a run; b2 and b2-cpu make serial durable calls on disk and on an in-memory database, b2-approval calls that ask an approver.
  for (const target of ['b6', 'b2', 'b2-cpu', 'b2-approval']) {
    it(`bench/ab.mjs ${target} pairs two builds in one process (here this build with itself) and reports new ÷ old`, { timeout: 120_000 }, () => {
      const stdout = execFileSync(process.execPath, [join(root, 'bench', 'ab.mjs'), target, root, root, '--rounds=2'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      const match = new RegExp(`^${target}, 2 rounds(?: \\(50 calls\\))?: old ([\\d.]+) ms, new ([\\d.]+) ms; median of paired new ÷ old ([\\d.]+)$`, 'm').exec(stdout);
      assert.ok(match, stdout);
      for (const [i, what] of ['old median', 'new median', 'paired ratio'].entries()) finitePositive(Number(match[i + 1]), what);
    });
  }

  it('bench/split.mjs splits a durable call into fsync, rows and CPU: every variant reports its figures', { timeout: 120_000 }, () => {
    const stdout = execFileSync(process.execPath, [join(root, 'bench', 'split.mjs'), '--blocks=1', '--calls=5'], {
      encoding: 'utf8',
      env: { ...process.env, BENCH_TMPDIR: dir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const rows = [...stdout.matchAll(/^\| ([^|]+) \| (\d+) µs \| (\d+) µs \| (\d+) µs \| ([\d.]+|—) \|$/gm)];
    assert.deepEqual(rows.map((r) => r[1]), [
      'Jingwei call, synchronous=FULL', 'Jingwei call, synchronous=OFF', 'rows, raw SQL, synchronous=FULL', 'rows, raw SQL, synchronous=OFF',
      'floor, synchronous=FULL', 'floor, synchronous=OFF', 'Jingwei call, in memory',
    ], stdout);
    for (const r of rows) {
      finitePositive(Number(r[2]), `${r[1]} p50`);
      finitePositive(Number(r[3]), `${r[1]} JS thread CPU`);
      if (r[5] !== '—') finitePositive(Number(r[5]), `${r[1]} WAL frames`);
    }
    // Every call on disk writes WAL frames, and a Jingwei call more of them than its floor's same bytes.
    const frames = (name: string) => Number(rows.find((r) => r[1] === name)![5]);
    assert.ok(frames('Jingwei call, synchronous=FULL') > frames('floor, synchronous=FULL'), stdout);
  });
});

describePostgres('bench/split-pg.mjs', (url) => {
  it('splits a durable call on PostgreSQL into its rows and the rest, and drops the schemas it made', { timeout: 120_000 }, async () => {
    const stdout = execFileSync(process.execPath, [join(root, 'bench', 'split-pg.mjs'), '--blocks=1', '--calls=3'], {
      encoding: 'utf8',
      env: { ...process.env, JINGWEI_PG_URL: url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const rows = [...stdout.matchAll(/^\| ([^|]+) \| (\d+) µs \| (\d+) µs \| (\d+) µs \| (\d+ µs|—) \|$/gm)];
    assert.deepEqual(rows.map((r) => r[1]), ['Jingwei call', 'rows, raw SQL', 'floor'], stdout);
    for (const r of rows) {
      finitePositive(Number(r[2]), `${r[1]} p50`);
      finitePositive(Number(r[3]), `${r[1]} JS thread CPU`);
    }
    assert.match(stdout, /^rows ÷ floor [\d.]+, Jingwei ÷ floor [\d.]+, Jingwei ÷ rows [\d.]+$/m);
    const left = await adminPool(url).query("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'jw_split_%'");
    assert.deepEqual(left.rows, []);
  });
});
