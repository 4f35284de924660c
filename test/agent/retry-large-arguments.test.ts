/**
 * A resumed run's retry of a call whose arguments are larger than an unusable tool's calls are journaled with
 * (LIMITS.maxUnavailableArgumentsBytes), made by a host whose caller may no longer use the tool: the retry's refusal
 * is journaled like any other, so the run stops for a person while an earlier attempt may have taken effect (the model,
 * no longer offered the tool, could do the action another way), or, for a call that only waited for a person, the
 * model reads that it did not run, and a later resume reads that refusal back instead of making the
 * operation's attempt after the model did the action another way. Before, the retry was refused unrecorded, as a
 * first call with such arguments is: the model read "the tool did not run" for a call whose body may have run (and
 * did the action with another tool), or for an approved call that the next resume, with the grant back, then made.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resumeAgent, runAgent, scriptedModel, type ScriptedModel } from '../../src/agent.js';
import { decisionInbox } from '../../src/decisions.js';
import { LIMITS } from '../../src/limits.js';
import type { ToolApprover } from '../../src/tool/types.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { calls, Crash, crashedInsideEmail, doneStep, failing, host, orderStep, outside, reply } from './fixtures/shop-run.js';

const item = 'tea, '.repeat(1 + LIMITS.maxUnavailableArgumentsBytes / 5);
const largeEmail = reply(null, calls(['c2', 'send_email', JSON.stringify({ item })]));
const pending: ToolApprover = async () => ({ decision: 'pending', note: 'check the address' });
const toolMessages = (model: ScriptedModel) => model.requests[0]!.messages.filter((m) => m.role === 'tool').map((m) => m.content);
const attemptsOf = async (store: { loadHistory(id: string): Promise<readonly { kind: { type: string } }[]> }) =>
  (await store.loadHistory('shop')).filter((e) => e.kind.type === 'tool_call').length;

describe('a retry of a call with large arguments, by a caller no longer granted its tool', () => {
  const dir = tempDir();

  it('in doubt (its body started): the refusal is journaled and the run stops for a person, the model not asked to do it another way', async () => {
    const world = outside();
    const second = await crashedInsideEmail(tempDbPath(dir), world, 'large-1', { step: largeEmail, grant: ['place_order'] });
    const model = scriptedModel([doneStep]);
    const resumed = await resumeAgent({ ...second, model, runId: 'large-1', store: second.store, maxSteps: 4, recovery: 'retry_safe' });
    assert.equal(resumed.stopReason, 'needs_review', 'the tool is no longer offered to the model and its call is still in doubt');
    assert.equal(model.requests.length, 0, 'the model is not asked again');
    const history = await second.store.loadHistory('shop');
    const attempts = history.flatMap((e) => (e.kind.type === 'tool_call' && e.kind.call.name === 'send_email' ? [e.kind.call] : []));
    assert.equal(attempts.length, 2, 'the e-mail and its retry');
    const retryResult = history.find((e) => e.kind.type === 'tool_result' && e.kind.result.callId === attempts[1]!.id);
    assert.equal(retryResult?.kind.type === 'tool_result' && retryResult.kind.result.outcome.status === 'failed' && retryResult.kind.result.outcome.category, 'unavailable', 'the retry\'s refusal was journaled');
    assert.equal(attempts[1]!.operation?.retry?.callId, attempts[0]!.id);
    assert.deepEqual(resumed.pendingCallIds, [attempts[1]!.id], 'the call in doubt is named as the queue lists it: its operation\'s latest attempt');
    assert.equal(await attemptsOf(second.store), 3, 'the order, the e-mail and its refused retry');
    assert.deepEqual(world.bodies, ['place_order']);
    await second.store.close();
  });

  it('in doubt, retried and refused under stopOnUncertainOutcome: the run stops for a person instead of letting the model do it another way', async () => {
    const world = outside();
    const second = await crashedInsideEmail(tempDbPath(dir), world, 'large-3', { step: largeEmail, grant: ['place_order'] });
    const resumed = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'large-3', store: second.store, maxSteps: 4, recovery: 'retry_safe', stopOnUncertainOutcome: true });
    assert.equal(resumed.stopReason, 'needs_review');
    assert.deepEqual(world.bodies, ['place_order']);
    await second.store.close();
  });

  it('approved while it waited: the model reads that it did not run, and a resume with the grant back makes no attempt of it', async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailApprover: true });
    const first = await host(path, world.tools, pending);
    const stopped = await runAgent({ ...first, model: scriptedModel([orderStep, largeEmail]), input: 'Buy tea.', maxSteps: 6, runId: 'large-2', store: first.store });
    assert.equal(stopped.stopReason, 'awaiting_approval');
    const inbox = decisionInbox(first.store);
    const [request] = (await inbox.list({ sessionId: 'shop', kind: 'approval' })).items;
    await inbox.approve(request!.id, { actor: 'ops@example.com' });
    await first.store.close();

    const narrowed = await host(path, world.tools, pending, ['place_order']);
    const model = scriptedModel([failing()]);
    await assert.rejects(resumeAgent({ ...narrowed, model, runId: 'large-2', store: narrowed.store, maxSteps: 6 }), Crash);
    const read = toolMessages(model)[1]!;
    assert.match(read, /unavailable/);
    assert.match(read, /did not run/);
    assert.equal(await attemptsOf(narrowed.store), 3, 'the order, the e-mail waiting for approval, and its refused retry');
    assert.equal((await decisionInbox(narrowed.store).get(request!.id))?.state, 'superseded', 'no host will use the approval: it leaves the queue');
    await narrowed.store.close();

    // The grant is back: the journal answers for the call with the refusal the model read; nothing is sent.
    const restored = await host(path, world.tools, pending);
    const done = await resumeAgent({ ...restored, model: scriptedModel([doneStep]), runId: 'large-2', store: restored.store, maxSteps: 6 });
    assert.equal(done.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order']);
    assert.equal(await attemptsOf(restored.store), 3);
    await restored.store.close();
  });
});
