/**
 * What the network does to a PostgreSQL store. A server that ended a connection the moment it became ready (a
 * restart, a failover, pg_terminate_backend under load) sent its error before anyone had checked the connection
 * out; pg emitted it as an 'error' event nobody heard, and the host process died with every call in flight left in
 * doubt. A partition that drops packets without a reset held calls, `awaitDecision` past its deadline and `close()`
 * until the network healed, since every timeout was the server's. Now the first fails as a typed store error, and
 * the store's connections bound their answers on the client too.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { POSTGRES_DEFAULTS } from '../../src/limits.js';
import { awaitDecision, decisionInbox } from '../../src/store/inbox.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { startPgProxy } from '../support/pg-proxy.js';
import { adminPool, describePostgres, freshSchema, openPostgresStore } from '../support/postgres.js';
import { sleep, tool } from '../support/runtime.js';

const settled = <T>(p: Promise<T>) => p.then(() => 'ok', (error: { code?: string }) => error.code ?? String(error));

describePostgres('a PostgreSQL store on a failing network', (url) => {
  it('survives a connection the server ends as it becomes ready: the read fails typed, the next one works', async () => {
    const proxy = await startPgProxy(url);
    const store = await openPostgresStore(proxy.url, { schema: freshSchema() });
    const owner = await store.acquire('s', { owner: 'host' });
    proxy.killNextAtStartup(async (pid) => { await adminPool(url).query('SELECT pg_terminate_backend($1)', [pid]); });
    // Two reads at once: the pool holds one idle connection, so the second opens the connection that is ended.
    const outcomes = await Promise.all([settled(store.loadHistory('s')), settled(store.loadHistory('s'))]);
    for (const outcome of outcomes) assert.ok(outcome === 'ok' || outcome === 'store_failure', outcome);
    assert.deepEqual(await store.loadHistory('s'), [], 'the process lives on and the store still answers');
    await owner.release();
    await store.close();
    await proxy.close();
  });

  it('bounds a call, a decision wait and close() during a partition by the client\'s own clock', { timeout: 60_000 }, async () => {
    const proxy = await startPgProxy(url);
    const statementTimeoutMs = 500;
    const store = await openPostgresStore(proxy.url, { schema: freshSchema(), statementTimeoutMs });
    const mail = tool('send_mail', async () => 'sent', new ToolMetadata('mails', { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('ops'));
    const runtime = createToolRuntime({ tools: [mail], grants: { agent: '*' }, approvers: { ops: async () => ({ decision: 'pending' }) } });
    const owner = await store.acquire('s', { owner: 'host', heartbeat: false });
    await owner.startTask('t');
    const requestId = (await runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('send_mail', {})).result.approval!.requestId;

    const waiting = settled(awaitDecision(store, requestId, { timeoutMs: 1_500, pollMs: 100 }));
    await sleep(300);
    proxy.freeze();
    const reading = settled(store.loadHistory('s'));
    assert.equal(await Promise.race([waiting, sleep(6_000).then(() => 'still waiting')]), 'decision_wait_timeout', 'the wait ended at its deadline');
    const bound = statementTimeoutMs + POSTGRES_DEFAULTS.answerMarginMs + 5_000;
    assert.equal(await Promise.race([reading, sleep(bound).then(() => 'still reading')]), 'store_failure', 'the read gave up on the silent server');
    assert.equal(await Promise.race([settled(store.close()), sleep(bound).then(() => 'still closing')]), 'ok', 'close() returned');
    proxy.thaw();
    await proxy.close();
  });

  it("a start marker's commit that landed, its answer lost and the server unreachable: the body never runs, and once the host journals that, an operator's review is taken while the host lives", { timeout: 60_000 }, async () => {
    const proxy = await startPgProxy(url);
    const schema = freshSchema();
    const store = await openPostgresStore(proxy.url, { schema });
    const operator = await openPostgresStore(url, { schema });
    try {
      let bodies = 0;
      const pay = tool('pay', async () => { bodies += 1; return 'paid'; }, new ToolMetadata('pays', { type: 'object' }).withEffect('non_idempotent', 'v1'));
      const look = tool('look', async () => 'seen', new ToolMetadata('looks', { type: 'object' }).withEffect('read_only', 'v1'));
      const owner = await store.acquire('s', { owner: 'host' });
      await owner.startTask('t');
      const gateway = createToolRuntime({ tools: [pay, look], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
      // Nothing can ask the server whether the marker landed: every connection is cut with its answer.
      proxy.loseAnswerTo('tool_started', 'unreachable');
      await assert.rejects(gateway.call('pay', { to: 'acme' }), { code: 'recording_failed' });
      assert.equal(bodies, 0, 'the body was never called');
      proxy.refuseConnections(false);
      const landed = await operator.loadHistory('s');
      const callId = landed.flatMap((e) => (e.kind.type === 'tool_call' && e.kind.call.name === 'pay' ? [e.kind.call.id] : []))[0]!;
      assert.ok(landed.some((e) => e.kind.type === 'tool_started' && e.kind.callId === callId), 'the call and its marker landed');
      // Before, an operator's review was refused call_in_flight for as long as this host held the session.
      await gateway.call('look', {});
      const told = await operator.loadHistory('s');
      assert.ok(told.some((e) => e.kind.type === 'custom' && e.kind.kind === 'body_ended' && JSON.stringify(e.kind.payload) === JSON.stringify({ callId, ended: 'not_called' })),
        "the host's next write journals that the body was never called");
      const row = await decisionInbox(operator).recordReview({ sessionId: 's', callId, outcome: 'not_executed', evidence: 'the bank shows no payment', actor: 'ops' });
      assert.equal(row.decision, 'not_executed');
      await owner.release();
    } finally {
      await operator.close();
      await store.close();
      await proxy.close();
    }
  });
});
