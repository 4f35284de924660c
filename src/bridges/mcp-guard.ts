/**
 * The stdio MCP server's parent-death watch: `node mcp-guard.js <command> [args…]`. The bridge starts this instead
 * of the server; it runs the server in a process group of its own, sharing this process's stdin, stdout and stderr
 * (so the protocol never passes through here), and ends that whole group when:
 * - the host dies, however it dies (SIGKILL included): this process is re-parented, which the watch notices;
 * - this process is asked to stop (SIGTERM, SIGINT, SIGHUP: the SDK's `close()` sends SIGTERM).
 * The group gets SIGTERM, then SIGKILL after a short grace. When the server exits by itself, this process exits with
 * its status, and anything left in its group is killed.
 *
 * POSIX only (process groups); see docs/bridges-in-production.md.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';

/** How often the parent is checked. */
const WATCH_MS = 100;
/** Between SIGTERM and SIGKILL. */
const GRACE_MS = 500;

const [command, ...args] = process.argv.slice(2);
if (command === undefined) {
  process.stderr.write('mcp-guard: usage: mcp-guard <command> [args…]\n');
  process.exit(2);
}

const parent = process.ppid;
const server = spawn(command, args, { stdio: 'inherit', detached: true, env: process.env });
let stopping = false;

const signalGroup = (signal: NodeJS.Signals) => {
  if (server.pid === undefined) return;
  try {
    process.kill(-server.pid, signal);
  } catch {
    // the group is already gone
  }
};

const stop = () => {
  if (stopping) return;
  stopping = true;
  signalGroup('SIGTERM');
  setTimeout(() => signalGroup('SIGKILL'), GRACE_MS);
};

const watch = setInterval(() => {
  if (process.ppid !== parent) stop();
}, WATCH_MS);

for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, stop);

server.on('error', (error) => {
  process.stderr.write(`mcp-guard: cannot start ${command}: ${error.message}\n`);
  clearInterval(watch);
  process.exit(127);
});

server.on('exit', (code, signal) => {
  clearInterval(watch);
  signalGroup('SIGKILL');
  process.exit(code ?? (signal === null ? 1 : 128 + (constants.signals[signal] ?? 0)));
});
