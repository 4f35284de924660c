/**
 * Caller keys and replay (docs/design.md#caller-keys-and-replay): a completed key with the same binding returns its
 * recorded execution and runs, writes and charges nothing; another binding is binding_changed; a key whose latest
 * attempt did not complete is operation_in_doubt, and the library never retries it by itself.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { OperationConfirmedError, OperationInDoubtError, ToolBodyError } from '../../src/errors.js';
import { recordToolReview } from '../../src/review.js';
import type { JsonValue } from '../../src/json/types.js';
import { OPERATION_KEY_LIMITS } from '../../src/limits.js';
import { createMemoryStore } from '../../src/store/memory.js';
import type { SessionOwner, SessionStore } from '../../src/store/types.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool, ToolGateway } from '../../src/tool/types.js';
import { rig, tool } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';
import { HistoryBuilder, succeeded } from '../support/history.js';
import { commitAs } from '../../src/store/owner-commit.js';
import { ToolEffect } from '../../src/event/types.js';

const idempotent = (name: string, revision = 'v1') => new ToolMetadata(`the ${name} tool`, { type: 'object' }).withEffect('idempotent', revision);

/** What replay must leave untouched: the journal and the task's charges. */
async function footprint(store: SessionStore, owner: SessionOwner, sessionId: string, taskId: string) {
  const task = await owner.task(taskId);
  return { events: (await store.loadHistory(sessionId)).length, charged: task.charged, reserved: task.reservedOutputBytes };
}

async function memoryRig(tools: Tool[]) {
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t', { limits: { toolCalls: 1_000 } });
  const gateway = createToolRuntime({ tools, grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  return { store, owner, gateway, at: () => footprint(store, owner, 's', 't') };
}

describe('caller keys', () => {
  it('a completed key replays its recorded execution: the body runs once, nothing is written or charged again', async () => {
    let runs = 0;
    const place = tool('place', async (req) => {
      runs++;
      return { order: (req.arguments as { sku: string }).sku };
    }, idempotent('place'));
    const r = await memoryRig([place]);
    const first = await r.gateway.callWithOptions('place', { sku: 'A', qty: 1 }, { operationKey: 'run-1/step-0/0' });
    assert.equal(first.replayed, undefined);
    assert.equal(first.call.operation?.key, 'run-1/step-0/0');
    const before = await r.at();
    // Key order does not matter: the binding compares canonical arguments.
    const again = await r.gateway.callWithOptions('place', { qty: 1, sku: 'A' }, { operationKey: 'run-1/step-0/0' });
    assert.equal(again.replayed, true);
    assert.equal(runs, 1);
    assert.deepEqual(again.result, first.result);
    assert.equal(again.call.id, first.call.id);
    assert.deepEqual(again.resultEvent, first.resultEvent);
    assert.deepEqual(await r.at(), before);
    await r.store.close();
  });

  it('the same key with another tool, other arguments or another contract revision is binding_changed, writing nothing', async () => {
    const a = tool('a', async () => 'ok', idempotent('a'));
    const b = tool('b', async () => 'ok', idempotent('b'));
    const r = await memoryRig([a, b]);
    await r.gateway.callWithOptions('a', { n: 1 }, { operationKey: 'k' });
    const before = await r.at();
    await assert.rejects(r.gateway.callWithOptions('a', { n: 2 }, { operationKey: 'k' }), { code: 'binding_changed' });
    await assert.rejects(r.gateway.callWithOptions('b', { n: 1 }, { operationKey: 'k' }), { code: 'binding_changed' });
    const revised = createToolRuntime({ tools: [tool('a', async () => 'ok', idempotent('a', 'v2'))], grants: { agent: '*' } })
      .bind({ owner: r.owner, taskId: 't', caller: 'agent' });
    await assert.rejects(revised.callWithOptions('a', { n: 1 }, { operationKey: 'k' }), { code: 'binding_changed' });
    // A deploy that removed or renamed the tool: the message says so, rather than "another contract".
    const renamed = createToolRuntime({ tools: [tool('a_v2', async () => 'ok', idempotent('a'))], grants: { agent: '*' } })
      .bind({ owner: r.owner, taskId: 't', caller: 'agent' });
    await assert.rejects(renamed.callWithOptions('a', { n: 1 }, { operationKey: 'k' }),
      { code: 'binding_changed', message: /tool "a" is not registered with this runtime \(removed or renamed since it was called\?\); its recorded result was not returned/ });
    assert.deepEqual(await r.at(), before);
    await r.store.close();
  });

  // u139 #1: a job re-delivered with one regenerated field, or a step run again after a redeploy, was told only "use a
  // new operation key", whatever the key's write had become; following that made a completed or in-doubt write twice.
  it('binding_changed says what became of the key\'s write: made, running, in doubt, or never run', async () => {
    const nonIdempotent = new ToolMetadata('pays', { type: 'object', properties: { n: { type: 'number' } } }).withEffect('non_idempotent', 'v1');
    let release!: () => void;
    const pay = tool('pay', async (req) => {
      if ((req.arguments as { slow?: boolean }).slow) await new Promise<void>((resolve) => (release = resolve));
      return 'paid';
    }, nonIdempotent);
    const r = await memoryRig([pay]);
    const again = /a new operation key would make the write again/;
    await r.gateway.callWithOptions('pay', { n: 1 }, { operationKey: 'done' });
    await assert.rejects(r.gateway.callWithOptions('pay', { n: 1, at: 'later' }, { operationKey: 'done' }),
      { code: 'binding_changed', message: /with other arguments; its write was made \(call \S+ succeeded\): that step is done, and a new operation key would make the write again/ });

    const stopped = await r.gateway.callWithOptions('pay', { n: 2, slow: true }, { operationKey: 'doubt', timeoutMs: 50 });
    assert.equal(stopped.result.outcome.status === 'failed' && stopped.result.outcome.code, 'tool_timeout');
    await assert.rejects(r.gateway.callWithOptions('pay', { n: 2 }, { operationKey: 'doubt' }),
      { code: 'binding_changed', message: new RegExp(`call ${stopped.call.id} is still running here: wait for it to end; ${again.source}`) });
    release();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await assert.rejects(r.gateway.callWithOptions('pay', { n: 2 }, { operationKey: 'doubt' }),
      { code: 'binding_changed', message: new RegExp(`its write is in doubt \\(call ${stopped.call.id}: it failed after its body started \\(timeout: tool_timeout\\)\\): settle that call first .*; ${again.source} if it was made`) });

    // u140 #2: a call waiting for a person's approval had "never ran its body: a new operation key runs this call";
    // the new key paid, then the old request was approved and its retry paid too.
    const approving = createToolRuntime({
      tools: [tool('pay_approved', async () => 'paid', new ToolMetadata('pays', { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('ops'))],
      grants: { agent: '*' },
      approvers: { ops: async () => ({ decision: 'pending' }) },
    }).bind({ owner: r.owner, taskId: 't', caller: 'agent' });
    const waiting = await approving.callWithOptions('pay_approved', { n: 4 }, { operationKey: 'waiting' });
    assert.equal(waiting.result.outcome.status === 'failed' && waiting.result.outcome.category, 'approval_pending');
    await assert.rejects(approving.callWithOptions('pay_approved', { n: 5 }, { operationKey: 'waiting' }),
      { code: 'binding_changed', message: /waits for a person's approval: approved, its request lets a retry under this key make the write, so deny it first/ });

    // A write a review found not made is due: the key's retry (a resumed run, the startup routine) makes it.
    await recordToolReview(r.owner, await r.store.loadHistory('s'), stopped.call.id, { turnId: 'turn-review', actor: 'ops', outcome: 'not_executed', evidence: 'nothing at the bank', despiteLateReturn: true });
    await assert.rejects(r.gateway.callWithOptions('pay', { n: 2 }, { operationKey: 'doubt' }),
      { code: 'binding_changed', message: new RegExp(`a review says call ${stopped.call.id} did not make its write, which is due: a retry under this key .* makes it, and ${again.source}, so use one only where nothing will retry this key`) });

    const refused = await r.gateway.callWithOptions('pay', { n: 'three' }, { operationKey: 'refused' });
    assert.equal(refused.result.outcome.status === 'failed' && refused.result.outcome.category, 'invalid_arguments');
    await assert.rejects(r.gateway.callWithOptions('pay', { n: 3 }, { operationKey: 'refused' }),
      { code: 'binding_changed', message: /was refused before its body \(invalid_arguments: \S+\): a new operation key runs this call$/ });
    await r.store.close();
  });

  it('a retry of a tool the runtime no longer has is binding_changed naming the missing tool, and the plan stays usable', async () => {
    const failing = tool('c', async () => { throw new ToolBodyError('upstream_503', 'try later'); }, idempotent('c'));
    const r = await memoryRig([failing]);
    const first = await r.gateway.call('c', { n: 1 });
    const plan = prepareToolRetry(await r.store.loadHistory(r.owner.sessionId), first.call.id);
    const before = await r.at();
    const renamed = createToolRuntime({ tools: [tool('c_v2', async () => 'ok', idempotent('c'))], grants: { agent: '*' } })
      .bind({ owner: r.owner, taskId: 't', caller: 'agent' });
    await assert.rejects(renamed.callWithOptions('c', { n: 1 }, { retry: plan }),
      { code: 'binding_changed', message: /tool "c" is not registered with this runtime .*; the plan was not consumed/ });
    assert.deepEqual(await r.at(), before);
    const restored = createToolRuntime({ tools: [tool('c', async () => 'ok', idempotent('c'))], grants: { agent: '*' } })
      .bind({ owner: r.owner, taskId: 't', caller: 'agent' });
    assert.equal((await restored.callWithOptions('c', { n: 1 }, { retry: plan })).result.outcome.status, 'succeeded');
    await r.store.close();
  });

  it('a key whose latest attempt failed is operation_in_doubt with its call id; explicit recovery completes it, then it replays', async () => {
    let runs = 0;
    const flaky = tool('flaky', async () => {
      runs++;
      if (runs === 1) throw new ToolBodyError('upstream_503', 'try later', { retryable: true });
      return 'done';
    }, idempotent('flaky'));
    const r = await memoryRig([flaky]);
    const failed = await r.gateway.callWithOptions('flaky', {}, { operationKey: 'order-7' });
    assert.equal(failed.result.outcome.status, 'failed');
    const before = await r.at();
    await assert.rejects(r.gateway.callWithOptions('flaky', {}, { operationKey: 'order-7' }), (error: unknown) => {
      assert.ok(error instanceof OperationInDoubtError);
      assert.equal(error.code, 'operation_in_doubt');
      assert.equal(error.callId, failed.call.id);
      assert.equal(error.operationKey, 'order-7');
      assert.match(error.message, /; recover that call explicitly$/, 'a failed attempt is not running: recover it');
      return true;
    });
    assert.equal(runs, 1, 'the library never retries by itself');
    assert.deepEqual(await r.at(), before);
    // Recovery is explicit: a plan from the journal, then the retry; afterwards the key is completed.
    const plan = prepareToolRetry(await r.store.loadHistory('s'), failed.call.id);
    const retried = await r.gateway.callWithOptions('flaky', {}, { retry: plan });
    assert.equal(retried.result.outcome.status, 'succeeded');
    const replayed = await r.gateway.callWithOptions('flaky', {}, { operationKey: 'order-7' });
    assert.equal(replayed.replayed, true);
    assert.equal(replayed.call.id, retried.call.id);
    assert.equal(runs, 2);
    await r.store.close();
  });

  it('two calls racing on one new key run the body once; the other is operation_in_doubt', async () => {
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow = tool('slow', async () => {
      runs++;
      await gate;
      return 'ok';
    }, idempotent('slow'));
    const r = await memoryRig([slow]);
    const first = r.gateway.callWithOptions('slow', {}, { operationKey: 'same' });
    const second = r.gateway.callWithOptions('slow', {}, { operationKey: 'same' });
    // The first is still running here: the advice is to wait for it, not to recover it.
    await assert.rejects(second, { code: 'operation_in_doubt', message: /it is still running in this process\); wait for its result/ });
    while (runs === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    await assert.rejects(r.gateway.callWithOptions('slow', {}, { operationKey: 'same' }), { code: 'operation_in_doubt', message: /still running in this process\); wait for its result/ },
      'a third call once the first is journaled and its body runs: the same advice');
    release();
    assert.equal((await first).result.outcome.status, 'succeeded');
    assert.equal(runs, 1);
    await r.store.close();
  });

  it('refuses a malformed key, or a key with a retry plan, before anything is written', async () => {
    const r = await memoryRig([tool('a', async (req) => {
      if ((req.arguments as { fail?: boolean }).fail) throw new ToolBodyError('upstream_503', 'later', { retryable: true });
      return 'ok';
    }, idempotent('a'))]);
    const before = await r.at();
    const bad: unknown[] = ['', ' lead', 'has space', '-dash-first', 'ключ', 'x'.repeat(OPERATION_KEY_LIMITS.maxBytes + 1), 7, null];
    for (const key of bad) {
      await assert.rejects(r.gateway.callWithOptions('a', {}, { operationKey: key as string }), { code: 'invalid_options' }, String(key));
    }
    await r.gateway.callWithOptions('a', {}, { operationKey: 'x'.repeat(OPERATION_KEY_LIMITS.maxBytes) });
    const failed = await r.gateway.callWithOptions('a', { fail: true }, {});
    const plan = prepareToolRetry(await r.store.loadHistory('s'), failed.call.id);
    await assert.rejects(r.gateway.callWithOptions('a', { fail: true }, { retry: plan, operationKey: 'k' }), { code: 'invalid_options' });
    assert.equal((await r.at()).events, before.events + 6, 'two calls of three events each; the refusals wrote nothing');
    await r.store.close();
  });

  it('property: over any sequence of keyed calls, no body runs twice for a completed key and replay writes nothing', async () => {
    const keys = ['k1', 'k2', 'k3'];
    const step = fc.record({
      key: fc.constantFrom(...keys),
      tool: fc.constantFrom('t1', 't2'),
      n: fc.integer({ min: 0, max: 2 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
        const runs = new Map<string, number>();
        // A body fails for n = 2: its key then stays in doubt.
        const body = (name: string) => tool(name, async (req) => {
          const op = req.operation!.key;
          runs.set(op, (runs.get(op) ?? 0) + 1);
          if ((req.arguments as { n: number }).n === 2) throw new ToolBodyError('refused', 'no');
          return `${name}:${JSON.stringify(req.arguments)}`;
        }, idempotent(name));
        const r = await memoryRig([body('t1'), body('t2')]);
        const first = new Map<string, { tool: string; n: number; ok: boolean; output: JsonValue }>();
        for (const s of steps) {
          const before = await r.at();
          const known = first.get(s.key);
          const call = r.gateway.callWithOptions(s.tool, { n: s.n }, { operationKey: s.key });
          if (!known) {
            const ex = await call;
            const ok = ex.result.outcome.status === 'succeeded';
            first.set(s.key, { tool: s.tool, n: s.n, ok, output: ok ? (ex.result.outcome as { output: string }).output : null });
            continue;
          }
          if (known.tool !== s.tool || known.n !== s.n) await assert.rejects(call, { code: 'binding_changed' });
          else if (!known.ok) await assert.rejects(call, { code: 'operation_in_doubt' });
          else {
            const ex = await call;
            assert.equal(ex.replayed, true);
            assert.equal((ex.result.outcome as { output: string }).output, known.output);
          }
          assert.deepEqual(await r.at(), before, 'a refused or replayed call writes and charges nothing');
        }
        for (const [key, count] of runs) assert.equal(count, 1, `body of ${key} ran ${count} times`);
        await r.store.close();
      }),
      { numRuns: 60 },
    );
  });
});

forEachStore('caller keys', (target) => {
  it("a failed key's answer stays operation_in_doubt in a journal whose tool evidence the evidence pass refuses elsewhere", async () => {
    const store = await target.fresh().open();
    try {
      const owner = await store.acquire('s-forged', { owner: 'host' });
      await owner.startTask('t');
      const h = new HistoryBuilder();
      h.call({ id: 'toolcall_k', name: 'pay', arguments: {}, effect: ToolEffect.NonIdempotent, revision: 'v1', taskId: 't', key: 'order-1' });
      h.result('toolcall_k', { status: 'failed', category: 'body_failure', code: 'declined', message: 'card declined', retryable: false });
      // A result naming no call: evidence assessSession and the evidence pass refuse, which the journal's chain holds.
      h.result('toolcall_ghost', succeeded());
      await commitAs(owner, { events: h.build().map((e) => ({ eventId: e.eventId, turnId: e.turnId, kind: e.kind })) });
      const pay = tool('pay', async () => 'paid', new ToolMetadata('pays', { type: 'object' }).withEffect('non_idempotent', 'v1'));
      const gateway = createToolRuntime({ tools: [pay], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
      await assert.rejects(gateway.callWithOptions('pay', {}, { operationKey: 'order-1' }), (error: unknown) =>
        error instanceof OperationInDoubtError && error.callId === 'toolcall_k' && error.detail === 'it failed (body_failure: declined)');
    } finally {
      await store.close();
    }
  });

  it('replay and operation_in_doubt read the operation row and history of a durable store, also from another handle', async () => {
    let runs = 0;
    const r = await rig(target, {
      tools: [tool('pay', async (req) => {
        runs++;
        if ((req.arguments as { fail?: boolean }).fail) throw new ToolBodyError('declined', 'no');
        return 'paid';
      }, idempotent('pay'))],
    });
    const paid = await r.gateway.callWithOptions('pay', {}, { operationKey: 'invoice-1' });
    await r.gateway.callWithOptions('pay', { fail: true }, { operationKey: 'invoice-2' });
    const events = (await r.store.loadHistory(r.sessionId)).length;
    const again = await r.gateway.callWithOptions('pay', {}, { operationKey: 'invoice-1' });
    assert.equal(again.replayed, true);
    assert.equal(again.call.id, paid.call.id);
    await assert.rejects(r.gateway.callWithOptions('pay', { fail: true }, { operationKey: 'invoice-2' }), { code: 'operation_in_doubt' });
    assert.equal(runs, 2);
    assert.equal((await r.store.loadHistory(r.sessionId)).length, events);
    // A new host takes the session over: the key still replays from the journal.
    const other = await r.reopen();
    const owner = await other.acquire(r.sessionId, { owner: 'host-2', takeover: true });
    const gateway: ToolGateway = createToolRuntime({ tools: [tool('pay', async () => { runs++; return 'paid'; }, idempotent('pay'))], grants: { agent: '*' } })
      .bind({ owner, taskId: r.taskId, caller: 'agent' });
    assert.equal((await gateway.callWithOptions('pay', {}, { operationKey: 'invoice-1' })).replayed, true);
    assert.equal(runs, 2);
    await other.close();
    await r.store.close();
  });

  it('a key whose latest attempt a review confirmed completed is operation_confirmed: no result to return, nothing to recover (r105 F1)', async () => {
    for (const ending of ['cancelled', 'no result'] as const) {
      const paid: unknown[] = [];
      let entered = () => {};
      const inBody = new Promise<void>((resolve) => { entered = resolve; });
      let finish = () => {};
      const finished = new Promise<void>((resolve) => { finish = resolve; });
      const pay = tool('pay', async (req) => {
        paid.push(req.arguments);
        entered();
        await finished;
        return 'paid';
      }, new ToolMetadata('pays', { type: 'object' }).withEffect('non_idempotent', 'v1'));
      const r = await rig(target, { tools: [pay] });
      const caller = new AbortController();
      const first = r.gateway.callWithOptions('pay', { amount: 7 }, { operationKey: 'order-1', signal: caller.signal });
      await inBody;
      let owner = r.owner;
      let gateway = r.gateway;
      let store = r.store;
      if (ending === 'cancelled') {
        caller.abort();
        assert.equal((await first).result.outcome.status, 'failed');
        finish();
      } else {
        // Another host takes the session over while the body runs: the first host's result can never be journaled.
        store = await r.reopen();
        owner = await store.acquire(r.sessionId, { owner: 'host-2', takeover: true });
        gateway = createToolRuntime({ tools: [pay], grants: { agent: '*' } }).bind({ owner, taskId: r.taskId, caller: 'agent' });
        finish();
        await assert.rejects(first);
      }
      let history = await store.loadHistory(r.sessionId);
      while (!history.some((e) => e.kind.type === 'custom' && e.kind.kind === 'body_ended')) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        history = await store.loadHistory(r.sessionId);
      }
      const callEvent = history.find((e) => e.kind.type === 'tool_call');
      const callId = callEvent?.kind.type === 'tool_call' ? callEvent.kind.call.id : '';
      assert.equal(history.some((e) => e.kind.type === 'tool_result'), ending === 'cancelled', `${ending}: the journal as set up`);
      await assert.rejects(gateway.callWithOptions('pay', { amount: 7 }, { operationKey: 'order-1' }), { code: 'operation_in_doubt' }, `${ending}: in doubt before the review`);
      await recordToolReview(owner, history, callId, { actor: 'al@example.com', evidence: 'in the ledger', outcome: 'completed' });
      const events = (await store.loadHistory(r.sessionId)).length;
      await assert.rejects(gateway.callWithOptions('pay', { amount: 7 }, { operationKey: 'order-1' }), (error: unknown) => {
        assert.ok(error instanceof OperationConfirmedError, `${ending}: ${String(error)}`);
        assert.deepEqual([error.code, error.callId, error.operationKey, error.actor, error.evidence], ['operation_confirmed', callId, 'order-1', 'al@example.com', 'in the ledger']);
        return true;
      });
      assert.equal((await store.loadHistory(r.sessionId)).length, events, `${ending}: nothing written`);
      assert.equal(paid.length, 1, `${ending}: one payment`);
      if (store !== r.store) await store.close();
      await r.store.close().catch(() => undefined);
    }
  });
});
