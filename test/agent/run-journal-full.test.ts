/**
 * A run whose journal fills as the model answers (u143 #2): the answer and the run's end are one commit, so a journal
 * with room for the answer but not for its end refuses both, and the run can still end, in a later resume, with an
 * answer that fits.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { resumeAgent, runAgent, scriptedModel } from '../../src/agent.js';
import { LIMITS } from '../../src/limits.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { fillUntil, used } from '../support/journal-fill.js';

it('an answer whose run end does not fit is refused with it, nothing written, and a later resume ends the run', async () => {
  const store = createMemoryStore();
  const owner = await store.acquire('full-run', { owner: 'host' });
  await owner.startTask('task', { limits: { journalBytes: 64 * 1024 * 1024 } });
  const gateway = createToolRuntime({ tools: [], grants: { agent: '*' } }).bind({ owner, taskId: 'task', caller: 'agent' });
  const answer = 'a'.repeat(200 * 1024);
  // Room for the answer as a step (its text twice) and not for the run's end (a third time).
  await fillUntil(store, owner, Math.round(2.5 * answer.length));
  assert.ok(LIMITS.maxHistoryBytes - (await used(store, 'full-run')) > 2 * answer.length + 4096);
  await assert.rejects(runAgent({ model: scriptedModel([{ text: answer, toolCalls: [] }]), owner, gateway, input: 'Summarise.', maxSteps: 2, runId: 'r', store }), { code: 'journal_full' });
  const history = await store.loadHistory('full-run');
  assert.equal(history.filter((e) => e.kind.type === 'assistant_message').length, 0, 'the answer is not journaled without the run\'s end');
  const resumed = await resumeAgent({ model: scriptedModel([{ text: 'In short: done.', toolCalls: [] }]), owner, gateway, runId: 'r', store, maxSteps: 2 });
  assert.deepEqual([resumed.stopReason, resumed.text], ['completed', 'In short: done.']);
  await store.close();
});
