/**
 * Attention means attention (the case): an approval is unavailable once, the agent asks again and the mail
 * is sent. The operator's queue is then empty, assessSession finds nothing needing attention, and the routine in
 * docs/operator-guide.md (work the queue: review what is in doubt, retry what was interrupted) sends no second mail.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolEffect } from '../../src/event/types.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { assessSession } from '../../src/tool/assess.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { attentionOf } from '../../src/cli/assessment.js';
import type { SessionStore } from '../../src/store/types.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { forEachStore } from '../support/stores.js';

async function story(store: SessionStore) {
  const sent: unknown[] = [];
  let asked = 0;
  const owner = await store.acquire('mail', { owner: 'host' });
  await owner.startTask('task');
  const runtime = createToolRuntime({
    tools: [{
      name: 'send_mail',
      metadata: new ToolMetadata('Sends one e-mail', { type: 'object' }).withEffect(ToolEffect.NonIdempotent, 'v1').withApproval('ops'),
      async execute(request) { sent.push(request.arguments); return 'sent'; },
    }],
    grants: { agent: '*' },
    approvers: { ops: async () => (++asked === 1 ? { decision: 'unavailable' } : { decision: 'approved' }) },
  });
  const gateway = runtime.bind({ owner, taskId: 'task', caller: 'agent' });
  const args = { to: 'ana@example.com', subject: 'Your order' };
  const first = await gateway.call('send_mail', args);
  assert.equal(first.result.outcome.status === 'failed' ? first.result.outcome.category : 'succeeded', 'approval_unavailable');
  // The agent saw the failure and asked again, as a new operation: not refused (the first provably never ran).
  const second = await gateway.call('send_mail', args);
  assert.equal(second.result.outcome.status, 'succeeded');
  assert.equal(sent.length, 1);

  // The operator's views: nothing needs attention; the delivered failure is shown, not pending.
  assert.deepEqual((await store.attention()).items, []);
  const history = await store.loadHistory('mail');
  const assessment = assessSession(history);
  assert.deepEqual(assessment.calls.map((c) => [c.callId, c.nextStep, c.attention]), [[first.call.id, 'retry_allowed', 'none']]);
  assert.deepEqual(attentionOf(assessment), { total: 0, needsReview: 0, retryAllowed: 0, handled: 1 });

  // The documented routine: for each queue item, review it if in doubt, retry it if interrupted. Nothing to do.
  for (const item of (await store.attention()).items) {
    const plan = prepareToolRetry(await store.loadHistory(item.sessionId), item.callId);
    await gateway.callWithOptions(item.tool, args, { retry: plan });
  }
  assert.equal(sent.length, 1, 'no second mail');
}

it('an approval unavailable once, then the mail is sent: the queue is empty and no routine sends a second mail (memory)', async () => {
  await story(createMemoryStore());
});

forEachStore('attention means attention', (target) => {
  it('an approval unavailable once, then the mail is sent: the queue is empty and no routine sends a second mail', async () => {
    const store = await target.fresh().open();
    try {
      await story(store);
    } finally {
      await store.close();
    }
  });
});
