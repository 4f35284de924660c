/**
 * An approval request answers for the attempts that follow it only until one of them is approved by the host's
 * approver. Before, a request left `pending` by attempt 1 stayed open after attempt 2 was approved directly (and ran):
 * the queue showed it for ever, an operator could approve it (the CLI said the host would use it), and attempt 3 then
 * ran on that approval without asking the approver, who would have denied it. Attempt 2's start marker now supersedes
 * the requests earlier attempts left.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ToolBodyError } from '../../src/errors.js';
import { decisionInbox } from '../../src/store/inbox.js';
import { createMemoryStore } from '../../src/store/memory.js';
import type { SessionStore } from '../../src/store/types.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/recovery.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { ToolApproval } from '../../src/tool/types.js';
import { tool } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';

function scenario(open: () => Promise<SessionStore>): void {
  it('a request left by attempt 1 is superseded once attempt 2 is approved and runs; attempt 3 asks the approver', async () => {
    const store = await open();
    const answers: ToolApproval[] = [
      { decision: 'pending', note: 'a person must look' },
      { decision: 'approved' },
      { decision: 'denied', code: 'over_limit', message: 'not today' },
    ];
    let asked = 0;
    let ran = 0;
    const wire = tool('wire', async () => { ran += 1; throw new ToolBodyError('bank_timeout', 'the bank did not answer'); },
      new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('boss'));
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('t');
    const gateway = createToolRuntime({ tools: [wire], grants: { agent: '*' }, approvers: { boss: async () => answers[asked++]! } })
      .bind({ owner, taskId: 't', caller: 'agent' });
    const first = await gateway.call('wire', { to: 'acct-1' });
    const requestId = first.result.approval?.requestId ?? '';
    assert.equal((await decisionInbox(store).get(requestId))?.state, 'open');

    const second = await gateway.callWithOptions('wire', { to: 'acct-1' }, { retry: prepareToolRetry(await store.loadHistory('s'), first.call.id) });
    assert.ok(second.startedEvent, 'approved by the approver, attempt 2 ran');
    assert.equal((await decisionInbox(store).get(requestId))?.state, 'superseded', "attempt 1's request no longer waits");
    await assert.rejects(decisionInbox(store).approve(requestId, { actor: 'alice' }), { code: 'decision_stale' });
    assert.deepEqual((await decisionInbox(store).list({ kind: 'approval' })).items, [], 'nothing waits in the queue');

    const review = { actor: 'ops', evidence: 'the bank has no transfer', outcome: 'not_executed' as const };
    const third = await gateway.callWithOptions('wire', { to: 'acct-1' }, { retry: prepareToolRetry(await store.loadHistory('s'), second.call.id, review) });
    assert.equal(third.result.outcome.status === 'failed' && third.result.outcome.category, 'approval_denied', 'the approver was asked and denied');
    assert.equal(asked, 3);
    assert.equal(ran, 1);
    await store.close();
  });
}

describe('approval requests of earlier attempts on memory', () => scenario(async () => createMemoryStore()));
forEachStore('approval requests of earlier attempts', (target) => scenario(() => target.fresh().open()));
