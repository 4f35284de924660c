/**
 * Identity is per session (issue 13, finding 1): exporting a live session, renaming its id and importing it into
 * the same store must not touch the live session's operations. Before, the import overwrote the live operation's
 * row, so a stale plan was accepted (the body ran again) and recovery of the live session then failed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createMemoryStore } from '../../src/store/memory.js';
import type { SessionStore } from '../../src/store/types.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { inspectToolRecovery, prepareToolRetry } from '../../src/tool/recovery.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { tool } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';
import { openBusiness, sqliteLedger } from '../support/orders.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir();

function scenario(open: () => Promise<SessionStore>): void {
  it('a renamed import of a live session: the stale plan is refused and the live session still recovers', async () => {
    const store = await open();
    const owner = await store.acquire('s-live', { owner: 'host-a' });
    await owner.startTask('t');
    let fail = true;
    let bodies = 0;
    const lookup = tool('lookup', async () => { bodies += 1; if (fail) throw new TypeError('flaky'); return 'found'; },
      new ToolMetadata('reads', { type: 'object' }).withEffect('read_only', 'v1'));
    const gateway = createToolRuntime({ tools: [lookup], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
    const first = await gateway.call('lookup', { q: 'x' });
    assert.equal(first.result.outcome.status, 'failed');
    const early = await store.exportJsonl('s-live');
    const stale = prepareToolRetry(await store.loadHistory('s-live'), first.call.id, null);
    const second = await gateway.callWithOptions('lookup', { q: 'x' }, { retry: prepareToolRetry(await store.loadHistory('s-live'), first.call.id, null) });
    assert.equal(second.result.outcome.status, 'failed');
    // Somebody imports the early export under another id into the same store.
    await store.importJsonl(early.replaceAll('"session_id":"s-live"', '"session_id":"s-copy"'), { owner: 'importer' });
    const before = { events: (await store.loadHistory('s-live')).length, bodies, charged: (await owner.task('t')).charged };
    await assert.rejects(gateway.callWithOptions('lookup', { q: 'x' }, { retry: stale }), { code: 'not_latest_attempt' });
    assert.equal(bodies, before.bodies, 'the stale plan ran nothing');
    assert.equal((await store.loadHistory('s-live')).length, before.events, 'nothing written');
    assert.deepEqual((await owner.task('t')).charged, before.charged, 'nothing charged');
    // Recovery of the live session goes on from its real latest attempt.
    fail = false;
    const history = await store.loadHistory('s-live');
    assert.equal(inspectToolRecovery(history, second.call.id).status, 'outcome_unknown', 'a read-only body failure: retried without review');
    const third = await gateway.callWithOptions('lookup', { q: 'x' }, { retry: prepareToolRetry(history, second.call.id, null) });
    assert.equal(third.result.outcome.status, 'succeeded');
    assert.equal(bodies, 3);
    // The copy is a session of its own: its first attempt is its latest, and it can run its own task t.
    const copyHistory = await store.loadHistory('s-copy');
    // The task's start, the first call, its marker and its result, as the early export held them.
    assert.deepEqual(copyHistory.map((e) => e.kind.type), ['task_ledger', 'tool_call', 'tool_started', 'tool_result']);
    const copyOwner = await store.acquire('s-copy', { owner: 'host-b' });
    await copyOwner.startTask('t');
    const copyGateway = createToolRuntime({ tools: [lookup], grants: { agent: '*' } }).bind({ owner: copyOwner, taskId: 't', caller: 'agent' });
    const copied = await copyGateway.callWithOptions('lookup', { q: 'x' }, { retry: prepareToolRetry(copyHistory, first.call.id, null) });
    assert.equal(copied.result.outcome.status, 'succeeded');
    assert.equal((await copyOwner.task('t')).charged.toolCalls, 1);
    assert.equal((await owner.task('t')).charged.toolCalls, 3);
    await store.close();
  });
}

/**
 * The idempotency helpers dedupe on the operation as the journal knows it, (session, task, key). Before, they keyed
 * on (task, key): a second session's task `checkout` with caller key `cart/1` was skipped, handed the first
 * session's order id as its own, and a reconciler asked about a third session's unrun call answered `completed`.
 */
function helperScenario(open: () => Promise<SessionStore>): void {
  it('two sessions running task checkout with key cart/1 place two orders; each reconciles its own', async () => {
    const store = await open();
    const ledger = sqliteLedger(tempDbPath(dir, 'orders'));
    const seen: string[] = [];
    const placeOrder = tool('place_order', async (request) => {
      seen.push(request.sessionId);
      return ledger.place(request);
    }, new ToolMetadata('places an order', { type: 'object' }).withEffect('idempotent', 'v1'));
    const runtime = createToolRuntime({ tools: [placeOrder], grants: { agent: '*' } });
    const results = [];
    for (const session of ['s-alice', 's-bob']) {
      const owner = await store.acquire(session, { owner: 'host' });
      await owner.startTask('checkout');
      const gateway = runtime.bind({ owner, taskId: 'checkout', caller: 'agent' });
      const execution = await gateway.callWithOptions('place_order', { cart: 1 }, { operationKey: 'cart/1' });
      assert.equal(execution.result.outcome.status, 'succeeded');
      results.push(JSON.parse((execution.result.outcome as { output: string }).output) as { orderId: number });
    }
    assert.deepEqual(seen, ['s-alice', 's-bob'], 'each body is told its session');
    assert.equal(await ledger.count(), 2, 'two sessions, two orders');
    assert.notEqual(results[0]!.orderId, results[1]!.orderId, "Bob is not handed Alice's order");
    const ask = (sessionId: string) => ({ sessionId, operation: { taskId: 'checkout', key: 'cart/1' }, arguments: { cart: 1 } });
    const idem = openBusiness(ledger.path);
    assert.equal(idem.reconcile(ask('s-alice')).outcome, 'completed');
    assert.equal(idem.reconcile(ask('s-carol')).outcome, 'not_executed', "a third session's unrun call is not Alice's");
    idem.close();
    await ledger.close();
    await store.close();
  });
}

describe('identity is per session on memory', () => scenario(async () => createMemoryStore()));
describe('the idempotency helpers key on the session too', () => helperScenario(async () => createMemoryStore()));
forEachStore('identity is per session', (target) => scenario(() => target.fresh().open()));
