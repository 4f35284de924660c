#!/usr/bin/env node
/**
 * Regenerates the console's screenshots in docs/console/ (queue.png, timeline.png, call.png), shown in
 * docs/operator-guide.md. It builds the tests and runs the console's browser test (the same scenario, the same
 * Chromium setup: Debian's /usr/bin/chromium driven by playwright-core), which saves each page it checks when
 * JINGWEI_CONSOLE_SCREENSHOTS names a directory. Usage: node scripts/console-screenshots.mjs
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'docs', 'console');
mkdirSync(out, { recursive: true });
const run = (command, args, env = {}) => {
  const r = spawnSync(command, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
  if (r.status !== 0) process.exit(r.status ?? 1);
};
run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json']);
run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.test.json']);
run(process.execPath, ['--test', join(root, 'build-test', 'test', 'console', 'browser.test.js')], { JINGWEI_CONSOLE_SCREENSHOTS: out, CI: '1' });
process.stdout.write(`screenshots written to ${out}\n`);
