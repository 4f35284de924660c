/**
 * A graceful shutdown (the store closed while a call of the run waits on its approver) and the resume after it
 * (docs/design.md#resumable-runs): the call stopped before its body is made again, once, as a crash at the same moment
 * would have had it made; the shutdown never loses the action. A call whose cancellation the model already read (the
 * run went on to a later step) is read back as it was.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resumeAgent, runAgent, scriptedModel } from '../../src/agent.js';
import { modelResponseEvent } from '../../src/agent/run-journal.js';
import type { ToolApprover } from '../../src/tool/types.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { doneStep, emailStep, host, orderStep, outside, reply } from './fixtures/shop-run.js';

/** An approver still deciding when the store closes: it answers only once told to. */
function slowApprover() {
  let asked: () => void = () => {};
  const beingAsked = new Promise<void>((resolve) => { asked = resolve; });
  const approver: ToolApprover = async () => {
    asked();
    await new Promise<void>(() => {});
    return { decision: 'approved' };
  };
  return { approver, beingAsked };
}

const approves: ToolApprover = async () => ({ decision: 'approved' });

describe('a run whose host shuts down gracefully while a call waits on its approver', () => {
  const dir = tempDir();

  async function shutDownWhileAsked(runId: string) {
    const path = tempDbPath(dir);
    const world = outside({ emailApprover: true });
    const { approver, beingAsked } = slowApprover();
    const first = await host(path, world.tools, approver);
    const running = runAgent({ ...first, model: scriptedModel([orderStep, emailStep, doneStep]), input: 'Buy tea.', maxSteps: 6, runId, store: first.store });
    await beingAsked;
    await first.store.close();
    await running.catch(() => undefined);
    return { path, world };
  }

  it('the resume makes the e-mail once, on a fresh approval, and the model reads it was sent (pass r41 #10)', async () => {
    const { path, world } = await shutDownWhileAsked('shutdown-1');
    assert.deepEqual(world.bodies, ['place_order'], 'the e-mail was not sent before the shutdown');
    const second = await host(path, world.tools, approves);
    const model = scriptedModel([doneStep]);
    const resumed = await resumeAgent({ ...second, model, runId: 'shutdown-1', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email'], 'the action the shutdown interrupted is made, once');
    const read = model.requests[0]!.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    assert.equal(read[1], 'sent');
    const again = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'shutdown-1', store: second.store, maxSteps: 6 });
    assert.equal(again.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email'], 'read back, nothing runs again');
    await second.store.close();
  });

  it('a cancellation the model already read (a later step of the run is journaled) is read back, not made again', async () => {
    const { path, world } = await shutDownWhileAsked('shutdown-read');
    // The model read the cancelled e-mail and answered in a step the journal holds (as a run whose store stayed open
    // after a caller's cancel of the one call would have): that answer was the run's decision about it.
    const second = await host(path, world.tools, approves);
    const turnId = (await second.store.loadHistory('shop')).at(-1)!.turnId;
    await second.owner.append([modelResponseEvent(turnId, 'shutdown-read', 3, reply('I will not send the e-mail.'), new Set(['place_order', 'send_email']))]);
    const model = scriptedModel([]);
    const resumed = await resumeAgent({ ...second, model, runId: 'shutdown-read', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order'], 'not made again');
    assert.match(resumed.toolCalls[1]!.outcome.ok ? '' : resumed.toolCalls[1]!.outcome.text, /tool_cancelled/);
    await second.store.close();
  });

  it('cancelled by its caller inside the approval, the resumed run makes the call the cancel stopped, once', async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailApprover: true });
    const controller = new AbortController();
    const cancelling: ToolApprover = async () => {
      controller.abort();
      await new Promise<void>((resolve) => setTimeout(resolve, 5));
      return { decision: 'approved' };
    };
    const first = await host(path, world.tools, cancelling);
    await assert.rejects(runAgent({ ...first, model: scriptedModel([orderStep, emailStep]), input: 'Buy tea.', maxSteps: 6, runId: 'cancel-1', store: first.store, signal: controller.signal }));
    assert.deepEqual(world.bodies, ['place_order']);
    await first.store.close();
    const second = await host(path, world.tools, approves);
    const resumed = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'cancel-1', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    await second.store.close();
  });
});
