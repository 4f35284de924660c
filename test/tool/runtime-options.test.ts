/**
 * No silent caps: a call option above its ceiling is refused with `invalid_options`, naming the ceiling and the
 * setting that raises it, and nothing is recorded. One test per option and ceiling. Also: a tool's own availability
 * check refuses a call before its start marker, and an event draft's errors name the API's fields.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assessSession } from '../../src/tool/assess.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool, ToolDenial, ToolRuntimeConfig } from '../../src/tool/types.js';
import { LIMITS, RUNTIME_DEFAULTS } from '../../src/limits.js';
import { commitAs } from '../../src/store/owner-commit.js';

async function setup(tools: Tool[], config: Partial<ToolRuntimeConfig> = {}) {
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('task');
  const runtime = createToolRuntime({ tools, grants: { agent: '*' }, ...config });
  return { store, owner, gateway: runtime.bind({ owner, taskId: 'task', caller: 'agent', turnId: 'turn-1' }) };
}

const echo = (metadata = new ToolMetadata('echo', { type: 'object' })): Tool => ({ name: 'echo', metadata, execute: async () => 'ok' });

function refused(pattern: RegExp) {
  return (error: Error & { code?: string }) => {
    assert.equal(error.code, 'invalid_options');
    assert.equal(error.name, 'ToolPreflightError');
    assert.match(error.message, pattern);
    return true;
  };
}

describe('call options above a ceiling are refused, never cut', () => {
  it('timeoutMs above the runtime default (30 s): names defaultTimeoutMs', async () => {
    const { store, gateway } = await setup([echo()]);
    await assert.rejects(gateway.callWithOptions('echo', {}, { timeoutMs: 60_000 }),
      refused(/timeoutMs 60000 is above its ceiling of 30000; to allow more, raise the runtime's defaultTimeoutMs \(createToolRuntime\)/));
    // Nothing but the task's start (docs/design.md#the-task-ledger-in-the-chain).
    assert.deepEqual((await store.loadHistory('s')).map((e) => e.kind.type), ['task_ledger']);
    // At the ceiling is allowed.
    const at = await gateway.callWithOptions('echo', {}, { timeoutMs: RUNTIME_DEFAULTS.timeoutMs });
    assert.equal(at.result.outcome.status, 'succeeded');
  });

  it('timeoutMs above a raised runtime default passes; above the tool ceiling names withTimeoutCeiling', async () => {
    const { gateway } = await setup([echo(new ToolMetadata('echo', { type: 'object' }).withTimeoutCeiling(45_000))], { defaultTimeoutMs: 120_000 });
    await assert.rejects(gateway.callWithOptions('echo', {}, { timeoutMs: 60_000 }),
      refused(/ceiling of 45000; to allow more, raise the tool's ceiling \(ToolMetadata\.withTimeoutCeiling on echo\)/));
    const { gateway: raised } = await setup([echo()], { defaultTimeoutMs: 120_000 });
    assert.equal((await raised.callWithOptions('echo', {}, { timeoutMs: 60_000 })).result.outcome.status, 'succeeded');
  });

  it("a timeout longer than Node's timers hold (2^31 ms) is refused at configuration; at the limit a call runs to its end", async () => {
    const slow: Tool = { name: 'slow', metadata: new ToolMetadata('slow', { type: 'object' }), execute: () => new Promise((resolve) => setTimeout(() => resolve('done'), 30)) };
    assert.throws(() => createToolRuntime({ tools: [slow], grants: { agent: '*' }, defaultTimeoutMs: LIMITS.maxTimeoutMs + 1 }),
      { code: 'tool_config_invalid', message: /defaultTimeoutMs must be a positive integer of at most 2147483647, got 2147483648/ });
    assert.throws(() => new ToolMetadata('slow', { type: 'object' }).withTimeoutCeiling(7 * LIMITS.maxTimeoutMs), { code: 'invalid_input', field: 'timeoutCeilingMs' });
    // Node fires a longer timer at once: such a limit used to time out every call (tool_timeout after the start marker).
    const { gateway } = await setup([slow], { defaultTimeoutMs: LIMITS.maxTimeoutMs });
    assert.equal((await gateway.call('slow', {})).result.outcome.status, 'succeeded');
    const ceiling = await setup([{ ...slow, metadata: slow.metadata.withTimeoutCeiling(LIMITS.maxTimeoutMs) }], { defaultTimeoutMs: LIMITS.maxTimeoutMs });
    assert.equal((await ceiling.gateway.callWithOptions('slow', {}, { timeoutMs: LIMITS.maxTimeoutMs })).result.outcome.status, 'succeeded');
  });

  it('maxOutputBytes above the runtime maxOutputBytes (64 KiB): names maxOutputBytes', async () => {
    const { store, gateway } = await setup([echo()]);
    await assert.rejects(gateway.callWithOptions('echo', {}, { maxOutputBytes: 1_000_000 }),
      refused(/maxOutputBytes 1000000 is above its ceiling of 65536; to allow more, raise the runtime's maxOutputBytes \(createToolRuntime\)/));
    // Nothing but the task's start (docs/design.md#the-task-ledger-in-the-chain).
    assert.deepEqual((await store.loadHistory('s')).map((e) => e.kind.type), ['task_ledger']);
  });

  it('maxOutputBytes above the tool output ceiling: names withOutputCeiling', async () => {
    const { gateway } = await setup([echo(new ToolMetadata('echo', { type: 'object' }).withOutputCeiling(100))]);
    await assert.rejects(gateway.callWithOptions('echo', {}, { maxOutputBytes: 101 }),
      refused(/ceiling of 100; to allow more, raise the tool's ceiling \(ToolMetadata\.withOutputCeiling on echo\)/));
    assert.equal((await gateway.callWithOptions('echo', {}, { maxOutputBytes: 100 })).result.outcome.status, 'succeeded');
  });

  it('a non-positive or fractional option is refused as before', async () => {
    const { gateway } = await setup([echo()]);
    await assert.rejects(gateway.callWithOptions('echo', {}, { timeoutMs: 0 }), refused(/timeoutMs must be a positive integer/));
    await assert.rejects(gateway.callWithOptions('echo', {}, { maxOutputBytes: 1.5 }), refused(/maxOutputBytes must be a positive integer/));
  });
});

describe("a tool's availability check", () => {
  it('a denial is recorded as unavailable before any start marker; the body never runs and the call needs no review', async () => {
    let down: ToolDenial | null = { code: 'mcp_disconnected', message: 'the server is not connected; the call was not sent', retryable: true };
    let bodies = 0;
    const tool: Tool = {
      name: 'write',
      metadata: new ToolMetadata('writes', { type: 'object' }),
      execute: async () => { bodies += 1; return 'written'; },
      availability: () => down,
    };
    const { store, gateway } = await setup([tool]);
    const refusedCall = await gateway.call('write', {});
    assert.equal(refusedCall.startedEvent, null);
    assert.deepEqual(refusedCall.result.outcome, { status: 'failed', category: 'unavailable', code: 'mcp_disconnected', message: 'the server is not connected; the call was not sent', retryable: true });
    assert.equal(bodies, 0);
    down = null;
    assert.equal((await gateway.call('write', {})).result.outcome.status, 'succeeded');
    const assessment = assessSession(await store.loadHistory('s'));
    assert.deepEqual(assessment.calls.map((c) => [c.status, c.nextStep]), [['not_executed', 'retry_allowed']]);
    assert.equal(assessment.totals.byNextStep.needs_review, 0);
  });

  it('is asked again once an approver answered: a tool gone while a person decided is recorded unavailable, never started', async () => {
    let down: ToolDenial | null = null;
    let bodies = 0;
    let asked = 0;
    const tool: Tool = {
      name: 'write',
      metadata: new ToolMetadata('writes', { type: 'object' }).withApproval('human'),
      execute: async () => { bodies += 1; return 'written'; },
      availability: () => down,
    };
    const human = async () => {
      asked += 1;
      down = { code: 'mcp_disconnected', message: 'the server went away while a person decided; the call was not sent', retryable: true };
      return { decision: 'approved' as const };
    };
    const { store, gateway } = await setup([tool], { approvers: { human } });
    const gone = await gateway.call('write', {});
    assert.equal(asked, 1);
    assert.equal(gone.startedEvent, null);
    assert.ok(gone.result.outcome.status === 'failed' && gone.result.outcome.category === 'unavailable' && gone.result.outcome.code === 'mcp_disconnected');
    assert.equal(bodies, 0);
    const assessment = assessSession(await store.loadHistory('s'));
    assert.deepEqual(assessment.calls.map((c) => [c.status, c.nextStep]), [['not_executed', 'retry_allowed']]);
  });

  it('a throwing or malformed check is recorded as unavailable too', async () => {
    const throwing: Tool = { ...echo(), availability: () => { throw new Error('boom'); } };
    const { gateway } = await setup([throwing]);
    const execution = await gateway.call('echo', {});
    assert.equal(execution.startedEvent, null);
    assert.ok(execution.result.outcome.status === 'failed' && execution.result.outcome.code === 'tool_availability_fault');
  });
});

describe('event drafts: errors name the API fields', () => {
  it('a custom event without turnId names turnId, not turn_id', async () => {
    const { owner } = await setup([echo()]);
    const draft = { kind: { type: 'custom', plugin: 'my-host', kind: 'manifest', payload: {} } } as never;
    await assert.rejects(owner.append([draft]), (error: Error & { code?: string; field?: string }) => {
      assert.equal(error.code, 'invalid_input');
      assert.equal(error.field, 'events[0].turnId');
      assert.ok(!error.message.includes('turn_id'), error.message);
      return true;
    });
  });

  it('nested wire names are camel-cased; payload keys are kept as written', async () => {
    const { owner } = await setup([echo()]);
    // Tool evidence is the runtime's to write: its drafts are validated on the runtime's own path, commit.
    await assert.rejects(commitAs(owner, { events: [{ turnId: 't' as never, kind: { type: 'tool_started' } as never }] }), { field: 'events[0].kind.callId' });
    await assert.rejects(owner.append([{ turnId: 't' as never } as never]), { field: 'events[0].kind' });
    await assert.rejects(owner.append([{ turnId: 't' as never, kind: { type: 'custom', plugin: 'p', kind: 'k' } as never }]), { field: 'events[0].kind.payload' });
  });
});
