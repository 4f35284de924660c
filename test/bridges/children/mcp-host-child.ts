/**
 * A host that connects to a stdio MCP server through the bridge and is then SIGKILLed by the test.
 * Arguments: `filesystem <root>` (the registry server, idle), `hang <log>` (the keyed fixture, a call in flight) or
 * `linger <log>` (the keyed fixture, idle, running on after its stdin closes).
 * Prints one JSON line `{"watch":pid,"group":pid,"server":pid}` once the server runs (and, for `hang`, once its body started).
 */
import { existsSync, readFileSync } from 'node:fs';
import { connectMcpServer } from '../../../src/mcp.js';
import { createMemoryStore } from '../../../src/store/memory.js';
import { createToolRuntime } from '../../../src/tool/runtime.js';
import { childrenOf, serverUnder, until } from '../fixtures/processes.js';
import { filesystemServer, keyedServer } from '../fixtures/registry-server.js';

const [mode, path] = process.argv.slice(2) as ['filesystem' | 'hang' | 'linger', string];
const connection = await connectMcpServer(mode === 'filesystem' ? filesystemServer(path) : keyedServer('conforming', path, undefined, mode === 'linger'));
const watch = connection.processId!;
if (mode === 'hang') {
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t');
  const gateway = createToolRuntime({ tools: connection.tools, grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  void gateway.call('hang', {});
  await until(() => existsSync(path) && readFileSync(path, 'utf8').includes('"hang"'), 'the hang body');
}
await until(() => serverUnder(watch) !== undefined, 'the server process');
process.stdout.write(JSON.stringify({ watch, group: childrenOf(watch)[0], server: serverUnder(watch) }) + '\n');
setInterval(() => undefined, 60_000);
