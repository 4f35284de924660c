import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ToolOperation } from '../../src/event/types.js';
import type { JsonValue } from '../../src/json/types.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { endHungBodies, never, rig, sleep, tool } from '../support/runtime.js';
import { untilBodyEnded } from '../support/body-ended.js';
import { forEachStore } from '../support/stores.js';

describe('ToolMetadata', () => {
  it('is immutable and defaults to the unknown contract', () => {
    const base = new ToolMetadata('d', { type: 'object' });
    assert.deepEqual(base.effect, { effect: 'unknown', revision: 'unspecified' });
    const idem = base.withEffect('idempotent', 'orders-v1').withApproval('human').withTimeoutCeiling(5).withOutputCeiling(10);
    assert.deepEqual(base.effect, { effect: 'unknown', revision: 'unspecified' });
    assert.equal(base.approval, null);
    assert.deepEqual(idem.effect, { effect: 'idempotent', revision: 'orders-v1' });
    assert.equal(idem.approval, 'human');
    assert.equal(idem.timeoutCeilingMs, 5);
    assert.throws(() => base.withEffect('sometimes' as never, 'v'), { code: 'invalid_input' });
    assert.throws(() => base.withEffect('read_only', '  '), { code: 'invalid_input' });
    assert.throws(() => base.withTimeoutCeiling(0), { code: 'invalid_input' });
  });
});

describe('createToolRuntime refuses an inconsistent configuration', () => {
  const t = tool('t', async () => 'x');
  it('duplicate names, unknown grants, missing approvers, invalid schemas', () => {
    assert.throws(() => createToolRuntime({ tools: [t, t], grants: {} }), { code: 'tool_config_invalid' });
    assert.throws(() => createToolRuntime({ tools: [t], grants: { a: ['missing'] } }), { code: 'tool_config_invalid' });
    const needs = tool('needs', async () => 'x', new ToolMetadata('n', {}).withApproval('boss'));
    assert.throws(() => createToolRuntime({ tools: [needs], grants: {} }), { code: 'tool_config_invalid' });
    const bad = tool('bad', async () => 'x', new ToolMetadata('b', { type: 'no-such-type' }));
    assert.throws(() => createToolRuntime({ tools: [bad], grants: {} }), { code: 'tool_config_invalid' });
    assert.throws(() => createToolRuntime({ tools: [], grants: {}, maxInFlight: 0 }), { code: 'tool_config_invalid' });
  });

  it('a configuration of the wrong shape is ToolConfigError naming the part, never a TypeError, and a tool without a body is refused before any call', () => {
    const cases: Array<[unknown, RegExp]> = [
      [undefined, /the runtime configuration must be an object/],
      [null, /the runtime configuration must be an object/],
      [{ grants: {} }, /tools must be an array of tools, got undefined/],
      [{ tools: [null], grants: {} }, /tools\[0\] must be a tool/],
      [{ tools: [{ name: 't', execute: async () => 'x' }], grants: {} }, /tool "t"\.metadata must be a ToolMetadata/],
      [{ tools: [{ name: 't', metadata: { description: 'd', inputSchema: {} }, execute: async () => 'x' }], grants: {} }, /tool "t"\.metadata must be a ToolMetadata/],
      [{ tools: [{ name: 't', metadata: t.metadata }], grants: {} }, /tool "t"\.execute must be a function/],
      [{ tools: [{ ...t, reconcile: 'yes' }], grants: {} }, /tool "t"\.reconcile must be a function/],
      [{ tools: [t] }, /grants must be an object/],
      [{ tools: [t], grants: null }, /grants must be an object/],
      [{ tools: [t], grants: { a: 'all' } }, /the grant of caller "a" must be '\*' or an array of tool names, got a string/],
      [{ tools: [t], grants: { a: 5 } }, /the grant of caller "a"/],
      [{ tools: [t], grants: {}, guards: 'no' }, /guards must be an array/],
      [{ tools: [t], grants: {}, guards: [5] }, /guards\[0\] must be a function/],
      [{ tools: [t], grants: {}, approvers: { boss: 'yes' } }, /approver "boss" must be a function/],
      [{ tools: [t], grants: {}, describePanic: 'x' }, /describePanic must be a function/],
    ];
    for (const [config, message] of cases) {
      assert.throws(() => createToolRuntime(config as Parameters<typeof createToolRuntime>[0]), { name: 'ToolConfigError', code: 'tool_config_invalid', message });
    }
  });
});

describe('a gateway refuses options of the wrong shape before anything is recorded', () => {
  it('a binding signal or call options that are not what they say: typed, nothing journaled', async () => {
    const store = createMemoryStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('task');
    const runtime = createToolRuntime({ tools: [tool('t', async () => 'x')], grants: { agent: '*' } });
    assert.throws(() => runtime.bind({ owner, taskId: 'task', caller: 'agent', signal: {} as AbortSignal }), { name: 'InvalidInputError', field: 'signal' });
    const gateway = runtime.bind({ owner, taskId: 'task', caller: 'agent' });
    await assert.rejects(gateway.callWithOptions('t', {}, null as unknown as object), { name: 'ToolPreflightError', code: 'invalid_options', message: /options must be an object, got null/ });
    await assert.rejects(gateway.callWithOptions('t', {}, { signal: {} as AbortSignal }), { name: 'ToolPreflightError', code: 'invalid_options', message: /signal must be an AbortSignal/ });
    assert.deepEqual((await store.loadHistory('s')).map((e) => e.kind.type), ['task_ledger']);
  });
});

forEachStore('the gateway', (target) => {
  it('shows each caller only its granted tools', async () => {
    const r = await rig(target, { tools: [tool('a', async () => ''), tool('b', async () => '')], grants: { agent: ['b'] } });
    assert.deepEqual(r.gateway.schemas().map((s) => s.name), ['b']);
    await r.store.close();
  });

  it('hands the body the journaled operation; every attempt has a fresh call id and new action a new key', async () => {
    const seen: Array<{ callId: string; operation: ToolOperation }> = [];
    const probe = tool('probe', async (req) => { seen.push({ callId: req.callId, operation: req.operation }); return { echoed: req.arguments }; },
      new ToolMetadata('p', { type: 'object' }).withEffect('idempotent', 'v1'));
    const r = await rig(target, { tools: [probe] });
    const a = await r.gateway.call('probe', { x: 1 });
    const b = await r.gateway.call('probe', { x: 1 });
    assert.equal(a.result.outcome.status, 'succeeded');
    assert.equal((a.result.outcome as { output: string }).output, '{"echoed":{"x":1}}', 'non-string output is recorded as JSON text');
    assert.deepEqual(seen[0]!.operation, a.call.operation);
    assert.deepEqual(seen[1]!.operation, b.call.operation);
    assert.equal(seen[0]!.callId, a.call.id);
    assert.notEqual(a.call.id, b.call.id);
    assert.notEqual(a.call.operation!.key, b.call.operation!.key);
    assert.deepEqual(a.call.operation, { taskId: r.taskId, key: a.call.operation!.key, contract: { effect: 'idempotent', revision: 'v1' }, retry: null, startMarker: true });
    assert.match(a.call.id, /^toolcall_[0-9a-f-]{36}$/);
    assert.match(a.call.operation!.key, /^operation_[0-9a-f-]{36}$/);
    const history = await r.store.loadHistory(r.sessionId);
    assert.deepEqual(history.map((e) => e.kind.type), ['task_ledger', 'tool_call', 'tool_started', 'tool_result', 'tool_call', 'tool_started', 'tool_result'], 'after the task\'s start');
    await r.store.close();
  });

  it('options only tighten: a larger timeout than the tool ceiling is refused, never loosened or cut, and the ceiling holds', async () => {
    const slow = tool('slow', () => never(), new ToolMetadata('s', {}).withTimeoutCeiling(20));
    const r = await rig(target, { tools: [slow] });
    await assert.rejects(r.gateway.callWithOptions('slow', {}, { timeoutMs: 60_000 }), (error: Error & { code: string }) => {
      assert.equal(error.code, 'invalid_options');
      assert.match(error.message, /timeoutMs 60000 is above its ceiling of 20/);
      assert.match(error.message, /withTimeoutCeiling/);
      return true;
    });
    // Nothing but the task's start (docs/design.md#the-task-ledger-in-the-chain).
    assert.deepEqual((await r.store.loadHistory(r.sessionId)).map((e) => e.kind.type), ['task_ledger']);
    const execution = await r.gateway.callWithOptions('slow', {}, { timeoutMs: 20 });
    assert.equal((execution.result.outcome as { category: string }).category, 'timeout');
    endHungBodies();
    await r.store.close();
  });

  it('throws, recording nothing, for preflight errors, a stopped task and an exhausted budget', async () => {
    const t = tool('t', async () => 'x');
    const r = await rig(target, { tools: [t] }, { toolCalls: 1 });
    await assert.rejects(r.gateway.call('', {}), { code: 'empty_name' });
    await assert.rejects(r.gateway.call('n'.repeat(257), {}), { code: 'name_too_long' });
    await assert.rejects(r.gateway.call('t', { big: 'x'.repeat(1024 * 1024) }), { code: 'arguments_too_large' });
    await assert.rejects(r.gateway.call('t', { bad: Number.NaN }), { code: 'arguments_not_serializable' });
    // A getter that answers the check one way and the serialization another is refused the same way, typed.
    const shifty = (second: () => unknown) => {
      let reads = 0;
      return { get v() { reads += 1; return reads === 1 ? 'fine' : second(); } } as unknown as JsonValue;
    };
    const cycle: { self?: unknown } = {};
    cycle.self = cycle;
    for (const second of [() => 10n, () => cycle, () => { throw new Error('second read'); }, () => { throw 'not an error'; }]) {
      await assert.rejects(r.gateway.call('t', shifty(second)), { name: 'ToolPreflightError', code: 'arguments_not_serializable' });
    }
    await assert.rejects(r.gateway.callWithOptions('t', {}, { timeoutMs: -1 }), { code: 'invalid_options' });
    await r.gateway.call('t', {});
    await assert.rejects(r.gateway.call('t', {}), { code: 'budget_exhausted' });
    await r.owner.stopTask(r.taskId, 'done for today');
    await assert.rejects(r.gateway.call('t', {}), { code: 'task_not_running' });
    // The task's start, the one admitted call and its result, the task's stop: nothing for the refused calls.
    assert.deepEqual((await r.store.loadHistory(r.sessionId)).map((e) => e.kind.type), ['task_ledger', 'tool_call', 'tool_started', 'tool_result', 'task_ledger']);
    assert.equal((await r.owner.task(r.taskId)).charged.toolCalls, 1);
    await r.store.close();
  });

  it('a cancelled gateway admits nothing', async () => {
    const controller = new AbortController();
    const r = await rig(target, { tools: [tool('t', async () => 'x')] });
    const runtime = createToolRuntime({ tools: [tool('t', async () => 'x')], grants: { agent: '*' } });
    const gateway = runtime.bind({ owner: r.owner, taskId: r.taskId, caller: 'agent', signal: controller.signal });
    controller.abort();
    await assert.rejects(gateway.call('t', {}), { code: 'turn_closed' });
    // Nothing but the task's start (docs/design.md#the-task-ledger-in-the-chain).
    assert.deepEqual((await r.store.loadHistory(r.sessionId)).map((e) => e.kind.type), ['task_ledger']);
    await r.store.close();
  });

  it('100 concurrent calls: gap-free verified journal, every call paired, ledger equals attempts, maxInFlight holds', async () => {
    let running = 0;
    let peak = 0;
    const busy = tool('busy', async () => {
      running += 1;
      peak = Math.max(peak, running);
      await sleep(5);
      running -= 1;
      return 'ok';
    });
    const r = await rig(target, { tools: [busy], maxInFlight: 16 });
    const settled = await Promise.allSettled(Array.from({ length: 100 }, (_, i) => r.gateway.call('busy', { i })));
    const done = settled.filter((s) => s.status === 'fulfilled');
    const overloaded = settled.filter((s) => s.status === 'rejected');
    for (const s of overloaded) assert.equal((s.reason as { code: string }).code, 'overloaded');
    assert.ok(peak <= 16, `peak ${peak}`);
    assert.equal(done.length + overloaded.length, 100);
    assert.ok(done.length >= 16);
    const history = await r.store.loadHistory(r.sessionId);
    assert.deepEqual(history.map((e) => e.seq), history.map((_, i) => i));
    const calls = history.filter((e) => e.kind.type === 'tool_call');
    const results = history.filter((e) => e.kind.type === 'tool_result');
    assert.equal(calls.length, done.length);
    assert.equal(results.length, done.length);
    const resultIds = new Set(results.map((e) => (e.kind as { result: { callId: string } }).result.callId));
    for (const c of calls) assert.ok(resultIds.has((c.kind as { call: { id: string } }).call.id));
    assert.equal((await r.owner.task(r.taskId)).charged.toolCalls, done.length);
    await r.store.close();
  });

  it('a takeover during a running call: the old runtime cannot record the result, the new journal verifies', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    let entered!: () => void;
    const inBody = new Promise<void>((resolve) => { entered = resolve; });
    const held = tool('held', async () => { entered(); await gate; return 'finished'; });
    const r = await rig(target, { tools: [held] });
    const pending = r.gateway.call('held', {});
    await inBody;
    const other = await r.reopen();
    const next = await other.acquire(r.sessionId, { owner: 'new-host', takeover: true });
    release();
    await assert.rejects(pending, (error: unknown) => {
      const e = error as { code: string; stage: string; result: { outcome: { status: string } } };
      assert.equal(e.code, 'recording_failed');
      assert.equal(e.stage, 'result');
      assert.equal(e.result.outcome.status, 'succeeded', 'the error carries what the body returned');
      return true;
    });
    // The new owner, on the same database in this process, journals that the fenced body returned.
    const callId = ((await other.loadHistory(r.sessionId))[1]!.kind as { call: { id: string } }).call.id;
    await untilBodyEnded(other, r.sessionId, callId);
    const history = await other.loadHistory(r.sessionId);
    assert.deepEqual(history.map((e) => e.kind.type), ['task_ledger', 'tool_call', 'tool_started', 'custom'], 'after the task\'s start');
    assert.equal(next.epoch, 2);
    await other.close();
    await r.store.close();
  });
});

forEachStore('preflight keeps every journaled call importable', (target) => {
  it('refuses arguments nested deeper than the journal line allows, recording nothing', async () => {
    const r = await rig(target, { tools: [tool('t', async () => 'x')] });
    const nest = (depth: number) => { let v: unknown = {}; for (let i = 1; i < depth; i++) v = { v }; return v as never; };
    const ok = await r.gateway.call('t', nest(253));
    assert.equal(ok.result.outcome.status, 'succeeded');
    await assert.rejects(r.gateway.call('t', nest(254)), { code: 'arguments_not_serializable' });
    const jsonl = await r.store.exportJsonl(r.sessionId);
    const copy = await target.fresh().open();
    // The task's start, then the call, its marker and its result.
    assert.equal((await copy.importJsonl(jsonl, { owner: 'importer' })).events, 4, 'the deepest accepted call survives export and import');
    await copy.close();
    await r.store.close();
  });
});
