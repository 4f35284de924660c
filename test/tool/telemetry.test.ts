/**
 * Observability through the OpenTelemetry SDK's in-memory span exporter and a collecting metric reader: the span,
 * its attributes and events, and the metrics of a success, a pre-body refusal, a timeout, an approval wait and a
 * retry; the onEvent hook sees the same facts; a throwing hook or tracer never changes a call.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { metrics, trace } from '@opentelemetry/api';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { decisionInbox } from '../../src/store/inbox.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/recovery.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { ToolRuntimeEvent } from '../../src/tool/telemetry-types.js';
import type { Tool, ToolGuard, ToolRuntimeConfig } from '../../src/tool/types.js';
import { never, tool } from '../support/runtime.js';
import { CollectingReader, collect, counter, histogramCount, observed, type Observed } from './telemetry-support.js';

async function setup(o: Observed, tools: Tool[], extra: Partial<ToolRuntimeConfig> = {}) {
  const store = createMemoryStore();
  const owner = await store.acquire('s-otel', { owner: 'host' });
  await owner.startTask('t-otel');
  const runtime = createToolRuntime({
    tools,
    grants: { agent: '*' },
    telemetry: { tracer: o.tracer, meter: o.meter },
    onEvent: (event) => { o.events.push(event); },
    ...extra,
  });
  return { store, owner, gateway: runtime.bind({ owner, taskId: 't-otel', caller: 'agent' }), runtime };
}

const echo = tool('echo', async (request) => request.arguments, new ToolMetadata('echoes', { type: 'object' }).withEffect('read_only', 'echo-v1'));
const spanEvents = (span: ReadableSpan) => span.events.map((e) => e.name);
const types = (events: ToolRuntimeEvent[]) => events.map((e) => e.type);

describe('observability', () => {
  it('a success: one execute_tool span with the GenAI and Jingwei attributes, its events, metrics and hook events', async () => {
    const o = observed();
    const { gateway } = await setup(o, [echo]);
    const execution = await gateway.call('echo', { a: 1 });
    const op = execution.call.operation!;
    const [span, ...more] = o.exporter.getFinishedSpans();
    assert.equal(more.length, 0);
    assert.equal(span!.name, 'execute_tool echo');
    assert.equal(span!.kind, 0, 'SpanKind.INTERNAL');
    assert.deepEqual(span!.attributes, {
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'echo',
      'gen_ai.tool.call.id': execution.call.id,
      'jingwei.session.id': 's-otel',
      'jingwei.task.id': 't-otel',
      'jingwei.tool.effect': 'read_only',
      'jingwei.tool.revision': 'echo-v1',
      'jingwei.operation.key': op.key,
      'jingwei.attempt': 1,
      'jingwei.retry': false,
      'jingwei.outcome': 'succeeded',
      'jingwei.body.started': true,
      'jingwei.recovery.status': 'completed',
      'jingwei.recovery.rule': 'succeeded',
    });
    assert.equal(span!.status.code, 0, 'a success leaves the status unset');
    assert.deepEqual(spanEvents(span!), ['jingwei.body.started', 'jingwei.result.recorded']);

    const m = await collect(o.reader);
    assert.equal(counter(m, 'jingwei.tool.attempts', { 'gen_ai.tool.name': 'echo', 'jingwei.outcome': 'succeeded', 'jingwei.tool.effect': 'read_only' }), 1);
    assert.equal(counter(m, 'jingwei.tool.failures'), 0);
    assert.equal(counter(m, 'jingwei.tool.in_flight'), 0, 'admitted then ended');
    assert.equal(counter(m, 'jingwei.tool.in_doubt'), 0);
    assert.equal(histogramCount(m, 'gen_ai.execute_tool.duration', { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'echo' }), 1);
    assert.equal(histogramCount(m, 'jingwei.tool.body.duration', { 'jingwei.outcome': 'succeeded' }), 1);
    assert.equal(histogramCount(m, 'jingwei.tool.approval.duration'), 0);

    assert.deepEqual(types(o.events), ['attempt_admitted', 'body_started', 'result_recorded']);
    for (const e of o.events) {
      assert.equal(e.callId, execution.call.id);
      assert.equal(e.operationKey, op.key);
      assert.equal(e.attempt, 1);
      assert.equal(e.tool, 'echo');
      assert.equal(e.effect, 'read_only');
      assert.equal(e.revision, 'echo-v1');
      assert.equal(e.sessionId, 's-otel');
      assert.equal(e.taskId, 't-otel');
    }
    const recorded = o.events[2] as Extract<ToolRuntimeEvent, { type: 'result_recorded' }>;
    assert.equal(recorded.outcome, 'succeeded');
    assert.equal(recorded.category, null);
    assert.equal(recorded.recoveryStatus, 'completed');
    assert.equal(recorded.bodyStarted, true);
    assert.equal(typeof recorded.bodyMs, 'number');
    assert.equal(recorded.approvalMs, null);
  });

  it('a pre-body refusal: error status and category, not_executed, a failure counted as pre-body, no body duration', async () => {
    const o = observed();
    const deny: ToolGuard = () => ({ code: 'policy_says_no', message: 'not now' });
    const { gateway } = await setup(o, [echo], { guards: [deny] });
    const execution = await gateway.call('echo', {});
    assert.equal(execution.startedEvent, null);
    const [span] = o.exporter.getFinishedSpans();
    assert.deepEqual(spanEvents(span!), ['jingwei.attempt.refused', 'jingwei.result.recorded']);
    assert.equal(span!.status.code, 2, 'SpanStatusCode.ERROR');
    assert.match(span!.status.message ?? '', /denied: policy_says_no/);
    assert.equal(span!.attributes['error.type'], 'denied');
    assert.equal(span!.attributes['jingwei.failure.category'], 'denied');
    assert.equal(span!.attributes['jingwei.failure.code'], 'policy_says_no');
    assert.equal(span!.attributes['jingwei.body.started'], false);
    assert.equal(span!.attributes['jingwei.recovery.status'], 'not_executed');
    assert.deepEqual(span!.events[0]!.attributes, { 'jingwei.failure.category': 'denied', 'jingwei.failure.code': 'policy_says_no' });

    const m = await collect(o.reader);
    assert.equal(counter(m, 'jingwei.tool.failures', { 'jingwei.failure.category': 'denied', 'jingwei.failure.pre_body': true, 'error.type': 'denied' }), 1);
    assert.equal(counter(m, 'jingwei.tool.attempts', { 'jingwei.outcome': 'failed', 'jingwei.failure.category': 'denied' }), 1);
    assert.equal(histogramCount(m, 'jingwei.tool.body.duration'), 0);
    assert.equal(histogramCount(m, 'gen_ai.execute_tool.duration', { 'error.type': 'denied' }), 1);

    assert.deepEqual(types(o.events), ['attempt_admitted', 'attempt_refused', 'result_recorded']);
    const refused = o.events[1] as Extract<ToolRuntimeEvent, { type: 'attempt_refused' }>;
    assert.deepEqual([refused.category, refused.code], ['denied', 'policy_says_no']);
    const recorded = o.events[2] as Extract<ToolRuntimeEvent, { type: 'result_recorded' }>;
    assert.deepEqual([recorded.outcome, recorded.category, recorded.recoveryStatus, recorded.bodyStarted, recorded.bodyMs], ['failed', 'denied', 'not_executed', false, null]);
  });

  it('a timeout after the body started: outcome_unknown, counted in doubt', async () => {
    const o = observed();
    const hang = tool('hang', async () => never(), new ToolMetadata('hangs', { type: 'object' }).withEffect('non_idempotent', 'hang-v1'));
    const { gateway } = await setup(o, [hang]);
    // The deadline runs from admission: long enough for the call and its start marker to be written on a loaded
    // machine (a 20 ms one once ran out before the body was called, and the call was rightly not_executed).
    const execution = await gateway.callWithOptions('hang', {}, { timeoutMs: 1_000 });
    assert.equal(execution.result.outcome.status === 'failed' && execution.result.outcome.category, 'timeout');
    const [span] = o.exporter.getFinishedSpans();
    assert.deepEqual(spanEvents(span!), ['jingwei.body.started', 'jingwei.result.recorded']);
    assert.equal(span!.attributes['error.type'], 'timeout');
    assert.equal(span!.attributes['jingwei.recovery.status'], 'outcome_unknown');
    assert.equal(span!.attributes['jingwei.recovery.rule'], 'flagged_started');
    assert.equal(span!.status.code, 2);

    const m = await collect(o.reader);
    assert.equal(counter(m, 'jingwei.tool.failures', { 'jingwei.failure.category': 'timeout', 'jingwei.failure.pre_body': false }), 1);
    assert.equal(counter(m, 'jingwei.tool.in_doubt', { 'gen_ai.tool.name': 'hang', 'jingwei.tool.effect': 'non_idempotent' }), 1);
    assert.equal(histogramCount(m, 'jingwei.tool.body.duration', { 'jingwei.failure.category': 'timeout' }), 1);

    assert.deepEqual(types(o.events), ['attempt_admitted', 'body_started', 'result_recorded']);
    const recorded = o.events[2] as Extract<ToolRuntimeEvent, { type: 'result_recorded' }>;
    assert.deepEqual([recorded.category, recorded.recoveryStatus, recorded.bodyStarted], ['timeout', 'outcome_unknown', true]);
  });

  it('an approval wait: requested and answered events, the waiting gauge while it waits, the approval duration', async () => {
    const o = observed();
    let answer!: (decision: 'approved' | 'denied') => void;
    const approver = () => new Promise<{ decision: 'approved' } | { decision: 'denied'; code: string; message: string }>((resolve) => {
      answer = (decision) => resolve(decision === 'approved' ? { decision } : { decision, code: 'no', message: 'refused by ops' });
    });
    const pay = tool('pay', async () => 'paid', new ToolMetadata('pays', { type: 'object' }).withEffect('non_idempotent', 'pay-v1').withApproval('ops'));
    const { gateway } = await setup(o, [pay], { approvers: { ops: approver } });

    const first = gateway.call('pay', { cents: 1 });
    while (!o.events.some((e) => e.type === 'approval_requested')) await new Promise((r) => setTimeout(r, 2));
    let m = await collect(o.reader);
    assert.equal(counter(m, 'jingwei.tool.approvals_waiting', { 'gen_ai.tool.name': 'pay' }), 1, 'one attempt waits for a person');
    assert.equal(counter(m, 'jingwei.tool.in_flight'), 1);
    answer('approved');
    const approved = await first;
    assert.equal(approved.result.outcome.status, 'succeeded');

    const second = gateway.call('pay', { cents: 2 });
    while (o.events.filter((e) => e.type === 'approval_requested').length < 2) await new Promise((r) => setTimeout(r, 2));
    answer('denied');
    const denied = await second;
    assert.equal(denied.startedEvent, null);

    const [a, d] = o.exporter.getFinishedSpans();
    assert.deepEqual(spanEvents(a!), ['jingwei.approval.requested', 'jingwei.approval.answered', 'jingwei.body.started', 'jingwei.result.recorded']);
    assert.deepEqual(a!.events[1]!.attributes, { 'jingwei.approval.approver': 'ops', 'jingwei.approval.answer': 'approved' });
    assert.deepEqual(spanEvents(d!), ['jingwei.approval.requested', 'jingwei.approval.answered', 'jingwei.attempt.refused', 'jingwei.result.recorded']);
    assert.equal(d!.events[1]!.attributes?.['jingwei.approval.answer'], 'approval_denied');
    assert.equal(d!.attributes['jingwei.recovery.status'], 'not_executed');

    m = await collect(o.reader);
    assert.equal(counter(m, 'jingwei.tool.approvals_waiting'), 0);
    assert.equal(histogramCount(m, 'jingwei.tool.approval.duration', { 'jingwei.approval.answer': 'approved' }), 1);
    assert.equal(histogramCount(m, 'jingwei.tool.approval.duration', { 'jingwei.approval.answer': 'approval_denied' }), 1);
    assert.equal(counter(m, 'jingwei.tool.failures', { 'jingwei.failure.category': 'approval_denied', 'jingwei.failure.pre_body': true }), 1);

    const forSecond = o.events.filter((e) => e.callId === denied.call.id);
    assert.deepEqual(types(forSecond), ['attempt_admitted', 'approval_requested', 'approval_answered', 'attempt_refused', 'result_recorded']);
    const answered = forSecond[2] as Extract<ToolRuntimeEvent, { type: 'approval_answered' }>;
    assert.deepEqual([answered.approver, answered.answer], ['ops', 'approval_denied']);
    assert.equal(typeof answered.waitMs, 'number');
    const recorded = o.events.find((e) => e.type === 'result_recorded' && e.callId === approved.call.id) as Extract<ToolRuntimeEvent, { type: 'result_recorded' }>;
    assert.equal(typeof recorded.approvalMs, 'number');
  });

  it('a retry made from a plan: attempt 2 of the same operation, the plan event, the source call', async () => {
    const o = observed();
    let refuse = true;
    const once: ToolGuard = () => (refuse ? { code: 'busy', message: 'try later', retryable: true } : null);
    const { store, gateway } = await setup(o, [echo], { guards: [once] });
    const first = await gateway.call('echo', { n: 1 });
    assert.equal(first.result.outcome.status, 'failed');
    refuse = false;
    const plan = prepareToolRetry(await store.loadHistory('s-otel'), first.call.id);
    assert.equal(plan.sourceAttempt, 1);
    const retry = await gateway.callWithOptions('echo', { n: 1 }, { retry: plan });
    assert.equal(retry.result.outcome.status, 'succeeded');

    const [, second] = o.exporter.getFinishedSpans();
    assert.equal(second!.attributes['jingwei.attempt'], 2);
    assert.equal(second!.attributes['jingwei.retry'], true);
    assert.equal(second!.attributes['jingwei.retry.source_call_id'], first.call.id);
    assert.equal(second!.attributes['jingwei.operation.key'], first.call.operation!.key);
    assert.deepEqual(spanEvents(second!), ['jingwei.retry.plan_used', 'jingwei.body.started', 'jingwei.result.recorded']);
    assert.deepEqual(second!.events[0]!.attributes, { 'jingwei.retry.source_call_id': first.call.id, 'jingwei.retry.review': 'none' });

    const m = await collect(o.reader);
    assert.equal(counter(m, 'jingwei.tool.attempts', { 'jingwei.outcome': 'failed', 'jingwei.failure.category': 'denied' }), 1);
    assert.equal(counter(m, 'jingwei.tool.attempts', { 'jingwei.outcome': 'succeeded' }), 1);

    const forRetry = o.events.filter((e) => e.callId === retry.call.id);
    assert.deepEqual(types(forRetry), ['attempt_admitted', 'retry_plan_used', 'body_started', 'result_recorded']);
    assert.ok(forRetry.every((e) => e.attempt === 2 && e.operationKey === first.call.operation!.key));
    const used = forRetry[1] as Extract<ToolRuntimeEvent, { type: 'retry_plan_used' }>;
    assert.deepEqual([used.sourceCallId, used.review], [first.call.id, null]);
  });

  it('a result the fenced host cannot record: attempt_unrecorded, outcome_unknown, in doubt', async () => {
    const o = observed();
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const slow = tool('slow', async () => { await gate; return 'done'; }, new ToolMetadata('slow', { type: 'object' }).withEffect('unknown', 'slow-v1'));
    const { store, gateway } = await setup(o, [slow]);
    const pending = gateway.call('slow', {}).catch((e: unknown) => e);
    while (!o.events.some((e) => e.type === 'body_started')) await new Promise((r) => setTimeout(r, 2));
    await store.acquire('s-otel', { owner: 'other-host', takeover: true });
    release();
    assert.equal(((await pending) as { code: string }).code, 'recording_failed');
    const [span] = o.exporter.getFinishedSpans();
    assert.equal(span!.attributes['jingwei.outcome'], 'unrecorded');
    assert.equal(span!.attributes['jingwei.unrecorded.stage'], 'result');
    assert.equal(span!.attributes['jingwei.recovery.status'], 'outcome_unknown');
    assert.equal(span!.attributes['error.type'], 'recording_failed');
    assert.equal(span!.status.code, 2);
    const m = await collect(o.reader);
    assert.equal(counter(m, 'jingwei.tool.in_doubt'), 1);
    assert.equal(counter(m, 'jingwei.tool.in_flight'), 0);
    assert.equal(counter(m, 'jingwei.tool.attempts', { 'jingwei.outcome': 'unrecorded', 'error.type': 'recording_failed' }), 1);
    const last = o.events.at(-1) as Extract<ToolRuntimeEvent, { type: 'attempt_unrecorded' }>;
    assert.deepEqual([last.type, last.stage, last.error, last.bodyStarted, last.recoveryStatus], ['attempt_unrecorded', 'result', 'recording_failed', true, 'outcome_unknown']);
  });

  it('a call the store refuses to journal (budget): attempt_unrecorded at the call stage, no recovery status', async () => {
    const o = observed();
    const store = createMemoryStore();
    const owner = await store.acquire('s-budget', { owner: 'host' });
    await owner.startTask('t', { limits: { toolCalls: 1 } });
    const runtime = createToolRuntime({ tools: [echo], grants: { agent: '*' }, telemetry: { tracer: o.tracer, meter: o.meter }, onEvent: (e) => { o.events.push(e); } });
    const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent' });
    await gateway.call('echo', {});
    await assert.rejects(gateway.call('echo', {}), { code: 'budget_exhausted' });
    const [, refused] = o.exporter.getFinishedSpans();
    assert.equal(refused!.attributes['jingwei.unrecorded.stage'], 'call');
    assert.equal(refused!.attributes['error.type'], 'budget_exhausted');
    assert.equal(refused!.attributes['jingwei.recovery.status'], undefined, 'nothing of the attempt is journaled');
    assert.deepEqual(spanEvents(refused!), ['jingwei.result.unrecorded']);
    const last = o.events.at(-1) as Extract<ToolRuntimeEvent, { type: 'attempt_unrecorded' }>;
    assert.deepEqual([last.type, last.stage, last.error, last.bodyStarted, last.recoveryStatus], ['attempt_unrecorded', 'call', 'budget_exhausted', false, null]);
    const m = await collect(o.reader);
    assert.equal(counter(m, 'jingwei.tool.in_doubt'), 0);
    assert.equal(counter(m, 'jingwei.tool.in_flight'), 0);
  });

  it('a refusal is told once journaled: not for a guard denial the store then refuses, nor for a pending answer an operator\'s approval overtook (r69 #1)', async () => {
    const o = observed();
    const store = createMemoryStore();
    const owner = await store.acquire('s-told', { owner: 'host' });
    await owner.startTask('t', { limits: { toolCalls: 1 } });
    const deny: ToolGuard = () => ({ code: 'policy_says_no', message: 'not now' });
    const gateway = createToolRuntime({ tools: [echo], grants: { agent: '*' }, guards: [deny], telemetry: { tracer: o.tracer, meter: o.meter }, onEvent: (e) => { o.events.push(e); } })
      .bind({ owner, taskId: 't', caller: 'agent' });
    await gateway.call('echo', {});
    o.events.length = 0;
    await assert.rejects(gateway.call('echo', {}), { code: 'budget_exhausted' });
    assert.deepEqual(types(o.events), ['attempt_admitted', 'attempt_unrecorded'], 'the denial was never journaled');
    assert.deepEqual(spanEvents(o.exporter.getFinishedSpans()[1]!), ['jingwei.result.unrecorded']);

    const p = observed();
    const approvals = createMemoryStore();
    const holder = await approvals.acquire('s-ok', { owner: 'host' });
    await holder.startTask('t');
    let asked = 0;
    let requestId = '';
    const wire = tool('wire', async () => 'wired', new ToolMetadata('wires', { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('boss'));
    const approving = createToolRuntime({
      tools: [wire], grants: { agent: '*' }, telemetry: { tracer: p.tracer, meter: p.meter }, onEvent: (e) => { p.events.push(e); },
      approvers: {
        boss: async () => {
          asked += 1;
          if (asked === 2) await decisionInbox(approvals).approve(requestId, { actor: 'alice' });
          return { decision: 'pending' };
        },
      },
    }).bind({ owner: holder, taskId: 't', caller: 'agent' });
    const first = await approving.call('wire', {});
    requestId = first.result.approval?.requestId ?? '';
    p.events.length = 0;
    const second = await approving.callWithOptions('wire', {}, { retry: prepareToolRetry(await approvals.loadHistory('s-ok'), first.call.id) });
    assert.equal(second.result.outcome.status, 'succeeded', "the operator's approval answered: the body ran");
    assert.deepEqual(types(p.events), ['attempt_admitted', 'retry_plan_used', 'approval_requested', 'approval_answered', 'body_started', 'result_recorded']);
    assert.ok(!spanEvents(p.exporter.getFinishedSpans()[1]!).includes('jingwei.attempt.refused'));
  });

  it('an interrupt between the marker and the body: body.started false, no body duration, not_executed (r69 #6)', async () => {
    const o = observed();
    const controller = new AbortController();
    const { gateway } = await setup(o, [echo], { onEvent: (e) => { o.events.push(e); if (e.type === 'body_started') controller.abort(); } });
    const execution = await gateway.callWithOptions('echo', {}, { signal: controller.signal });
    assert.equal(execution.result.outcome.status === 'failed' && execution.result.outcome.code, 'tool_stopped_before_body');
    const [span] = o.exporter.getFinishedSpans();
    assert.equal(span!.attributes['jingwei.body.started'], false);
    assert.equal(span!.attributes['jingwei.recovery.status'], 'not_executed');
    const recorded = o.events.at(-1) as Extract<ToolRuntimeEvent, { type: 'result_recorded' }>;
    assert.deepEqual([recorded.bodyStarted, recorded.bodyMs, recorded.recoveryStatus], [false, null, 'not_executed']);
    assert.equal(histogramCount(await collect(o.reader), 'jingwei.tool.body.duration'), 0);
  });

  it('a throwing hook, tracer and meter never change a call or its journal', async () => {
    const boom = () => { throw new Error('observer broke'); };
    const brokenSpan = { setAttributes: boom, addEvent: boom, setStatus: boom, end: boom };
    let hookCalls = 0;
    const store = createMemoryStore();
    const owner = await store.acquire('s-broken', { owner: 'host' });
    await owner.startTask('t');
    const runtime = createToolRuntime({
      tools: [echo],
      grants: { agent: '*' },
      telemetry: {
        tracer: { startSpan: () => brokenSpan },
        meter: { createCounter: () => ({ add: boom }), createUpDownCounter: () => ({ add: boom }), createHistogram: () => ({ record: boom }) },
      },
      onEvent: () => { hookCalls += 1; throw new Error('hook broke'); },
    });
    const execution = await runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('echo', { x: 1 });
    assert.equal(execution.result.outcome.status, 'succeeded');
    assert.equal(hookCalls, 3, 'every event is still delivered after a throw');
    assert.deepEqual((await store.loadHistory('s-broken')).map((e) => e.kind.type), ['task_ledger', 'tool_call', 'tool_started', 'tool_result'], 'after the task\'s start');
    assert.equal(runtime.inFlight, 0);

    const rejecting = createToolRuntime({ tools: [echo], grants: { agent: '*' }, onEvent: async () => { throw new Error('async hook broke'); } });
    const again = await rejecting.bind({ owner, taskId: 't', caller: 'agent' }).call('echo', {});
    assert.equal(again.result.outcome.status, 'succeeded', 'a rejected promise from the hook is swallowed, not unhandled');
  });

  it('a tracer or meter that is not one is refused when the runtime is built', () => {
    const bad = (telemetry: unknown) => () => createToolRuntime({ tools: [echo], grants: {}, telemetry: telemetry as NonNullable<ToolRuntimeConfig['telemetry']> });
    assert.throws(bad({ tracer: {} }), { code: 'tool_config_invalid', message: /telemetry\.tracer must have startSpan/ });
    assert.throws(bad({ meter: { createCounter: () => null } }), { code: 'tool_config_invalid', message: /telemetry\.meter must have/ });
    assert.throws(bad(null), { code: 'tool_config_invalid' });
    assert.throws(() => createToolRuntime({ tools: [echo], grants: {}, onEvent: 'log' as unknown as NonNullable<ToolRuntimeConfig['onEvent']> }), { code: 'tool_config_invalid' });
  });

  it('unconfigured: nothing reaches the global OpenTelemetry providers', async () => {
    const exporter = new InMemorySpanExporter();
    const reader = new CollectingReader();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const meterProvider = new MeterProvider({ readers: [reader] });
    assert.ok(trace.setGlobalTracerProvider(provider));
    assert.ok(metrics.setGlobalMeterProvider(meterProvider));
    try {
      const store = createMemoryStore();
      const owner = await store.acquire('s-quiet', { owner: 'host' });
      await owner.startTask('t');
      const runtime = createToolRuntime({ tools: [echo], grants: { agent: '*' } });
      const execution = await runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('echo', {});
      assert.equal(execution.result.outcome.status, 'succeeded');
      // The probe proves the globals are live: the same exporter and reader see what goes through the API.
      trace.getTracer('probe').startSpan('probe').end();
      metrics.getMeter('probe').createCounter('probe.count').add(1);
      assert.deepEqual(exporter.getFinishedSpans().map((s) => s.name), ['probe']);
      assert.deepEqual([...(await collect(reader)).keys()], ['probe.count']);
    } finally {
      trace.disable();
      metrics.disable();
    }
  });
});
