/**
 * The timing method shared by every benchmark (no dependencies, so B1–B3 run without the bench/ package install).
 *
 * A benchmark is a set of variants, each compared against a reference variant (its floor, or for B4 Jingwei on
 * the same engine). One *run* prepares and measures every variant once, in alternating order (A B / B A / ...)
 * so slow drift of the machine hits both sides alike; each variant's per-operation latencies give that run's p50,
 * p99, mean and throughput, and each ratio is taken between two variants *of the same run*. The report gives the
 * median over runs of every figure and of every ratio, plus the spread of the ratio (min–max over runs).
 */

import { readFileSync } from 'node:fs';

const now = () => process.hrtime.bigint();
const ms = (ns) => Number(ns) / 1e6;

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil(p * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export function median(values) {
  const xs = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (xs.length === 0) return Number.NaN;
  const mid = xs.length >> 1;
  return xs.length % 2 === 1 ? xs[mid] : (xs[mid - 1] + xs[mid]) / 2;
}

/** One run of one variant: per-operation latencies (ms) and the wall time of all of them. */
export function summarize(samples, wallMs) {
  const sorted = Float64Array.from(samples).sort();
  let sum = 0;
  for (const s of sorted) sum += s;
  return {
    n: sorted.length,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    mean: sorted.length > 0 ? sum / sorted.length : Number.NaN,
    opsPerSec: wallMs > 0 ? sorted.length / (wallMs / 1000) : Number.NaN,
  };
}

/** Runs `op(i)` `n` times one after another (after `warmup` untimed calls) and times each call. */
export async function timeSerial(op, { n, warmup = 0 }) {
  for (let i = 0; i < warmup; i++) await op(-1 - i);
  const samples = new Float64Array(n);
  const start = now();
  for (let i = 0; i < n; i++) {
    const t = now();
    await op(i);
    samples[i] = ms(now() - t);
  }
  return { samples, wallMs: ms(now() - start) };
}

/**
 * `lanes` concurrent loops, lane k running `op(k, i)` one after another, `n` operations in all (split evenly).
 * Each operation's latency includes its wait behind the other lanes; throughput is n over the wall time.
 */
export async function timeConcurrent(op, { n, lanes, warmup = 0 }) {
  const per = Math.max(1, Math.ceil(n / lanes));
  if (warmup > 0) await Promise.all(Array.from({ length: lanes }, async (_, k) => { for (let i = 0; i < warmup; i++) await op(k, -1 - i); }));
  const samples = [];
  const start = now();
  await Promise.all(
    Array.from({ length: lanes }, async (_, k) => {
      for (let i = 0; i < per; i++) {
        const t = now();
        await op(k, i);
        samples.push(ms(now() - t));
      }
    }),
  );
  return { samples: Float64Array.from(samples), wallMs: ms(now() - start) };
}

/**
 * Measures `variants` over `runs` runs. Each variant: `{ name, label, against?, prepare(run) -> { measure() ->
 * {samples, wallMs, extra?}, close() } }`. `against` names the reference variant of the same run for the ratios.
 * Returns `{ runs, variants: [{ name, label, against, runs: [summary], median: {...}, ratio: {...} }] }`.
 */
export async function compare({ runs, variants, log = () => {} }) {
  const perRun = [];
  for (let r = 0; r < runs; r++) {
    const order = r % 2 === 0 ? variants : [...variants].reverse();
    const results = {};
    for (const v of order) {
      const instance = await v.prepare(r);
      try {
        const m = await instance.measure();
        results[v.name] = { ...summarize(m.samples, m.wallMs), ...(m.extra ? { extra: m.extra } : {}) };
      } finally {
        await instance.close?.();
      }
      log(`  run ${r + 1}/${runs} ${v.name}: p50 ${fmtMs(results[v.name].p50)} p99 ${fmtMs(results[v.name].p99)} ${fmtRate(results[v.name].opsPerSec)}/s`);
    }
    perRun.push(results);
  }
  return {
    runs,
    variants: variants.map((v) => {
      const mine = perRun.map((r) => r[v.name]);
      const med = (key) => median(mine.map((s) => s[key]));
      const out = {
        name: v.name,
        label: v.label ?? v.name,
        against: v.against ?? null,
        n: mine[0]?.n ?? 0,
        runs: mine,
        median: { p50: med('p50'), p99: med('p99'), mean: med('mean'), opsPerSec: med('opsPerSec') },
        ratio: null,
      };
      if (v.extra) out.extraKeys = v.extra;
      if (v.against) {
        const base = perRun.map((r) => r[v.against]);
        const series = (f) => mine.map((s, i) => f(s, base[i]));
        const spread = (xs) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs) });
        out.ratio = {
          p50: spread(series((s, b) => s.p50 / b.p50)),
          p99: spread(series((s, b) => s.p99 / b.p99)),
          // Time per operation: the reference's throughput over this variant's.
          time: spread(series((s, b) => b.opsPerSec / s.opsPerSec)),
        };
      }
      return out;
    }),
  };
}

export function fmtMs(value) {
  if (!Number.isFinite(value)) return 'n/a';
  if (value >= 100) return `${value.toFixed(0)} ms`;
  if (value >= 10) return `${value.toFixed(1)} ms`;
  if (value >= 1) return `${value.toFixed(2)} ms`;
  return `${(value * 1000).toFixed(0)} µs`;
}

export function fmtRate(value) {
  if (!Number.isFinite(value)) return 'n/a';
  if (value >= 100) return value.toFixed(0);
  if (value >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

/** Whole µs in one unit, so the columns of a diagnostic's table compare ('—' where there is no figure). */
export function fmtUs(value) {
  return Number.isFinite(value) ? `${Math.round(value)} µs` : '—';
}

export function fmtRatio(value) {
  return Number.isFinite(value) ? `${value.toFixed(2)}×` : 'n/a';
}

const PAUSE = new Int32Array(new SharedArrayBuffer(4));

/**
 * The calling thread's CPU time in ns (Linux: /proc/thread-self/schedstat, user and kernel time alike), or null
 * where the kernel does not report it. `process.cpuUsage` counts every thread of the process, V8's background
 * compiler and garbage collector among them; this counts the thread that runs the calls. The kernel brings a
 * running thread's figure up to date only when the thread is switched out or a tick lands, so the thread first
 * sleeps for 20 µs.
 */
function threadCpuNs() {
  Atomics.wait(PAUSE, 0, 0, 0.02);
  try {
    return Number(readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ')[0]);
  } catch {
    return null;
  }
}

/**
 * Diagnostics' loop (bench/split.mjs, bench/split-pg.mjs): `blocks` blocks of `calls` serial calls of each variant,
 * the variants in a rotating order from block to block; `before(v)` runs untimed before each block. Adds to each
 * variant its block p50s in µs (`p50`), and its CPU per call in µs: the JS thread's (`thread`, NaN where the kernel
 * does not report it) and the rest of the process's (`others`: V8's compiler and collector threads, the thread pool).
 * With `probe` (async, a CPU counter in ns outside this process, or null), read untimed before and after each block,
 * also `probed`: its growth per call in µs (NaN when it gave null).
 */
export async function alternateBlocks(variants, { blocks, calls, before = () => {}, probe = async () => null }) {
  for (const v of variants) Object.assign(v, { p50: [], thread: [], others: [], probed: [] });
  for (let b = 0; b < blocks; b++) {
    for (let k = 0; k < variants.length; k++) {
      const v = variants[(b + k) % variants.length];
      before(v);
      const probed = await probe();
      const latencies = new Float64Array(calls);
      const cpu = process.cpuUsage();
      const thread = threadCpuNs();
      for (let i = 0; i < calls; i++) {
        const t = now();
        await v.call();
        latencies[i] = Number(now() - t) / 1e3;
      }
      const threadUs = thread === null ? Number.NaN : (threadCpuNs() - thread) / 1e3;
      const used = process.cpuUsage(cpu);
      const probedAfter = await probe();
      v.probed.push(probed === null || probedAfter === null ? Number.NaN : (probedAfter - probed) / 1e3 / calls);
      latencies.sort();
      v.p50.push(latencies[calls >> 1]);
      v.thread.push(threadUs / calls);
      v.others.push(Math.max(0, used.user + used.system - threadUs) / calls);
    }
  }
}
