/**
 * Calls create_order against the orders API through a gateway on SQLite and SIGKILLs itself right after the body
 * returned (`body:after`): the API applied the order, the journal has the call and its start marker, no result.
 * Arguments: journal path, session id, API url.
 */
import { setFaultHook } from '../../../src/fault.js';
import { openSqliteStore } from '../../../src/sqlite.js';
import { createToolRuntime } from '../../../src/tool/runtime.js';
import { createOrderTool } from '../fixtures/orders-http.js';

const [journal, sessionId, url] = process.argv.slice(2) as [string, string, string];
const store = openSqliteStore(journal);
const owner = await store.acquire(sessionId, { owner: 'agent-host' });
await owner.startTask('order-task');
const gateway = createToolRuntime({ tools: [createOrderTool(url)], grants: { agent: '*' } }).bind({ owner, taskId: 'order-task', caller: 'agent' });
setFaultHook((point) => {
  if (point === 'body:after') process.kill(process.pid, 'SIGKILL');
});
await gateway.call('create_order', { item: 'tea' });
process.stdout.write('{"error":"not killed"}\n');
