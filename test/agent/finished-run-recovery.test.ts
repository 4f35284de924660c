/**
 * The startup routine leaves a finished run's calls alone (docs/design.md#recovering-abandoned-sessions). A run read a
 * payment's failure in doubt and gave its answer; its host closed the store without releasing the session; an
 * operator found no payment and reviewed the call `not_executed`. Before, a later host's `retry_safe` routine took the
 * session over as abandoned (its lease had run out) and paid: a write the user had been told may have failed, made
 * after the run was over, and a second payment once the user had asked again in a new run (pass r63 #1). The same run
 * whose host released the session was already left alone.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { runAgent, scriptedModel } from '../../src/agent.js';
import { decisionInbox } from '../../src/decisions.js';
import { recoverAbandoned } from '../../src/review.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool } from '../../src/tool/types.js';
import { sleep } from '../support/runtime.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

it('a finished run\'s call reviewed not_executed is not retried by the startup routine, whether or not its host released the session', async () => {
  const path = tempDbPath(tempDir());
  const payments: string[] = [];
  let attempts = 0;
  const pay: Tool = {
    name: 'pay',
    metadata: new ToolMetadata('Pays', { type: 'object' }).withEffect('non_idempotent', 'pay-v1'),
    async execute(request) {
      attempts += 1;
      // The gateway drops the connection before taking the first payment: it was not made.
      if (attempts === 1) throw new Error('ECONNRESET talking to the payment gateway');
      payments.push(request.operation.key);
      return 'paid';
    },
  };
  const runtime = createToolRuntime({ tools: [pay], grants: { agent: '*' } });
  const first = openSqliteStore(path);
  const owner = await first.acquire('chat', { owner: 'host-1', leaseMs: 200 });
  await owner.startTask('task');
  const gateway = runtime.bind({ owner, taskId: 'task', caller: 'agent' });
  const payStep = { text: null, toolCalls: [{ id: 'p', name: 'pay', arguments: '{}' }] };
  const run = await runAgent({ model: scriptedModel([payStep, { text: 'The payment may have failed.', toolCalls: [] }]), owner, gateway, store: first, input: 'Pay.', runId: 'run-1', maxSteps: 3 });
  assert.equal(run.stopReason, 'completed');
  const callId = run.toolCalls[0]!.execution!.call.id;
  // The host ends as the bridge examples end: the store closed, the session not released.
  await first.close();

  const store = openSqliteStore(path);
  try {
    while ((await store.listExpiredSessions()).length === 0) await sleep(25);
    await decisionInbox(store).recordReview({ sessionId: 'chat', callId, outcome: 'not_executed', evidence: 'the gateway has no such payment', actor: 'alice' });
    const report = await recoverAbandoned(store, { runtime, tools: [pay], caller: 'agent' }, 'retry_safe');
    const session = report.sessions[0]!;
    assert.equal(session.action, 'taken_over');
    assert.ok(session.action === 'taken_over');
    assert.equal(session.reviewed.length, 1, 'the operator\'s review is journaled');
    assert.deepEqual(session.retried, [], 'nothing is retried');
    assert.equal(session.left.length, 1);
    assert.match(session.left[0]!.reason, /agent run run-1 finished after its model read this call's result/);
    assert.equal(session.heldForNextRoutine, false, 'released: no later routine is asked to decide it again');
    assert.deepEqual(payments, []);
    assert.deepEqual(await recoverAbandoned(store, { runtime, tools: [pay], caller: 'agent' }, 'retry_safe').then((r) => r.sessions), []);
    assert.deepEqual(payments, [], 'still no payment');
  } finally {
    await store.close();
  }
});
