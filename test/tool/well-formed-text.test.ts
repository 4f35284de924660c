/**
 * Text a tool, guard or approver hands back that is not well-formed (a string cut in the middle of an emoji leaves a
 * lone surrogate) is still recorded: the journal holds well-formed text only, so the lone surrogate becomes U+FFFD.
 * Before, the result could not be journaled and a body that had finished left its call in doubt.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolBodyError } from '../../src/errors.js';
import { assessSession } from '../../src/tool/assess.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { rig, tool } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';

const CUT = 'Great job 🎉🎉'.slice(0, 11);
const WELL_FORMED = 'Great job \ufffd';
const write = new ToolMetadata('writes', { type: 'object' }).withEffect('non_idempotent', 'v1');

forEachStore('text with a lone surrogate is recorded well-formed', (target) => {
  it('a text output: succeeded, journaled and charged as U+FFFD, nothing left in doubt', async () => {
    const r = await rig(target, { tools: [tool('summarize', async () => CUT, write)] });
    const execution = await r.gateway.call('summarize', {});
    assert.deepEqual(execution.result.outcome, { status: 'succeeded', output: WELL_FORMED });
    const history = await r.store.loadHistory(r.sessionId);
    assert.deepEqual(history.at(-1), execution.resultEvent);
    assert.equal(assessSession(history).calls.length, 0, 'the call completed');
    const task = await r.owner.task(r.taskId);
    assert.equal(task.charged.toolOutputBytes, Buffer.byteLength(WELL_FORMED));
    assert.equal(task.reservedOutputBytes, 0);
    await r.store.close();
  });

  it("a body's error message and code, a panic's detail, a guard's and an approver's denial, a pending note: each recorded", async () => {
    const r = await rig(target, {
      tools: [
        tool('body_message', async () => { throw new ToolBodyError('bad', CUT); }),
        tool('body_code', async () => { throw new ToolBodyError(CUT, 'message'); }),
        tool('panic', async () => { throw new Error(CUT); }),
        tool('guarded', async () => 'ran'),
        tool('denied', async () => 'ran', new ToolMetadata('denied', { type: 'object' }).withApproval('deny')),
        tool('pending', async () => 'ran', new ToolMetadata('pending', { type: 'object' }).withApproval('wait')),
      ],
      guards: [({ call }) => (call.name === 'guarded' ? { code: 'no', message: CUT } : null)],
      approvers: {
        deny: async () => ({ decision: 'denied', code: 'no', message: CUT }),
        wait: async () => ({ decision: 'pending', note: CUT }),
      },
      describePanic: (error) => (error as Error).message,
    });
    const expected: Record<string, [string, 'code' | 'message']> = {
      body_message: ['body_failure', 'message'],
      body_code: ['body_failure', 'code'],
      panic: ['body_panic', 'message'],
      guarded: ['denied', 'message'],
      denied: ['approval_denied', 'message'],
      pending: ['approval_pending', 'message'],
    };
    for (const [name, [category, field]] of Object.entries(expected)) {
      const outcome = (await r.gateway.call(name, {})).result.outcome;
      assert.equal(outcome.status, 'failed', name);
      if (outcome.status !== 'failed') continue;
      assert.equal(outcome.category, category, name);
      assert.ok(outcome[field].includes(WELL_FORMED), `${name}: ${outcome[field]}`);
    }
    const history = await r.store.loadHistory(r.sessionId);
    assert.equal(history.filter((e) => e.kind.type === 'tool_result').length, 6, 'every call has its result journaled');
    await r.store.close();
  });
});
