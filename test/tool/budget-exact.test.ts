/**
 * Finding 6: budgets are exact. Output beyond what is left of the budget is refused as `output_limit` and never
 * charged past the limit.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool } from '../../src/tool/types.js';

const big: Tool = { name: 'big', metadata: new ToolMetadata('big', { type: 'object' }), execute: async () => 'x'.repeat(5000) };

describe('budgets are exact', () => {
  it('5,000 bytes of output against a 1,000-byte task limit: output_limit, charged at most 1,000', async () => {
    const store = createMemoryStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('task', { limits: { toolOutputBytes: 1000 } });
    const gateway = createToolRuntime({ tools: [big], grants: { agent: '*' } }).bind({ owner, taskId: 'task', caller: 'agent', turnId: 'turn-1' });
    const execution = await gateway.call('big', {});
    const outcome = execution.result.outcome;
    assert.ok(outcome.status === 'failed' && outcome.category === 'output_limit', JSON.stringify(outcome));
    const task = await owner.task('task');
    assert.equal(task.charged.toolOutputBytes, 1000);
    assert.equal(task.reservedOutputBytes, 0);
    assert.ok(task.charged.toolOutputBytes <= task.limits.toolOutputBytes);
  });
});
