/**
 * A run waiting for an operator's approval whose next attempt is refused before its approver is asked (the caller's
 * grant withdrawn, a guard): nothing of the operation may stay in the queue waiting for a host that will make no
 * further attempt. An operator's denial of the action is the attempt's answer, recorded and used; before, it was
 * left "waiting for the session's host" for ever, the attempt recorded with the grant's refusal.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resumeAgent, runAgent, scriptedModel } from '../../src/agent.js';
import { decisionInbox } from '../../src/decisions.js';
import type { ToolApprover } from '../../src/tool/types.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { doneStep, emailStep, host, orderStep, outside } from './fixtures/shop-run.js';

const pending: ToolApprover = async () => ({ decision: 'pending', note: 'check the address' });

describe('a follow-up attempt refused before its approver is asked', () => {
  const dir = tempDir();

  it('denied while it waited, the grant withdrawn since: the denial is recorded and used, and the queue is empty', async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailApprover: true });
    const first = await host(path, world.tools, pending);
    const stopped = await runAgent({ ...first, model: scriptedModel([orderStep, emailStep]), input: 'Buy tea.', maxSteps: 6, runId: 'denied-1', store: first.store });
    assert.equal(stopped.stopReason, 'awaiting_approval');
    const inbox = decisionInbox(first.store);
    const [request] = (await inbox.list({ sessionId: 'shop', kind: 'approval' })).items;
    await inbox.deny(request!.id, { actor: 'ops@example.com', reason: 'wrong address' });
    await first.store.close();

    const narrowed = await host(path, world.tools, pending, ['place_order']);
    const model = scriptedModel([doneStep]);
    const done = await resumeAgent({ ...narrowed, model, runId: 'denied-1', store: narrowed.store, maxSteps: 6 });
    assert.equal(done.stopReason, 'completed');
    const read = done.toolCalls[1]!.outcome;
    assert.ok(!read.ok && read.category === 'approval_denied' && /wrong address/.test(read.text), JSON.stringify(read));
    assert.equal((await decisionInbox(narrowed.store).get(request!.id))?.state, 'consumed', 'the denial was used: nothing waits for a host');
    assert.equal((await decisionInbox(narrowed.store).list({ sessionId: 'shop', kind: 'approval' })).items.length, 0);
    assert.deepEqual(world.bodies, ['place_order']);
    await narrowed.store.close();
  });
});
