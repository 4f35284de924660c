#!/usr/bin/env node
/**
 * A throwaway PostgreSQL cluster for the tests: initdb into a fresh temporary directory, listen only on
 * 127.0.0.1 on a free port, fsync left on (the tests are about durability), create one database, hand back its
 * URL; stop and remove everything afterwards.
 *
 * As a module:  const cluster = await startPgCluster(); ... await cluster.stop();
 * From a shell: node scripts/pg-test-cluster.mjs run -- <command ...>   (JINGWEI_PG_URL set for the command)
 *               node scripts/pg-test-cluster.mjs start                  (prints the URL and the stop command)
 *               node scripts/pg-test-cluster.mjs stop <dir>
 *
 * PostgreSQL refuses to run as root, so when this process is root the server programs run as the `postgres` OS
 * user (runuser, else su) and the temporary directory is handed to that user. Binaries are taken from
 * $JINGWEI_PG_BIN, else the newest /usr/lib/postgresql/<version>/bin, else `pg_config --bindir`.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const DATABASE = 'jingwei_test';
const SUPERUSER = 'postgres';

/** The directory holding initdb, pg_ctl and psql, or undefined when PostgreSQL is not installed. */
export function findPgBin() {
  const fromEnv = process.env.JINGWEI_PG_BIN;
  if (fromEnv) return existsSync(join(fromEnv, 'initdb')) ? fromEnv : undefined;
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
      .sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a));
    if (versions.length > 0) return join(root, versions[0], 'bin');
  }
  try {
    const dir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    if (dir && existsSync(join(dir, 'initdb'))) return dir;
  } catch {
    // no pg_config on PATH
  }
  return undefined;
}

const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0;

/** Runs a server program, as the postgres OS user when we are root. Throws with its output on failure. */
function runAsServerUser(file, args, options = {}) {
  let command = file;
  let argv = args;
  if (isRoot()) {
    if (existsSync('/usr/sbin/runuser') || existsSync('/sbin/runuser') || existsSync('/usr/bin/runuser')) {
      command = 'runuser';
      argv = ['-u', SUPERUSER, '--', file, ...args];
    } else {
      command = 'su';
      argv = [SUPERUSER, '-s', '/bin/sh', '-c', [file, ...args].map(shellQuote).join(' ')];
    }
  }
  const result = spawnSync(command, argv, { encoding: 'utf8', cwd: options.cwd ?? '/', timeout: options.timeoutMs ?? 120_000 });
  if (result.error || result.status !== 0) {
    const detail = result.error ? result.error.message : `exit ${result.status}${result.signal ? ` (${result.signal})` : ''}`;
    throw new Error(`${file} ${args.join(' ')} failed: ${detail}\n${result.stdout ?? ''}${result.stderr ?? ''}`);
  }
  return result.stdout;
}

const shellQuote = (s) => `'${String(s).replace(/'/g, `'\\''`)}'`;

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function serverUserIds() {
  const uid = Number(execFileSync('id', ['-u', SUPERUSER], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', SUPERUSER], { encoding: 'utf8' }).trim());
  return { uid, gid };
}

/**
 * Starts a cluster and creates the test database. Returns { url, dir, bin, stop() }; stop() is idempotent and
 * removes the directory.
 */
export async function startPgCluster(options = {}) {
  const bin = options.bin ?? findPgBin();
  if (!bin) throw new Error('no PostgreSQL binaries found (looked at $JINGWEI_PG_BIN, /usr/lib/postgresql/*/bin, pg_config)');
  const log = options.log ?? (() => {});
  // As root the server runs as `postgres`, which must be able to reach the directory: /tmp always is.
  const base = process.env.JINGWEI_PG_TMPDIR ?? (isRoot() ? '/tmp' : tmpdir());
  const dir = mkdtempSync(join(base, 'jingwei-pg-'));
  const data = join(dir, 'data');
  let started = false;
  const stop = () => {
    if (started) {
      try {
        runAsServerUser(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', '-t', '30', 'stop'], { timeoutMs: 60_000 });
      } catch (error) {
        log(`pg_ctl stop failed: ${error.message}`);
      }
      started = false;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    if (isRoot()) {
      const { uid, gid } = serverUserIds();
      chownSync(dir, uid, gid);
    }
    runAsServerUser(join(bin, 'initdb'), ['-D', data, '-U', SUPERUSER, '--auth=trust', '-E', 'UTF8', '--locale=C']);
    let port;
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      const settings = [
        `-c listen_addresses=127.0.0.1`,
        `-c port=${port}`,
        `-c unix_socket_directories=${dir}`,
        `-c fsync=on`,
        `-c synchronous_commit=on`,
        `-c max_connections=100`,
      ].join(' ');
      try {
        runAsServerUser(join(bin, 'pg_ctl'), ['-D', data, '-l', join(dir, 'server.log'), '-o', settings, '-w', '-t', '60', 'start'], { timeoutMs: 90_000 });
        started = true;
        break;
      } catch (error) {
        // Someone may have taken the port between our probe and the server's bind: try another one.
        const serverLog = existsSync(join(dir, 'server.log')) ? readFileSync(join(dir, 'server.log'), 'utf8') : '';
        if (attempt >= 3) throw new Error(`${error.message}\n${serverLog}`);
        log(`PostgreSQL did not start on port ${port}, retrying`);
      }
    }
    runAsServerUser(join(bin, 'createdb'), ['-h', '127.0.0.1', '-p', String(port), '-U', SUPERUSER, DATABASE]);
    const url = `postgres://${SUPERUSER}@127.0.0.1:${port}/${DATABASE}`;
    log(`PostgreSQL ${bin} running at ${url} (data in ${data})`);
    return { url, dir, bin, port, stop };
  } catch (error) {
    stop();
    throw error;
  }
}

/** Stops a cluster started by `start` from another process, and removes its directory. */
export function stopPgCluster(dir, bin = findPgBin()) {
  const data = join(dir, 'data');
  if (bin && existsSync(join(data, 'postmaster.pid'))) {
    runAsServerUser(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', '-t', '30', 'stop'], { timeoutMs: 60_000 });
  }
  rmSync(dir, { recursive: true, force: true });
}

async function main(argv) {
  const [command, ...rest] = argv;
  const log = (line) => process.stderr.write(`[pg-test-cluster] ${line}\n`);
  if (command === 'start') {
    const cluster = await startPgCluster({ log });
    process.stdout.write(`JINGWEI_PG_URL=${cluster.url}\n`);
    process.stderr.write(`stop it with: node ${fileURLToPath(import.meta.url)} stop ${cluster.dir}\n`);
    return 0;
  }
  if (command === 'stop' && rest[0]) {
    stopPgCluster(rest[0]);
    return 0;
  }
  if (command === 'run') {
    const cmd = rest[0] === '--' ? rest.slice(1) : rest;
    if (cmd.length === 0) throw new Error('usage: run -- <command ...>');
    const cluster = await startPgCluster({ log });
    let stopped = false;
    const stopOnce = () => { if (!stopped) { stopped = true; cluster.stop(); } };
    try {
      const child = spawn(cmd[0], cmd.slice(1), { stdio: 'inherit', env: { ...process.env, JINGWEI_PG_URL: cluster.url } });
      for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
      const [code, signal] = await new Promise((resolve) => child.on('exit', (c, s) => resolve([c, s])));
      return code ?? (signal ? 128 + 2 : 1);
    } finally {
      stopOnce();
    }
  }
  process.stderr.write('usage: pg-test-cluster.mjs start | stop <dir> | run -- <command ...>\n');
  return 2;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error) => {
      process.stderr.write(`[pg-test-cluster] ${error.stack ?? error}\n`);
      process.exit(1);
    },
  );
}
