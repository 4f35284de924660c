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
    await assert.rejects(decisionInbox(store).approve(requestId, { actor: 'alice' }), {
      code: 'decision_stale',
      message: new RegExp(`is superseded \\(attempt ${second.call.id} of the operation was answered without it \\(by the host's approver, or refused before it was asked\\)\\); it takes one decision`),
    }, 'the refusal says why the request was superseded (r70 F3)');
    assert.deepEqual((await decisionInbox(store).list({ kind: 'approval' })).items, [], 'nothing waits in the queue');

    const review = { actor: 'ops', evidence: 'the bank has no transfer', outcome: 'not_executed' as const };
    const third = await gateway.callWithOptions('wire', { to: 'acct-1' }, { retry: prepareToolRetry(await store.loadHistory('s'), second.call.id, review) });
    assert.equal(third.result.outcome.status === 'failed' && third.result.outcome.category, 'approval_denied', 'the approver was asked and denied');
    assert.equal(asked, 3);
    assert.equal(ran, 1);
    await store.close();
  });

  it('the tool redeployed without its approval: the retry that runs supersedes the request attempt 1 left, and a denial made before it starts is its answer', async () => {
    const store = await open();
    let ran = 0;
    const body = async () => { ran += 1; return 'wired'; };
    const metadata = new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1');
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('t');
    const asking = createToolRuntime({ tools: [tool('wire', body, metadata.withApproval('boss'))], grants: { agent: '*' }, approvers: { boss: async () => ({ decision: 'pending', note: 'a person must look' }) } })
      .bind({ owner, taskId: 't', caller: 'agent' });
    // The same contract, approval dropped by a redeploy.
    const plain = createToolRuntime({ tools: [tool('wire', body, metadata)], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });

    const first = await asking.call('wire', { to: 'acct-1' });
    const requestId = first.result.approval?.requestId ?? '';
    const second = await plain.callWithOptions('wire', { to: 'acct-1' }, { retry: prepareToolRetry(await store.loadHistory('s'), first.call.id) });
    assert.equal(second.result.outcome.status, 'succeeded');
    assert.equal((await decisionInbox(store).get(requestId))?.state, 'superseded', "attempt 1's request no longer waits for anyone");
    await assert.rejects(decisionInbox(store).approve(requestId, { actor: 'alice' }), { code: 'decision_stale' });
    assert.deepEqual((await decisionInbox(store).list({ kind: 'approval' })).items, []);

    // Another operation: its request is denied while the retry is under way (in a guard, before it starts).
    const other = await asking.call('wire', { to: 'acct-2' });
    const otherRequest = other.result.approval?.requestId ?? '';
    const plan = prepareToolRetry(await store.loadHistory('s'), other.call.id);
    const denying = createToolRuntime({
      tools: [tool('wire', body, metadata)], grants: { agent: '*' },
      guards: [async () => { await decisionInbox(store).deny(otherRequest, { actor: 'alice', reason: 'wrong account' }); return null; }],
    }).bind({ owner, taskId: 't', caller: 'agent' });
    const third = await denying.callWithOptions('wire', { to: 'acct-2' }, { retry: plan });
    assert.equal(third.result.outcome.status === 'failed' && third.result.outcome.category, 'approval_denied', 'the denial is the answer');
    assert.equal((await decisionInbox(store).get(otherRequest))?.state, 'consumed');
    assert.equal(ran, 1, 'the denied retry never ran');
    await store.close();
  });
}

describe('approval requests of earlier attempts on memory', () => scenario(async () => createMemoryStore()));
forEachStore('approval requests of earlier attempts', (target) => scenario(() => target.fresh().open()));
