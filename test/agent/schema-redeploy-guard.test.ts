/**
 * A redeploy that changes a tool's input schema under the same name, between a crash and the resume, while a call of
 * it is in doubt (docs/design.md#the-in-doubt-guard). The guard knows a repeat by identical arguments; arguments that
 * no longer fit the schema cannot be repeated identically, so the model's new-shaped repeat ran and charged a second
 * time (pass r63 #3). The resume now stops `needs_review` on such a call, as it does for a renamed tool; a redeploy
 * under which the recorded arguments still fit leaves the guard to refuse the identical repeat, as before.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { resumeAgent, runAgent, scriptedModel, type ChatResponse } from '../../src/agent.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool } from '../../src/tool/types.js';

const step = (args: string): ChatResponse => ({ text: null, toolCalls: [{ id: 'c', name: 'charge', arguments: args }] });
const hostDied = () => { throw new Error('the host died before the next step'); };
const schema = (field: string) => ({ type: 'object', properties: { [field]: { type: 'number' } }, required: [field], additionalProperties: false });

for (const redeploy of [
  { what: 'the input schema changed (amount → amount_cents)', field: 'amount_cents', repeat: '{"amount_cents":500}', stop: 'needs_review' },
  { what: 'a new revision whose schema the recorded arguments still fit', field: 'amount', repeat: '{"amount":5}', stop: 'completed' },
] as const) {
  it(`a call in doubt across a redeploy: ${redeploy.what}: the charge is made once`, async () => {
    const ledger: unknown[] = [];
    const charge = (field: string, revision: string): Tool => ({
      name: 'charge',
      metadata: new ToolMetadata('charges the card', schema(field)).withEffect('non_idempotent', revision),
      async execute(request) {
        ledger.push(request.arguments);
        // The write is made, then the connection drops: in doubt.
        throw new Error('ECONNRESET after the charge');
      },
    });
    const store = createMemoryStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('task');
    const v1 = createToolRuntime({ tools: [charge('amount', 'charge-v1')], grants: { agent: '*' } }).bind({ owner, taskId: 'task', caller: 'agent' });
    await assert.rejects(runAgent({ model: scriptedModel([step('{"amount":5}'), hostDied]), owner, gateway: v1, store, input: 'Charge 5.', runId: 'r', maxSteps: 4, reconcilers: [] }), /host died/);
    assert.equal(ledger.length, 1);
    const v2 = createToolRuntime({ tools: [charge(redeploy.field, 'charge-v2')], grants: { agent: '*' } }).bind({ owner, taskId: 'task', caller: 'agent' });
    const resumed = await resumeAgent({ model: scriptedModel([step(redeploy.repeat), { text: 'It may have been charged.', toolCalls: [] }]), owner, gateway: v2, store, runId: 'r', maxSteps: 4, reconcilers: [] });
    assert.equal(resumed.stopReason, redeploy.stop);
    assert.equal(ledger.length, 1, 'charged once');
  });
}
