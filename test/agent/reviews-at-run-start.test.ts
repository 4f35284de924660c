/**
 * An operator's review from the decision inbox reaches the journal as the session's run is picked up again, whatever
 * call it reviews: here a payment whose deadline passed while its body went on and made it. The run finished, so a
 * resume settles no open call; before, nothing journaled the review, the queue showed the call in doubt for ever, and
 * a new run's identical payment was refused as in doubt.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { resumeAgent, runAgent, scriptedModel } from '../../src/agent.js';
import { decisionInbox } from '../../src/decisions.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool } from '../../src/tool/types.js';
import { untilBodyEnded } from '../support/body-ended.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

describe('reviews waiting in the inbox, journaled as a run starts', () => {
  const dir = tempDir();

  it('a completed review of a call that timed out is journaled by the resume of its finished run, and the call leaves the queue', async () => {
    const payments: string[] = [];
    const pay: Tool = {
      name: 'pay',
      metadata: new ToolMetadata('Pays', { type: 'object' }).withEffect('non_idempotent', 'pay-v1'),
      // Ignores its abort signal, as many HTTP clients do: the deadline is recorded, the payment still goes through.
      // The deadline leaves the call's two commits ample time on a loaded machine, so it passes while the body runs.
      async execute(request) {
        await sleep(600);
        payments.push(request.operation.key);
        return 'paid';
      },
    };
    const store = openSqliteStore(tempDbPath(dir));
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('task');
    const gateway = createToolRuntime({ tools: [pay], grants: { agent: '*' }, defaultTimeoutMs: 250 }).bind({ owner, taskId: 'task', caller: 'agent' });
    const payStep = { text: null, toolCalls: [{ id: 'p', name: 'pay', arguments: '{}' }] };
    const first = await runAgent({ model: scriptedModel([payStep, { text: 'It may have been paid.', toolCalls: [] }]), owner, gateway, store, input: 'Pay.', runId: 'pay-1', maxSteps: 3 });
    assert.equal(first.stopReason, 'completed');
    const callId = first.toolCalls[0]!.execution!.call.id;
    assert.equal(first.toolCalls[0]!.execution!.result.outcome.status === 'failed' && first.toolCalls[0]!.execution!.result.outcome.code, 'tool_timeout');
    await untilBodyEnded(store, 's', callId);
    assert.deepEqual((await store.attention()).items.map((i) => i.callId), [callId]);

    await decisionInbox(store).recordReview({ sessionId: 's', callId, outcome: 'completed', evidence: 'the bank shows the payment', actor: 'ops@example.com' });
    const again = await resumeAgent({ model: scriptedModel([]), owner, gateway, store, runId: 'pay-1', maxSteps: 3 });
    assert.equal(again.stopReason, 'completed');
    const reviews = (await store.loadHistory('s')).filter((e) => e.kind.type === 'tool_review');
    assert.equal(reviews.length, 1, 'the review is journaled');
    assert.deepEqual((await store.attention()).items, [], 'and the call leaves the queue');

    // A new run's payment is a new action, no longer held back by a call in doubt.
    const next = await runAgent({ model: scriptedModel([payStep, { text: 'Paid.', toolCalls: [] }]), owner, gateway, store, input: 'Pay again.', runId: 'pay-2', maxSteps: 3 });
    assert.equal(next.toolCalls[0]!.execution?.result.outcome.status, 'failed', 'its deadline passed again');
    assert.notEqual(next.toolCalls[0]!.execution?.result.outcome.status === 'failed' && next.toolCalls[0]!.execution.result.outcome.code, 'tool_in_doubt');
    await untilBodyEnded(store, 's', next.toolCalls[0]!.execution!.call.id);
    assert.equal(payments.length, 2);
    await owner.release();
    await store.close();
  });
});
