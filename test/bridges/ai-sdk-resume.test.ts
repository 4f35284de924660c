/**
 * The AI SDK bridge resumes (SQLite and PostgreSQL, in process, the SDK's own generateText/streamText loops over
 * its mock model): a run placing an order and then sending its confirmation is stopped after the order (at the model step between the
 * calls, or inside the e-mail's body); a fresh store handle, owner and runtime open the same run id: the completed
 * order is replayed (never run), the open e-mail goes through the recovery policy, the loop finishes, and exactly
 * one order and one e-mail reach the outside system.
 */
import assert from 'node:assert/strict';
import { afterEach, it } from 'node:test';
import { generateText, simulateReadableStream, stepCountIs, streamText } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { aiSdkRun, jingweiHalted, ToolRuntimeHaltedError } from '../../src/ai-sdk.js';
import { resumeAgent, scriptedModel } from '../../src/agent.js';
import { InvalidInputError } from '../../src/errors.js';
import { setFaultHook } from '../../src/fault.js';
import { answer, dies, scripted, usage, type MockContent } from './fixtures/ai-sdk-mock.js';
import { Crash, hostOn, outsideWorld } from './fixtures/resume-world.js';
import { forEachStore } from '../support/stores.js';

const call = (toolCallId: string, toolName: string): MockContent => ({ type: 'tool-call', toolCallId, toolName, input: '{"item":"tea"}' });
const orderStep = answer([{ type: 'text', text: 'Ordering.' }, call('c1', 'place_order')]);
// A real model mints new call ids on every request: the resumed run must not depend on them.
const emailStep = (id = 'c2') => answer([call(id, 'send_email')]);
const doneStep = answer([{ type: 'text', text: 'Ordered and confirmed.' }]);

/** The prompt roles and tool results the model was sent in its `n`-th request. */
function sent(model: MockLanguageModelV3, n: number) {
  const prompt = model.doGenerateCalls[n]!.prompt;
  const results = prompt.flatMap((m) => (m.role === 'tool' ? m.content.flatMap((p) => (p.type === 'tool-result' ? [p.output] : [])) : []));
  return { roles: prompt.map((m) => m.role), results };
}

forEachStore('aiSdkRun: kill and resume with generateText', (target) => {
  afterEach(() => setFaultHook(null));

  it('stopped at the model step between the order and the e-mail: the order is replayed, the e-mail sent once, the run finishes', async () => {
    const journal = target.fresh();
    const open = () => journal.open();
    const world = outsideWorld();
    const first = await hostOn(open, world);
    const run1 = await aiSdkRun({ ...first, runId: 'order-1', prompt: 'Buy tea.' });
    assert.equal(run1.status, 'running');
    assert.equal(run1.steps, 0);
    await assert.rejects(generateText({ model: run1.model(scripted([orderStep, dies])), tools: run1.tools, messages: run1.messages, stopWhen: [stepCountIs(5), jingweiHalted] }), Crash);
    assert.deepEqual(world.bodies, ['place_order']);
    await first.store.close();

    const second = await hostOn(open, world);
    const run2 = await aiSdkRun({ ...second, runId: 'order-1' });
    assert.equal(run2.status, 'running');
    assert.equal(run2.steps, 1);
    assert.deepEqual(run2.messages.map((m) => m.role), ['user', 'assistant', 'tool']);
    assert.equal(run2.toolCalls[0]!.execution!.replayed, true, 'the order is read back from the journal');
    const model = scripted([emailStep('fresh-id'), doneStep]);
    const result = await generateText({ model: run2.model(model), tools: run2.tools, messages: run2.messages, stopWhen: [stepCountIs(5 - run2.steps), jingweiHalted] });
    assert.equal(result.text, 'Ordered and confirmed.');
    assert.equal(run2.status, 'finished');
    assert.equal(run2.steps, 3);
    assert.deepEqual(sent(model, 0).roles, ['user', 'assistant', 'tool']);
    assert.deepEqual(sent(model, 0).results, [{ type: 'text', value: 'order 1 placed' }]);
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    assert.deepEqual([...world.orders.keys()], ['order-1/1/0']);
    assert.deepEqual([...world.emails.keys()], ['order-1/2/0']);

    // Opened again after it finished: nothing runs and there is nothing left to ask the model.
    const again = await aiSdkRun({ ...second, runId: 'order-1', prompt: 'Buy tea.' });
    assert.equal(again.status, 'finished');
    assert.equal(again.text, 'Ordered and confirmed.');
    assert.equal(again.steps, 3);
    assert.ok(again.toolCalls.length === 2 && again.toolCalls.every((c) => c.execution?.replayed === true));
    assert.deepEqual(again.messages.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant']);
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);

    // The run's events are the ones runAgent writes: one run id is one conversation whichever loop wrote it.
    const history = await second.store.loadHistory('shop');
    const runEvents = history.flatMap((e) => (e.kind.type === 'custom' && e.kind.plugin === 'jingwei.run' ? [e.kind.kind] : []));
    assert.deepEqual(runEvents, ['run_started', 'model_response', 'model_response', 'model_response', 'run_finished']);
    await second.store.close();
  });

  it('killed inside the e-mail body: suspend stops the run as needs_review; retry_safe retries the idempotent e-mail once and the loop finishes', async () => {
    const journal = target.fresh();
    const open = () => journal.open();
    const world = outsideWorld();
    const first = await hostOn(open, world);
    const run1 = await aiSdkRun({ ...first, runId: 'order-2', prompt: 'Buy tea.' });
    setFaultHook((point) => { if (point === 'started:after' && world.bodies.length === 1) throw new Crash('killed after the e-mail started'); });
    // The SDK reports the tool's throw to the model and asks it again; the host is dead by then.
    await assert.rejects(generateText({ model: run1.model(scripted([orderStep, emailStep(), dies])), tools: run1.tools, messages: run1.messages, stopWhen: stepCountIs(5) }), Crash);
    setFaultHook(null);
    await first.store.close();

    const second = await hostOn(open, world);
    const suspended = await aiSdkRun({ ...second, runId: 'order-2' });
    assert.equal(suspended.status, 'needs_review');
    assert.equal(suspended.pendingCallIds.length, 1);
    assert.deepEqual(world.bodies, ['place_order']);

    const resumed = await aiSdkRun({ ...second, runId: 'order-2', recovery: 'retry_safe' });
    assert.equal(resumed.status, 'running');
    assert.deepEqual(world.bodies, ['place_order', 'send_email'], 'the open e-mail was retried while the run opened');
    const retry = resumed.toolCalls[1]!.execution!.call.operation!.retry!;
    assert.equal(retry.callId, suspended.pendingCallIds[0]);
    assert.equal(retry.review!.actor, 'policy:retry_safe');
    assert.deepEqual(resumed.messages.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant', 'tool']);
    const model = scripted([doneStep]);
    const result = await generateText({ model: resumed.model(model), tools: resumed.tools, messages: resumed.messages, stopWhen: stepCountIs(3) });
    assert.equal(result.text, 'Ordered and confirmed.');
    assert.deepEqual(sent(model, 0).results, [{ type: 'text', value: 'order 1 placed' }, { type: 'text', value: 'sent' }]);
    assert.equal(world.orders.size, 1);
    assert.equal(world.emails.size, 1);
    assert.equal(resumed.status, 'finished');
    await second.store.close();
  });

  it('a durable approval halts the loop (jingweiHalted); the run opens as awaiting_approval until the operator decides, then continues', async () => {
    const journal = target.fresh();
    const open = () => journal.open();
    const world = outsideWorld({ emailApproval: true });
    const first = await hostOn(open, world, async () => ({ decision: 'pending', note: 'check the address' }));
    const run1 = await aiSdkRun({ ...first, runId: 'order-3', prompt: 'Buy tea.' });
    const halted = await generateText({ model: run1.model(scripted([orderStep, emailStep()])), tools: run1.tools, messages: run1.messages, stopWhen: [stepCountIs(5), jingweiHalted] });
    const error = halted.steps[1]!.content.find((p) => p.type === 'tool-error');
    assert.ok(error?.type === 'tool-error' && error.error instanceof ToolRuntimeHaltedError);
    assert.equal(error.error.code, 'operation_in_doubt');
    // Model-safe: no operation key, task or call id (r99 #3); the host reads them from the cause.
    assert.equal(error.error.message, 'Tool "send_email" was not run now (operation_in_doubt): it waits on an operator\'s approval decision and has not run. Do not call tools again.');
    assert.match((error.error.cause as Error).message, /open the run again once the operator decides/);
    assert.equal(run1.status, 'awaiting_approval');
    assert.equal(run1.pendingCallIds.length, 1);

    const waiting = await aiSdkRun({ ...first, runId: 'order-3' });
    assert.equal(waiting.status, 'awaiting_approval', 'undecided: the run waits without a new attempt');
    assert.deepEqual(waiting.pendingCallIds, run1.pendingCallIds);
    const { decisionInbox } = await import('../../src/decisions.js');
    const inbox = decisionInbox(first.store);
    const [request] = (await inbox.list({ sessionId: 'shop' })).items;
    await inbox.approve(request!.id, { actor: 'ops@example.com' });

    const resumed = await aiSdkRun({ ...first, runId: 'order-3' });
    assert.equal(resumed.status, 'running');
    assert.deepEqual(world.bodies, ['place_order', 'send_email'], 'the decided approval answered one more attempt');
    const result = await generateText({ model: resumed.model(scripted([doneStep])), tools: resumed.tools, messages: resumed.messages, stopWhen: stepCountIs(3) });
    assert.equal(result.text, 'Ordered and confirmed.');
    assert.equal(world.orders.size, 1);
    assert.equal(world.emails.size, 1);
    await first.store.close();
  });

  it('several calls of one step waiting on people: opening the run names every one of them, not one per opening', async () => {
    const journal = target.fresh();
    const open = () => journal.open();
    // Two e-mails in one step, each killed inside its body (start marker durable, no result).
    const world = outsideWorld();
    const first = await hostOn(open, world);
    const run1 = await aiSdkRun({ ...first, runId: 'doubts', prompt: 'Buy tea.' });
    setFaultHook((point) => { if (point === 'body:after') throw new Crash('killed inside the e-mail'); });
    const twoEmails = answer([call('e1', 'send_email'), { type: 'tool-call', toolCallId: 'e2', toolName: 'send_email', input: '{"item":"cake"}' }]);
    await assert.rejects(generateText({ model: run1.model(scripted([twoEmails, dies])), tools: run1.tools, messages: run1.messages, stopWhen: stepCountIs(5) }), Crash);
    setFaultHook(null);
    assert.deepEqual(world.bodies, ['send_email', 'send_email']);
    await first.store.close();
    const second = await hostOn(open, world);
    const reopened = await aiSdkRun({ ...second, runId: 'doubts' });
    assert.equal(reopened.status, 'needs_review');
    const attempts = (await second.store.loadHistory('shop')).flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call.id] : []));
    assert.deepEqual([...reopened.pendingCallIds].sort(), [...attempts].sort(), 'both e-mails wait on a person');
    assert.deepEqual(world.bodies, ['send_email', 'send_email'], 'nothing ran while the run was opened');
    // runAgent, resuming the same run, names both too.
    const resumed = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'doubts', store: second.store, maxSteps: 4 });
    assert.equal(resumed.stopReason, 'needs_review');
    assert.deepEqual([...resumed.pendingCallIds].sort(), [...attempts].sort());
    assert.deepEqual(world.bodies, ['send_email', 'send_email']);

    // Two approvals asked in one step, both left to a person (another journal: the e-mails above are in doubt).
    await second.store.close();
    const other = target.fresh();
    const approvals = outsideWorld({ emailApproval: true });
    const host = await hostOn(() => other.open(), approvals, async () => ({ decision: 'pending' }));
    const run2 = await aiSdkRun({ ...host, runId: 'approvals', prompt: 'Buy tea.' });
    await generateText({ model: run2.model(scripted([twoEmails])), tools: run2.tools, messages: run2.messages, stopWhen: [stepCountIs(5), jingweiHalted] });
    const waiting = await aiSdkRun({ ...host, runId: 'approvals' });
    assert.equal(waiting.status, 'awaiting_approval');
    assert.equal(waiting.pendingCallIds.length, 2, 'both requests wait');
    assert.deepEqual(approvals.bodies, []);
    await host.store.close();
  });

  it('one run id is one conversation whichever loop wrote it: resumeAgent continues a run the AI SDK loop started', async () => {
    const journal = target.fresh();
    const open = () => journal.open();
    const world = outsideWorld();
    const first = await hostOn(open, world);
    const run1 = await aiSdkRun({ ...first, runId: 'order-4', prompt: 'Buy tea.' });
    await assert.rejects(generateText({ model: run1.model(scripted([orderStep, dies])), tools: run1.tools, messages: run1.messages, stopWhen: stepCountIs(5) }), Crash);
    await first.store.close();

    const second = await hostOn(open, world);
    const model = scriptedModel([{ text: null, toolCalls: [{ id: 'e', name: 'send_email', arguments: '{"item":"tea"}' }] }, { text: 'Ordered and confirmed.', toolCalls: [] }]);
    const result = await resumeAgent({ ...second, model, runId: 'order-4', store: second.store, maxSteps: 4 });
    assert.equal(result.stopReason, 'completed');
    assert.equal(result.toolCalls[0]!.execution!.replayed, true);
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    assert.deepEqual([...world.emails.keys()], ['order-4/2/0']);
    const again = await aiSdkRun({ ...second, runId: 'order-4' });
    assert.equal(again.status, 'finished');
    assert.equal(again.text, 'Ordered and confirmed.');
    await second.store.close();
  });

  it('a run id, prompt or gateway that does not match the journal is refused, and nothing is written', async () => {
    const journal = target.fresh();
    const open = () => journal.open();
    const world = outsideWorld();
    const host = await hostOn(open, world);
    try {
      // The host's task start is journaled (a task_ledger event); the refused runs must add nothing after it.
      const before = (await host.store.loadHistory('shop')).length;
      await assert.rejects(aiSdkRun({ ...host, runId: 'never-started' }), (e) => e instanceof InvalidInputError && /prompt/.test(e.message));
      await assert.rejects(aiSdkRun({ ...host, runId: 'bad/id', prompt: 'x' }), InvalidInputError);
      await assert.rejects(aiSdkRun({ ...host, runId: 'r', prompt: 'x', recovery: 'always' as never }), InvalidInputError);
      assert.equal((await host.store.loadHistory('shop')).length, before);
      await aiSdkRun({ ...host, runId: 'r', prompt: 'Buy tea.' });
      await assert.rejects(aiSdkRun({ ...host, runId: 'r', prompt: 'Buy cake.' }), (e) => e instanceof InvalidInputError && /differs/.test(e.message));
    } finally {
      await host.store.close();
    }
  });

  it("tools used without the run's model halt the loop instead of running a call with no position", async () => {
    const journal = target.fresh();
    const open = () => journal.open();
    const world = outsideWorld();
    const host = await hostOn(open, world);
    const run = await aiSdkRun({ ...host, runId: 'r2', prompt: 'Buy tea.' });
    const result = await generateText({ model: scripted([orderStep, doneStep]), tools: run.tools, messages: run.messages, stopWhen: [stepCountIs(3), jingweiHalted] });
    const error = result.steps[0]!.content.find((p) => p.type === 'tool-error');
    assert.ok(error?.type === 'tool-error' && error.error instanceof ToolRuntimeHaltedError);
    assert.deepEqual(world.bodies, []);
    await host.store.close();
  });
});

forEachStore('aiSdkRun: kill and resume with streamText', (target) => {
  type Part = Parameters<typeof simulateReadableStream>[0]['chunks'][number];
  const finish = (reason: 'tool-calls' | 'stop') => ({ type: 'finish', finishReason: { unified: reason, raw: undefined }, usage });
  const streamed = (turns: Array<unknown[] | (() => never)>) => {
    let i = 0;
    return new MockLanguageModelV3({
      doStream: async () => {
        const turn = turns[i++];
        if (turn === undefined) throw new Error('the mock model ran out of answers');
        if (typeof turn === 'function') turn();
        return { stream: simulateReadableStream({ chunks: turn as Part[] }) } as never;
      },
    });
  };
  const orderParts = [
    { type: 'text-start', id: 't1' }, { type: 'text-delta', id: 't1', delta: 'Ordering.' }, { type: 'text-end', id: 't1' },
    { type: 'tool-call', toolCallId: 'c1', toolName: 'place_order', input: '{"item":"tea"}' }, finish('tool-calls'),
  ];
  const emailParts = [{ type: 'tool-call', toolCallId: 'x9', toolName: 'send_email', input: '{"item":"tea"}' }, finish('tool-calls')];
  const doneParts = [
    { type: 'text-start', id: 't2' }, { type: 'text-delta', id: 't2', delta: 'Ordered and confirmed.' }, { type: 'text-end', id: 't2' }, finish('stop'),
  ];

  it('each streamed response is journaled before its calls run; the resumed stream replays the order and sends one e-mail', async () => {
    const journal = target.fresh();
    const open = () => journal.open();
    const world = outsideWorld();
    const first = await hostOn(open, world);
    const run1 = await aiSdkRun({ ...first, runId: 'stream-1', prompt: 'Buy tea.' });
    const errors: unknown[] = [];
    const s1 = streamText({ model: run1.model(streamed([orderParts, dies])), tools: run1.tools, messages: run1.messages, stopWhen: stepCountIs(5), onError: ({ error }) => { errors.push(error); } });
    await s1.consumeStream();
    assert.ok(errors.some((e) => e instanceof Crash), 'the stream ended with the crash');
    assert.deepEqual(world.bodies, ['place_order']);
    await first.store.close();

    const second = await hostOn(open, world);
    const run2 = await aiSdkRun({ ...second, runId: 'stream-1' });
    assert.equal(run2.steps, 1);
    assert.equal(run2.text, 'Ordering.');
    const s2 = streamText({ model: run2.model(streamed([emailParts, doneParts])), tools: run2.tools, messages: run2.messages, stopWhen: stepCountIs(5) });
    assert.equal(await s2.text, 'Ordered and confirmed.');
    assert.equal(run2.status, 'finished');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    assert.deepEqual([...world.emails.keys()], ['stream-1/2/0']);
    // Each step's response is in the journal before the call it asked for.
    const order = (await second.store.loadHistory('shop')).flatMap((e) =>
      e.kind.type === 'custom' && e.kind.kind === 'model_response' ? ['response'] : e.kind.type === 'tool_call' ? [e.kind.call.name] : []);
    assert.deepEqual(order, ['response', 'place_order', 'response', 'send_email', 'response']);
    const again = await aiSdkRun({ ...second, runId: 'stream-1' });
    assert.equal(again.status, 'finished');
    assert.equal(again.text, 'Ordered and confirmed.');
    await second.store.close();
  });
});
