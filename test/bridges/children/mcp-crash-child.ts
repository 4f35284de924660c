/**
 * Imports the fixture MCP server's tools (trusted or not), calls lookup_weather through a gateway on SQLite, and
 * SIGKILLs itself at `started:after`: the call and its start marker are durable, the MCP request was never sent.
 * Arguments: journal path, session id, `trusted` | `untrusted`, server log path.
 */
import { setFaultHook } from '../../../src/fault.js';
import { connectMcpServer } from '../../../src/mcp.js';
import { openSqliteStore } from '../../../src/sqlite.js';
import { createToolRuntime } from '../../../src/tool/runtime.js';
import { fixtureAddress } from '../fixtures/mcp-address.js';

const [journal, sessionId, trust, log] = process.argv.slice(2) as [string, string, 'trusted' | 'untrusted', string];
const store = openSqliteStore(journal);
const owner = await store.acquire(sessionId, { owner: 'agent-host' });
await owner.startTask('weather-task');
const server = await connectMcpServer(fixtureAddress({ log }), { trusted: trust === 'trusted' });
const runtime = createToolRuntime({ tools: server.tools, grants: { agent: '*' } });
const gateway = runtime.bind({ owner, taskId: 'weather-task', caller: 'agent' });
setFaultHook((point) => {
  if (point === 'started:after') process.kill(process.pid, 'SIGKILL');
});
await gateway.call('lookup_weather', { city: 'Hangzhou' });
process.stdout.write('{"error":"not killed"}\n');
