/**
 * A review waits for the call to stop. An operator's `not_executed` review of a call whose body was still running
 * (its host alive, holding the session, no result yet) was accepted; the body then made its effect, the host died
 * before its result, and the startup routine journaled the review and retried: the wire ran twice. The inbox now
 * refuses a review of a call that may still be running (`call_in_flight`), and takes it once the host has stopped
 * (its lease ran out, or another host took the session over) or the call has a result.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolBodyError } from '../../src/errors.js';
import { decisionInbox } from '../../src/store/inbox.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { sleep, tool } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';

forEachStore('a review of a call that may still be running', (target) => {
  it('is refused while its host holds the session and the body runs; taken after a result, a lapsed lease or a takeover', async () => {
    const location = target.fresh();
    const store = await location.open();
    const operator = await location.open();
    const inbox = decisionInbox(operator);
    let release = () => {};
    let hangUp = () => {};
    let bodies = 0;
    // Every body's end, so the test can let them all end before the stores close (a close waits for the bodies of
    // the sessions it holds).
    const ends: Array<() => void> = [];
    const wire = tool('wire', () => new Promise<string>((resolve, reject) => {
      bodies += 1;
      ends.push(() => resolve('wired'));
      release = () => resolve('wired');
      hangUp = () => reject(new ToolBodyError('connection_reset', 'the bank hung up'));
    }),
      new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1'));
    const runtime = createToolRuntime({ tools: [wire], grants: { agent: '*' } });
    const review = (sessionId: string, callId: string) => inbox.recordReview({ sessionId, callId, outcome: 'not_executed', evidence: 'no transfer seen yet', actor: 'ops' });
    const callIdOf = async (sessionId: string) => {
      for (;;) {
        const call = (await operator.loadHistory(sessionId)).find((e) => e.kind.type === 'tool_call');
        if (call?.kind.type === 'tool_call' && (await operator.loadHistory(sessionId)).some((e) => e.kind.type === 'tool_started')) return call.kind.call.id;
        await sleep(10);
      }
    };

    // The body is running in a live host: refused, nothing written; once the call has a result, taken.
    const live = await store.acquire('s-live', { owner: 'host-a' });
    await live.startTask('t');
    const running = runtime.bind({ owner: live, taskId: 't', caller: 'agent' }).call('wire', {});
    const liveCall = await callIdOf('s-live');
    await assert.rejects(review('s-live', liveCall), { name: 'DecisionError', code: 'call_in_flight', message: /may still be running/ });
    assert.deepEqual((await inbox.list({ kind: 'review' })).items, [], 'nothing recorded');
    hangUp();
    await running;
    assert.equal((await review('s-live', liveCall)).state, 'decided', 'a call with a result that leaves its outcome unknown can be reviewed');
    const second = runtime.bind({ owner: live, taskId: 't', caller: 'agent' }).call('wire', { to: 'another account' });
    while (bodies < 2) await sleep(5);
    release();
    const succeeded = (await second).call.id;
    await assert.rejects(review('s-live', succeeded), { name: 'DecisionError', code: 'decision_stale', message: /^nothing was recorded: call \S+ succeeded/ },
      'a call that succeeded has nothing to review: refused when given, not taken and dropped by the host later');

    // The host stopped heartbeating (a dead process): refused until its lease runs out, then taken.
    const dying = await store.acquire('s-dead', { owner: 'host-b', leaseMs: 300, heartbeat: false });
    await dying.startTask('t');
    void runtime.bind({ owner: dying, taskId: 't', caller: 'agent' }).call('wire', {}).catch(() => {});
    const deadCall = await callIdOf('s-dead');
    await assert.rejects(review('s-dead', deadCall), { code: 'call_in_flight' });
    await sleep(400);
    assert.equal((await review('s-dead', deadCall)).state, 'decided', 'the lease ran out: the host stopped');

    // Another host took the session over: the call's writer is fenced, so the review is taken at once.
    const held = await store.acquire('s-taken', { owner: 'host-c' });
    await held.startTask('t');
    void runtime.bind({ owner: held, taskId: 't', caller: 'agent' }).call('wire', {}).catch(() => {});
    const takenCall = await callIdOf('s-taken');
    await assert.rejects(review('s-taken', takenCall), { code: 'call_in_flight' });
    const successor = await operator.acquire('s-taken', { owner: 'host-d', takeover: true });
    assert.equal((await review('s-taken', takenCall)).state, 'decided', 'the writer of the call is fenced');
    // Host-c's body still runs in this process: the successor's release waits for it, since it can still make its write.
    for (const end of ends) end();
    await successor.release();
    await store.close();
    await operator.close();
  });

  it("is refused though the reviewer paused between reading the store's clock and the session's lease, longer than the lease", async () => {
    const location = target.fresh();
    const store = await location.open();
    const operator = await location.open();
    // The reviewer's process pauses (a stopped terminal, a debugger, a laptop lid) after each read, longer than the
    // host's lease, while the host, alive, renews it: whichever read comes first, the other sees a later world.
    const backend = (operator as unknown as { backend: { now?: () => Promise<number>; snapshot: (id: string) => Promise<unknown> } }).backend;
    const now = backend.now?.bind(backend) ?? (async () => Date.now());
    const snapshot = backend.snapshot.bind(backend);
    const PAUSE_MS = 1_200;
    backend.now = async () => {
      const at = await now();
      await sleep(PAUSE_MS);
      return at;
    };
    backend.snapshot = async (id: string) => {
      const read = await snapshot(id);
      await sleep(PAUSE_MS);
      return read;
    };
    let bodies = 0;
    let end = () => {};
    const wire = tool('wire', () => new Promise<string>((resolve) => {
      bodies += 1;
      end = () => resolve('wired');
    }),
      new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1'));
    const owner = await store.acquire('s-paused', { owner: 'host-a', leaseMs: 1_000 });
    await owner.startTask('t');
    void createToolRuntime({ tools: [wire], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' }).call('wire', {}).catch(() => {});
    while (bodies === 0) await sleep(5);
    const callId = (await store.loadHistory('s-paused')).flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call.id] : []))[0]!;
    await assert.rejects(
      decisionInbox(operator).recordReview({ sessionId: 's-paused', callId, outcome: 'not_executed', evidence: 'no transfer seen yet', actor: 'ops' }),
      { code: 'call_in_flight' },
      'the host renewed its lease all along: its call may still be running',
    );
    // Its release would wait for the body: it ends first.
    end();
    await owner.release();
    await store.close();
    await operator.close();
  });
});
