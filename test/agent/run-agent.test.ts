/** The reference agent loop over the scripted model: bounded, journaled, and never retrying a failed tool itself. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resumeAgent, runAgent, scriptedModel, type ChatModel, type ChatResponse, type ChatToolCall } from '../../src/agent.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { RUN_LIMITS } from '../../src/limits.js';
import { ChatModelError, ToolBodyError } from '../../src/errors.js';
import { setFaultHook } from '../../src/fault.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool, ToolApprover, ToolGateway } from '../../src/tool/types.js';
import { recordToolReview } from '../../src/tool/review.js';

const schema = { type: 'object', properties: { item: { type: 'string' } }, required: ['item'] };

async function setup(options: { approver?: ToolApprover } = {}) {
  const bodies: string[] = [];
  const tools: Tool[] = [
    {
      name: 'lookup_price',
      metadata: new ToolMetadata('Price of an item', schema).withEffect('read_only', 'prices-v1'),
      async execute(request) { bodies.push('lookup_price'); return { item: (request.arguments as { item: string }).item, cents: 1299 }; },
    },
    {
      name: 'charge_card',
      metadata: new ToolMetadata('Charges the card', schema).withEffect('non_idempotent', 'charge-v1'),
      async execute() { bodies.push('charge_card'); throw new ToolBodyError('gateway_timeout', 'the card network did not answer'); },
    },
    {
      name: 'gift_wrap',
      metadata: new ToolMetadata('Wraps an item', schema).withEffect('idempotent', 'wrap-v1').withApproval('human'),
      async execute() { bodies.push('gift_wrap'); return 'wrapped'; },
    },
  ];
  const store = createMemoryStore();
  const owner = await store.acquire('agent-session', { owner: 'host' });
  await owner.startTask('task');
  const runtime = createToolRuntime({
    tools,
    grants: { agent: '*' },
    approvers: { human: options.approver ?? (async () => ({ decision: 'approved' })) },
  });
  const gateway = runtime.bind({ owner, taskId: 'task', caller: 'agent' });
  return { store, owner, gateway, bodies };
}

/** A gateway this package did not make, offering the tools under other names (a provider's naming rule: `_` → `-`). */
function renamingWrapper(inner: ToolGateway): ToolGateway {
  return {
    sessionId: inner.sessionId, taskId: inner.taskId, turnId: inner.turnId,
    schemas: () => inner.schemas().map((t) => ({ ...t, name: t.name.replace('_', '-') })),
    call: (name, args) => inner.call(name.replace('-', '_'), args),
    callWithOptions: (name, args, options) => inner.callWithOptions(name.replace('-', '_'), args, options),
  };
}

const calls = (...list: Array<[string, string, string]>): ChatToolCall[] => list.map(([id, name, args]) => ({ id, name, arguments: args }));
const reply = (text: string | null, toolCalls: ChatToolCall[] = []): ChatResponse => ({ text, toolCalls });

/** A run `runId` whose host died after charge_card failed in its body (in doubt), before the model's next step. */
async function chargeInDoubt(runId: string) {
  const rig = await setup();
  const hostDied = () => { throw new Error('the host died before the next step'); };
  const { store, owner, gateway } = rig;
  await assert.rejects(runAgent({ model: scriptedModel([reply(null, calls(['a', 'charge_card', '{"item":"tea"}'])), hostDied]), owner, gateway, input: 'Buy tea.', maxSteps: 3, runId, store }), /host died/);
  const charged = (await store.loadHistory('agent-session')).find((e) => e.kind.type === 'tool_call')!;
  return { ...rig, hostDied, chargedId: charged.kind.type === 'tool_call' ? charged.kind.call.id : '' };
}

describe('runAgent', () => {
  it('a resume with retry_safe by an owner that took the session over while an idempotent body still runs here stops for it (needs_review), and runs nothing', async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => { release = resolve; });
    let entered!: () => void;
    const inBody = new Promise<void>((resolve) => { entered = resolve; });
    let bodies = 0;
    const wrap: Tool = {
      name: 'wrap',
      metadata: new ToolMetadata('Wraps an item', schema).withEffect('idempotent', 'wrap-v1'),
      async execute() { bodies += 1; entered(); await released; return 'wrapped'; },
    };
    const store = createMemoryStore();
    const runtime = createToolRuntime({ tools: [wrap], grants: { agent: '*' } });
    const first = await store.acquire('s', { owner: 'first' });
    await first.startTask('task');
    const running = runAgent({ model: scriptedModel([reply(null, calls(['a', 'wrap', '{"item":"tea"}'])), reply('Done.')]), owner: first, gateway: runtime.bind({ owner: first, taskId: 'task', caller: 'agent' }), input: 'Wrap it.', maxSteps: 3, runId: 'r', store });
    await inBody;
    const second = await store.acquire('s', { owner: 'second', takeover: true });
    const resumed = await resumeAgent({ model: scriptedModel([]), owner: second, gateway: runtime.bind({ owner: second, taskId: 'task', caller: 'agent' }), runId: 'r', store, maxSteps: 3, recovery: 'retry_safe' });
    assert.equal(resumed.stopReason, 'needs_review');
    assert.equal(resumed.pendingCallIds.length, 1);
    release();
    await running.catch(() => undefined);
    assert.equal(bodies, 1);
  });

  it('with a gateway this package did not make (a wrapper), requires reconcilers to be given: it cannot find the runtime\'s own', async () => {
    const { owner, gateway, store } = await setup();
    const wrapper: typeof gateway = {
      sessionId: gateway.sessionId, taskId: gateway.taskId, turnId: gateway.turnId,
      schemas: () => gateway.schemas(),
      call: (name, args) => gateway.call(name, args),
      callWithOptions: (name, args, options) => gateway.callWithOptions(name, args, options),
    };
    await assert.rejects(runAgent({ model: scriptedModel([]), owner, gateway: wrapper, input: 'Buy tea.', maxSteps: 2, runId: 'wrapped', store }),
      { name: 'InvalidInputError', field: 'reconcilers', message: /a tool left out is not asked/ });
    // One that only borrows the gateway's prototype is a wrapper too, not a TypeError.
    const borrowed = Object.setPrototypeOf({ ...wrapper }, Object.getPrototypeOf(gateway)) as typeof gateway;
    await assert.rejects(runAgent({ model: scriptedModel([]), owner, gateway: borrowed, input: 'Buy tea.', maxSteps: 2, runId: 'wrapped', store }),
      { name: 'InvalidInputError', field: 'reconcilers' });
    const result = await runAgent({ model: scriptedModel([reply('Nothing to do.')]), owner, gateway: wrapper, input: 'Buy tea.', maxSteps: 2, runId: 'wrapped', store, reconcilers: [] });
    assert.equal(result.stopReason, 'completed');
  });

  it('through a wrapper gateway, a completed call whose tool was redeployed under another revision, or removed, is read back from the journal', async () => {
    const { owner, gateway, store, bodies } = await setup();
    const hostDied = () => { throw new Error('the host died before the next step'); };
    await assert.rejects(runAgent({ model: scriptedModel([reply(null, calls(['a', 'lookup_price', '{"item":"tea"}'])), hostDied]), owner, gateway, input: 'Price of tea?', maxSteps: 3, runId: 'wrapped-redeploy', store, reconcilers: [] }), /host died/);
    const wrap = (inner: typeof gateway): typeof gateway => ({
      sessionId: inner.sessionId, taskId: inner.taskId, turnId: inner.turnId,
      schemas: () => inner.schemas(),
      call: (name, args) => inner.call(name, args),
      callWithOptions: (name, args, options) => inner.callWithOptions(name, args, options),
    });
    const lookupV2: Tool = {
      name: 'lookup_price',
      metadata: new ToolMetadata('Price of an item', schema).withEffect('read_only', 'prices-v2'),
      async execute() { bodies.push('lookup_price v2'); return { cents: 1 }; },
    };
    // A wrapper that renames the tools for the model too (the runtime's lookup_price is lookup-price to it).
    const renamed = renamingWrapper;
    await assert.rejects(runAgent({ model: scriptedModel([reply(null, calls(['a', 'lookup-price', '{"item":"tea"}'])), hostDied]), owner, gateway: renamed(gateway), input: 'Price of tea?', maxSteps: 3, runId: 'renamed-redeploy', store, reconcilers: [] }), /host died/);
    const renamedV2 = renamed(createToolRuntime({ tools: [lookupV2], grants: { agent: '*' } }).bind({ owner, taskId: 'task', caller: 'agent' }));
    const readBack = await resumeAgent({ model: scriptedModel([reply('Tea is 12.99.')]), owner, gateway: renamedV2, runId: 'renamed-redeploy', store, maxSteps: 3, reconcilers: [] });
    assert.equal(readBack.stopReason, 'completed');
    assert.match(readBack.messages.find((m) => m.role === 'tool')!.content ?? '', /1299/);
    for (const tools of [[lookupV2], []]) {
      const redeployed = wrap(createToolRuntime({ tools, grants: { agent: '*' } }).bind({ owner, taskId: 'task', caller: 'agent' }));
      // Before, every resume (and, once finished, every read-back) threw binding_changed ("use a new operation key",
      // which a run cannot).
      const resumed = await resumeAgent({ model: scriptedModel([reply('Tea is 12.99.')]), owner, gateway: redeployed, runId: 'wrapped-redeploy', store, maxSteps: 3, reconcilers: [] });
      assert.equal(resumed.stopReason, 'completed');
      assert.equal(resumed.toolCalls[0]!.execution!.replayed, true);
      assert.match(resumed.messages.find((m) => m.role === 'tool')!.content ?? '', /1299/, 'the price as it was recorded');
    }
    assert.deepEqual(bodies, ['lookup_price', 'lookup_price'], 'nothing ran again');
  });

  it('refuses a gateway bound to another owner of a session with the same id (another store, a tenant copy), before anything is journaled', async () => {
    const { owner, gateway, store } = await setup();
    const other = createMemoryStore();
    const elsewhere = await other.acquire('agent-session', { owner: 'host' });
    await elsewhere.startTask('task');
    const foreign = createToolRuntime({ tools: [], grants: { agent: '*' } }).bind({ owner: elsewhere, taskId: 'task', caller: 'agent' });
    const before = [(await store.loadHistory('agent-session')).length, (await other.loadHistory('agent-session')).length];
    await assert.rejects(runAgent({ model: scriptedModel([]), owner, gateway: foreign, input: 'Buy tea.', maxSteps: 2, runId: 'mixed', store }),
      { name: 'InvalidInputError', field: 'gateway', message: /another owner of session agent-session/ });
    await assert.rejects(runAgent({ model: scriptedModel([]), owner: elsewhere, gateway, input: 'Buy tea.', maxSteps: 2 }), { name: 'InvalidInputError', field: 'gateway' });
    assert.deepEqual([(await store.loadHistory('agent-session')).length, (await other.loadHistory('agent-session')).length], before, 'nothing journaled');
  });

  it('journals the user and assistant messages and every call; a failed tool is read by the model and never run again by the loop', async () => {
    const { store, owner, gateway, bodies } = await setup();
    const model = scriptedModel([
      reply('Checking.', calls(['a', 'lookup_price', '{"item":"tea"}'])),
      reply(null, calls(['b', 'charge_card', '{"item":"tea"}'])),
      reply('The charge may have gone through; I will not try again.'),
    ]);
    const result = await runAgent({ model, owner, gateway, input: 'Buy tea.', maxSteps: 4 });
    assert.equal(result.stopReason, 'completed');
    assert.equal(result.steps, 3);
    assert.equal(result.text, 'The charge may have gone through; I will not try again.');
    assert.deepEqual(bodies, ['lookup_price', 'charge_card'], 'each body ran once');

    const toolMessage = model.requests[2]!.messages.at(-1)!;
    assert.deepEqual(toolMessage, {
      role: 'tool',
      toolCallId: 'b',
      content: 'Tool "charge_card" failed: body_failure (gateway_timeout): the card network did not answer. The tool started, so it may have taken effect before failing; check before doing it again.',
    });
    assert.deepEqual(model.requests[0]!.tools.map((t) => t.name), ['lookup_price', 'charge_card', 'gift_wrap']);

    const history = await store.loadHistory('agent-session');
    // The run's own events (docs/design.md#resumable-runs) are custom events of plugin jingwei.run around them; the
    // first event is the store's record of the task's start (docs/design.md#the-task-ledger-in-the-chain).
    assert.deepEqual(history.map((e) => (e.kind.type === 'custom' ? `${e.kind.plugin}:${e.kind.kind}` : e.kind.type === 'task_ledger' ? `task_ledger:${e.kind.ledger.change}` : e.kind.type)), [
      'task_ledger:started', 'jingwei.run:run_started', 'user_message',
      'assistant_message', 'jingwei.run:model_response', 'tool_call', 'tool_started', 'tool_result',
      'jingwei.run:model_response', 'tool_call', 'tool_started', 'tool_result',
      'assistant_message', 'jingwei.run:model_response', 'jingwei.run:run_finished',
    ]);
    assert.deepEqual(history.flatMap((e) => (e.kind.type === 'user_message' || e.kind.type === 'assistant_message' ? [e.kind.text] : [])), [
      'Buy tea.', 'Checking.', 'The charge may have gone through; I will not try again.',
    ]);
    const journaled = history.flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call] : []));
    assert.deepEqual(journaled.map((c) => [c.name, c.operation!.contract.effect, c.action!.providerCallId, c.action!.actionIndex]), [
      ['lookup_price', 'read_only', 'a', 0],
      ['charge_card', 'non_idempotent', 'b', 0],
    ]);
    assert.notEqual(journaled[0]!.action!.decision.stepId, journaled[1]!.action!.decision.stepId);
    const seen = JSON.stringify(model.requests);
    for (const call of journaled) assert.ok(!seen.includes(call.id) && !seen.includes(call.operation!.key));
    assert.doesNotMatch(seen, /toolcall_|operation_|evt_/);
  });

  it('a scripted model asked past its script fails typed, and the run journals nothing of that step', async () => {
    const { owner, gateway, bodies } = await setup();
    await assert.rejects(runAgent({ model: scriptedModel([]), owner, gateway, input: 'Anything.', maxSteps: 2 }), { name: 'ChatModelError', code: 'model_script_exhausted' });
    assert.equal(bodies.length, 0);
  });

  it('is bounded: at most maxSteps model requests, then max_steps', async () => {
    const { owner, gateway, bodies } = await setup();
    const forever = () => reply(null, calls(['x', 'lookup_price', '{"item":"tea"}']));
    const model = scriptedModel([forever, forever, forever, forever]);
    const result = await runAgent({ model, owner, gateway, input: 'Loop.', maxSteps: 2 });
    assert.equal(result.stopReason, 'max_steps');
    assert.equal(result.steps, 2);
    assert.equal(model.requests.length, 2);
    assert.equal(bodies.length, 2);
    await assert.rejects(runAgent({ model, owner, gateway, input: 'x', maxSteps: 0 }), { code: 'invalid_input', message: /maxSteps: must be a positive integer, got a number \(0\)/ });
  });

  it('journals calls the model gets wrong (bad JSON, unknown tool) and tells the model; a name over the limit is refused unrecorded', async () => {
    const { store, owner, gateway, bodies } = await setup();
    const longName = 'n'.repeat(300);
    const model = scriptedModel([
      reply(null, calls(['a', 'lookup_price', '{"item": tea}'], ['b', 'fly_drone', '{}'], ['c', longName, '{}'])),
      reply('Sorry.'),
    ]);
    const result = await runAgent({ model, owner, gateway, input: 'Go.', maxSteps: 3 });
    assert.equal(result.stopReason, 'completed');
    assert.deepEqual(bodies, []);
    const contents = model.requests[1]!.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    assert.match(contents[0]!, /^Tool "lookup_price" failed: invalid_arguments \(tool_arguments_invalid\): .*The tool did not run\.$/);
    assert.match(contents[1]!, /^Tool "fly_drone" failed: unavailable \(tool_unavailable\): .*The tool did not run\.$/);
    assert.match(contents[2]!, /was refused before it ran: preflight \(name_too_long\)/);
    const journaled = (await store.loadHistory('agent-session')).flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call] : []));
    assert.deepEqual(journaled.map((c) => [c.name, c.arguments]), [['lookup_price', '{"item": tea}'], ['fly_drone', {}]]);
    assert.equal(result.toolCalls[2]!.execution, null);
  });

  it('refuses arguments naming one key twice before anything is recorded, naming the key; a resume reads the same refusal', async () => {
    const { store, owner, gateway, bodies } = await setup();
    const model = scriptedModel([reply(null, calls(['a', 'lookup_price', '{"item":"tea","item":"cake"}'])), reply('Sorry.')]);
    const result = await runAgent({ model, owner, gateway, input: 'Go.', maxSteps: 3, runId: 'dup-1', store });
    assert.equal(result.stopReason, 'completed');
    assert.deepEqual(bodies, []);
    const [told] = model.requests[1]!.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    assert.match(told!, /was refused before it ran: preflight \(duplicate_key\): duplicate key "item" .*send each key once/);
    assert.equal((await store.loadHistory('agent-session')).filter((e) => e.kind.type === 'tool_call').length, 0);
    const again = await resumeAgent({ model: scriptedModel([]), owner, gateway, runId: 'dup-1', store, maxSteps: 3 });
    assert.deepEqual(again.messages, result.messages);
  });

  it('offers only the tools it is given, and refuses a call to another granted tool: journaled with its step, read back the same, never run', async () => {
    const { store, owner, gateway, bodies } = await setup();
    const model = scriptedModel([
      reply(null, calls(['a', 'charge_card', '{"item":"tea"}'], ['b', 'lookup_price', '{"item":"tea"}'])),
      reply('I may only look prices up.'),
    ]);
    const result = await runAgent({ model, owner, gateway, input: 'Buy tea.', maxSteps: 3, runId: 'only-1', store, tools: ['lookup_price'] });
    assert.equal(result.stopReason, 'completed');
    assert.deepEqual(model.requests[0]!.tools.map((t) => t.name), ['lookup_price']);
    assert.deepEqual(bodies, ['lookup_price'], 'the card was not charged');
    const [told] = model.requests[1]!.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    assert.match(told!, /refused before it ran: preflight \(unavailable_tool\): tool "charge_card" was not offered to the model in this run/);
    const history = await store.loadHistory('agent-session');
    assert.deepEqual(history.filter((e) => e.kind.type === 'tool_call').map((e) => e.kind.type === 'tool_call' && e.kind.call.name), ['lookup_price']);
    const refused = history.filter((e) => e.kind.type === 'custom' && e.kind.kind === 'call_refused');
    assert.equal(refused.length, 1);
    const stepEvent = history.findIndex((e) => e.kind.type === 'custom' && e.kind.kind === 'model_response');
    assert.equal(history.indexOf(refused[0]!), stepEvent + 1, 'journaled with its step, before any call of it runs');
    // Read back, even by a run that offers every tool: the refusal the model read, nothing run.
    const again = await resumeAgent({ model: scriptedModel([]), owner, gateway, runId: 'only-1', store, maxSteps: 3 });
    assert.deepEqual(again.messages, result.messages);
    assert.deepEqual(bodies, ['lookup_price']);
  });

  it('a journaled call never made (killed after its step), resumed with tools that no longer offer it: refused, journaled, never run', async () => {
    const { store, owner, gateway, bodies } = await setup();
    setFaultHook((point) => { if (point === 'step:after') throw new Error('killed after the step was journaled'); });
    try {
      await assert.rejects(runAgent({ model: scriptedModel([reply(null, calls(['a', 'charge_card', '{"item":"tea"}']))]), owner, gateway, input: 'Buy tea.', maxSteps: 3, runId: 'only-2', store }), /killed/);
    } finally {
      setFaultHook(null);
    }
    const model = scriptedModel([reply('I may only look prices up.')]);
    const resumed = await resumeAgent({ model, owner, gateway, runId: 'only-2', store, maxSteps: 3, tools: ['lookup_price'] });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(bodies, [], 'the card was not charged');
    assert.match(model.requests[0]!.messages.at(-1)!.content ?? '', /unavailable_tool.*not offered/);
    const refusals = (await store.loadHistory('agent-session')).filter((e) => e.kind.type === 'custom' && e.kind.kind === 'call_refused');
    assert.equal(refusals.length, 1, 'journaled, so every later reader reads the same');
    const again = await resumeAgent({ model: scriptedModel([]), owner, gateway, runId: 'only-2', store, maxSteps: 3 });
    assert.deepEqual(again.messages, resumed.messages);
    assert.deepEqual(bodies, []);
  });

  it('with stopOnUncertainOutcome, stops on a call refused because an identical one is in doubt', async () => {
    const { store, owner, gateway, bodies } = await setup();
    const charge = reply(null, calls(['a', 'charge_card', '{"item":"tea"}']));
    const first = await runAgent({ model: scriptedModel([charge, reply('It may have gone through.')]), owner, gateway, input: 'Buy tea.', maxSteps: 3, runId: 'charge-1', store });
    assert.equal(first.stopReason, 'completed');
    const again = await runAgent({ model: scriptedModel([charge]), owner, gateway, input: 'Buy tea again.', maxSteps: 3, runId: 'charge-2', store, stopOnUncertainOutcome: true });
    assert.equal(again.stopReason, 'uncertain_outcome');
    const refused = again.toolCalls[0]!.outcome;
    assert.ok(!refused.ok && refused.code === 'tool_in_doubt' && refused.mayHaveTakenEffect, JSON.stringify(refused));
    assert.deepEqual(bodies, ['charge_card'], 'charged once');
  });

  it('a resume after a redeploy that renamed a tool whose call is in doubt stops for a person: the guard knows a repeat by name only', async () => {
    const { store, owner, bodies, chargedId } = await chargeInDoubt('renamed');
    // The next deploy calls the same tool pay_card: the model, told the charge may have gone through, asks again under it.
    const payCard: Tool = {
      name: 'pay_card',
      metadata: new ToolMetadata('Charges the card', schema).withEffect('non_idempotent', 'charge-v2'),
      async execute() { bodies.push('pay_card'); return 'charged'; },
    };
    const redeployed = createToolRuntime({ tools: [payCard], grants: { agent: '*' } }).bind({ owner, taskId: 'task', caller: 'agent' });
    const repeat = scriptedModel([reply(null, calls(['b', 'pay_card', '{"item":"tea"}'])), reply('Charged.')]);
    const stopped = await resumeAgent({ model: repeat, owner, gateway: redeployed, runId: 'renamed', store, maxSteps: 3 });
    assert.equal(stopped.stopReason, 'needs_review');
    assert.deepEqual(stopped.pendingCallIds, [chargedId]);
    assert.equal(repeat.requests.length, 0, 'the model is not asked while the charge is in doubt');
    assert.deepEqual(bodies, ['charge_card']);
    // With the guard off, the run goes on and the model reads the failure again, as before.
    const unguarded = createToolRuntime({ tools: [payCard], grants: { agent: '*' }, inDoubtGuard: false }).bind({ owner, taskId: 'task', caller: 'agent' });
    const told = scriptedModel([reply('It may have gone through; I will not charge again.')]);
    const onward = await resumeAgent({ model: told, owner, gateway: unguarded, runId: 'renamed', store, maxSteps: 3 });
    assert.equal(onward.stopReason, 'completed');
    assert.match(told.requests[0]!.messages.find((m) => m.role === 'tool')!.content ?? '', /may have taken effect/);
  });

  it('once a person settles the renamed tool\'s call, the resume goes on', async () => {
    const { store, owner, bodies, chargedId } = await chargeInDoubt('renamed-2');
    const history = await store.loadHistory('agent-session');
    await recordToolReview(owner, history, chargedId, { actor: 'ops@example.com', evidence: 'the card network shows the charge', outcome: 'completed' });
    const redeployed = createToolRuntime({ tools: [], grants: { agent: '*' } }).bind({ owner, taskId: 'task', caller: 'agent' });
    const model = scriptedModel([reply('It went through.')]);
    const resumed = await resumeAgent({ model, owner, gateway: redeployed, runId: 'renamed-2', store, maxSteps: 3 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(bodies, ['charge_card']);
    // Told only that it "may have taken effect", with the guard cleared by the review, the model could charge again.
    assert.match(model.requests[0]!.messages.find((m) => m.role === 'tool')!.content ?? '', /The tool completed; its output was confirmed outside the journal/);
  });

  it('a call in doubt whose tool the resumed run leaves out of its tools stops it too, while one a wrapper offers under another name does not', async () => {
    const { store, owner, gateway, bodies, chargedId, hostDied } = await chargeInDoubt('left-out');
    // Still registered and granted, but the run offers the model only lookup_price: a repeat through another tool is
    // not the guard's to see.
    const narrowed = await resumeAgent({ model: scriptedModel([]), owner, gateway, runId: 'left-out', store, maxSteps: 3, tools: ['lookup_price'] });
    assert.equal(narrowed.stopReason, 'needs_review');
    assert.deepEqual(narrowed.pendingCallIds, [chargedId]);
    // A wrapper that gives the tools other names (a provider's naming rule), nothing redeployed: the model's repeat is
    // the guard's to refuse, and the run goes on.
    const renaming = renamingWrapper(gateway);
    await assert.rejects(runAgent({ model: scriptedModel([reply(null, calls(['a', 'charge-card', '{"item":"cake"}'])), hostDied]), owner, gateway: renaming, input: 'Buy cake.', maxSteps: 3, runId: 'wrapped-doubt', store, reconcilers: [] }), /host died/);
    const model = scriptedModel([reply(null, calls(['b', 'charge-card', '{"item":"cake"}'])), reply('I will check first.')]);
    const wrapped = await resumeAgent({ model, owner, gateway: renaming, runId: 'wrapped-doubt', store, maxSteps: 3, reconcilers: [] });
    assert.equal(wrapped.stopReason, 'completed');
    assert.match(JSON.stringify(wrapped.toolCalls[1]!.outcome), /tool_in_doubt/);
    assert.deepEqual(bodies, ['charge_card', 'charge_card'], 'each item charged once');
  });

  it("asks Jingwei's approver on every call, and a denial is read by the model", async () => {
    let asked = 0;
    const { owner, gateway, bodies } = await setup({
      approver: async () => { asked += 1; return asked === 1 ? { decision: 'denied', code: 'busy', message: 'not now' } : { decision: 'approved' }; },
    });
    const model = scriptedModel([
      reply(null, calls(['a', 'gift_wrap', '{"item":"tea"}'])),
      reply(null, calls(['b', 'gift_wrap', '{"item":"tea"}'])),
      reply('Wrapped.'),
    ]);
    const result = await runAgent({ model, owner, gateway, input: 'Wrap it.', maxSteps: 3 });
    assert.equal(result.stopReason, 'completed');
    assert.equal(asked, 2);
    assert.deepEqual(bodies, ['gift_wrap']);
    assert.equal(result.toolCalls[0]!.outcome.ok === false && result.toolCalls[0]!.outcome.text, 'Tool "gift_wrap" failed: approval_denied (busy): not now. The tool did not run.');
    assert.notEqual(result.toolCalls[0]!.execution!.call.operation!.key, result.toolCalls[1]!.execution!.call.operation!.key, 'a new request of the model is a new operation, not a retry');
  });

  it('with stopOnUncertainOutcome, stops at the first tool that failed after it started', async () => {
    const { owner, gateway, bodies } = await setup();
    const model = scriptedModel([reply(null, calls(['a', 'charge_card', '{"item":"tea"}'], ['b', 'lookup_price', '{"item":"tea"}'])), reply('never')]);
    const result = await runAgent({ model, owner, gateway, input: 'Pay.', maxSteps: 3, stopOnUncertainOutcome: true });
    assert.equal(result.stopReason, 'uncertain_outcome');
    assert.deepEqual(bodies, ['charge_card'], 'the rest of the step was not run');
    assert.equal(model.requests.length, 1);
  });

  it("refuses a model's answer that is not a ChatResponse with model_bad_response, journals nothing of it, and resumes once the model answers well", async () => {
    const answers: Array<[unknown, RegExp]> = [
      [undefined, /the answer must be an object \{ text, toolCalls \}, got undefined/],
      [{ toolCalls: [] }, /text must be a string or null, got undefined/],
      [{ text: 'hi' }, /toolCalls must be an array \(empty when the model is done\), got undefined/],
      [{ text: null, toolCalls: [null] }, /toolCalls\[0\] must be an object/],
      [{ text: null, toolCalls: [{ id: 'a', name: 'lookup_price', arguments: { item: 'tea' } }] }, /toolCalls\[0\]\.arguments must be JSON text \(a string\), got an object/],
      [{ text: null, toolCalls: [{ id: 'a', name: 'lookup_price', arguments: '{}' }, { name: 'lookup_price', arguments: '{}' }] }, /toolCalls\[1\]\.id must be a string, got undefined/],
      // An answer a run would keep three times, uncharged: refused before it can fill the session's journal.
      [{ text: 'é'.repeat(RUN_LIMITS.maxAnswerBytes / 2 + 1), toolCalls: [] }, /answer text is 262146 bytes, over a run's limit of 262144 \(RUN_LIMITS\.maxAnswerBytes\)/],
    ];
    for (const [answer, message] of answers) {
      const { store, owner, gateway, bodies } = await setup();
      const model: ChatModel = { complete: async () => answer as ChatResponse };
      await assert.rejects(runAgent({ model, owner, gateway, store, runId: 'run-1', input: 'Price of tea?', maxSteps: 3 }), (error) => {
        assert.ok(error instanceof ChatModelError);
        assert.equal(error.code, 'model_bad_response');
        assert.match(error.message, message);
        return true;
      });
      const kinds = (await store.loadHistory('agent-session')).map((e) => (e.kind.type === 'custom' ? e.kind.kind : e.kind.type));
      assert.deepEqual(kinds, ['task_ledger', 'run_started', 'user_message'], 'nothing of the bad answer was journaled');
      assert.deepEqual(bodies, []);
      const good = scriptedModel([reply(null, calls(['a', 'lookup_price', '{"item":"tea"}'])), reply('12.99')]);
      const resumed = await resumeAgent({ model: good, owner, gateway, store, runId: 'run-1', maxSteps: 3 });
      assert.equal(resumed.stopReason, 'completed');
      assert.equal(resumed.text, '12.99');
      assert.deepEqual(bodies, ['lookup_price']);
    }
  });

  it('refuses a gateway bound to another session', async () => {
    const { owner } = await setup();
    const store = createMemoryStore();
    const elsewhere = await store.acquire('elsewhere', { owner: 'host' });
    await elsewhere.startTask('task');
    const gateway = createToolRuntime({ tools: [], grants: {} }).bind({ owner: elsewhere, taskId: 'task', caller: 'agent' });
    await assert.rejects(runAgent({ model: scriptedModel([]), owner, gateway, input: 'x', maxSteps: 1 }), { code: 'invalid_input' });
  });
});

describe('a model answer read once', () => {
  it('journals and runs the same calls, whatever its getters answer on a second read', async () => {
    const { store, owner, gateway, bodies } = await setup();
    let reads = 0;
    const shifty = {
      text: null,
      toolCalls: [{ get id() { reads += 1; return reads === 1 ? `call_${'x'.repeat(1100)}` : 'call_short'; }, name: 'lookup_price', arguments: '{"item":"tea"}' }],
    };
    let asked = 0;
    const model: ChatModel = { complete: async () => (asked++ === 0 ? (shifty as unknown as ChatResponse) : reply('done')) };
    const result = await runAgent({ model, owner, gateway, store, runId: 'run-once', input: 'Price?', maxSteps: 3 });
    assert.equal(reads, 1, 'the id was read once');
    assert.equal(result.toolCalls[0]!.outcome.ok, false, 'refused: the journal could not hold its id');
    assert.deepEqual(bodies, []);
    const again = await resumeAgent({ model: scriptedModel([]), owner, gateway, store, runId: 'run-once', maxSteps: 3 });
    assert.equal(again.stopReason, 'completed', 'the finished run reads back');
  });
});
