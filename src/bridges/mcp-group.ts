/**
 * The stdio MCP server's process group: `node mcp-group.js <command> [args…]`, started by the parent-death watch
 * (bridges/mcp-guard.ts) as the leader of a process group of its own. It starts the server in that group, sharing
 * its stdin, stdout and stderr (the protocol never passes through here), and ends the whole group when the watch
 * that started it is gone, however it went: a kill of the host's process group (`kill -9 -PGID`, `timeout`, many
 * supervisors) takes the host and the watch at once, and only a process outside that group can still act. The group
 * gets SIGTERM, then SIGKILL after a short grace. When the server exits by itself, this process exits with its status
 * and the watch kills whatever is left in the group.
 *
 * POSIX only (process groups); see docs/bridges-in-production.md.
 */
import { spawn } from 'node:child_process';
import { exitLike, groupStopper, startFailed, stopWhenOrphaned } from './mcp-guard-common.js';

const [command, ...args] = process.argv.slice(2);
if (command === undefined) {
  process.stderr.write('mcp-group: usage: mcp-group <command> [args…]\n');
  process.exit(2);
}

const server = spawn(command, args, { stdio: 'inherit', env: process.env });
// The group's SIGTERM reaches this process too: it stays to send the SIGKILL that ends the group, itself included.
const { stop } = groupStopper(() => process.pid);
const watch = stopWhenOrphaned(stop);

server.on('error', (error) => {
  clearInterval(watch);
  startFailed('mcp-group', command, error);
});

server.on('exit', (code, signal) => {
  clearInterval(watch);
  exitLike(code, signal);
});
