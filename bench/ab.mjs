#!/usr/bin/env node
/**
 * Two builds side by side in one process: the paired measurement behind "Optimisations made on the way" in
 * docs/benchmarks.md. On a shared machine two full runs of the same code can differ by as much as a code change;
 * alternating the two builds operation by operation in one process pairs them on the same machine state.
 *
 *   node bench/ab.mjs b3 OLD [NEW] [--rounds=N]   loadHistory + inspectToolRecovery on one 80,000-event file
 *   node bench/ab.mjs b6 OLD [NEW] [--rounds=N]   resumeAgent replaying the B6 run (each build its own run)
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
const rounds = Number(process.argv.find((a) => a.startsWith('--rounds='))?.slice(9) ?? (target === 'b3' ? 16 : 60));
if ((target !== 'b3' && target !== 'b6') || !oldArg) {
  process.stderr.write('usage: node bench/ab.mjs b3|b6 OLD [NEW] [--rounds=N]\n');
  process.exit(2);
}
const roots = { old: resolve(oldArg), new: resolve(newArg ?? fileURLToPath(new URL('..', import.meta.url))) };
const scratch = mkdtempSync(join(tmpdir(), `jingwei-ab-${target}-`));
const closers = [];

/** One operation per build: B3 reads one file written once by the new build; B6 gives each build its own run. */
async function sides() {
  const side = {};
  if (target === 'b3') {
    const path = join(scratch, 'b3.db');
    const { B3_EVENTS, sessionDrafts } = await import(`${roots.new}/bench/jingwei/b3.mjs`);
    const { LIMITS } = await import(`${roots.new}/dist/index.js`);
    const { commitAs } = await import(`${roots.new}/dist/store/owner-commit.js`);
    const { openSqliteStore } = await import(`${roots.new}/dist/sqlite.js`);
    const { drafts, lastCallId } = sessionDrafts(B3_EVENTS, 400, Math.floor(LIMITS.maxHistoryBytes - 64 * 1024), 'ab-b3');
    const writer = openSqliteStore(path);
    const owner = await writer.acquire('ab-b3', { owner: 'bench' });
    for (let i = 0; i < drafts.length; i += 1000) await commitAs(owner, { events: drafts.slice(i, i + 1000) });
    await writer.close();
    for (const [name, root] of Object.entries(roots)) {
      const store = (await import(`${root}/dist/sqlite.js`)).openSqliteStore(path);
      const { inspectToolRecovery } = await import(`${root}/dist/index.js`);
      closers.push(() => store.close());
      side[name] = async () => inspectToolRecovery(await store.loadHistory('ab-b3'), lastCallId);
    }
  } else {
    for (const [name, root] of Object.entries(roots)) {
      const rig = await (await import(`${root}/bench/jingwei/b6.mjs`)).openB6Rig(join(scratch, `b6-${name}.db`), { steps: 50, perStep: 10 });
      closers.push(() => rig.close());
      side[name] = rig.resume;
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
  process.stdout.write(`${target}, ${rounds} rounds: old ${median(times.old).toFixed(1)} ms, new ${median(times.new).toFixed(1)} ms; ` +
    `median of paired new ÷ old ${ratio.toFixed(3)}\n  old: ${roots.old}\n  new: ${roots.new}\n`);
} finally {
  for (const close of closers) await close();
  rmSync(scratch, { recursive: true, force: true });
}
