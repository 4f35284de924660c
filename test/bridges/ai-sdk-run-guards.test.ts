/**
 * What a framework's loop does that a resumable run must not turn into a write: the AI SDK refuses a call to a tool
 * it was not given (or not given at that step) without calling us, a model may reuse a call id, and a host may open
 * one run twice at once (a double-submitted request). None of these may run a tool the framework did not run, run
 * one tool under another's name, or leave a run no reader accepts.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { aiSdkRun, aiSdkTools, jingweiHalted } from '../../src/ai-sdk.js';
import { AgentRunBusyError, runAgent, scriptedModel } from '../../src/agent.js';
import { assessSession, prepareToolRetry } from '../../src/index.js';
import { decisionInbox } from '../../src/decisions.js';
import { setFaultHook } from '../../src/fault.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { modelResponseEvent, runStartedEvent } from '../../src/agent/run-journal.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { answer, dies, scripted, type MockContent } from './fixtures/ai-sdk-mock.js';
import { Crash, hostOn, outsideWorld } from './fixtures/resume-world.js';

const call = (toolCallId: string, toolName: string, item = 'tea'): MockContent => ({ type: 'tool-call', toolCallId, toolName, input: JSON.stringify({ item }) });
const done = answer([{ type: 'text', text: 'Done.' }]);

const runEvents = async (store: { loadHistory(id: string): Promise<readonly { kind: { type: string; kind?: string; plugin?: string } }[]> }) =>
  (await store.loadHistory('shop')).flatMap((e) => (e.kind.type === 'custom' && e.kind.plugin === 'jingwei.run' ? [e.kind.kind!] : []));

/**
 * A host that gave the run's loop the gateway's own bridge tools: the model orders tea, and the host is killed at
 * `point` of that order (the SDK hands the tool's throw to the model as an error; the host dies while the model thinks).
 */
async function orderOutsideKilled(path: string, world: ReturnType<typeof outsideWorld>, runId: string, point: string): Promise<void> {
  const first = await hostOn(() => openSqliteStore(path), world);
  const run = await aiSdkRun({ ...first, runId, prompt: 'Buy tea.' });
  setFaultHook((at) => { if (at === point) throw new Crash(`killed at ${point} of the order`); });
  try {
    await assert.rejects(generateText({ model: run.model(scripted([answer([call('a', 'place_order')]), dies])), tools: aiSdkTools(first.gateway), messages: run.messages, stopWhen: stepCountIs(5) }), Crash);
  } finally {
    setFaultHook(null);
    await first.store.close();
  }
}

describe('aiSdkRun: calls the framework did not run stay unrun', () => {
  afterEach(() => setFaultHook(null));
  const dir = tempDir();

  it('a call to a tool the run did not offer is journaled refused with its step; killed in that step, the resume never runs it', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const first = await hostOn(() => openSqliteStore(path), world);
    const run1 = await aiSdkRun({ ...first, runId: 'offered-1', prompt: 'Confirm.', tools: ['send_email'] });
    setFaultHook((point) => { if (point === 'started:after' && world.bodies.length === 0) throw new Crash('killed as the e-mail started'); });
    await assert.rejects(generateText({
      model: run1.model(scripted([answer([call('a', 'place_order'), call('b', 'send_email')]), dies])),
      tools: run1.tools, messages: run1.messages, stopWhen: stepCountIs(5),
    }), Crash);
    setFaultHook(null);
    assert.deepEqual(world.bodies, [], 'the SDK refused the order; the e-mail was killed as it started');
    assert.ok((await runEvents(first.store)).includes('call_refused'), 'the refusal is journaled with its step');
    await first.store.close();

    const second = await hostOn(() => openSqliteStore(path), world);
    const run2 = await aiSdkRun({ ...second, runId: 'offered-1', tools: ['send_email'], recovery: 'retry_safe' });
    assert.equal(world.orders.size, 0, 'the order the framework refused is never placed');
    assert.match(run2.toolCalls[0]!.outcome.ok ? '' : run2.toolCalls[0]!.outcome.text, /unavailable_tool/);
    await generateText({ model: run2.model(scripted([done])), tools: run2.tools, messages: run2.messages, stopWhen: [stepCountIs(5), jingweiHalted] });
    assert.equal(run2.status, 'finished');
    assert.deepEqual(world.bodies, ['send_email']);
    assert.equal(world.orders.size, 0);
    await second.store.close();
  });

  it('a call the framework refused at a step (activeTools) is never run by a resume once a later step is journaled', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const first = await hostOn(() => openSqliteStore(path), world);
    const run1 = await aiSdkRun({ ...first, runId: 'active-1', prompt: 'Confirm.' });
    setFaultHook((point) => { if (point === 'started:after' && world.bodies.length === 0) throw new Crash('killed as the e-mail started'); });
    await assert.rejects(generateText({
      model: run1.model(scripted([answer([call('a', 'place_order')]), answer([call('b', 'send_email')]), dies])),
      tools: run1.tools, activeTools: ['send_email'], messages: run1.messages, stopWhen: stepCountIs(5),
    }), Crash);
    setFaultHook(null);
    await first.store.close();

    const second = await hostOn(() => openSqliteStore(path), world);
    const run2 = await aiSdkRun({ ...second, runId: 'active-1', recovery: 'retry_safe' });
    assert.equal(world.orders.size, 0, 'the framework moved on from step 1 without running the order: the resume does not run it');
    await generateText({ model: run2.model(scripted([done])), tools: run2.tools, messages: run2.messages, stopWhen: [stepCountIs(5), jingweiHalted] });
    assert.deepEqual(world.bodies, ['send_email']);
    assert.equal(world.orders.size, 0);
    await second.store.close();
  });

  it('a call the SDK refused for its arguments in the last step, with the loop at its bound, is never run by the next open', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const first = await hostOn(() => openSqliteStore(path), world);
    const run1 = await aiSdkRun({ ...first, runId: 'parse-1', prompt: 'Buy tea.' });
    // Jingwei's JSON reader accepts a __proto__ key; the SDK's refuses it and never calls the tool.
    const refused: MockContent = { type: 'tool-call', toolCallId: 'a', toolName: 'place_order', input: '{"item":"cake","__proto__":{"x":1}}' };
    const result = await generateText({ model: run1.model(scripted([answer([refused])])), tools: run1.tools, messages: run1.messages, stopWhen: stepCountIs(1) });
    assert.equal(result.steps[0]!.content.find((p) => p.type === 'tool-error')?.type, 'tool-error', 'the SDK refused the call');
    assert.deepEqual(world.bodies, []);
    await first.store.close();

    const second = await hostOn(() => openSqliteStore(path), world);
    const run2 = await aiSdkRun({ ...second, runId: 'parse-1', recovery: 'retry_safe' });
    assert.deepEqual(world.bodies, [], 'the order the framework refused is not placed by opening the run again');
    assert.equal(run2.status, 'running');
    const read = run2.toolCalls[0]!.outcome;
    assert.ok(!read.ok && read.code === 'not_run_by_framework' && /The tool did not run\.$/.test(read.text), JSON.stringify(read));
    await generateText({ model: run2.model(scripted([done])), tools: run2.tools, messages: run2.messages, stopWhen: [stepCountIs(5), jingweiHalted] });
    assert.equal(run2.status, 'finished');
    assert.equal(world.orders.size, 0);
    await second.store.close();
  });

  for (const reopened of [false, true]) {
    it(`a call the SDK refused, the loop at its bound: runAgent going on with the run never makes it${reopened ? ', after the bridge opened it again' : ''}`, async () => {
      const path = tempDbPath(dir);
      const world = outsideWorld();
      const first = await hostOn(() => openSqliteStore(path), world);
      const runId = `continued-${reopened}`;
      const run1 = await aiSdkRun({ ...first, runId, prompt: 'Buy tea.' });
      const refused: MockContent = { type: 'tool-call', toolCallId: 'a', toolName: 'place_order', input: '{"item":"cake","__proto__":{"x":1}}' };
      await generateText({ model: run1.model(scripted([answer([refused])])), tools: run1.tools, messages: run1.messages, stopWhen: stepCountIs(1) });
      assert.deepEqual(world.bodies, []);
      if (reopened) {
        await aiSdkRun({ ...first, runId });
        assert.ok((await runEvents(first.store)).includes('call_refused'), 'the reading "not run" is journaled as the bridge opens the run');
      }
      await first.store.close();

      const second = await hostOn(() => openSqliteStore(path), world);
      const result = await runAgent({ ...second, model: scriptedModel([{ text: 'Nothing ordered.', toolCalls: [] }]), input: 'Buy tea.', runId, store: second.store, maxSteps: 3 });
      assert.equal(result.stopReason, 'completed');
      assert.deepEqual(world.bodies, [], 'the order the framework refused is never placed');
      const read = result.toolCalls[0]!.outcome;
      assert.ok(!read.ok && read.code === 'not_run_by_framework', JSON.stringify(read));
      await second.store.close();
    });
  }

  it('a run opened with a cancelled signal throws the cancellation and journals nothing, even with a call to retry', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const first = await hostOn(() => openSqliteStore(path), world);
    const run1 = await aiSdkRun({ ...first, runId: 'cancelled-1', prompt: 'Buy tea.' });
    setFaultHook((point) => { if (point === 'started:after' && world.bodies.length === 0) throw new Crash('killed as the order started'); });
    await assert.rejects(generateText({ model: run1.model(scripted([answer([call('a', 'place_order')]), dies])), tools: run1.tools, messages: run1.messages, stopWhen: stepCountIs(5) }), Crash);
    setFaultHook(null);
    await first.store.close();

    const second = await hostOn(() => openSqliteStore(path), world);
    const before = (await second.store.loadHistory('shop')).length;
    const stop = new AbortController();
    stop.abort(new Error('the operator stopped it'));
    await assert.rejects(aiSdkRun({ ...second, runId: 'cancelled-1', recovery: 'retry_safe', signal: stop.signal }), /the operator stopped it/);
    assert.equal((await second.store.loadHistory('shop')).length, before, 'nothing journaled');
    assert.deepEqual(world.bodies, []);
    await second.store.close();
  });

  for (const second of ['aiSdkRun', 'runAgent'] as const) {
    it(`a second open of a run (${second}) while the first one's call is under way waits for it: the order is placed once, and read back as placed`, async () => {
      const path = tempDbPath(dir);
      const world = outsideWorld();
      const { store, owner } = await hostOn(() => openSqliteStore(path), world);
      // The first call waits in a guard, before anything of it is journaled, until the second open has begun.
      let entered!: () => void;
      const inGuard = new Promise<void>((resolve) => { entered = resolve; });
      let waited = false;
      const guard = async () => {
        if (!waited) {
          waited = true;
          entered();
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        return null;
      };
      const gateway = createToolRuntime({ tools: world.tools, grants: { agent: '*' }, guards: [guard] }).bind({ owner, taskId: 'task', caller: 'agent' });
      const runId = `twice-${second}`;
      const run1 = await aiSdkRun({ owner, gateway, store, runId, prompt: 'Buy tea.' });
      const firstLoop = generateText({ model: run1.model(scripted([answer([call('a', 'place_order')]), done])), tools: run1.tools, messages: run1.messages, stopWhen: [stepCountIs(5), jingweiHalted] })
        .then(() => 'finished', (error: unknown) => (error instanceof Error ? error.message : String(error)));
      await inGuard;
      if (second === 'aiSdkRun') {
        const run2 = await aiSdkRun({ owner, gateway, store, runId });
        assert.equal(run2.toolCalls[0]!.outcome.ok, true, 'the second open reads the order as placed');
      } else {
        const result = await runAgent({ owner, gateway, store, runId, input: 'Buy tea.', model: scriptedModel([{ text: 'Ordered.', toolCalls: [] }]), maxSteps: 3 });
        assert.equal(result.stopReason, 'completed');
        assert.equal(result.toolCalls[0]!.execution?.replayed, true);
      }
      await firstLoop;
      assert.deepEqual(world.bodies, ['place_order'], 'placed once');
      assert.equal((await runEvents(store)).filter((k) => k === 'call_refused').length, 0, 'nothing says it did not run');
      await store.close();
    });
  }

  it('a step a framework journaled with text and no calls, and no end (text beside a handoff): opened again, the run goes on, not finished', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const h = await hostOn(() => openSqliteStore(path), world);
    await h.owner.append([
      runStartedEvent(h.gateway.turnId, 'handoff-1', 'task', 'Help me.'),
      modelResponseEvent(h.gateway.turnId, 'handoff-1', 1, { text: 'Let me transfer you to billing.', toolCalls: [] }, new Set(), true),
    ]);
    const run = await aiSdkRun({ ...h, runId: 'handoff-1' });
    assert.equal(run.status, 'running');
    assert.ok(!(await runEvents(h.store)).includes('run_finished'), 'no answer is journaled for it');
    await h.store.close();
  });

  it('the same step read by runAgent going on with the run: the model is asked again, the journaled text is not its answer', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const h = await hostOn(() => openSqliteStore(path), world);
    await h.owner.append([
      runStartedEvent(h.gateway.turnId, 'handoff-2', 'task', 'Help me.'),
      modelResponseEvent(h.gateway.turnId, 'handoff-2', 1, { text: 'Let me transfer you to billing.', toolCalls: [] }, new Set(), true),
    ]);
    const model = scriptedModel([{ text: 'Billing here: your refund is on its way.', toolCalls: [] }]);
    const result = await runAgent({ ...h, model, input: 'Help me.', runId: 'handoff-2', store: h.store, maxSteps: 3 });
    assert.equal(result.stopReason, 'completed');
    assert.equal(result.text, 'Billing here: your refund is on its way.');
    assert.equal(result.steps, 2);
    assert.deepEqual(model.requests[0]!.messages.map((m) => m.role), ['user', 'assistant'], 'the model read the journaled text');
    await h.store.close();
  });

  it('runAgent\'s answer with neither text nor calls, the host killed before the run\'s end was journaled: the bridge reads the run finished, as runAgent does, and runs nothing', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const h = await hostOn(() => openSqliteStore(path), world);
    setFaultHook((point) => { if (point === 'step:after') throw new Crash('killed after the answer was journaled'); });
    await assert.rejects(runAgent({ ...h, model: scriptedModel([{ text: null, toolCalls: [] }]), input: 'Buy tea.', runId: 'empty-1', store: h.store, maxSteps: 3 }), Crash);
    setFaultHook(null);
    const run = await aiSdkRun({ ...h, runId: 'empty-1' });
    assert.equal(run.status, 'finished');
    assert.ok((await runEvents(h.store)).includes('run_finished'), 'the end is journaled');
    const again = await runAgent({ ...h, model: scriptedModel([]), input: 'Buy tea.', runId: 'empty-1', store: h.store, maxSteps: 3 });
    assert.equal(again.stopReason, 'completed');
    assert.equal(again.steps, 1);
    assert.deepEqual(world.bodies, []);
    await h.store.close();
  });

  it('calls without an id (some servers send none) run in the step that asked for them, each with its own arguments', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const h = await hostOn(() => openSqliteStore(path), world);
    const run = await aiSdkRun({ ...h, runId: 'noid-1', prompt: 'Buy tea and cake.' });
    const noId = (toolName: string, item: string) => ({ type: 'tool-call', toolName, input: JSON.stringify({ item }) }) as unknown as MockContent;
    await generateText({
      model: run.model(scripted([answer([noId('place_order', 'tea'), noId('place_order', 'cake'), noId('send_email', 'tea')]), done])),
      tools: run.tools, messages: run.messages, stopWhen: [stepCountIs(5), jingweiHalted],
    });
    assert.equal(run.status, 'finished');
    assert.deepEqual([...world.orders.entries()].sort(), [['noid-1/1/0', 'tea'], ['noid-1/1/1', 'cake']]);
    assert.deepEqual([...world.emails.entries()], [['noid-1/1/2', 'tea']]);
    const again = await aiSdkRun({ ...h, runId: 'noid-1' });
    assert.equal(again.status, 'finished', 'the journal of a run without ids reads back');
    assert.equal(world.bodies.length, 3);
    await h.store.close();
  });

  it('a reused call id runs the tool the framework runs, with the arguments of its own step, never a refused call queued under the same id', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const h = await hostOn(() => openSqliteStore(path), world);
    // The order is offered but not active: the SDK refuses it without calling us, and runs the e-mail, same id.
    const run = await aiSdkRun({ ...h, runId: 'ids-1', prompt: 'Confirm.' });
    await generateText({
      model: run.model(scripted([answer([call('x', 'place_order'), call('x', 'send_email')]), done])),
      tools: run.tools, activeTools: ['send_email'], messages: run.messages, stopWhen: [stepCountIs(5), jingweiHalted],
    });
    assert.equal(run.status, 'finished');
    assert.deepEqual(world.bodies, ['send_email'], 'the e-mail call ran the e-mail');
    assert.equal(world.orders.size, 0, 'no order was placed under the e-mail\'s name');

    // The same id and tool at two steps, the first refused (nothing active yet): the second runs with its own
    // arguments under its own key, not the first's.
    const again = await aiSdkRun({ ...h, runId: 'ids-2', prompt: 'Confirm.' });
    await generateText({
      model: again.model(scripted([answer([call('z', 'send_email', 'tea')]), answer([call('z', 'send_email', 'cake')]), done])),
      tools: again.tools, prepareStep: ({ stepNumber }) => ({ activeTools: stepNumber === 0 ? [] : ['send_email'] }),
      messages: again.messages, stopWhen: [stepCountIs(5), jingweiHalted],
    });
    assert.deepEqual([...world.emails].filter(([key]) => key.startsWith('ids-2/')), [['ids-2/2/0', 'cake']]);
    await h.store.close();
  });

  it('calls a provider sent without ids run at their own positions when the framework skips one it could not parse (r78 B F3)', async () => {
    // Matched by id and tool name alone, the second order took the first's position, whose arguments are not JSON:
    // the model was told the tea order failed as invalid arguments, the journal disagreed, and the cake never ran.
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const h = await hostOn(() => openSqliteStore(path), world);
    const run = await aiSdkRun({ ...h, runId: 'no-ids-1', prompt: 'Buy tea and cake.' });
    const broken: MockContent = { type: 'tool-call', toolCallId: '', toolName: 'place_order', input: '{"item":"tea"' };
    const result = await generateText({
      model: run.model(scripted([answer([broken, call('', 'place_order', 'cake')]), done])),
      tools: run.tools, messages: run.messages, stopWhen: [stepCountIs(5), jingweiHalted],
    });
    assert.deepEqual([...world.orders], [['no-ids-1/1/1', 'cake']], 'the cake order ran under its own position');
    const told = result.steps[0]!.content.flatMap((p) => (p.type === 'tool-result' ? [p.output] : []));
    assert.deepEqual(told, ['order 1 placed'], 'the model is told the cake order was placed');
    const reopened = await aiSdkRun({ ...h, runId: 'no-ids-1' });
    assert.deepEqual(reopened.toolCalls.map((c) => c.outcome.ok ? c.outcome.output : c.outcome.code), ['not_run_by_framework', 'order 1 placed'], 'the journal tells the story the model was told: the framework never ran the tea order');
    await h.store.close();
  });

  it('a call the framework repaired to another tool name never takes the position of that tool\'s next call (r81 R3)', async () => {
    // The journal refused `Place_order` (not offered); the AI SDK's repair ran it as place_order with the tea. Matched
    // by id and name alone it took the cake's position: the model read "order placed" for the tea, and the cake's own
    // call was refused, while the cake was ordered and the tea was not.
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const h = await hostOn(() => openSqliteStore(path), world);
    const run = await aiSdkRun({ ...h, runId: 'repair-1', prompt: 'Buy tea and cake.' });
    const misnamed: MockContent = { type: 'tool-call', toolCallId: '', toolName: 'Place_order', input: JSON.stringify({ item: 'tea' }) };
    const result = await generateText({
      model: run.model(scripted([answer([misnamed, call('', 'place_order', 'cake')]), done])),
      tools: run.tools, messages: run.messages, stopWhen: [stepCountIs(5), jingweiHalted],
      experimental_repairToolCall: async ({ toolCall }) => ({ ...toolCall, toolName: 'place_order' }),
    });
    assert.deepEqual([...world.orders], [['repair-1/1/1', 'cake']], 'the cake was ordered at its own position, the tea never');
    const told = result.steps[0]!.content.flatMap((p) => (p.type === 'tool-result' ? [[(p.input as { item: string }).item, p.output]] : []));
    assert.deepEqual(told, [['cake', 'order 1 placed']], 'only the cake is reported placed, to the cake\'s call');
    await h.store.close();
  });

  it('arguments canonical JSON cannot take, beside a call with no arguments, each run at their own position (r82 G1, G2)', async () => {
    // 1e400 (past a double) matched no position by canonical equality; the call with no arguments ('' , run as {})
    // counted as one only a repair runs, so the first took its position and the payment made for {} was reported to
    // the other call, and the {} call itself was refused. Alone at its own id, such a call halted the run.
    const paid: string[] = [];
    const store = openSqliteStore(tempDbPath(dir));
    const owner = await store.acquire('s-args', { owner: 'h' });
    await owner.startTask('t');
    const gateway = createToolRuntime({
      tools: [{ name: 'pay', metadata: new ToolMetadata('pays', { type: 'object' }).withEffect('non_idempotent', 'p1'), execute: async (r) => { paid.push(JSON.stringify(r.arguments)); return `paid ${JSON.stringify(r.arguments)}`; } }],
      grants: { agent: '*' },
    }).bind({ owner, taskId: 't', caller: 'agent' });
    for (const [runId, ids] of [['args-1', ['', '']], ['args-2', ['a', 'b']]] as const) {
      const run = await aiSdkRun({ owner, gateway, store, runId, prompt: 'Pay.' });
      const result = await generateText({
        model: run.model(scripted([answer([{ type: 'tool-call', toolCallId: ids[0], toolName: 'pay', input: '{"n":1e400}' }, { type: 'tool-call', toolCallId: ids[1], toolName: 'pay', input: '' }]), done])),
        tools: run.tools, messages: run.messages, stopWhen: [stepCountIs(5), jingweiHalted],
      });
      assert.equal(run.status, 'finished', `${runId}: the run goes on`);
      const told = result.steps[0]!.content.flatMap((p) => (p.type === 'tool-result' ? [[JSON.stringify(p.input), p.output]] : p.type === 'tool-error' ? [[JSON.stringify(p.input), 'error']] : []));
      assert.deepEqual(told, [['{"n":null}', 'error'], ['{}', 'paid {}']], `${runId}: each call is told its own outcome`);
      const reopened = await aiSdkRun({ owner, gateway, store, runId });
      assert.deepEqual(reopened.toolCalls.map((c) => (c.outcome.ok ? c.outcome.output : c.outcome.code)), ['tool_arguments_invalid', 'paid {}'], `${runId}: the journal agrees`);
    }
    assert.deepEqual(paid, ['{}', '{}'], 'one payment a run');
    await store.close();
  });

  it('one run opened twice at once through one owner: the older loop fails with run_busy, the newer finishes, the run stays readable', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const h = await hostOn(() => openSqliteStore(path), world);
    const [older, newer] = await Promise.all([
      aiSdkRun({ ...h, runId: 'twice-1', prompt: 'Buy tea.' }),
      aiSdkRun({ ...h, runId: 'twice-1', prompt: 'Buy tea.' }),
    ]);
    assert.deepEqual((await runEvents(h.store)).filter((k) => k === 'run_started'), ['run_started'], 'the run is started once');
    await assert.rejects(generateText({
      model: older.model(scripted([answer([call('a', 'place_order')]), done])), tools: older.tools, messages: older.messages, stopWhen: [stepCountIs(5), jingweiHalted],
    }), (error: unknown) => error instanceof AgentRunBusyError && error.code === 'run_busy');
    await generateText({
      model: newer.model(scripted([answer([call('a', 'place_order')]), done])), tools: newer.tools, messages: newer.messages, stopWhen: [stepCountIs(5), jingweiHalted],
    });
    assert.equal(newer.status, 'finished');
    assert.equal(world.orders.size, 1);
    const again = await aiSdkRun({ ...h, runId: 'twice-1' });
    assert.equal(again.status, 'finished');
    assert.equal(again.toolCalls[0]!.execution!.replayed, true);
    assert.equal(world.orders.size, 1);
    await h.store.close();
  });

  it('a loop driven a step at a time reads the run\'s messages as they are now; messages read before a step are refused, not asked again (r99 #1)', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const h = await hostOn(() => openSqliteStore(path), world);
    const run = await aiSdkRun({ ...h, runId: 'stepwise', prompt: 'Buy tea.' });
    const opened = run.messages;
    // A model that orders until it reads the order's result.
    const model = new MockLanguageModelV3({
      doGenerate: async ({ prompt }) => (prompt.some((m) => m.role === 'tool') ? done : answer([call(`c${Math.random()}`, 'place_order')])),
    });
    for (let i = 0; i < 4 && run.status === 'running'; i += 1) {
      await generateText({ model: run.model(model), tools: run.tools, messages: run.messages, stopWhen: [stepCountIs(1), jingweiHalted] });
    }
    assert.deepEqual([run.status, run.steps, world.orders.size], ['finished', 2, 1], 'one order, read back by the next step');
    assert.deepEqual(run.messages.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);

    const again = await aiSdkRun({ ...h, runId: 'stepwise-2', prompt: 'Buy tea.' });
    const first = again.messages;
    await generateText({ model: again.model(model), tools: again.tools, messages: first, stopWhen: [stepCountIs(1), jingweiHalted] });
    assert.equal(world.orders.size, 2, 'the second run placed its order');
    const calls = model.doGenerateCalls.length;
    await assert.rejects(generateText({ model: again.model(model), tools: again.tools, messages: first, stopWhen: [stepCountIs(1), jingweiHalted] }),
      (error: unknown) => JSON.stringify(error).includes('does not hold step 1 of run stepwise-2') || String((error as Error)?.message).includes('does not hold step 1 of run stepwise-2'));
    assert.equal(model.doGenerateCalls.length, calls, 'the model was not asked');
    assert.equal(world.orders.size, 2, 'no order placed again');
    assert.equal(opened.length, 1, 'messages read before are what they were');
    await h.store.close();
  });

  it('a step-at-a-time loop goes on past a call the framework refused, and a stale prompt is refused whatever the last step held or the provider\'s ids (r100)', async () => {
    const path = tempDbPath(dir);
    for (const refused of [call('z1', 'refund_all'), { type: 'tool-call', toolCallId: 'call_0', toolName: 'place_order', input: '{"item": tea' } as MockContent]) {
      const world = outsideWorld();
      const h = await hostOn(() => openSqliteStore(path), world);
      const runId = `refused-${world.bodies.length}-${Math.random()}`;
      const run = await aiSdkRun({ ...h, runId, prompt: 'Buy tea.' });
      const stale = run.messages;
      // The provider numbers each response's calls from zero: every step asks under call_0.
      let asked = 0;
      const model = new MockLanguageModelV3({
        doGenerate: async ({ prompt }) => {
          asked += 1;
          if (asked === 1) return answer([call('call_0', 'place_order')]);
          if (asked === 2) return answer([refused]);
          return JSON.stringify(prompt).includes('order 1 placed') ? done : answer([call('call_0', 'place_order')]);
        },
      });
      const step = (messages: typeof stale) => generateText({ model: run.model(model), tools: run.tools, messages, stopWhen: [stepCountIs(1), jingweiHalted] });
      await step(run.messages);
      const afterFirst = run.messages;
      await step(run.messages);
      for (const old of [stale, afterFirst]) {
        await assert.rejects(step(old), (error: unknown) => String((error as Error)?.message).includes(`does not hold step 2 of run ${runId}`));
      }
      await step(run.messages);
      assert.deepEqual([run.status, world.orders.size, asked], ['finished', 1, 3], 'the loop read the refused call as not run, and finished with one order');
      const ids = run.messages.flatMap((m) => (m.role === 'assistant' && Array.isArray(m.content) ? m.content.flatMap((p) => (p.type === 'tool-call' ? [p.toolCallId] : [])) : []));
      assert.equal(new Set(ids).size, ids.length, `each step's call under an id of its own: ${ids.join(', ')}`);
      await h.store.close();
    }
  });

  it('messages read mid-step, or one prompt answered twice at once, never make a step\'s write again (r103 A, B)', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const h = await hostOn(() => openSqliteStore(path), world);
    const model = new MockLanguageModelV3({
      doGenerate: async ({ prompt }) => {
        await new Promise((resolve) => setTimeout(resolve, 10));
        return JSON.stringify(prompt).includes('order 1 placed') || JSON.stringify(prompt).includes('order 2 placed') ? done : answer([call(`c${Math.random()}`, 'place_order')]);
      },
    });
    // A: the host saves the conversation as the tool starts: it says the order did not run, and it then ran.
    const run = await aiSdkRun({ ...h, runId: 'mid-step', prompt: 'Buy tea.' });
    let saved: typeof run.messages = [];
    await generateText({ model: run.model(model), tools: run.tools, messages: run.messages, stopWhen: [stepCountIs(1), jingweiHalted], experimental_onToolCallStart: () => { saved = run.messages; } });
    assert.equal(world.orders.size, 1);
    await assert.rejects(generateText({ model: run.model(model), tools: run.tools, messages: saved, stopWhen: [stepCountIs(1), jingweiHalted] }),
      (error: unknown) => String((error as Error)?.message).includes('did not run, but it ran'));
    assert.equal(world.orders.size, 1, 'the saved messages placed no second order');
    // B: two loops on one run object asked at once from the same messages: one answer is journaled, the other refused.
    const both = await aiSdkRun({ ...h, runId: 'twice', prompt: 'Buy tea.' });
    const go = () => generateText({ model: both.model(model), tools: both.tools, messages: both.messages, stopWhen: [stepCountIs(3), jingweiHalted] }).then(() => 'ok', (e: unknown) => String((e as Error)?.message));
    const outcomes = await Promise.all([go(), go()]);
    assert.equal(outcomes.filter((o) => o === 'ok').length, 1, outcomes.join(' | '));
    assert.ok(outcomes.some((o) => o.includes('does not hold step 1 of run twice')), outcomes.join(' | '));
    assert.equal(world.orders.size, 2, 'one order for each run');
    await h.store.close();
  });

  it('the gateway\'s own bridge tools in a run\'s loop: the next step is refused before the model is asked, so no resume tells it the order did not run (r111 F1)', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const host = await hostOn(() => openSqliteStore(path), world);
    const run1 = await aiSdkRun({ ...host, runId: 'mixed-1', prompt: 'Buy tea.' });
    const model = scripted([answer([call('a', 'place_order')]), answer([call('b', 'place_order')]), done]);
    await assert.rejects(generateText({ model: run1.model(model), tools: aiSdkTools(host.gateway), messages: run1.messages, stopWhen: stepCountIs(5) }),
      (e: unknown) => e instanceof Error && /holds a result of the call "a" of "place_order" \(step 1 of run mixed-1\) that the run's tools never ran: a tool outside the run made it/.test(String((e as { cause?: unknown }).cause ?? e) + (e as Error).message));
    assert.equal(model.doGenerateCalls.length, 1, 'the model was not asked again');
    assert.deepEqual(world.bodies, ['place_order'], 'placed once, by the tool outside the run');
    // The host does as told: it opens the run again and gives the loop the run's tools. The order the tool outside the
    // run placed is read back from its attempt, not as a call that did not run, which the model would ask for again
    // (r112 #1).
    const run2 = await aiSdkRun({ ...host, runId: 'mixed-1' });
    assert.equal(run2.toolCalls[0]!.outcome.ok, true, JSON.stringify(run2.toolCalls[0]!.outcome));
    assert.equal(run2.toolCalls[0]!.execution?.replayed, true);
    await generateText({ model: run2.model(scripted([done])), tools: run2.tools, messages: run2.messages, stopWhen: stepCountIs(5) });
    assert.equal(run2.status, 'finished');
    assert.deepEqual(world.bodies, ['place_order'], 'placed once');
    // Opened again, the finished run runs nothing.
    const again = await aiSdkRun({ ...host, runId: 'mixed-1' });
    assert.equal(again.status, 'finished');
    assert.deepEqual(world.bodies, ['place_order']);
    await host.store.close();
  });

  it('a step\'s call a tool outside the run left in doubt, then retried on a review: the run opened again reads the retry\'s success back', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    await orderOutsideKilled(path, world, 'mixed-2', 'started:after');
    // The next host finds the order in doubt, a person says it was not placed, and the host retries it.
    const second = await hostOn(() => openSqliteStore(path), world);
    const history = await second.store.loadHistory('shop');
    const inDoubt = assessSession(history).calls.find((c) => c.name === 'place_order')!;
    assert.equal(inDoubt.status, 'outcome_unknown');
    const plan = prepareToolRetry(history, inDoubt.callId, { actor: 'ops', evidence: 'no order in the shop', outcome: 'not_executed' });
    assert.equal((await second.gateway.callWithOptions('place_order', { item: 'tea' }, { retry: plan })).result.outcome.status, 'succeeded');
    const run2 = await aiSdkRun({ ...second, runId: 'mixed-2' });
    assert.equal(run2.toolCalls[0]!.outcome.ok, true, 'read back from the retry that placed it');
    await generateText({ model: run2.model(scripted([done])), tools: run2.tools, messages: run2.messages, stopWhen: stepCountIs(5) });
    assert.equal(run2.status, 'finished');
    assert.deepEqual(world.bodies, ['place_order'], 'placed once');
    await second.store.close();
  });

  it('a host\'s earlier turns before the run\'s messages, their calls under the ids the provider gives again: a stale prompt is still refused (r113 F4, F5)', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const h = await hostOn(() => openSqliteStore(path), world);
    const run = await aiSdkRun({ ...h, runId: 'prefixed', prompt: 'Buy cake.' });
    // An earlier turn of the chat, outside the run: a call numbered call_0, as this provider numbers every response's calls.
    const earlier = [
      { role: 'user' as const, content: 'Buy tea.' },
      { role: 'assistant' as const, content: [{ type: 'tool-call' as const, toolCallId: 'call_0', toolName: 'place_order', input: { item: 'tea' } }] },
      { role: 'tool' as const, content: [{ type: 'tool-result' as const, toolCallId: 'call_0', toolName: 'place_order', output: { type: 'text' as const, value: 'order 1 placed' } }] },
    ];
    const stale = [...earlier, ...run.messages];
    const model = new MockLanguageModelV3({
      doGenerate: async ({ prompt }) => (prompt.filter((m) => m.role === 'tool').length > 1 ? done : answer([call('call_0', 'place_order', 'cake')])),
    });
    await generateText({ model: run.model(model), tools: run.tools, messages: stale, stopWhen: [stepCountIs(1), jingweiHalted] });
    assert.equal(world.orders.size, 1, 'the run placed its order');
    assert.notEqual(run.toolCalls[0]!.providerCallId, 'call_0', 'journaled under an id the prompt did not hold');
    const calls = model.doGenerateCalls.length;
    await assert.rejects(generateText({ model: run.model(model), tools: run.tools, messages: stale, stopWhen: [stepCountIs(1), jingweiHalted] }),
      (error: unknown) => String((error as Error)?.message).includes('does not hold step 1 of run prefixed') || JSON.stringify(error).includes('does not hold step 1 of run prefixed'));
    assert.equal(model.doGenerateCalls.length, calls, 'the model was not asked');
    // Read now, the run's messages after the same earlier turns go on: the earlier turn's result is not taken for the step's.
    await generateText({ model: run.model(model), tools: run.tools, messages: [...earlier, ...run.messages], stopWhen: [stepCountIs(1), jingweiHalted] });
    assert.equal(run.status, 'finished');
    assert.equal(world.orders.size, 1, 'one order for the run');
    await h.store.close();
  });

  it('a step\'s call the framework refused is not read back from an identical call other host code made in the task (r113 F1)', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const first = await hostOn(() => openSqliteStore(path), world);
    const run1 = await aiSdkRun({ ...first, runId: 'refused-3', prompt: 'Buy tea.' });
    await assert.rejects(generateText({
      model: run1.model(scripted([answer([call('a', 'place_order')]), dies])), tools: run1.tools, activeTools: [], messages: run1.messages, stopWhen: stepCountIs(5),
    }), Crash);
    // Other code of the host places the same order in the task, on its own account.
    assert.equal((await first.gateway.call('place_order', { item: 'tea' })).result.outcome.status, 'succeeded');
    const run2 = await aiSdkRun({ ...first, runId: 'refused-3' });
    assert.match(run2.toolCalls[0]!.outcome.ok ? 'read back as made' : run2.toolCalls[0]!.outcome.text, /not_run_by_framework/, 'the run\'s own call did not run');
    await first.store.close();
  });

  it('a step\'s call a tool outside the run left in doubt: the run stops for a review, and a completed review from the inbox reads as made, never made again (r113 F2, r114 N1, N5)', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    await orderOutsideKilled(path, world, 'mixed-3', 'body:after');
    // Opened again: the order's body ran and nothing says what happened. Told it did not run, the model would order
    // again, with arguments written a little differently past the in-doubt guard.
    const second = await hostOn(() => openSqliteStore(path), world);
    const inDoubt = assessSession(await second.store.loadHistory('shop')).calls.find((c) => c.name === 'place_order')!;
    const stopped = await aiSdkRun({ ...second, runId: 'mixed-3' });
    assert.deepEqual([stopped.status, stopped.pendingCallIds], ['needs_review', [inDoubt.callId]]);
    await second.owner.release();
    // An operator reviews it from the decision inbox (jingwei review), with no host running.
    await decisionInbox(second.store).recordReview({ sessionId: 'shop', callId: inDoubt.callId, outcome: 'completed', evidence: 'the shop has the order', actor: 'ops' });
    await second.store.close();
    const third = await hostOn(() => openSqliteStore(path), world);
    const run3 = await aiSdkRun({ ...third, runId: 'mixed-3' });
    assert.deepEqual(run3.toolCalls[0]!.outcome, { ok: true, output: 'The tool completed; its output was confirmed outside the journal and is not available.' });
    await generateText({ model: run3.model(scripted([done])), tools: run3.tools, messages: run3.messages, stopWhen: stepCountIs(5) });
    assert.equal(run3.status, 'finished');
    assert.deepEqual(world.bodies, ['place_order'], 'placed once');
    await third.store.close();
  });

  it('a step\'s call the framework refused is not read back from another loop\'s call under the same provider id with other arguments (r114 N2)', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const h = await hostOn(() => openSqliteStore(path), world);
    const runA = await aiSdkRun({ ...h, runId: 'refused-4', prompt: 'Buy tea.' });
    await assert.rejects(generateText({
      model: runA.model(scripted([answer([call('call_0', 'place_order')]), dies])), tools: runA.tools, activeTools: [], messages: runA.messages, stopWhen: stepCountIs(5),
    }), Crash);
    // A plain loop of the same task, whose provider numbers its calls the same way, orders coffee.
    await generateText({ model: scripted([answer([call('call_0', 'place_order', 'coffee')]), done]), tools: aiSdkTools(h.gateway), prompt: 'Buy coffee.', stopWhen: stepCountIs(5) });
    assert.deepEqual([...world.orders.values()], ['coffee']);
    const again = await aiSdkRun({ ...h, runId: 'refused-4' });
    assert.match(again.toolCalls[0]!.outcome.ok ? 'read back as made' : again.toolCalls[0]!.outcome.text, /not_run_by_framework/, 'the tea was never ordered');
    await h.store.close();
  });

  it('a step\'s call made outside the run under the same provider id twice, another caller\'s refusal first: the success is read back, not the refusal (r114 N3)', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const h = await hostOn(() => openSqliteStore(path), world);
    const run1 = await aiSdkRun({ ...h, runId: 'best-1', prompt: 'Buy tea.' });
    await assert.rejects(generateText({
      model: run1.model(scripted([answer([call('a', 'place_order')]), dies])), tools: run1.tools, activeTools: [], messages: run1.messages, stopWhen: stepCountIs(5),
    }), Crash);
    // Two plain loops of the task under the step's call id: another caller's, which a guard refuses, then the host's
    // own, which places the order.
    const intruder = createToolRuntime({ tools: world.tools, grants: { intruder: '*' }, guards: [({ caller }) => (caller === 'intruder' ? { code: 'not_yours', message: 'this caller may not order' } : null)] })
      .bind({ owner: h.owner, taskId: 'task', caller: 'intruder' });
    await generateText({ model: scripted([answer([call('a', 'place_order')]), done]), tools: aiSdkTools(intruder), prompt: 'Buy tea.', stopWhen: stepCountIs(5) });
    assert.equal(world.orders.size, 0, 'the other caller was refused');
    await generateText({ model: scripted([answer([call('a', 'place_order')]), done]), tools: aiSdkTools(h.gateway), prompt: 'Buy tea.', stopWhen: stepCountIs(5) });
    assert.deepEqual([...world.orders.values()], ['tea']);
    const refusals = (await h.store.loadHistory('shop')).filter((e) => e.kind.type === 'tool_result' && e.kind.result.outcome.status === 'failed');
    assert.equal(refusals.length, 1, 'the refusal is journaled: a candidate the read passes over');
    const again = await aiSdkRun({ ...h, runId: 'best-1' });
    assert.deepEqual(again.toolCalls[0]!.outcome, { ok: true, output: 'order 1 placed' }, 'read back from the call that placed it');
    await generateText({ model: again.model(scripted([done])), tools: again.tools, messages: again.messages, stopWhen: stepCountIs(5) });
    assert.equal(again.status, 'finished');
    assert.deepEqual(world.bodies, ['place_order'], 'placed once');
    await h.store.close();
  });

  it('a step\'s call made outside the run to a tool whose name holds a colon is read back as made (r114 N4)', async () => {
    const path = tempDbPath(dir);
    const base = outsideWorld();
    const world = { ...base, tools: base.tools.map((t) => (t.name === 'place_order' ? { ...t, name: 'shop:place_order' } : t)) };
    const host = await hostOn(() => openSqliteStore(path), world);
    const run1 = await aiSdkRun({ ...host, runId: 'colon-1', prompt: 'Buy tea.' });
    const model = scripted([answer([call('a', 'shop:place_order')]), answer([call('b', 'shop:place_order')]), done]);
    await assert.rejects(generateText({ model: run1.model(model), tools: aiSdkTools(host.gateway), messages: run1.messages, stopWhen: stepCountIs(5) }), /that the run's tools never ran/);
    assert.deepEqual(world.bodies, ['place_order'], 'placed once, by the tool outside the run');
    const run2 = await aiSdkRun({ ...host, runId: 'colon-1' });
    assert.deepEqual(run2.toolCalls[0]!.outcome, { ok: true, output: 'order 1 placed' });
    assert.equal(run2.toolCalls[0]!.execution?.replayed, true);
    await generateText({ model: run2.model(scripted([done])), tools: run2.tools, messages: run2.messages, stopWhen: stepCountIs(5) });
    assert.equal(run2.status, 'finished');
    assert.deepEqual(world.bodies, ['place_order'], 'placed once');
    await host.store.close();
  });

  it('bad options are InvalidInputError naming the option, and nothing is journaled', async () => {
    const path = tempDbPath(dir);
    const world = outsideWorld();
    const h = await hostOn(() => openSqliteStore(path), world);
    const before = (await h.store.loadHistory('shop')).length;
    const cases: Array<[string, unknown]> = [
      ['tools', { ...h, runId: 'bad-1', prompt: 'x', tools: 'place_order' }],
      ['tools', { ...h, runId: 'bad-1', prompt: 'x', tools: ['no_such_tool'] }],
      ['owner', { gateway: h.gateway, store: h.store, runId: 'bad-1', prompt: 'x' }],
      ['gateway', { owner: h.owner, store: h.store, runId: 'bad-1', prompt: 'x' }],
      ['signal', { ...h, runId: 'bad-1', prompt: 'x', signal: 'x' }],
      ['prompt', { ...h, runId: 'bad-1', prompt: 'a\uD800b' }],
      ['options', null],
    ];
    for (const [field, options] of cases) {
      await assert.rejects(aiSdkRun(options as Parameters<typeof aiSdkRun>[0]), { name: 'InvalidInputError', field }, field);
    }
    assert.equal((await h.store.loadHistory('shop')).length, before);
    // A hook or a model that is not one is refused when the bridge is built, not after a call's write (r99 #4).
    assert.throws(() => aiSdkTools(h.gateway, { onExecution: 5 as never }), { name: 'InvalidInputError', field: 'onExecution' });
    assert.throws(() => aiSdkTools(h.gateway, null as never), { name: 'InvalidInputError', field: 'options' });
    const run = await aiSdkRun({ ...h, runId: 'bad-model', prompt: 'x' });
    for (const model of [null, {}, 'gpt-x']) assert.throws(() => run.model(model as never), { name: 'InvalidInputError', field: 'model' });
    await h.store.close();
  });
});
