/**
 * B1–B3, B5, B6: Jingwei against its storage floor. Imports only the library (../../dist) and the root's better-sqlite3,
 * so the smoke test (test/bench/bench-smoke.test.ts) runs it without the bench/ package install.
 */
import { calibrateFsync } from '../lib/env.mjs';
import { runB1 } from './b1.mjs';
import { runB2 } from './b2.mjs';
import { runB3 } from './b3.mjs';
import { runB5 } from './b5.mjs';
import { runB6 } from './b6.mjs';

/**
 * Counts per mode. Full: at least 5 runs of every benchmark, more and shorter ones where one operation is a few
 * fsyncs (shorter runs pair the two sides more tightly in time on a noisy disk); quick: every path, in seconds.
 */
export const SETTINGS = {
  full: {
    calibrate: 300,
    b1: { runs: 11, n: 200, warmup: 10 },
    b2: { runs: 11, n: 100, warmup: 5, lanes: 16, concurrentN: 320 },
    b3: { runs: 5, n: 3, warmup: 1 },
    b5: { runs: 5, n: 50, warmup: 3 },
    b6: { runs: 5, n: 20, warmup: 3 },
  },
  quick: {
    calibrate: 20,
    b1: { runs: 2, n: 10, warmup: 2 },
    b2: { runs: 2, n: 6, warmup: 1, lanes: 4, concurrentN: 8 },
    b3: { runs: 2, n: 1, warmup: 0, events: 2000, calls: 10 },
    b5: { runs: 2, n: 4, warmup: 1, sessions: 50 },
    b6: { runs: 2, n: 1, warmup: 0, steps: 5, perStep: 2 },
  },
};

/** Runs the selected benchmarks of B1–B3, B5 and B6 and returns `{ calibration, results: [...] }`. */
export async function runJingweiSuite({ quick = false, only = ['B1', 'B2', 'B3', 'B5', 'B6'], log = () => {} } = {}) {
  const s = quick ? SETTINGS.quick : SETTINGS.full;
  const calibration = calibrateFsync(s.calibrate);
  log(`fdatasync calibration: p50 ${calibration.p50.toFixed(3)} ms, p99 ${calibration.p99.toFixed(3)} ms over ${calibration.count} 1 KiB appends`);
  const results = [];
  if (only.includes('B1')) {
    log('B1: journal append');
    results.push(await runB1({ ...s.b1, log }));
  }
  if (only.includes('B2')) {
    log('B2: durable tool call');
    results.push(...(await runB2({ ...s.b2, log })));
  }
  if (only.includes('B3')) {
    log('B3: recovery read');
    results.push(await runB3({ ...s.b3, log }));
  }
  if (only.includes('B5')) {
    log('B5: the attention queue');
    results.push(...(await runB5({ ...s.b5, log })));
  }
  if (only.includes('B6')) {
    log('B6: resuming a run, replay only');
    results.push(await runB6({ ...s.b6, log }));
  }
  return { calibration, results };
}
