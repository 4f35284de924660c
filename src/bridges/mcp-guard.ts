/**
 * The stdio MCP server's parent-death watch: `node mcp-guard.js <command> [args…]`. The bridge starts this instead
 * of the server. It starts bridges/mcp-group.js as the leader of a process group of its own, which starts the
 * server in that group; all three share this process's stdin, stdout and stderr (the protocol never passes through
 * here). It ends that whole group when:
 * - the host dies, however it dies (SIGKILL included): this process is re-parented, which the watch notices;
 * - this process is asked to stop (SIGTERM, SIGINT, SIGHUP: the SDK's `close()` sends SIGTERM).
 * A kill of the host's whole process group takes this process with the host; the group's leader then notices that
 * its watch is gone and ends the group itself. The group gets SIGTERM, then SIGKILL after a short grace. When the
 * server exits by itself, this process exits with its status, and anything left in its group is killed.
 *
 * POSIX only (process groups); see docs/bridges-in-production.md.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { exitLike, groupStopper, startFailed, stopWhenOrphaned } from './mcp-guard-common.js';

const GROUP_SCRIPT = fileURLToPath(new URL('./mcp-group.js', import.meta.url));

const [command, ...args] = process.argv.slice(2);
if (command === undefined) {
  process.stderr.write('mcp-guard: usage: mcp-guard <command> [args…]\n');
  process.exit(2);
}

const group = spawn(process.execPath, [GROUP_SCRIPT, command, ...args], { stdio: 'inherit', detached: true, env: process.env });
const { signalGroup, stop } = groupStopper(() => group.pid);
const watch = stopWhenOrphaned(stop);

group.on('error', (error) => {
  clearInterval(watch);
  startFailed('mcp-guard', process.execPath, error);
});

group.on('exit', (code, signal) => {
  clearInterval(watch);
  signalGroup('SIGKILL');
  exitLike(code, signal);
});
