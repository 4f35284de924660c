#!/usr/bin/env node
/**
 * `npm test`: runs `node --test --test-concurrency=2` over the compiled tests (or the paths given as arguments), and
 * lists the failed tests once more at the end (scripts/test-failures-reporter.mjs).
 *
 * The PostgreSQL suites need a server. When JINGWEI_PG_URL is set it is used as is. Otherwise, if PostgreSQL is
 * installed, a throwaway cluster is started for this run (scripts/pg-test-cluster.mjs) and JINGWEI_PG_URL is set
 * for the test process; it is always stopped and removed afterwards, also on Ctrl-C. Without binaries the
 * PostgreSQL suites report themselves skipped, or fail when JINGWEI_PG_REQUIRED=1 (CI).
 */
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { findPgBin, startPgCluster } from './pg-test-cluster.mjs';

/**
 * Test files under a directory. Node 20's runner, given a directory, also runs every .js file below a `test`
 * directory, child-process helpers included (they fail without their arguments); so directories are expanded to
 * their *.test.js files here.
 */
function testFiles(target) {
  if (!statSync(target).isDirectory()) return [target];
  return readdirSync(target, { withFileTypes: true })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .flatMap((entry) => {
      const path = join(target, entry.name);
      if (entry.isDirectory()) return testFiles(path);
      return /\.test\.[cm]?js$/.test(entry.name) ? [path] : [];
    });
}

const targets = process.argv.slice(2);
const files = (targets.length > 0 ? targets : ['build-test/test/']).flatMap(testFiles);
// The usual reporter on stdout (spec on a terminal, TAP otherwise, as node picks by default), and a list of the
// failed tests on stderr once the run ends.
const reporters = [
  `--test-reporter=${process.stdout.isTTY ? 'spec' : 'tap'}`, '--test-reporter-destination=stdout',
  `--test-reporter=${new URL('./test-failures-reporter.mjs', import.meta.url).href}`, '--test-reporter-destination=stderr',
];
const args = ['--test', '--test-concurrency=2', ...reporters, ...files];
const log = (line) => process.stderr.write(`[test] ${line}\n`);
const env = { ...process.env };
const required = env.JINGWEI_PG_REQUIRED === '1';

let cluster;
let stopping = false;
const stopCluster = () => {
  if (cluster && !stopping) {
    stopping = true;
    log('stopping the throwaway PostgreSQL cluster');
    cluster.stop();
  }
};

let child;
let interrupted;
let starting = false;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    interrupted = signal;
    // The test run gets the signal (a terminal Ctrl-C reaches it too); the cluster is stopped once it has exited.
    if (child && child.exitCode === null) child.kill(signal);
    else if (!starting) {
      stopCluster();
      process.exit(130);
    }
    // While the cluster is starting: it is stopped as soon as it is up, and no tests run.
  });
}

if (env.JINGWEI_PG_URL) {
  log('PostgreSQL suites use JINGWEI_PG_URL');
} else {
  const bin = findPgBin();
  if (!bin) {
    const reason = 'no PostgreSQL binaries found (/usr/lib/postgresql/*/bin) and JINGWEI_PG_URL is not set';
    env.JINGWEI_PG_SKIP_REASON = reason;
    log(`${reason}: the PostgreSQL suites will ${required ? 'FAIL (JINGWEI_PG_REQUIRED=1)' : 'be skipped'}`);
  } else {
    const started = Date.now();
    starting = true;
    try {
      cluster = await startPgCluster({ bin, log });
      env.JINGWEI_PG_URL = cluster.url;
      log(`throwaway PostgreSQL cluster ready in ${Date.now() - started} ms`);
    } catch (error) {
      const reason = `the throwaway PostgreSQL cluster did not start: ${error instanceof Error ? error.message : String(error)}`;
      env.JINGWEI_PG_SKIP_REASON = reason.split('\n')[0];
      log(reason);
    } finally {
      starting = false;
    }
  }
}

let code = 1;
try {
  if (!interrupted) {
    child = spawn(process.execPath, args, { stdio: 'inherit', env });
    code = await new Promise((resolve) => {
      child.on('error', (error) => {
        log(`could not run the tests: ${error.message}`);
        resolve(1);
      });
      child.on('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 128 + (signal === 'SIGINT' ? 2 : 15) : 1)));
    });
  }
} finally {
  stopCluster();
}
process.exit(interrupted ? 130 : code);
