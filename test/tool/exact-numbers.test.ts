/**
 * Finding 8: every number the journal holds is held exactly. An integer beyond ±(2^53 − 1) is refused with its JSON
 * path wherever it would enter a journal (import, the gateway, an append, a model's arguments), never rounded.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runAgent, scriptedModel } from '../../src/agent.js';
import { InvalidInputError, JournalImportError, JsonParseError } from '../../src/errors.js';
import { encodeEventText } from '../../src/event/codec.js';
import { ToolEffect } from '../../src/event/types.js';
import { parseJournal } from '../../src/store/jsonl.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolPreflightError } from '../../src/errors.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { TurnId } from '../../src/ids.js';
import { HistoryBuilder } from '../support/history.js';

async function setup() {
  const bodies: unknown[] = [];
  const store = createMemoryStore();
  const owner = await store.acquire('numbers', { owner: 'host' });
  await owner.startTask('task');
  const runtime = createToolRuntime({
    tools: [{
      name: 'transfer',
      metadata: new ToolMetadata('Moves money', { type: 'object' }).withEffect(ToolEffect.NonIdempotent, 'v1'),
      async execute(request) { bodies.push(request.arguments); return 'moved'; },
    }],
    grants: { agent: '*' },
  });
  const gateway = runtime.bind({ owner, taskId: 'task', caller: 'agent' });
  return { store, owner, gateway, bodies };
}

describe('exact numbers', () => {
  it('import refuses a journal whose arguments hold an integer beyond 2^53, naming the line and the path', () => {
    const h = new HistoryBuilder();
    h.message('start');
    h.call({ effect: ToolEffect.NonIdempotent, arguments: { amount: 1 } });
    const lines = h.build().map(encodeEventText);
    const exact = lines.join('\n') + '\n';
    assert.equal(parseJournal(exact).length, 2);
    const tampered = exact.replace('"amount":1', '"amount":9007199254740993');
    assert.notEqual(tampered, exact);
    let thrown: unknown;
    try {
      parseJournal(tampered);
    } catch (error) {
      thrown = error;
    }
    assert.ok(thrown instanceof JournalImportError, String(thrown));
    assert.equal(thrown.line, 2);
    const cause = thrown.cause;
    assert.ok(cause instanceof JsonParseError);
    assert.equal(cause.reason, 'unsafe_integer');
    assert.equal(cause.path, '$.kind.call.arguments.amount');
  });

  it('the gateway refuses such arguments at preflight: nothing recorded, nothing charged, the body never runs', async () => {
    const { store, owner, gateway, bodies } = await setup();
    await assert.rejects(gateway.call('transfer', { amount: 2 ** 60 }), (error: unknown) => {
      assert.ok(error instanceof ToolPreflightError);
      assert.equal(error.code, 'unsafe_integer');
      assert.match(error.message, /\$\.amount/);
      return true;
    });
    assert.deepEqual(bodies, []);
    // Nothing but the task's start (docs/design.md#the-task-ledger-in-the-chain).
    assert.deepEqual((await store.loadHistory('numbers')).map((e) => e.kind.type), ['task_ledger']);
    assert.equal((await owner.task('task')).charged.toolCalls, 0);
    const fine = await gateway.call('transfer', { amount: Number.MAX_SAFE_INTEGER, big: 1e21, text: '9007199254740993' });
    assert.equal(fine.result.outcome.status, 'succeeded');
  });

  it('an append refuses a payload it could not load back exactly', async () => {
    const { store, owner } = await setup();
    await assert.rejects(
      owner.append([{ turnId: 'turn' as TurnId, kind: { type: 'custom', plugin: 'p', kind: 'k', payload: { id: 2 ** 60 } } }]),
      (error: unknown) => error instanceof InvalidInputError && /\$\.kind\.payload\.id/.test(error.message),
    );
    // Nothing but the task's start (docs/design.md#the-task-ledger-in-the-chain).
    assert.deepEqual((await store.loadHistory('numbers')).map((e) => e.kind.type), ['task_ledger']);
  });

  it("runAgent: the model's unsafe integer reaches the model as a refusal it can act on, not a rounded call", async () => {
    const { store, owner, gateway, bodies } = await setup();
    const model = scriptedModel([
      { text: null, toolCalls: [{ id: 'a', name: 'transfer', arguments: '{"amount": 9007199254740993}' }] },
      { text: null, toolCalls: [{ id: 'b', name: 'transfer', arguments: '{"amount": "9007199254740993"}' }] },
      { text: 'Done.', toolCalls: [] },
    ]);
    const result = await runAgent({ model, owner, gateway, input: 'Move it.', maxSteps: 3 });
    assert.equal(result.stopReason, 'completed');
    const first = result.toolCalls[0]!;
    assert.equal(first.execution, null, 'nothing was recorded for the refused call');
    assert.equal(first.outcome.ok, false);
    const text = model.requests[1]!.messages.find((m) => m.role === 'tool')!.content;
    assert.match(text, /refused before it ran: preflight \(unsafe_integer\).*\$\.amount.*send it as a string/);
    assert.deepEqual(bodies, [{ amount: '9007199254740993' }], 'only the exact retry ran');
    const calls = (await store.loadHistory('numbers')).filter((e) => e.kind.type === 'tool_call');
    assert.equal(calls.length, 1);
  });
});
