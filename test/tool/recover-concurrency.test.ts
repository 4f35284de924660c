/**
 * The startup routine's `concurrency` (docs/design.md#recovering-abandoned-sessions): sessions recovered side by
 * side, each session's calls still in order, the report in listing order; one at a time by default; a store that
 * becomes unusable stops new sessions, waits for the ones under way and then throws. No assertion depends on how
 * long anything took: overlap is proven by bodies that wait for each other.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StoreUnavailableError, ToolBodyError } from '../../src/errors.js';
import { recoverAbandoned, type RecoveryHost, type SessionRecovery } from '../../src/review.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { bodyEnded } from '../support/body-ended.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import type { SessionStore } from '../../src/store/types.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { tool } from '../support/runtime.js';
import { generateKeyPairSync } from 'node:crypto';
import { AnchorError } from '../../src/errors.js';
import { checkAnchors, type Checkpoint } from '../../src/store/anchors.js';
import { verifySessionAnchors } from '../../src/store/anchor-store.js';
import type { JournalStore } from '../../src/store/journal-store.js';

const keys = generateKeyPairSync('ed25519');

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * A read-only `lookup` whose first attempt in each session fails (so a `retry_safe` routine retries it). Its retries
 * record which session and which call ran, and how many ran at once; with `meet`, a retry waits until that many
 * retries are running together (or a second has passed, which the test then sees as no overlap).
 */
function lookups(meet = 1) {
  const state = { recovering: false, running: 0, most: 0, order: [] as string[] };
  const arrived: Array<() => void> = [];
  const lookup = tool('lookup', async (request) => {
    const { session, n } = request.arguments as { session: string; n: number };
    if (!state.recovering) throw new ToolBodyError('connection_reset', 'lost');
    state.running += 1;
    state.most = Math.max(state.most, state.running);
    state.order.push(`${session}#${n}`);
    if (state.running >= meet) for (const go of arrived.splice(0)) go();
    else await Promise.race([new Promise<void>((resolve) => arrived.push(resolve)), pause(1_000)]);
    state.running -= 1;
    return 'ok';
  }, new ToolMetadata('reads', { type: 'object' }).withEffect('read_only', 'r1'));
  const tools = [lookup];
  const host: RecoveryHost = { runtime: createToolRuntime({ tools, grants: { agent: '*' } }), tools, caller: 'agent' };
  return { state, host };
}

/** `count` sessions, each with two failed lookups, whose owners stopped writing and heartbeating. */
async function abandonedSessions(store: SessionStore, host: RecoveryHost, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const sessionId = `s-${i}`;
    const owner = await store.acquire(sessionId, { owner: 'gone', leaseMs: 100, heartbeat: false });
    await owner.startTask('t');
    const gateway = host.runtime.bind({ owner, taskId: 't', caller: 'agent' });
    await gateway.call('lookup', { session: sessionId, n: 1 });
    await gateway.call('lookup', { session: sessionId, n: 2 });
    ids.push(sessionId);
  }
  while ((await store.listExpiredSessions()).length < count) await pause(25);
  return ids;
}

/**
 * Session `s-late` of an owner that stopped heartbeating, abandoned once its lease ran out, with a charge whose body
 * went on after its 100 ms deadline and still runs in this process until `state.end()`.
 */
async function abandonedLateCharge(store: SessionStore) {
  const state = { end: () => {} };
  let started = () => {};
  const running = new Promise<void>((resolve) => { started = resolve; });
  const tools = [tool('charge', () => new Promise<string>((resolve) => {
    state.end = () => resolve('charged');
    started();
  }), new ToolMetadata('charges', { type: 'object' }).withEffect('non_idempotent', 'c1').withTimeoutCeiling(100))];
  const host: RecoveryHost = { runtime: createToolRuntime({ tools, grants: { agent: '*' } }), tools, caller: 'agent' };
  const gone = await store.acquire('s-late', { owner: 'gone', leaseMs: 100, heartbeat: false });
  await gone.startTask('t');
  const timedOut = await host.runtime.bind({ owner: gone, taskId: 't', caller: 'agent' }).call('charge', {});
  assert.equal(timedOut.result.outcome.status === 'failed' && timedOut.result.outcome.code, 'tool_timeout');
  await running;
  while ((await store.listExpiredSessions()).length === 0) await pause(25);
  return { state, host, timedOut };
}

/** `store`, whose acquire of `sessionId` fails as if the database went away; every session asked for is noted in `acquired`. */
function failingAt(store: SessionStore, sessionId: string, acquired: string[] = []): SessionStore {
  return Object.create(store, {
    acquire: {
      value: async (...[id, options]: Parameters<SessionStore['acquire']>) => {
        acquired.push(id);
        if (id === sessionId) throw new StoreUnavailableError('store_failure', 'the database went away');
        return store.acquire(id, options);
      },
    },
  });
}

/** Three abandoned sessions of failed lookups, and the store seen through `failingAt` the last of them. */
async function threeAbandonedTheLastFailing() {
  const store = createMemoryStore();
  const { state, host } = lookups();
  await abandonedSessions(store, host, 3);
  const listed = (await store.listExpiredSessions()).map((s) => s.sessionId);
  state.recovering = true;
  return { store, host, listed, failing: failingAt(store, listed[2]!) };
}

/** The sessions held by someone other than their abandoned owner, sorted. */
const heldByRoutine = async (store: SessionStore) =>
  (await store.listSessions()).filter((s) => s.held && s.owner !== 'gone').map((s) => String(s.sessionId)).sort();

describe('recoverAbandoned: concurrency', () => {
  it('recovers sessions side by side, each session\'s calls in order, the report in listing order', async () => {
    const store = createMemoryStore();
    const { state, host } = lookups(3);
    const ids = await abandonedSessions(store, host, 6);
    const listed = (await store.listExpiredSessions()).map((s) => s.sessionId);
    state.recovering = true;
    const report = await recoverAbandoned(store, host, { policy: 'retry_safe', concurrency: 3 });
    assert.equal(state.most, 3, 'three sessions\' retries ran at once');
    assert.deepEqual(report.sessions.map((s) => s.sessionId), listed, 'the listing order, whatever finished first');
    for (const session of report.sessions) {
      assert.ok(session.action === 'taken_over', JSON.stringify(session));
      assert.deepEqual(session.retried.map((r) => r.outcome), ['succeeded', 'succeeded']);
      assert.deepEqual(session.left, []);
      assert.equal(session.owner, null);
    }
    for (const id of ids) {
      const mine = state.order.filter((x) => x.startsWith(`${id}#`));
      assert.deepEqual(mine, [`${id}#1`, `${id}#2`], `${id}'s calls in order`);
    }
    assert.ok((await store.listSessions()).every((s) => !s.held), 'every session released');
    await store.close();
  });

  it('one session at a time by default', async () => {
    const store = createMemoryStore();
    const { state, host } = lookups();
    await abandonedSessions(store, host, 4);
    const listed = (await store.listExpiredSessions()).map((s) => s.sessionId);
    state.recovering = true;
    const report = await recoverAbandoned(store, host, 'retry_safe');
    assert.equal(report.sessions.length, 4);
    assert.equal(state.most, 1);
    assert.deepEqual(state.order, listed.flatMap((id) => [`${id}#1`, `${id}#2`]), 'each session finished before the next began');
    await store.close();
  });

  it('a store that becomes unusable starts no further session, lets the ones under way finish, then throws', async () => {
    const store = createMemoryStore();
    const { state, host } = lookups();
    await abandonedSessions(store, host, 6);
    const listed = (await store.listExpiredSessions()).map((s) => s.sessionId);
    state.recovering = true;
    const acquired: string[] = [];
    const failing = failingAt(store, listed[2]!, acquired);
    await assert.rejects(recoverAbandoned(failing, host, { policy: 'retry_safe', concurrency: 2 }), { code: 'store_failure' });
    assert.ok(!acquired.includes(listed[4]!) && !acquired.includes(listed[5]!), `no session started after the failure: ${acquired.join(', ')}`);
    const sessions = new Map((await store.listSessions()).map((s) => [String(s.sessionId), s]));
    for (const id of acquired.filter((x) => x !== listed[2])) {
      assert.equal(sessions.get(id)!.held, false, `${id}, under way, finished and released its session`);
      assert.equal(state.order.filter((x) => x.startsWith(`${id}#`)).length, 2, `${id}'s retries ran`);
    }
    await store.close();
  });

  it('kept sessions whose report cannot reach the host (the routine failed after them) are released, not left renewing for nobody (pass r57 #2)', async () => {
    const { store, host, failing } = await threeAbandonedTheLastFailing();
    await assert.rejects(recoverAbandoned(failing, host, { policy: 'retry_safe', keep: true }), { code: 'store_failure' });
    assert.deepEqual(await heldByRoutine(store), [], 'the two sessions recovered and kept were released');
    await store.close();
  });

  it('onSession tells the host each session\'s recovery as it is final, so a routine that then throws loses none; kept owners it was told of stay the host\'s (pass r57 #4)', async () => {
    const { store, host, listed, failing } = await threeAbandonedTheLastFailing();
    const told: SessionRecovery[] = [];
    let throws = 0;
    const onSession = (recovery: SessionRecovery) => {
      told.push(recovery);
      throws += 1;
      // A throwing hook, then a rejecting one: neither changes the routine.
      if (throws === 1) throw new Error('a logger that throws');
      return Promise.reject(new Error('a logger that rejects'));
    };
    await assert.rejects(recoverAbandoned(failing, host, { policy: 'retry_safe', keep: true, onSession }), { code: 'store_failure' });
    assert.deepEqual(told.map((r) => [r.sessionId, r.action]), [[listed[0], 'taken_over'], [listed[1], 'taken_over']]);
    for (const recovery of told) {
      assert.ok(recovery.action === 'taken_over');
      assert.deepEqual(recovery.retried.map((r) => r.outcome), ['succeeded', 'succeeded'], 'what was retried is known');
      assert.equal(recovery.owner?.sessionId, recovery.sessionId);
    }
    assert.deepEqual(await heldByRoutine(store), [listed[0], listed[1]].sort(), 'the owners handed to the host are still held');
    for (const recovery of told) if (recovery.action === 'taken_over') await recovery.owner!.release();
    await assert.rejects(recoverAbandoned(store, host, { onSession: 'log' as never }), { code: 'invalid_input', field: 'onSession' });
    await store.close();
  });

  it('with the host\'s anchor, every owner the routine acquires signs what it writes: all of it is anchored, and a journal rolled back to before it does not verify (pass r64 #1)', async () => {
    const store = createMemoryStore();
    const { state, host } = lookups();
    await abandonedSessions(store, host, 2);
    state.recovering = true;
    const checkpoints: Checkpoint[] = [];
    const anchor = { privateKey: keys.privateKey, sink: (c: Checkpoint) => void checkpoints.push(c) };
    await assert.rejects(recoverAbandoned(store, host, { anchor: { ...anchor, every: 0 } }), { code: 'invalid_input', field: 'anchor.every' });
    assert.equal((await store.listExpiredSessions()).length, 2, 'a bad anchor takes nothing over');
    // Each session's chain as it was before the routine (what a restored backup holds).
    const before = new Map<string, { epoch: number; links: Array<{ epoch: number; hash: string }> }>();
    for (const s of await store.listExpiredSessions()) {
      const { epoch, rows } = await (store as unknown as JournalStore).readChain(s.sessionId);
      before.set(s.sessionId, { epoch, links: rows.map((r) => ({ epoch: r.epoch, hash: r.hash })) });
    }
    const report = await recoverAbandoned(store, host, { policy: 'retry_safe', anchor });
    assert.deepEqual(report.sessions.map((s) => s.action), ['taken_over', 'taken_over']);
    for (const [sessionId, earlier] of before) {
      const verified = await verifySessionAnchors(store, sessionId, { publicKey: keys.publicKey, checkpoints });
      assert.equal(verified.unanchoredEvents, 0, `${sessionId}: the takeover, the retries and the release are anchored`);
      assert.ok(verified.anchoredSeq > earlier.links.length - 1);
      // The journal as it was before the routine: it no longer reaches what was anchored.
      assert.throws(() => checkAnchors(sessionId, earlier.links, earlier.epoch, checkpoints, keys.publicKey), AnchorError);
    }
    await store.close();
  });

  it('a cancelled routine starts no further session: those it did not reach are left to the next routine, untouched (pass r57 #5)', async () => {
    const store = createMemoryStore();
    // Two sessions under way, their retries waiting for a third that never comes while the routine is cancelled.
    const { state, host } = lookups(3);
    await abandonedSessions(store, host, 4);
    state.recovering = true;
    const cancel = new AbortController();
    const routine = recoverAbandoned(store, host, { policy: 'retry_safe', concurrency: 2, signal: cancel.signal, leaseMs: 200 });
    while (state.order.length === 0) await pause(5);
    cancel.abort(new Error('shutting down'));
    const report = await routine;
    assert.ok(report.sessions.length <= 2, `only the sessions under way: ${report.sessions.map((s) => s.sessionId).join(', ')}`);
    for (const session of report.sessions) {
      assert.ok(session.action === 'taken_over', JSON.stringify(session));
      assert.equal(session.heldForNextRoutine, true, 'cancelled while it worked there: the next routine decides again');
    }
    const untouched = (await store.listSessions()).filter((s) => s.owner === 'gone');
    assert.equal(untouched.length, 4 - report.sessions.length, 'never taken over');
    await store.close();
  });

  it('a signal shared by many sessions under way raises no MaxListenersExceededWarning (pass r57 #6)', async () => {
    const store = createMemoryStore();
    const { state, host } = lookups();
    await abandonedSessions(store, host, 20);
    state.recovering = true;
    const warnings: string[] = [];
    const heard = (warning: Error) => warnings.push(warning.name);
    process.on('warning', heard);
    try {
      const report = await recoverAbandoned(store, host, { policy: 'retry_safe', concurrency: 16, signal: new AbortController().signal });
      assert.equal(report.sessions.length, 20);
      await pause(10);
    } finally {
      process.off('warning', heard);
    }
    assert.deepEqual(warnings.filter((name) => name === 'MaxListenersExceededWarning'), []);
    await store.close();
  });

  it('a store closed while a retry\'s body runs: the close and the routine wait for the body, its session held and live meanwhile, so no other routine retries under it (pass r57 #1)', async () => {
    const path = tempDbPath(tempDir());
    const store = openSqliteStore(path);
    const other = openSqliteStore(path);
    const body = { recovering: false, end: () => {}, runs: 0 };
    let started = () => {};
    const running = new Promise<void>((resolve) => { started = resolve; });
    const tools = [tool('lookup', async () => {
      if (!body.recovering) throw new ToolBodyError('connection_reset', 'lost');
      body.runs += 1;
      started();
      // Ignores its signal, as many HTTP clients do.
      return new Promise<string>((resolve) => { body.end = () => resolve('late'); });
    }, new ToolMetadata('reads', { type: 'object' }).withEffect('read_only', 'r1'))];
    const host: RecoveryHost = { runtime: createToolRuntime({ tools, grants: { agent: '*' } }), tools, caller: 'agent' };
    try {
      await abandonedSessions(store, host, 1);
      body.recovering = true;
      let settled = false;
      const routine = recoverAbandoned(store, host, { policy: 'retry_safe', concurrency: 2, leaseMs: 200 }).finally(() => { settled = true; });
      routine.catch(() => undefined);
      await running;
      const closing = store.close();
      await pause(600);
      assert.equal(settled, false, 'the routine waits for the body it started');
      assert.deepEqual(await other.listExpiredSessions(), [], 'the session is held and its lease renewed: no other routine takes it');
      const second = await recoverAbandoned(other, host, { policy: 'retry_safe' });
      assert.deepEqual(second.sessions.map((s) => s.action), [], 'nothing to recover while the body runs');
      assert.equal(body.runs, 1);
      body.end();
      await closing;
      await assert.rejects(routine, { code: 'store_closed' });
      const history = await other.loadHistory('s-0');
      const retries = history.filter((e) => e.kind.type === 'tool_call').map((e) => (e.kind as { call: { id: string } }).call.id);
      assert.ok(bodyEnded(history, retries.at(-1)!), 'the retry body\'s end is journaled');
    } finally {
      body.end();
      await other.close();
      await store.close();
    }
  });

  it('a session whose abandoned owner\'s body still runs in this process: the routine that takes it over waits for that body before it lets the session go (pass r58 #2)', async () => {
    const store = createMemoryStore();
    const { state, host, timedOut } = await abandonedLateCharge(store);
    let settled = false;
    const routine = recoverAbandoned(store, host, { policy: 'retry_safe' }).finally(() => { settled = true; });
    await pause(300);
    assert.equal(settled, false, 'the routine waits for the body before it lets the session go');
    assert.equal((await store.listSessions())[0]!.owner, 'jingwei-recover', 'held by the routine meanwhile');
    state.end();
    const report = await routine;
    const session = report.sessions[0]!;
    assert.ok(session.action === 'taken_over', JSON.stringify(session));
    assert.deepEqual(session.reconciled.map((c) => c.action), ['body_running']);
    assert.ok(bodyEnded(await store.loadHistory('s-late'), timedOut.call.id), 'its end journaled before the session was let go');
    await store.close();
  });

  it('a routine cancelled while it waits for such a body returns; the session stays held, its lease renewed, and is let go once the body ends (pass r59 #2)', { timeout: 30_000 }, async () => {
    const store = createMemoryStore();
    const { state, host } = await abandonedLateCharge(store);
    try {
      const cancel = new AbortController();
      let settled = false;
      const routine = recoverAbandoned(store, host, { policy: 'retry_safe', signal: cancel.signal, leaseMs: 200 }).finally(() => { settled = true; });
      await pause(300);
      assert.equal(settled, false, 'the routine waits for the body');
      cancel.abort(new Error('shutting down'));
      const report = await routine;
      assert.deepEqual(report.sessions.map((s) => s.action), ['taken_over'], 'the cancelled routine returns with its report');
      await pause(600);
      const [held] = await store.listSessions();
      assert.equal(held!.owner, 'jingwei-recover');
      assert.equal(held!.held, true, 'still held while the body runs');
      assert.deepEqual(await store.listExpiredSessions(), [], 'its lease renewed: no other routine takes it under the body');
      state.end();
      while ((await store.listSessions())[0]!.held) await pause(25);
    } finally {
      state.end();
      await store.close();
    }
  });

  it('a call whose body went on after its deadline and returned, its reconciler answering not_executed, is left for a person: the session is not reported failed', async () => {
    const store = createMemoryStore();
    let bodies = 0;
    const tools = [{
      ...tool('pay', async () => {
        bodies += 1;
        await pause(200);
        return 'paid';
      }, new ToolMetadata('pays', { type: 'object' }).withEffect('non_idempotent', 'p1').withTimeoutCeiling(50)),
      reconcile: async () => ({ outcome: 'not_executed' as const, evidence: 'the bank shows nothing yet' }),
    }];
    const host: RecoveryHost = { runtime: createToolRuntime({ tools, grants: { agent: '*' } }), tools, caller: 'agent' };
    const gone = await store.acquire('s-paid', { owner: 'gone', leaseMs: 100, heartbeat: false });
    await gone.startTask('t');
    const timedOut = await host.runtime.bind({ owner: gone, taskId: 't', caller: 'agent' }).call('pay', {});
    assert.equal(timedOut.result.outcome.status === 'failed' && timedOut.result.outcome.code, 'tool_timeout');
    while (!bodyEnded(await store.loadHistory('s-paid'), timedOut.call.id)) await pause(20);
    while ((await store.listExpiredSessions()).length === 0) await pause(25);
    const session = (await recoverAbandoned(store, host, 'retry_safe')).sessions[0]!;
    assert.ok(session.action === 'taken_over', JSON.stringify(session));
    assert.deepEqual(session.retried, []);
    assert.deepEqual(session.left.map((c) => c.name), ['pay']);
    assert.match(session.left[0]!.reason, /despiteLateReturn/);
    assert.equal(bodies, 1);
    await store.close();
  });

  it('a concurrency outside 1..64 is a typed error and takes nothing over', async () => {
    const store = createMemoryStore();
    const { host } = lookups();
    await abandonedSessions(store, host, 1);
    for (const concurrency of [0, 65, 1.5, -1, Number.NaN, '2' as never]) {
      await assert.rejects(recoverAbandoned(store, host, { policy: 'retry_safe', concurrency }), (e: unknown) => e instanceof Error && (e as { code?: string }).code === 'invalid_input' && /concurrency/.test(e.message), String(concurrency));
    }
    assert.equal((await store.listSessions())[0]!.owner, 'gone', 'nothing was taken over');
    await store.close();
  });
});
