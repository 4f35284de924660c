/**
 * No orphans: a stdio MCP server dies with its host. The host (a child process) is SIGKILLed, alone or with its
 * whole process group (the watch included); the server it started through the bridge, the group leader above it and
 * the watch are gone within 2 s: the registry filesystem server idle, and the fixture server with a call still
 * running in it.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { alive, goneWithin } from './fixtures/processes.js';
import { tempDir } from '../support/tmp.js';

const child = fileURLToPath(new URL('./children/mcp-host-child.js', import.meta.url));
const dir = tempDir('jingwei-mcp-orphans-');

async function startHost(args: string[], ownGroup = false): Promise<{ host: number; watch: number; group: number; server: number }> {
  const host = spawn(process.execPath, [child, ...args], { stdio: ['ignore', 'pipe', 'inherit'], detached: ownGroup });
  const line = await new Promise<string>((resolve, reject) => {
    let text = '';
    host.stdout.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (text.includes('\n')) resolve(text.split('\n')[0]!);
    });
    host.on('exit', (code) => reject(new Error(`the host exited early (${code})`)));
  });
  const pids = JSON.parse(line) as { watch: number; group: number; server: number };
  return { host: host.pid!, ...pids };
}

describe('a stdio MCP server never outlives its host', () => {
  for (const [name, args] of [
    ['the registry filesystem server, idle', () => ['filesystem', tempDir('jingwei-orphan-root-')]],
    ['the fixture server, with a call in flight', () => ['hang', join(dir, 'hang.jsonl')]],
    ['the fixture server, idle and running on after its stdin closes', () => ['linger', join(dir, 'linger.jsonl')]],
  ] as const) {
    it(`${name}: SIGKILL the host, the server is gone within 2 s`, async () => {
      const { host, watch, group, server } = await startHost(args());
      assert.ok(alive(server) && alive(group) && alive(watch));
      process.kill(host, 'SIGKILL');
      const took = await goneWithin([server, group, watch], 2_000);
      if (took === null) {
        for (const pid of [server, group, watch]) if (alive(pid)) process.kill(pid, 'SIGKILL');
      }
      assert.notEqual(took, null, 'the server outlived its host by more than 2 s');
      process.stderr.write(`# ${name}: server gone ${took} ms after the host was killed\n`);
    });

    it(`${name}: SIGKILL the host's whole process group (the watch with it), the server is gone within 2 s`, async () => {
      // What \`timeout -s KILL\`, \`kill -9 -PGID\` and many supervisors do: the host and the watch die at the same instant.
      const { host, watch, group, server } = await startHost(args(), true);
      assert.ok(alive(server) && alive(group) && alive(watch));
      process.kill(-host, 'SIGKILL');
      const took = await goneWithin([server, group, watch], 2_000);
      if (took === null) {
        for (const pid of [server, group, watch]) if (alive(pid)) process.kill(pid, 'SIGKILL');
      }
      assert.notEqual(took, null, 'the server outlived its host\'s process group by more than 2 s');
      process.stderr.write(`# ${name}: server gone ${took} ms after the host's group was killed\n`);
    });
  }
});
