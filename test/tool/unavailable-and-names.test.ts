/**
 * Finding 10, the runtime side: a malformed tool name is refused at preflight with a typed error the model can act
 * on (never `recording_failed`), and calls to tools the caller cannot use cannot fill a session's journal.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runAgent, scriptedModel } from '../../src/agent.js';
import { encodeEventText } from '../../src/event/codec.js';
import { ToolEffect } from '../../src/event/types.js';
import { LIMITS } from '../../src/limits.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolPreflightError } from '../../src/errors.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';

async function setup(grants: readonly string[] | '*' = '*') {
  const bodies: string[] = [];
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('task', { limits: { toolCalls: 1000 } });
  const runtime = createToolRuntime({
    tools: [
      { name: 'lookup', metadata: new ToolMetadata('Looks up', { type: 'object' }).withEffect(ToolEffect.ReadOnly, 'v1'), async execute() { bodies.push('lookup'); return 'found'; } },
      { name: 'secret', metadata: new ToolMetadata('Not for agents', { type: 'object' }), async execute() { bodies.push('secret'); return 'x'; } },
    ],
    grants: { agent: grants === '*' ? '*' : [...grants] },
  });
  const gateway = runtime.bind({ owner, taskId: 'task', caller: 'agent' });
  // The task's journal: every event but the store's own record of the task's start, which is never charged to the
  // task (docs/design.md#the-task-ledger-in-the-chain).
  const journalBytes = async () => (await store.loadHistory('s')).filter((e) => e.kind.type !== 'task_ledger').reduce((sum, e) => sum + Buffer.byteLength(encodeEventText(e)), 0);
  return { store, owner, gateway, bodies, journalBytes };
}

const preflightCode = (code: string) => (error: unknown) => error instanceof ToolPreflightError && error.code === code;

describe('malformed tool names', () => {
  it('a lone surrogate, a control character or a bidi override in the name is refused at preflight, unrecorded', async () => {
    const { gateway, store } = await setup();
    for (const name of ['look\ud800', 'look\udc00up', 'look\u001b[2Kup', 'look\u0085', 'look\u202eup', 'look\u007f']) {
      await assert.rejects(gateway.call(name, {}), preflightCode('malformed_name'), JSON.stringify(name));
    }
    assert.deepEqual((await store.loadHistory('s')).map((e) => e.kind.type), ['task_ledger'], 'nothing but the task\'s start');
    assert.equal((await gateway.call('lookup', {})).result.outcome.status, 'succeeded', 'ordinary names still work');
  });

  it('runAgent: a name with a lone surrogate reaches the model as a refusal, and the run goes on', async () => {
    const { owner, gateway, bodies } = await setup();
    const model = scriptedModel([
      { text: null, toolCalls: [{ id: 'a', name: 'look\ud800', arguments: '{}' }] },
      { text: null, toolCalls: [{ id: 'b', name: 'lookup', arguments: '{}' }] },
      { text: 'Found it.', toolCalls: [] },
    ]);
    const result = await runAgent({ model, owner, gateway, input: 'Find it.', maxSteps: 3 });
    assert.equal(result.stopReason, 'completed');
    assert.equal(result.toolCalls[0]!.execution, null);
    const text = model.requests[1]!.messages.find((m) => m.role === 'tool')!.content;
    assert.match(text, /refused before it ran: preflight \(malformed_name\).*lone surrogate.*The tool did not run\./);
    assert.deepEqual(bodies, ['lookup']);
  });
});

describe('calls to tools the caller cannot use', () => {
  const big = { blob: 'x'.repeat(LIMITS.maxArgumentsBytes - 64) };

  it('15 calls with 1 MiB arguments to a tool that does not exist leave the journal small and the session usable', async () => {
    const { gateway, owner, journalBytes } = await setup();
    for (let i = 0; i < 15; i += 1) {
      await assert.rejects(gateway.call('does_not_exist', big), (error: unknown) => {
        assert.ok(preflightCode('unavailable_tool')(error), String(error));
        assert.match((error as Error).message, /does_not_exist.*not available.*not recorded/);
        return true;
      });
    }
    assert.equal(await journalBytes(), 0, 'nothing was journaled');
    assert.equal((await owner.task('task')).charged.toolCalls, 0, 'nothing was charged');
    const small = await gateway.call('does_not_exist', { q: 1 });
    assert.equal(small.result.outcome.status === 'failed' && small.result.outcome.category, 'unavailable', 'small mistakes stay on record');
    assert.equal((await gateway.call('lookup', big)).result.outcome.status, 'succeeded', 'a usable tool takes large arguments as before');
  });

  it('15 calls with 1 MiB arguments to a usable tool exhaust the task\'s journal budget, never the session', async () => {
    const { gateway, owner, store, journalBytes } = await setup();
    const outcomes: string[] = [];
    for (let i = 0; i < 15; i += 1) {
      try {
        await gateway.call('lookup', big);
        outcomes.push('ok');
      } catch (error) {
        outcomes.push(`${(error as { code?: string }).code}/${(error as { resource?: string }).resource}`);
      }
    }
    const admitted = outcomes.filter((o) => o === 'ok').length;
    assert.ok(admitted >= 7 && admitted < 15, outcomes.join(' '));
    assert.deepEqual(new Set(outcomes.slice(admitted)), new Set(['budget_exhausted/journal_bytes']), outcomes.join(' '));
    const task = await owner.task('task');
    assert.equal(task.charged.journalBytes, await journalBytes());
    assert.ok(task.charged.journalBytes <= task.limits.journalBytes, 'checked at admission: never past the limit here');
    // The session is not full: the host writes, and another task of the same session runs its own calls.
    await owner.append([{ turnId: 'turn-next', kind: { type: 'user_message', text: 'still here' } }]);
    await owner.startTask('task-2');
    const runtime = createToolRuntime({ tools: [{ name: 'lookup', metadata: new ToolMetadata('Looks up', { type: 'object' }), async execute() { return 'found'; } }], grants: { agent: '*' } });
    const next = await runtime.bind({ owner, taskId: 'task-2', caller: 'agent' }).call('lookup', {});
    assert.equal(next.result.outcome.status, 'succeeded');
    assert.ok((await store.loadHistory('s')).length > 0);
  });

  it('the same holds for a registered tool not granted to the caller; the bound is exact', async () => {
    const { gateway, store } = await setup(['lookup']);
    await assert.rejects(gateway.call('secret', big), preflightCode('unavailable_tool'));
    // {"p":"…"} is 8 bytes of JSON around the string.
    const atBound = { p: 'y'.repeat(LIMITS.maxUnavailableArgumentsBytes - 8) };
    assert.equal(Buffer.byteLength(JSON.stringify(atBound)), LIMITS.maxUnavailableArgumentsBytes);
    const recorded = await gateway.call('secret', atBound);
    assert.equal(recorded.result.outcome.status === 'failed' && recorded.result.outcome.category, 'unavailable');
    await assert.rejects(gateway.call('secret', { p: 'y'.repeat(LIMITS.maxUnavailableArgumentsBytes - 7) }), preflightCode('unavailable_tool'));
    assert.equal((await store.loadHistory('s')).filter((e) => e.kind.type === 'tool_call').length, 1);
  });

  it('runAgent: the model reads the refusal and nothing fills the journal', async () => {
    const { owner, gateway, journalBytes } = await setup();
    const args = JSON.stringify(big);
    const model = scriptedModel([
      { text: null, toolCalls: Array.from({ length: 15 }, (_, i) => ({ id: `c${i}`, name: 'fly_drone', arguments: args })) },
      { text: 'Gave up.', toolCalls: [] },
    ]);
    const result = await runAgent({ model, owner, gateway, input: 'Fly.', maxSteps: 2 });
    assert.equal(result.stopReason, 'completed');
    assert.ok(result.toolCalls.every((c) => c.execution === null && !c.outcome.ok));
    assert.match(model.requests[1]!.messages.find((m) => m.role === 'tool')!.content, /preflight \(unavailable_tool\)/);
    // 15 MiB of arguments reach no journal line: the run journals its messages, the response with the calls elided
    // and one short refusal per call (docs/design.md#resumable-runs), under 10 KiB whatever the arguments' size.
    assert.ok((await journalBytes()) < 12 * 1024, 'only the messages, the elided response and the refusals are journaled');
  });
});
