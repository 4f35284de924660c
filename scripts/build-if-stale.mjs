#!/usr/bin/env node
/**
 * `npm start` runs this first: it builds dist/ when there is none (a fresh `npm ci` builds nothing: the package has
 * no install script, so installing it never runs one) and rebuilds it only when a source file or a tsconfig is newer
 * than the last build, so a second start does not pay for the compiler.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const stamp = join(root, 'dist', '.tsbuildinfo');

function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

let built = 0;
try {
  built = statSync(stamp).mtimeMs;
} catch {
  built = 0;
}
const sources = Math.max(newest(join(root, 'src')), ...['tsconfig.json', 'tsconfig.base.json', 'package.json'].map((f) => statSync(join(root, f)).mtimeMs));
if (sources > built) {
  process.stderr.write(built === 0 ? 'building dist/ (first start: a few seconds)\n' : 'building dist/ (sources changed since the last build)\n');
  execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.json')], { stdio: 'inherit' });
  // An incremental build that finds nothing to emit leaves its build info untouched: mark this check as done.
  const now = new Date();
  utimesSync(stamp, now, now);
}
