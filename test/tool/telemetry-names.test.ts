/**
 * What observers are handed about calls a model can multiply at will: a call to a tool the caller cannot use is
 * named `_OTHER` in span names and metric attributes (its requested name only on its span and in the hook's
 * events), so made-up names cannot create series; the span still starts under the host's active context. Also: the
 * span status of an unrecorded attempt has the documented `<category>: <code>` form, and a hook's rejected thenable
 * from another realm is swallowed, never an unhandled rejection.
 */
import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, it } from 'node:test';
import vm from 'node:vm';
import { ROOT_CONTEXT, context, trace, type Context, type ContextManager, type Tracer } from '@opentelemetry/api';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { UNAVAILABLE_TOOL_LABEL } from '../../src/tool/telemetry.js';
import type { ToolRuntimeEventHandler } from '../../src/tool/telemetry-types.js';
import type { Tool, ToolRuntimeConfig } from '../../src/tool/types.js';
import { tool } from '../support/runtime.js';
import { collect, counter, observed, type Observed } from './telemetry-support.js';

const echo = tool('echo', async (request) => request.arguments, new ToolMetadata('echoes', { type: 'object' }).withEffect('read_only', 'echo-v1'));
const secret = tool('secret', async () => 'not for agents');
const offline: Tool = { ...tool('offline', async () => 'x'), availability: () => ({ code: 'maintenance', message: 'down for maintenance' }) };

async function gatewayFor(o: Observed, extra: Partial<ToolRuntimeConfig> = {}) {
  const store = createMemoryStore();
  const owner = await store.acquire('s-names', { owner: 'host' });
  await owner.startTask('t', { limits: { toolCalls: 1000 } });
  const runtime = createToolRuntime({
    tools: [echo, secret, offline],
    grants: { agent: ['echo', 'offline'] },
    telemetry: { tracer: o.tracer, meter: o.meter },
    onEvent: (event) => { o.events.push(event); },
    ...extra,
  });
  return runtime.bind({ owner, taskId: 't', caller: 'agent' });
}

/** A minimal AsyncLocalStorage context manager, as @opentelemetry/context-async-hooks provides. */
class StorageContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    return this.storage.run(ctx, () => fn.apply(thisArg, args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    return this;
  }
}

describe('observability: names a caller cannot multiply', () => {
  it('a registered tool whose own availability check answers with the code tool_unavailable keeps its name', async () => {
    const o = observed();
    // The name follows whether the caller can use the tool, not the refusal's code (before, it was read from it).
    const down: Tool = { ...tool('down', async () => 'x'), availability: () => ({ code: 'tool_unavailable', message: 'the provider is down' }) };
    const owner = await createMemoryStore().acquire('s-down', { owner: 'host' });
    await owner.startTask('t');
    const runtime = createToolRuntime({ tools: [down], grants: { agent: '*' }, telemetry: { tracer: o.tracer, meter: o.meter } });
    const outcome = (await runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('down', {})).result.outcome;
    assert.deepEqual(outcome.status === 'failed' && [outcome.category, outcome.code], ['unavailable', 'tool_unavailable']);
    assert.deepEqual(o.exporter.getFinishedSpans().map((span) => span.name), ['execute_tool down']);
  });

  it('calls to tools the runtime lacks or does not grant: one fixed name in span names and metric attributes', async () => {
    const o = observed();
    const gateway = await gatewayFor(o);
    const requested = [...Array.from({ length: 50 }, (_, i) => `hallucinated_tool_${i}_user@example.com`), 'secret'];
    for (const name of requested) {
      const execution = await gateway.call(name, {});
      const outcome = execution.result.outcome;
      assert.deepEqual(outcome.status === 'failed' && [outcome.category, outcome.code], ['unavailable', 'tool_unavailable']);
    }
    await gateway.call('echo', {});
    await gateway.call('offline', {});

    const spans = o.exporter.getFinishedSpans();
    assert.deepEqual([...new Set(spans.map((s) => s.name))], [`execute_tool ${UNAVAILABLE_TOOL_LABEL}`, 'execute_tool echo', 'execute_tool offline']);
    const others = spans.filter((s) => s.name === 'execute_tool _OTHER');
    assert.ok(others.every((s) => s.attributes['gen_ai.tool.name'] === '_OTHER'));
    // Spans already carry high-cardinality attributes (call id, operation key, session): the requested name is one.
    assert.deepEqual(others.map((s) => s.attributes['jingwei.tool.requested_name']), requested);
    assert.ok(spans.filter((s) => s.name !== 'execute_tool _OTHER').every((s) => !('jingwei.tool.requested_name' in s.attributes)));
    // A registered, granted tool that reports itself unavailable keeps its own name.
    assert.equal(spans.find((s) => s.name === 'execute_tool offline')!.attributes['jingwei.failure.code'], 'maintenance');

    const m = await collect(o.reader);
    const toolNames = new Set([...m.values()].flatMap((points) => points.map((p) => p.attributes['gen_ai.tool.name'])));
    assert.deepEqual([...toolNames].sort(), ['_OTHER', 'echo', 'offline']);
    assert.equal(counter(m, 'jingwei.tool.attempts', { 'gen_ai.tool.name': '_OTHER', 'jingwei.failure.category': 'unavailable' }), 51);
    assert.equal(counter(m, 'jingwei.tool.failures', { 'gen_ai.tool.name': '_OTHER' }), 51);
    assert.equal(counter(m, 'jingwei.tool.in_flight'), 0, 'each admitted, then ended, under one name');

    // The host's own hook hears the name as the call gave it, as the journal records it.
    const admitted = o.events.filter((e) => e.type === 'attempt_admitted').map((e) => e.tool);
    assert.deepEqual(admitted, [...requested, 'echo', 'offline']);
  });

  it("the span starts under the host's active context and is counted in flight while guards run", async () => {
    const o = observed();
    let release!: () => void;
    const held = new Promise<void>((resolve) => { release = resolve; });
    const gateway = await gatewayFor(o, { guards: [async () => { await held; return null; }] });
    assert.ok(context.setGlobalContextManager(new StorageContextManager()));
    try {
      const parent = (o.tracer as unknown as Tracer).startSpan('agent turn');
      const pending = context.with(trace.setSpan(context.active(), parent), () => gateway.call('echo', {}));
      await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(counter(await collect(o.reader), 'jingwei.tool.in_flight', { 'gen_ai.tool.name': 'echo' }), 1);
      release();
      assert.equal((await pending).result.outcome.status, 'succeeded');
      const span = o.exporter.getFinishedSpans().find((s) => s.name === 'execute_tool echo')!;
      assert.equal(span.parentSpanContext?.spanId, parent.spanContext().spanId);
    } finally {
      context.disable();
    }
  });
});

describe('observability: span status and hooks', () => {
  it('an unrecorded attempt: span status `unrecorded: <code>`, the form of a recorded failure', async () => {
    const o = observed();
    const store = createMemoryStore();
    const owner = await store.acquire('s-unrecorded', { owner: 'host' });
    await owner.startTask('t', { limits: { toolCalls: 1 } });
    const runtime = createToolRuntime({ tools: [echo], grants: { agent: '*' }, telemetry: { tracer: o.tracer } });
    const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent' });
    await gateway.call('echo', {});
    await assert.rejects(gateway.call('echo', {}), { code: 'budget_exhausted' });
    const span = o.exporter.getFinishedSpans()[1]!;
    assert.deepEqual(span.status, { code: 2, message: 'unrecorded: budget_exhausted' });
  });

  it('a hook or span returning a rejected promise from another realm, or a bare thenable, never leaves an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => { unhandled.push(reason); };
    process.on('unhandledRejection', onUnhandled);
    try {
      const otherRealm = vm.runInNewContext('(async function (e) { if (e.type === "result_recorded") throw new Error("logger down"); })') as ToolRuntimeEventHandler;
      assert.ok(!(otherRealm({ type: 'attempt_admitted' } as Parameters<ToolRuntimeEventHandler>[0]) as unknown instanceof Promise), 'not this realm\'s Promise');
      const thenable = (() => ({
        // biome-ignore lint/suspicious/noThenProperty: a bare thenable (not a Promise) is what this case hands back
        then: (_: unknown, reject: (e: Error) => void) => reject(new Error('thenable down')),
      })) as unknown as ToolRuntimeEventHandler;
      const rejecting = async () => { throw new Error('exporter down'); };
      const tracer = { startSpan: () => ({ setAttributes: rejecting, addEvent: rejecting, setStatus: rejecting, end: rejecting }) };
      const configs: Array<Partial<ToolRuntimeConfig>> = [{ onEvent: otherRealm }, { onEvent: thenable }, { telemetry: { tracer } }];
      for (const config of configs) {
        const store = createMemoryStore();
        const owner = await store.acquire('s-hook', { owner: 'host' });
        await owner.startTask('t');
        const gateway = createToolRuntime({ tools: [echo], grants: { agent: '*' }, ...config }).bind({ owner, taskId: 't', caller: 'agent' });
        assert.equal((await gateway.call('echo', {})).result.outcome.status, 'succeeded');
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
