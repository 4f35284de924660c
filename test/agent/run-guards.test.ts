/**
 * What a host does naturally to a run, and what must not follow from it: resuming after a grant was withdrawn must
 * not tell the model (or the journal) that a call which ran did not; resuming with a smaller `maxSteps` must not
 * hide a call left open; a second click on "resume" must not make the run unreadable; a bad option must journal
 * nothing.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { AgentRunBusyError, resumeAgent, runAgent, scriptedModel, type ChatResponse } from '../../src/agent.js';
import { callRefusedEvent, modelResponseEvent, runStartedEvent } from '../../src/agent/run-journal.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import type { Tool } from '../../src/tool/types.js';
import { ToolPreflightError } from '../../src/errors.js';
import { setFaultHook } from '../../src/fault.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { calls, Crash, crashedInsideEmail, doneStep, emailStep, failing, host, orderStep, outside, reply } from './fixtures/shop-run.js';

const runEvents = async (h: Awaited<ReturnType<typeof host>>) =>
  (await h.store.loadHistory('shop')).flatMap((e) => (e.kind.type === 'custom' && e.kind.plugin === 'jingwei.run' ? [e.kind.kind] : []));

describe('agent runs: what a host does naturally', () => {
  afterEach(() => setFaultHook(null));
  const dir = tempDir();

  it('a completed call whose grant was withdrawn: the resume throws unavailable_tool, journals nothing, and once the grant is back the order is replayed, never placed again', async () => {
    const path = tempDbPath(dir);
    const world = outside();
    const first = await host(path, world.tools);
    await assert.rejects(runAgent({ ...first, model: scriptedModel([orderStep, failing()]), input: 'Buy tea.', maxSteps: 4, runId: 'grant-1', store: first.store }), Crash);
    await first.store.close();

    const narrowed = await host(path, world.tools, undefined, ['send_email']);
    const before = (await narrowed.store.loadHistory('shop')).length;
    const model = scriptedModel([emailStep, doneStep]);
    await assert.rejects(resumeAgent({ ...narrowed, model, runId: 'grant-1', store: narrowed.store, maxSteps: 4 }), (error: unknown) =>
      error instanceof ToolPreflightError && error.code === 'unavailable_tool');
    assert.equal(model.requests.length, 0, 'the model read nothing about the order');
    assert.equal((await narrowed.store.loadHistory('shop')).length, before, 'no call_refused (or anything else) was journaled');
    await narrowed.store.close();

    const restored = await host(path, world.tools);
    const result = await resumeAgent({ ...restored, model: scriptedModel([emailStep, doneStep]), runId: 'grant-1', store: restored.store, maxSteps: 4 });
    assert.equal(result.stopReason, 'completed');
    assert.equal(result.toolCalls[0]!.execution!.replayed, true);
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    assert.equal(world.orders.size, 1);
    assert.ok(!(await runEvents(restored)).includes('call_refused'));

    // A finished run read back without the grant: the same typed error, and the run reads back whole once it is back.
    const without = await host(path, world.tools, undefined, ['send_email']);
    await assert.rejects(runAgent({ ...without, model: scriptedModel([]), input: 'Buy tea.', maxSteps: 4, runId: 'grant-1', store: without.store }), { code: 'unavailable_tool' });
    await without.store.close();
    const again = await host(path, world.tools);
    const readBack = await runAgent({ ...again, model: scriptedModel([]), input: 'Buy tea.', maxSteps: 4, runId: 'grant-1', store: again.store });
    assert.deepEqual(readBack.messages, result.messages);
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    await again.store.close();
    await restored.store.close();
  });

  it('a journal that holds call_refused for a call that ran (written before the fix) is settled from the call: the model reads its output', async () => {
    const path = tempDbPath(dir);
    const world = outside();
    const h = await host(path, world.tools);
    await assert.rejects(runAgent({ ...h, model: scriptedModel([orderStep, failing()]), input: 'Buy tea.', maxSteps: 4, runId: 'healed', store: h.store }), Crash);
    await h.owner.append([callRefusedEvent(h.gateway.turnId, 'healed', 1, 0, 'unavailable_tool', 'tool "place_order" is not available to this caller; its recorded result was not returned')]);
    const model = scriptedModel([emailStep, doneStep]);
    const result = await resumeAgent({ ...h, model, runId: 'healed', store: h.store, maxSteps: 4 });
    assert.equal(result.stopReason, 'completed');
    assert.deepEqual(model.requests[0]!.messages.at(-1), { role: 'tool', toolCallId: 'c1', content: '{"orderId":1}' });
    assert.equal(result.toolCalls[0]!.execution!.replayed, true);
    assert.equal(world.orders.size, 1);
    await h.store.close();
  });

  it('a journal whose completed call has arguments naming one key twice (made before such calls were refused) still replays it', async () => {
    const path = tempDbPath(dir);
    const bodies: unknown[] = [];
    const echo: Tool = { name: 'echo', metadata: new ToolMetadata('Echoes', {}).withEffect('read_only', 'echo-v1'), execute: async (request) => { bodies.push(request.arguments); return 'echoed'; } };
    const h = await host(path, [echo]);
    // What the earlier version journaled: the step, then the call with the text as it came, which the schema took.
    const text = '{"x":1,"x":2}';
    const turn = h.gateway.turnId;
    await h.owner.append([
      runStartedEvent(turn, 'dup-old', 'task', 'Echo.'),
      { turnId: turn, kind: { type: 'user_message', text: 'Echo.' } },
      modelResponseEvent(turn, 'dup-old', 1, reply(null, calls(['e', 'echo', text])), new Set(['echo'])),
    ]);
    assert.equal((await h.gateway.callWithOptions('echo', text, { operationKey: 'dup-old/1/0' })).result.outcome.status, 'succeeded');
    const model = scriptedModel([reply('Done.')]);
    const result = await resumeAgent({ ...h, model, runId: 'dup-old', store: h.store, maxSteps: 3 });
    assert.equal(result.stopReason, 'completed');
    assert.equal(result.toolCalls[0]!.execution!.replayed, true);
    assert.deepEqual(model.requests[0]!.messages.at(-1), { role: 'tool', toolCallId: 'e', content: 'echoed' });
    assert.deepEqual(bodies, [text], 'replayed, not run again');
    await h.store.close();
  });

  it("a call of a step the run went past with no attempt (a framework's step journaled before bridges marked theirs) is read as not run, never made", async () => {
    const path = tempDbPath(dir);
    const world = outside();
    const h = await host(path, world.tools);
    const turn = h.gateway.turnId;
    // What a bridge of an earlier version journaled: the framework refused step 1's order without calling the tool, and
    // the model ordered again in step 2, which ran. Neither step carries the framework's mark.
    await h.owner.append([
      runStartedEvent(turn, 'old-bridge', 'task', 'Buy tea.'),
      { turnId: turn, kind: { type: 'user_message', text: 'Buy tea.' } },
      modelResponseEvent(turn, 'old-bridge', 1, reply(null, calls(['r1', 'place_order', '{"item":"tea","note":1}'])), new Set(['place_order'])),
      modelResponseEvent(turn, 'old-bridge', 2, reply(null, calls(['r2', 'place_order', '{"item":"tea"}'])), new Set(['place_order'])),
    ]);
    const ran = await h.gateway.callWithOptions('place_order', { item: 'tea' }, { operationKey: 'old-bridge/2/0' });
    assert.equal(ran.result.outcome.status, 'succeeded');
    assert.equal(world.orders.size, 1);
    const model = scriptedModel([reply('Ordered.')]);
    const result = await resumeAgent({ ...h, model, runId: 'old-bridge', store: h.store, maxSteps: 4 });
    assert.equal(result.stopReason, 'completed');
    assert.equal(world.orders.size, 1, "step 1's order, which the framework never ran, is not placed now");
    assert.deepEqual(world.bodies, ['place_order']);
    const first = result.toolCalls[0]!;
    assert.equal(first.outcome.ok, false);
    assert.match(first.outcome.ok ? '' : first.outcome.text, /did not run this call/);
    assert.ok((await runEvents(h)).includes('call_refused'), 'journaled, so every later reader reads the same');
    await h.store.close();
  });

  it('resumed with maxSteps below the journaled steps: an open call still stops the run as needs_review, and a journaled step still runs its calls', async () => {
    const path = tempDbPath(dir);
    const world = outside({ emailEffect: 'non_idempotent' });
    const second = await crashedInsideEmail(path, world, 'short-1');
    const stopped = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'short-1', store: second.store, maxSteps: 1 });
    assert.equal(stopped.stopReason, 'needs_review');
    assert.equal(stopped.pendingCallIds.length, 1);
    assert.ok(!(await runEvents(second)).includes('run_finished'), 'the run is not finished behind the open call');
    const later = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'short-1', store: second.store, maxSteps: 6 });
    assert.equal(later.stopReason, 'needs_review');
    assert.deepEqual(world.bodies, ['place_order'], 'the open e-mail is never run again without a review');
    await second.store.close();

    // Stopped right after the second model response was journaled: its e-mail was asked for, so it is sent, once.
    const other = tempDbPath(dir);
    const shop = outside();
    const first = await host(other, shop.tools);
    setFaultHook((point) => { if (point === 'step:after' && shop.bodies.length === 1) throw new Crash('killed after the second response'); });
    await assert.rejects(runAgent({ ...first, model: scriptedModel([orderStep, emailStep]), input: 'Buy tea.', maxSteps: 4, runId: 'short-2', store: first.store }), Crash);
    setFaultHook(null);
    const model = scriptedModel([]);
    const result = await resumeAgent({ ...first, model, runId: 'short-2', store: first.store, maxSteps: 1 });
    assert.equal(result.stopReason, 'max_steps');
    assert.equal(result.steps, 2);
    assert.equal(model.requests.length, 0, 'no new model request past maxSteps');
    assert.deepEqual(shop.bodies, ['place_order', 'send_email']);
    await first.store.close();
  });

  it('two invocations of one run through one owner at once: the second is AgentRunBusyError, and the run stays readable', async () => {
    const path = tempDbPath(dir);
    const world = outside();
    const h = await host(path, world.tools);
    let release!: () => void;
    let asked!: () => void;
    const gate = new Promise<void>((resolve) => { release = resolve; });
    const waiting = new Promise<void>((resolve) => { asked = resolve; });
    const slow = scriptedModel([async (): Promise<ChatResponse> => { asked(); await gate; return orderStep; }, doneStep]);
    const running = runAgent({ ...h, model: slow, input: 'Buy tea.', maxSteps: 4, runId: 'twice', store: h.store });
    await waiting; // the first invocation has journaled the run's start and waits on the model
    const before = (await h.store.loadHistory('shop')).length;
    for (const second of [
      () => runAgent({ ...h, model: scriptedModel([orderStep, doneStep]), input: 'Buy tea.', maxSteps: 4, runId: 'twice', store: h.store }),
      () => resumeAgent({ ...h, model: scriptedModel([orderStep, doneStep]), runId: 'twice', store: h.store, maxSteps: 4 }),
    ]) {
      await assert.rejects(second(), (error: unknown) => error instanceof AgentRunBusyError && error.code === 'run_busy' && error.runId === 'twice');
    }
    assert.equal((await h.store.loadHistory('shop')).length, before, 'the refused invocations wrote nothing');
    release();
    assert.equal((await running).stopReason, 'completed');
    const readBack = await resumeAgent({ ...h, model: scriptedModel([]), runId: 'twice', store: h.store, maxSteps: 4 });
    assert.equal(readBack.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order']);
    // Another run on the same owner meanwhile is not this run: it is not refused.
    const other = await runAgent({ ...h, model: scriptedModel([doneStep]), input: 'Hello.', maxSteps: 1, store: h.store });
    assert.equal(other.stopReason, 'completed');
    await h.store.close();
  });

  it('bad options are InvalidInputError naming the option, before anything is journaled; a signal aborted before the start journals nothing', async () => {
    const path = tempDbPath(dir);
    const world = outside();
    const h = await host(path, world.tools);
    const ok = { ...h, model: scriptedModel([doneStep]), input: 'Hi.', maxSteps: 2, store: h.store };
    const before = (await h.store.loadHistory('shop')).length;
    const cases: Array<[string, unknown]> = [
      ['options', undefined],
      ['options', null],
      ['model', { ...ok, model: undefined }],
      ['model', { ...ok, model: {} }],
      ['owner', { ...ok, owner: undefined }],
      ['gateway', { ...ok, gateway: { sessionId: 'shop' } }],
      ['history', { ...ok, history: 'h' }],
      ['history[0]', { ...ok, history: [{ role: 'robot', content: 'x' }] }],
      ['history[0].content', { ...ok, history: [{ role: 'user', content: 5 }] }],
      ['history[0].toolCallId', { ...ok, history: [{ role: 'tool', content: 'x' }] }],
      ['system', { ...ok, system: 5 }],
      ['tools', { ...ok, tools: 'place_order' }],
      ['stopOnUncertainOutcome', { ...ok, stopOnUncertainOutcome: 'yes' }],
      ['signal', { ...ok, signal: {} }],
      ['recovery', { ...ok, recovery: 'always' }],
      ['maxSteps', { ...ok, maxSteps: 0 }],
      ['input', { ...ok, input: 5 }],
    ];
    for (const [field, options] of cases) {
      await assert.rejects(runAgent(options as Parameters<typeof runAgent>[0]), { code: 'invalid_input', field }, `runAgent: ${field}`);
    }
    await assert.rejects(resumeAgent({ ...h, model: scriptedModel([]), store: h.store, maxSteps: 1 } as unknown as Parameters<typeof resumeAgent>[0]), { code: 'invalid_input', field: 'runId' });
    await assert.rejects(resumeAgent(null as unknown as Parameters<typeof resumeAgent>[0]), { code: 'invalid_input', field: 'options' });
    const aborted = AbortSignal.abort(new Crash('cancelled before the start'));
    await assert.rejects(runAgent({ ...ok, signal: aborted }), Crash);
    assert.equal((await h.store.loadHistory('shop')).length, before, 'nothing was journaled');
    const run = await runAgent({ ...ok, history: [{ role: 'user', content: 'earlier' }, { role: 'assistant', content: null, toolCalls: calls(['x', 'place_order', '{}']) }, { role: 'tool', toolCallId: 'x', content: 'done' }] });
    assert.equal(run.stopReason, 'completed');
    assert.deepEqual(reply('Ordered and confirmed.'), doneStep);
    await h.store.close();
  });
});
