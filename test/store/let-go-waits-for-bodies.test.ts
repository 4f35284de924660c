/**
 * Letting a session go waits for the bodies still running (docs/design.md#letting-a-session-go-stops-its-calls).
 * `release()` and `store.close()` stop every call and record its outcome; a body that ignores its signal goes on and
 * can still make its write. Before, the session was let go at once (released, or its lease left to run out after a
 * close) and another host's routine asked the reconciler, heard `not_executed`, retried, and the first body's write
 * then landed too: a charge made twice, the journal showing one (pass r57 #1). Now the session stays held, its lease
 * renewed, until the body ends and its end is journaled. No assertion depends on how long anything took: the lease
 * is checked after it would have run out without renewal.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool } from '../../src/tool/types.js';
import { bodyEnded } from '../support/body-ended.js';
import { sleep } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { STORE_DEFAULTS } from '../../src/limits.js';

const LEASE_MS = 300;

/** A non-idempotent charge whose body ignores its signal and returns when `end()` is called. */
function ignoringCharge() {
  const state = { started: false, end: () => {} };
  let started = () => {};
  const running = new Promise<void>((resolve) => { started = resolve; });
  const charge: Tool = {
    name: 'charge',
    metadata: new ToolMetadata('charges a card', { type: 'object' }).withEffect('non_idempotent', 'v1'),
    execute: () => new Promise<string>((resolve) => {
      state.started = true;
      state.end = () => resolve('charged');
      started();
    }),
  };
  return { charge, state, running };
}

/** A non-idempotent charge with a deadline its body ignores: the attempt is recorded `tool_timeout`, the body goes on. */
function lateCharge() {
  const made = ignoringCharge();
  const charge: Tool = { ...made.charge, metadata: made.charge.metadata.withTimeoutCeiling(150) };
  return { ...made, charge };
}

forEachStore('letting a session go waits for its bodies still running', (target) => {
  for (const how of ['release', 'close'] as const) {
    it(`${how}(): the session stays held, its lease renewed, until the stopped body ends; its end is journaled first`, async () => {
      const location = target.fresh();
      const store = await location.open();
      const other = await location.open();
      try {
        const { charge, state, running } = ignoringCharge();
        const owner = await store.acquire('s', { owner: 'host', leaseMs: LEASE_MS });
        await owner.startTask('t');
        const gateway = createToolRuntime({ tools: [charge], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
        const call = gateway.call('charge', {});
        await running;
        let letGo = false;
        const going = (how === 'release' ? owner.release() : store.close()).then(() => { letGo = true; });
        const stopped = await call;
        const outcome = stopped.result.outcome;
        assert.equal(outcome.status === 'failed' && outcome.category, 'cancelled', 'the attempt is recorded stopped at once');
        // Three leases later, with the body still running: the session is held and live, so no other host takes it.
        await sleep(3 * LEASE_MS);
        assert.equal(letGo, false, `${how}() waits for the body`);
        await assert.rejects(other.acquire('s', { owner: 'rescuer', takeover: 'abandoned' }), { code: 'session_busy' });
        assert.equal((await other.listExpiredSessions()).length, 0, 'not listed as abandoned');
        assert.ok(state.started);
        state.end();
        await going;
        const history = await other.loadHistory('s');
        const ended = bodyEnded(history, stopped.call.id);
        assert.ok(ended, 'the body\'s end is journaled before the session is let go');
        assert.deepEqual((ended.kind as { payload: unknown }).payload, { callId: stopped.call.id, ended: 'returned' });
        if (how === 'release') assert.equal((await other.listSessions())[0]!.held, false, 'released once the body ended');
      } finally {
        await other.close();
        await store.close();
      }
    });
  }

  // A body its deadline stopped (pass r58 #1), and one still running with no result, its owner not yet aware of the
  // takeover: it learns only at its next write or heartbeat, so the body is not a stopped one when the new owner
  // lets the session go (pass r59 #1).
  for (const body of ['stopped by its deadline', 'still running with no result yet'] as const) {
    for (const how of ['release', 'close', 'close of the handle that took it over'] as const) {
      it(`a session taken over in this process while its earlier owner's body runs, ${body}: ${how}() waits for it`, async () => {
        const location = target.fresh();
        const store = await location.open();
        const taker = how === 'close of the handle that took it over' ? await location.open() : store;
        const other = await location.open();
        try {
          const { charge, state, running } = body === 'stopped by its deadline' ? lateCharge() : ignoringCharge();
          const first = await store.acquire('s', { owner: 'host', leaseMs: LEASE_MS });
          await first.startTask('t');
          const call = createToolRuntime({ tools: [charge], grants: { agent: '*' } }).bind({ owner: first, taskId: 't', caller: 'agent' }).call('charge', {});
          call.catch(() => undefined);
          if (body === 'stopped by its deadline') {
            const outcome = (await call).result.outcome;
            assert.equal(outcome.status === 'failed' && outcome.code, 'tool_timeout');
          }
          await running;
          const second = await taker.acquire('s', { owner: 'host', leaseMs: LEASE_MS, takeover: true });
          let letGo = false;
          const going = (how === 'release' ? second.release() : taker.close()).then(() => { letGo = true; });
          await sleep(3 * LEASE_MS);
          assert.equal(letGo, false, `${how}() waits for the body the first owner started`);
          await assert.rejects(other.acquire('s', { owner: 'rescuer', takeover: 'abandoned' }), { code: 'session_busy' });
          assert.equal((await other.listExpiredSessions()).length, 0, 'not listed as abandoned');
          state.end();
          await going;
          const history = await other.loadHistory('s');
          const callId = history.flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call.id] : []))[0]!;
          const ended = bodyEnded(history, callId);
          assert.deepEqual(ended && (ended.kind as { payload: unknown }).payload, { callId, ended: 'returned' }, 'the end is journaled through the owner that took the session over, before it let go');
        } finally {
          await other.close();
          if (taker !== store) await taker.close();
          await store.close();
        }
      });
    }
  }

  for (const how of ['release', 'close'] as const) {
    it(`an owner acquired without a heartbeat: ${how}() renews the lease itself while it waits (pass r60 #1)`, async () => {
      const location = target.fresh();
      const store = await location.open();
      const other = await location.open();
      const { charge, state, running } = lateCharge();
      try {
        const owner = await store.acquire('s', { owner: 'host', leaseMs: LEASE_MS, heartbeat: false });
        await owner.startTask('t');
        await createToolRuntime({ tools: [charge], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' }).call('charge', {});
        await running;
        let letGo = false;
        const going = (how === 'release' ? owner.release() : store.close()).then(() => { letGo = true; });
        await sleep(3 * LEASE_MS);
        assert.equal(letGo, false);
        await assert.rejects(other.acquire('s', { owner: 'rescuer', takeover: 'abandoned' }), { code: 'session_busy' }, 'nothing renewed the lease before: another host took over and retried');
        state.end();
        await going;
      } finally {
        state.end();
        await other.close();
        await store.close();
      }
    });
  }

  it('release() stops waiting once its owner learns it was fenced meanwhile, and says the session is lost (pass r59 #3)', { timeout: 30_000 }, async () => {
    const location = target.fresh();
    const store = await location.open();
    const other = await location.open();
    const { charge, state, running } = lateCharge();
    // The body holds no handle of its own and the heartbeat is unref'd: this keeps the process up while it waits.
    const alive = setInterval(() => undefined, 1_000);
    try {
      const owner = await store.acquire('s', { owner: 'host', leaseMs: LEASE_MS });
      await owner.startTask('t');
      await createToolRuntime({ tools: [charge], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' }).call('charge', {});
      await running;
      let settled = false;
      const going = owner.release().finally(() => { settled = true; });
      going.catch(() => undefined);
      await sleep(LEASE_MS);
      assert.equal(settled, false, 'release() waits for the late body');
      // An operator forces the session over (it could be another process): the wait protects nothing any more.
      await other.acquire('s', { owner: 'operator', takeover: true });
      await assert.rejects(going, { code: 'stale_owner' }, 'the release ends with the session lost, while the body still runs');
      assert.equal(state.started, true);
    } finally {
      clearInterval(alive);
      state.end();
      await other.close();
      await store.close();
    }
  });
});

it('a release or close that has waited STORE_DEFAULTS.bodyWaitWarningMs for a body says so once, as a process warning naming the session', { timeout: 30_000 }, async () => {
  const warnings: Array<{ code?: string; message: string }> = [];
  const listen = (warning: Error & { code?: string }) => {
    if (warning.code === 'JINGWEI_WAITING_FOR_BODIES') warnings.push({ code: warning.code, message: warning.message });
  };
  process.on('warning', listen);
  const stores = [createMemoryStore(), createMemoryStore()];
  try {
    const waits = await Promise.all(stores.map(async (store, i) => {
      const { charge, state, running } = ignoringCharge();
      const owner = await store.acquire(`held-${i}`, { owner: 'host' });
      await owner.startTask('t');
      const call = createToolRuntime({ tools: [charge], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' }).call('charge', {});
      await running;
      const going = i === 0 ? owner.release() : store.close();
      await call;
      return { state, going };
    }));
    await sleep(STORE_DEFAULTS.bodyWaitWarningMs + 500);
    // Let the warnings' own next-tick emission run.
    await new Promise<void>((resolve) => setImmediate(resolve));
    const messages = warnings.map((w) => w.message).sort();
    assert.equal(messages.length, 2, messages.join('\n'));
    assert.match(messages[0]!, /^close\(\) of the memory store has waited 5 s for 1 tool body still running in this process \(session "held-1"\)/);
    assert.match(messages[1]!, /^release\(\) has waited 5 s for 1 tool body still running in this process \(session "held-0"\)/);
    for (const { state, going } of waits) {
      state.end();
      await going;
    }
    await sleep(50);
    assert.equal(warnings.length, 2, 'said once, not again when the wait ends');
  } finally {
    process.off('warning', listen);
    await Promise.all(stores.map((store) => store.close()));
  }
});
