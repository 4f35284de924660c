/**
 * Loops of one run through one owner, in one process: a framework's loop (a bridge's open), a second open of it (a
 * double-submitted request), and runAgent or resumeAgent going on with it. Whatever the order they arrive in, each
 * reads the journal after the others' calls and step writes under way, a refused one leaves the live loop running,
 * and the run is started once, each step journaled once, each order placed once.
 */
import assert from 'node:assert/strict';
import { afterEach, it } from 'node:test';
import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { aiSdkRun, jingweiHalted } from '../../src/ai-sdk.js';
import { AgentRunBusyError, resumeAgent, runAgent, scriptedModel } from '../../src/agent.js';
import { InvalidInputError } from '../../src/errors.js';
import { runStartedEvent } from '../../src/agent/run-journal.js';
import { setFaultHook } from '../../src/fault.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { SessionStore } from '../../src/store/types.js';
import { forEachStore } from '../support/stores.js';
import { answer, scripted, type MockContent } from './fixtures/ai-sdk-mock.js';
import { hostOn, outsideWorld } from './fixtures/resume-world.js';

const call = (toolCallId: string, toolName: string, item = 'tea'): MockContent => ({ type: 'tool-call', toolCallId, toolName, input: JSON.stringify({ item }) });
const done = answer([{ type: 'text', text: 'Done.' }]);
const settledText = (p: Promise<unknown>) => p.then(() => 'finished', (error: unknown) => (error instanceof Error ? `${error.name}: ${error.message}` : String(error)));

const runEvents = async (store: SessionStore) =>
  (await store.loadHistory('shop')).flatMap((e) => (e.kind.type === 'custom' && e.kind.plugin === 'jingwei.run' ? [e.kind.kind] : []));

/** A guard that holds the first call it sees until `release()`, and says when it holds it. */
function holdingGuard() {
  let entered!: () => void;
  const held = new Promise<void>((resolve) => { entered = resolve; });
  let release!: () => void;
  const released = new Promise<void>((resolve) => { release = resolve; });
  let first = true;
  const guard = async () => {
    if (first) {
      first = false;
      entered();
      await released;
    }
    return null;
  };
  return { guard, held, release };
}

/**
 * Starts a framework loop on `run` whose model places an order in step 1 and then waits before its second answer;
 * resolves once it waits. `answer2` lets the model answer "Done.", `loop` settles with how the loop ended.
 */
async function placedThenWaiting(run: Awaited<ReturnType<typeof aiSdkRun>>) {
  let asked!: () => void;
  const waiting = new Promise<void>((resolve) => { asked = resolve; });
  let answer2!: () => void;
  const answered = new Promise<void>((resolve) => { answer2 = resolve; });
  let turn = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async () => {
      turn += 1;
      if (turn === 1) return answer([call('a', 'place_order')]);
      asked();
      await answered;
      return done;
    },
  });
  const loop = settledText(generateText({ model: run.model(model), tools: run.tools, messages: run.messages, stopWhen: [stepCountIs(5), jingweiHalted] }));
  await waiting;
  return { loop, answer2 };
}

forEachStore('one run, several loops through one owner', (target) => {
  afterEach(() => setFaultHook(null));

  it('a second open waits for the first loop\'s call, and a resumeAgent arriving meanwhile waits for it too: the order is placed once, and read back as placed', async () => {
    const world = outsideWorld();
    const { store, owner } = await hostOn(() => target.fresh().open(), world);
    const { guard, held, release } = holdingGuard();
    const gateway = createToolRuntime({ tools: world.tools, grants: { agent: '*' }, guards: [guard] }).bind({ owner, taskId: 'task', caller: 'agent' });
    const run1 = await aiSdkRun({ owner, gateway, store, runId: 'three', prompt: 'Buy tea.' });
    const firstLoop = settledText(generateText({ model: run1.model(scripted([answer([call('a', 'place_order')]), done])), tools: run1.tools, messages: run1.messages, stopWhen: [stepCountIs(5), jingweiHalted] }));
    await held;
    const second = aiSdkRun({ owner, gateway, store, runId: 'three' });
    const third = resumeAgent({ owner, gateway, store, runId: 'three', model: scriptedModel([{ text: 'Ordered.', toolCalls: [] }]), maxSteps: 3 });
    // Both wait for the call under way; give them every chance to read before it is journaled.
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    const run2 = await second;
    assert.equal(run2.toolCalls[0]!.outcome.ok, true, 'the second open reads the order as placed');
    const result = await third;
    assert.equal(result.stopReason, 'completed');
    assert.equal(result.toolCalls[0]!.outcome.ok, true, 'resumeAgent reads the order as placed');
    assert.equal(result.toolCalls[0]!.execution?.replayed, true);
    assert.match(await firstLoop, /taken by a newer open or runAgent through this owner/, 'the first loop journals nothing more once a newer loop has the run, and is told why');
    assert.deepEqual(world.bodies, ['place_order'], 'placed once');
    assert.ok(!(await runEvents(store)).includes('call_refused'), 'nothing says the order did not run');
    await store.close();
  });

  for (const first of ['aiSdkRun', 'runAgent'] as const) {
    it(`an open and a runAgent of a new run in the same tick (${first} first) start it once`, async () => {
      const world = outsideWorld();
      const h = await hostOn(() => target.fresh().open(), world);
      const runId = `tick-${first}`;
      const open = () => aiSdkRun({ ...h, runId, prompt: 'Buy tea.' });
      const drive = () => runAgent({ ...h, runId, input: 'Buy tea.', model: scriptedModel([{ text: 'Nothing to buy.', toolCalls: [] }]), maxSteps: 2 });
      const [a, b] = first === 'aiSdkRun' ? [open(), drive()] : [drive(), open()];
      const outcomes = await Promise.allSettled([a, b]);
      for (const o of outcomes) if (o.status === 'rejected') assert.ok(o.reason instanceof AgentRunBusyError, String(o.reason));
      assert.ok(outcomes.some((o) => o.status === 'fulfilled'));
      assert.equal((await runEvents(h.store)).filter((k) => k === 'run_started').length, 1, 'started once');
      const again = await aiSdkRun({ ...h, runId });
      assert.ok(['running', 'finished'].includes(again.status), 'the run reads back');
      await h.store.close();
    });
  }

  it('an open that arrives while the first loop journals a step reads the journal after that write: the step is journaled once', async () => {
    const world = outsideWorld();
    const h = await hostOn(() => target.fresh().open(), world);
    const run1 = await aiSdkRun({ ...h, runId: 'step-write', prompt: 'Buy tea.' });
    let second: ReturnType<typeof aiSdkRun> | null = null;
    let armed = false;
    // The second open begins inside the first loop's step write, just before its commit.
    setFaultHook((point) => {
      if (point === 'commit:before' && armed) {
        armed = false;
        second = aiSdkRun({ ...h, runId: 'step-write' });
      }
    });
    const model = new MockLanguageModelV3({
      doGenerate: async () => {
        armed = true;
        return answer([call('a', 'place_order')]);
      },
    });
    const firstLoop = settledText(generateText({ model: run1.model(model), tools: run1.tools, messages: run1.messages, stopWhen: [stepCountIs(5), jingweiHalted] }));
    await firstLoop;
    setFaultHook(null);
    assert.deepEqual(world.bodies, [], 'the first loop makes no call once the second open has the run');
    assert.notEqual(second, null, 'the second open began inside the step write');
    const run2 = await second!;
    assert.equal(run2.steps, 1, 'the second open read the step the first loop journaled');
    await generateText({ model: run2.model(scripted([answer([call('b', 'place_order')]), done])), tools: run2.tools, messages: run2.messages, stopWhen: [stepCountIs(5), jingweiHalted] });
    assert.equal(run2.status, 'finished');
    const steps = (await h.store.loadHistory('shop')).flatMap((e) => (e.kind.type === 'custom' && e.kind.kind === 'model_response' ? [(e.kind.payload as { step: number }).step] : []));
    assert.deepEqual(steps, [1, 2, 3], 'each step journaled once');
    const again = await aiSdkRun({ ...h, runId: 'step-write' });
    assert.equal(again.status, 'finished', 'the run reads back');
    assert.deepEqual(world.bodies, ['place_order'], 'the first loop never placed its order; the second did, once');
    await h.store.close();
  });

  it('an open whose signal aborts stops waiting for an older loop\'s call that does not end, and the next open still waits for that call', { timeout: 20_000 }, async () => {
    const world = outsideWorld();
    const { store, owner } = await hostOn(() => target.fresh().open(), world);
    const { guard, held, release } = holdingGuard();
    const gateway = createToolRuntime({ tools: world.tools, grants: { agent: '*' }, guards: [guard] }).bind({ owner, taskId: 'task', caller: 'agent' });
    const run1 = await aiSdkRun({ owner, gateway, store, runId: 'stuck', prompt: 'Buy tea.' });
    const firstLoop = settledText(generateText({ model: run1.model(scripted([answer([call('a', 'place_order')]), done])), tools: run1.tools, messages: run1.messages, stopWhen: [stepCountIs(5), jingweiHalted] }));
    await held;
    await assert.rejects(aiSdkRun({ owner, gateway, store, runId: 'stuck', signal: AbortSignal.timeout(100) }), (error: Error) => error.name === 'TimeoutError');
    let thirdOpened = false;
    const third = aiSdkRun({ owner, gateway, store, runId: 'stuck' }).then((run) => {
      thirdOpened = true;
      return run;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(thirdOpened, false, 'the call under way still holds the next open');
    release();
    const run3 = await third;
    assert.equal(run3.toolCalls[0]!.outcome.ok, true, 'read as placed');
    await firstLoop;
    assert.deepEqual(world.bodies, ['place_order']);
    await store.close();
  });

  for (const refused of ['aiSdkRun', 'runAgent'] as const) {
    it(`a ${refused} refused for its input leaves the live loop running`, async () => {
      const world = outsideWorld();
      const h = await hostOn(() => target.fresh().open(), world);
      const runId = `refused-${refused}`;
      const run1 = await aiSdkRun({ ...h, runId, prompt: 'Buy tea.' });
      if (refused === 'aiSdkRun') {
        await assert.rejects(aiSdkRun({ ...h, runId, prompt: 'Buy cake.' }), InvalidInputError);
      } else {
        await assert.rejects(runAgent({ ...h, runId, input: 'Buy cake.', model: scriptedModel([]), maxSteps: 2 }), InvalidInputError);
      }
      await generateText({ model: run1.model(scripted([answer([call('a', 'place_order')]), done])), tools: run1.tools, messages: run1.messages, stopWhen: [stepCountIs(5), jingweiHalted] });
      assert.equal(run1.status, 'finished');
      assert.deepEqual(world.bodies, ['place_order']);
      await h.store.close();
    });
  }

  for (const refused of ['aiSdkRun', 'runAgent'] as const) {
    it(`a ${refused} refused after it read the run (a completed call its caller may no longer use), having journaled nothing, gives the run back to the live loop`, async () => {
      const world = outsideWorld();
      const h = await hostOn(() => target.fresh().open(), world);
      const runId = `given-back-${refused}`;
      const narrow = createToolRuntime({ tools: world.tools, grants: { agent: ['send_email'] } }).bind({ owner: h.owner, taskId: 'task', caller: 'agent' });
      const run1 = await aiSdkRun({ ...h, runId, prompt: 'Buy tea.' });
      const { loop, answer2 } = await placedThenWaiting(run1);
      const before = (await h.store.loadHistory('shop')).length;
      const entry = refused === 'aiSdkRun'
        ? aiSdkRun({ ...h, gateway: narrow, runId })
        : runAgent({ ...h, gateway: narrow, runId, input: 'Buy tea.', model: scriptedModel([]), maxSteps: 3 });
      await assert.rejects(entry, { code: 'unavailable_tool' });
      assert.equal((await h.store.loadHistory('shop')).length, before, 'the refused entry journaled nothing');
      answer2();
      assert.equal(await loop, 'finished');
      assert.equal(run1.status, 'finished', 'the live loop kept the run and finished it');
      assert.deepEqual(world.bodies, ['place_order']);
      await h.store.close();
    });
  }

  it('a resumeAgent of a run not journaled yet, in the same tick as the open that starts it: the drive is refused for its input, the open goes on', async () => {
    const world = outsideWorld();
    const h = await hostOn(() => target.fresh().open(), world);
    const drive = resumeAgent({ ...h, runId: 'not-yet', model: scriptedModel([]), maxSteps: 2 });
    const open = aiSdkRun({ ...h, runId: 'not-yet', prompt: 'Buy tea.' });
    await assert.rejects(drive, InvalidInputError);
    const run = await open;
    assert.equal(run.status, 'running');
    assert.deepEqual((await runEvents(h.store)).filter((k) => k === 'run_started'), ['run_started']);
    await h.store.close();
  });

  it('one run object given to two framework loops at once journals each step once, under its own number, and the run reads back', async () => {
    const world = outsideWorld();
    const h = await hostOn(() => target.fresh().open(), world);
    const run = await aiSdkRun({ ...h, runId: 'two-loops', prompt: 'Buy tea.' });
    const loop = (id: string) => settledText(generateText({ model: run.model(scripted([answer([call(id, 'place_order')]), done])), tools: run.tools, messages: run.messages, stopWhen: [stepCountIs(5), jingweiHalted] }));
    await Promise.all([loop('a'), loop('b')]);
    const steps = (await h.store.loadHistory('shop')).flatMap((e) => (e.kind.type === 'custom' && e.kind.kind === 'model_response' ? [(e.kind.payload as { step: number }).step] : []));
    assert.deepEqual(steps, [...steps.keys()].map((i) => i + 1), 'steps 1, 2, ... each once');
    const again = await aiSdkRun({ ...h, runId: 'two-loops' });
    assert.ok(['running', 'finished'].includes(again.status), 'the run reads back');
    await h.store.close();
  });

  it('a runAgent that fails before it journals anything for the run gives it back, though another run of the session wrote meanwhile', async () => {
    const world = outsideWorld();
    const h = await hostOn(() => target.fresh().open(), world);
    const run1 = await aiSdkRun({ ...h, runId: 'kept', prompt: 'Buy tea.' });
    const { loop, answer2 } = await placedThenWaiting(run1);
    const failingModel = {
      async complete(): Promise<never> {
        // Another run of the session writes while this entry holds the run.
        await h.owner.append([runStartedEvent(h.gateway.turnId, 'another', 'task', 'Hello.')]);
        throw new Error('the model is down');
      },
    };
    await assert.rejects(runAgent({ ...h, runId: 'kept', input: 'Buy tea.', model: failingModel, maxSteps: 3 }), /the model is down/);
    answer2();
    assert.equal(await loop, 'finished');
    assert.equal(run1.status, 'finished', 'the live loop kept the run');
    assert.deepEqual(world.bodies, ['place_order']);
    await h.store.close();
  });

  it('a finished run takes no more steps: a loop that goes on with its model is refused, and nothing is journaled or run', async () => {
    const world = outsideWorld();
    const h = await hostOn(() => target.fresh().open(), world);
    const run = await aiSdkRun({ ...h, runId: 'over', prompt: 'Buy tea.' });
    await generateText({ model: run.model(scripted([done])), tools: run.tools, messages: run.messages, stopWhen: [stepCountIs(5), jingweiHalted] });
    assert.equal(run.status, 'finished');
    const before = (await h.store.loadHistory('shop')).length;
    await assert.rejects(generateText({ model: run.model(scripted([answer([call('a', 'place_order')]), done])), tools: run.tools, messages: run.messages, stopWhen: [stepCountIs(5), jingweiHalted] }),
      /over is finished/);
    assert.equal((await h.store.loadHistory('shop')).length, before);
    assert.deepEqual(world.bodies, []);
    await h.store.close();
  });

  it('a run stopped for a person takes no more steps: a loop that goes on past the stop is refused, and the run is not finished over its open call', async () => {
    const world = outsideWorld({ emailApproval: true });
    const h = await hostOn(() => target.fresh().open(), world, async () => ({ decision: 'pending', note: 'check the address' }));
    const run = await aiSdkRun({ ...h, runId: 'stopped', prompt: 'Mail them.' });
    // No jingweiHalted: the host lets the framework go on after the call halted.
    const loop = settledText(generateText({ model: run.model(scripted([answer([call('a', 'send_email')]), done])), tools: run.tools, messages: run.messages, stopWhen: stepCountIs(5) }));
    assert.match(await loop, /stopped is awaiting_approval/);
    assert.equal(run.status, 'awaiting_approval');
    assert.ok(!(await runEvents(h.store)).includes('run_finished'), 'not finished over the waiting call');
    assert.deepEqual(world.bodies, []);
    await h.store.close();
  });
});
