/**
 * A host that dies mid-run: acquires a session with a short lease, makes an order (lost after its write), a lookup
 * (failed) and a mail (SIGKILL inside its body, after the start marker). Prints {ready:true} first and {calling:
 * 'send_mail'} just before the last call.
 * argv: <sqlite path | postgres:// URL> <session> <business db path> <lease ms> [postgres schema]
 */
import { createToolRuntime } from '../../../src/tool/runtime.js';
import { openTarget } from '../../support/stores.js';
import { outsideSystem, recoverTools } from '../../support/recover-tools.js';

const [path, sessionId, business, leaseMs, schema] = process.argv.slice(2) as [string, string, string, string, string | undefined];
const out = (v: unknown) => process.stdout.write(JSON.stringify(v) + '\n');
const store = await openTarget(path, schema);
const outside = outsideSystem(business);
const tools = recoverTools(outside, { die: true });
const owner = await store.acquire(sessionId, { owner: 'crashing-host', leaseMs: Number(leaseMs) });
await owner.startTask('order-7');
const gateway = createToolRuntime({ tools, grants: { agent: '*' } }).bind({ owner, taskId: 'order-7', caller: 'agent' });
out({ ready: true });
await gateway.call('place_order', { item: 'book' });
await gateway.call('lookup', { item: 'book' });
out({ calling: 'send_mail' });
await gateway.call('send_mail', { to: 'a@example.com' });
out({ survived: true });
