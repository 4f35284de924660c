/**
 * Bad input to a public function is refused with the package's typed error (InvalidInputError, `invalid_input`,
 * naming the field), as docs/api.md#errors promises of every error, never a bare TypeError from deeper in.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { createMemoryStore, createToolRuntime, ToolMetadata } from '../../src/index.js';
import { describeToolFailure, modelFacingOutcome, resumeAgent, runAgent, runOperationKey, scriptedModel } from '../../src/agent.js';
import type { ToolExecution } from '../../src/tool/types.js';

const invalid = (field: string) => ({ name: 'InvalidInputError', code: 'invalid_input', field });

it('append, findInDoubt, modelFacingOutcome, describeToolFailure and scriptedModel refuse bad input as invalid_input, naming the field', async () => {
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'h' });
  await owner.startTask('t');
  await assert.rejects(owner.append([null as never]), invalid('events[0]'));
  await assert.rejects(owner.append([{ turnId: 'x', kind: { type: 'custom', plugin: 'p', kind: 'k', payload: 1 } }, 7 as never]), invalid('events[1]'));
  await assert.rejects(owner.findInDoubt!(null as never), invalid('binding'));
  await assert.rejects(owner.findInDoubt!({ taskId: 't', tool: 'w' } as never), invalid('binding.argsDigest'));
  await assert.rejects(owner.findInDoubt!({ taskId: 't', tool: 'w', argsDigest: 'd', running: 3 } as never), invalid('binding.running'));
  assert.equal(await owner.findInDoubt!({ taskId: 't', tool: 'w', argsDigest: 'd' }), null, 'a good binding is still answered');
  assert.throws(() => modelFacingOutcome(null as never), invalid('execution'));
  assert.throws(() => modelFacingOutcome({ call: { name: 'w' }, result: null } as unknown as ToolExecution), invalid('execution'));
  assert.throws(() => describeToolFailure('w', null as never, false), invalid('failure'));
  assert.throws(() => describeToolFailure('w', { category: 'denied', code: 'no' } as never, false), invalid('failure'));
  assert.throws(() => describeToolFailure(null as never, { category: 'denied', code: 'no', message: 'not today' }, false), invalid('name'));
  assert.match(describeToolFailure('w', { category: 'denied', code: 'no', message: 'not today' }, false), /^Tool "w" failed: denied \(no\): not today\. The tool did not run\.$/);
  assert.throws(() => scriptedModel(null as never), invalid('turns'));
  assert.throws(() => scriptedModel('turn' as never), invalid('turns'));
  await owner.release();
  await store.close();
});

it('a number setting given as text is shown quoted, so "100" does not read as the valid 100', async () => {
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'h' });
  await owner.startTask('t');
  const tool = { name: 'w', metadata: new ToolMetadata('w', { type: 'object' }).withEffect('idempotent', 'v1'), execute: async () => 'ok' };
  const gateway = createToolRuntime({ tools: [tool], grants: { a: '*' } }).bind({ owner, taskId: 't', caller: 'a' });
  const refused = (message: string) => ({ name: 'ToolPreflightError', code: 'invalid_options', message });
  await assert.rejects(gateway.callWithOptions('w', {}, { timeoutMs: '100' as never }), refused('timeoutMs must be a positive integer, got "100"'));
  await assert.rejects(gateway.callWithOptions('w', {}, { maxOutputBytes: '5' as never }), refused('maxOutputBytes must be a positive integer, got "5"'));
  await assert.rejects(gateway.callWithOptions('w', {}, { timeoutMs: -1 }), refused('timeoutMs must be a positive integer, got -1'));
  await assert.rejects(gateway.callWithOptions('w', {}, { timeoutMs: {} as never }), refused('timeoutMs must be a positive integer, got an object'));
  assert.throws(() => createToolRuntime({ tools: [tool], grants: { a: '*' }, maxInFlight: '4' as never }), { name: 'ToolConfigError', message: /maxInFlight must be a positive integer, got "4"$/ });
  assert.throws(() => new ToolMetadata('w', { type: 'object' }).withTimeoutCeiling('100' as never), { code: 'invalid_input', message: /got "100"$/ });
  await owner.release();
  await store.close();
});

it('runOperationKey checks its run id as runAgent does, and its step (from 1) and index (from 0)', () => {
  assert.equal(runOperationKey('run-1', 1, 0), 'run-1/1/0');
  assert.equal(runOperationKey('run-1', 12, 3), 'run-1/12/3');
  assert.throws(() => runOperationKey(null as never, 1, 0), invalid('runId'));
  assert.throws(() => runOperationKey('a/b', 1, 0), invalid('runId'));
  assert.throws(() => runOperationKey('', 1, 0), invalid('runId'));
  assert.throws(() => runOperationKey('run-1', 0, 0), invalid('step'));
  assert.throws(() => runOperationKey('run-1', 1.5, 0), invalid('step'));
  assert.throws(() => runOperationKey('run-1', '1' as never, 0), { ...invalid('step'), message: /got "1"$/ });
  assert.throws(() => runOperationKey('run-1', 1, -1), invalid('index'));
  assert.throws(() => runOperationKey('run-1', 1, Number.NaN), invalid('index'));
});

it('a run reads its options once: a runId getter answering differently cannot start a run twice (r78 A L1)', async () => {
  // Read three times, 'r1', 'r1', then nothing: the checks saw the run id and the loop started a new run beside r1,
  // and from then on r1 could never be resumed ("the run is started twice").
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'h' });
  await owner.startTask('t');
  const gateway = createToolRuntime({ tools: [], grants: {} }).bind({ owner, taskId: 't', caller: 'a' });
  const base = { owner, gateway, store, maxSteps: 3, input: 'go' };
  const first = await runAgent({ ...base, model: scriptedModel([{ text: 'one', toolCalls: [] }]), runId: 'r1' });
  assert.equal(first.stopReason, 'completed');
  let reads = 0;
  const tricky = { ...base, model: scriptedModel([{ text: 'two', toolCalls: [] }]), get runId() { reads += 1; return reads <= 2 ? 'r1' : undefined; } };
  const again = await runAgent(tricky as never);
  assert.equal(reads, 1, 'read once');
  assert.equal(again.runId, 'r1');
  assert.equal(again.text, 'one', 'the finished run is read back, not started anew');
  const resumed = await resumeAgent({ ...base, model: scriptedModel([]), runId: 'r1' });
  assert.equal(resumed.text, 'one');
  const throwing = { ...base, model: scriptedModel([]), get runId(): string { throw new Error('no'); } };
  await assert.rejects(runAgent(throwing), invalid('runId'));
  await store.close();
});

it('an input with a broken character is refused naming input, with nothing journaled (r78 A L2)', async () => {
  // Before, the refusal named events[0] and a byte offset inside an event the caller never wrote.
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'h' });
  await owner.startTask('t');
  const gateway = createToolRuntime({ tools: [], grants: {} }).bind({ owner, taskId: 't', caller: 'a' });
  await assert.rejects(runAgent({ owner, gateway, store, maxSteps: 3, input: 'pay \ud83d now', model: scriptedModel([]) }), invalid('input'));
  assert.equal((await store.loadHistory('s')).length, 1, 'only the task start is journaled');
  await store.close();
});
