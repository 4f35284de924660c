/**
 * Runs runAgent on SQLite against the parent's OpenAI-compatible server, and SIGKILLs itself when the second tool
 * (place_order) has its start marker durable and its body has not run. Arguments: journal path, session id,
 * server base URL, orders file.
 */
import { runAgent } from '../../../src/agent.js';
import { openAiCompatibleModel } from '../../../src/agent/openai-compatible.js';
import { setFaultHook } from '../../../src/fault.js';
import { openSqliteStore } from '../../../src/sqlite.js';
import { createToolRuntime } from '../../../src/tool/runtime.js';
import { agentTools } from '../fixtures/agent-tools.js';

const [journal, sessionId, baseUrl, ordersFile] = process.argv.slice(2) as [string, string, string, string];
const store = openSqliteStore(journal);
const owner = await store.acquire(sessionId, { owner: 'agent-host' });
await owner.startTask('shop-task');
const runtime = createToolRuntime({ tools: agentTools(ordersFile), grants: { agent: '*' } });
const gateway = runtime.bind({ owner, taskId: 'shop-task', caller: 'agent' });
let started = 0;
setFaultHook((point) => {
  if (point === 'started:after' && ++started === 2) process.kill(process.pid, 'SIGKILL');
});
await runAgent({ model: openAiCompatibleModel({ baseUrl, model: 'local-test' }), owner, gateway, input: 'Buy some tea.', maxSteps: 5 });
process.stdout.write('{"error":"not killed"}\n');
