/**
 * The startup routine (docs/design.md#recovering-abandoned-sessions). Across real processes on SQLite and
 * PostgreSQL: a SIGKILLed host leaves a session whose lease runs out; recoverAbandoned takes it over, the idempotency
 * helper's reconciler settles the order, the read-only lookup is retried under a review by `policy:retry_safe`, and
 * the mail whose body may have run is left for a person. A live, heartbeating owner is never taken over. In one
 * process: `suspend`, `keep`, a session that became live between listing and takeover, and bad input. No assertion
 * depends on how long anything took.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { InvalidInputError, ToolBodyError } from '../../src/errors.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { openSqliteStore } from '../../src/sqlite.js';
import Database from 'better-sqlite3';
import type { SessionStore } from '../../src/store/types.js';
import { openCalls, recordToolReview, recoverAbandoned, type RecoverOptions, type RecoveryHost, type RecoveryPolicy, type RecoveryReport, type SessionRecovery } from '../../src/review.js';
import { prepareToolRetry } from '../../src/index.js';
import { decisionInbox } from '../../src/decisions.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import type { Tool } from '../../src/tool/types.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { ChildProcess } from '../support/child.js';
import { setFaultHook } from '../../src/fault.js';
import { outsideSystem, recoverTools } from '../support/recover-tools.js';
import { tool } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const crashing = fileURLToPath(new URL('./children/recover-host.js', import.meta.url));
const ownerChild = fileURLToPath(new URL('../store/children/owner-child.js', import.meta.url));
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/**
 * The crashing host's lease: short, so recovery finds it soon after the SIGKILL, yet long enough that the host, alive
 * and heartbeating on a loaded machine, keeps it while it runs (a host whose lease ran out stops its calls,
 * docs/design.md#a-lost-session-stops-its-calls).
 */
const DEAD_LEASE_MS = 1_000;
const LIVE_LEASE_MS = 1_500;
const dir = tempDir();

/** Runs the routine until it finds an abandoned session, as a host's startup loop would. */
async function recoverUntilFound(store: SessionStore, host: RecoveryHost, policy: 'suspend' | 'retry_safe'): Promise<RecoveryReport> {
  for (;;) {
    const report = await recoverAbandoned(store, host, policy);
    if (report.sessions.length > 0) return report;
    await pause(DEAD_LEASE_MS / 4);
  }
}

forEachStore('recoverAbandoned across real processes', (target) => {
  it("takes over a SIGKILLed host's session once its lease ran out: reconciles, retries what is safe, leaves the rest", async () => {
    const location = target.fresh();
    const business = tempDbPath(dir, 'business');
    const child = new ChildProcess(crashing, [location.target, 's-crash', business, String(DEAD_LEASE_MS), ...(location.schema ? [location.schema] : [])]);
    assert.deepEqual(await child.next(), { ready: true }, child.stderr);
    assert.deepEqual(await child.next(), { calling: 'send_mail' }, child.stderr);
    assert.equal((await child.exited).signal, 'SIGKILL');

    const store = await location.open();
    const outside = outsideSystem(business);
    const lookups = { count: 0 };
    const tools = recoverTools(outside, { die: false, lookups });
    const host: RecoveryHost = { runtime: createToolRuntime({ tools, grants: { agent: '*' } }), tools, caller: 'agent' };
    const report = await recoverUntilFound(store, host, 'retry_safe');
    assert.equal(report.policy, 'retry_safe');
    assert.equal(report.sessions.length, 1);
    const session = report.sessions[0]!;
    assert.equal(session.action, 'taken_over', JSON.stringify(session));
    if (session.action !== 'taken_over') return;
    assert.equal(session.previousOwner, 'crashing-host');
    assert.equal(session.epoch, 2);
    assert.equal(session.owner, null, 'released');

    assert.deepEqual(session.reconciled.map((c) => [c.name, c.action, c.answer]), [
      ['place_order', 'recorded', 'completed'],
      ['lookup', 'no_reconciler', null],
      ['send_mail', 'no_reconciler', null],
    ]);
    assert.equal(session.reconciled[0]!.review?.actor, 'reconciler:place_order@orders-r1');
    assert.deepEqual(session.retried.map((r) => [r.name, r.outcome, r.status, r.review.actor]), [['lookup', 'succeeded', 'completed', 'policy:retry_safe']]);
    assert.equal(lookups.count, 1, 'the lookup ran once, as the retry');
    assert.deepEqual(session.left.map((c) => [c.name, c.nextStep]), [['send_mail', 'needs_review']]);
    assert.equal(outside.orders(), 1, 'the order was placed once and never again');

    const history = await store.loadHistory('s-crash');
    const retryCall = history.find((e) => e.kind.type === 'tool_call' && e.kind.call.id === session.retried[0]!.retryCallId);
    assert.ok(retryCall?.kind.type === 'tool_call');
    assert.equal(retryCall.kind.call.operation?.retry?.review?.actor, 'policy:retry_safe');
    assert.equal(retryCall.kind.call.operation?.retry?.callId, session.retried[0]!.callId);
    const [summary] = await store.listSessions();
    assert.equal(summary!.held, false);
    assert.equal(summary!.owner, 'jingwei-recover');
    assert.deepEqual(openCalls(history).map((c) => [c.name, c.nextStep]), [['send_mail', 'needs_review']], 'only the mail waits for a person');
    assert.deepEqual((await recoverAbandoned(store, host, 'retry_safe')).sessions, [], 'nothing is abandoned any more');
    outside.close();
    await store.close();
  });

  it('never takes over a live, heartbeating owner in another process', async () => {
    const location = target.fresh();
    const child = new ChildProcess(ownerChild, [location.target, 's-live', 'owner', ...(location.schema ? [location.schema] : [])]);
    assert.deepEqual(await child.next(), { ready: true }, child.stderr);
    child.send(`acquire-lease ${LIVE_LEASE_MS}`);
    assert.equal((await child.next<{ ok: boolean }>()).ok, true);
    const store = await location.open();
    const outside = outsideSystem(tempDbPath(dir, 'business'));
    const tools = recoverTools(outside, { die: false });
    const host: RecoveryHost = { runtime: createToolRuntime({ tools, grants: { agent: '*' } }), tools, caller: 'agent' };
    for (let attempt = 0; attempt < 10; attempt++) {
      assert.deepEqual((await recoverAbandoned(store, host, 'retry_safe')).sessions, []);
      await pause(LIVE_LEASE_MS / 4);
    }
    child.send('append still-mine');
    assert.equal((await child.next<{ ok: boolean }>()).ok, true, 'the owner still writes at its epoch');
    const [summary] = await store.listSessions();
    assert.equal(summary!.epoch, 1);
    assert.equal(summary!.owner, 'owner');
    child.send('exit');
    await child.exited;
    outside.close();
    await store.close();
  });
});

describe('recoverAbandoned in one process', () => {
  /** The routine's report of the session once it lists it as abandoned again (its lease ran out). */
  async function recoveredOnce(store: SessionStore, host: RecoveryHost, options: RecoveryPolicy | RecoverOptions): Promise<SessionRecovery> {
    for (let tries = 0; tries < 400; tries += 1) {
      await pause(25);
      const report = await recoverAbandoned(store, host, options);
      if (report.sessions.length > 0) return report.sessions[0]!;
    }
    throw new Error('the session was never listed as abandoned again');
  }

  const failing = () => {
    const lookups = { count: 0 };
    const tools = [
      tool('lookup', async () => {
        lookups.count += 1;
        if (lookups.count === 1) throw new ToolBodyError('connection_reset', 'lost');
        return 'ok';
      }, new ToolMetadata('reads', { type: 'object' }).withEffect('read_only', 'r1')),
      tool('charge', async () => { throw new ToolBodyError('connection_reset', 'lost'); }, new ToolMetadata('charges', { type: 'object' }).withEffect('non_idempotent', 'c1')),
    ];
    return { lookups, tools, host: { runtime: createToolRuntime({ tools, grants: { agent: '*' } }), tools, caller: 'agent' } satisfies RecoveryHost };
  };

  /** A session whose owner made two uncertain calls and then stopped writing and heartbeating. */
  async function abandoned(store: SessionStore, host: RecoveryHost, sessionId: string): Promise<void> {
    const owner = await store.acquire(sessionId, { owner: 'gone', leaseMs: 100, heartbeat: false });
    await owner.startTask('t');
    const gateway = host.runtime.bind({ owner, taskId: 't', caller: 'agent' });
    await gateway.call('lookup', {});
    await gateway.call('charge', {});
  }

  it('suspend (the default) leaves every open call in the queue and retries nothing; keep hands back the owner', async () => {
    const store = createMemoryStore();
    const { lookups, host } = failing();
    await abandoned(store, host, 's-1');
    let report: RecoveryReport;
    do {
      await pause(25);
      report = await recoverAbandoned(store, host, { keep: true, owner: 'rescuer' });
    } while (report.sessions.length === 0);
    const session = report.sessions[0]!;
    assert.equal(report.policy, 'suspend');
    assert.ok(session.action === 'taken_over');
    assert.deepEqual(session.retried, []);
    assert.deepEqual(session.left.map((c) => [c.name, c.nextStep]), [['lookup', 'retry_allowed'], ['charge', 'needs_review']]);
    assert.match(session.left[0]!.reason, /^policy suspend: /);
    assert.deepEqual(session.reconciled.map((c) => c.action), ['no_reconciler', 'no_reconciler']);
    assert.equal(lookups.count, 1);
    assert.ok(session.owner !== null, 'kept');
    assert.equal(session.owner.owner, 'rescuer');
    assert.equal(session.owner.heartbeating, true);
    assert.equal((await store.listSessions())[0]!.held, true);
    await session.owner.release();
    await store.close();
  });

  for (const engine of ['memory', 'sqlite'] as const) it(`${engine}: payments whose approval a person decided after their host died are made once by retry_safe, denied ones never; an undecided one and suspend leave them, saying why (u118 #1)`, async () => {
    const open = () => (engine === 'memory' ? createMemoryStore() : openSqliteStore(tempDbPath(dir)));
    const store = open();
    const paid: unknown[] = [];
    const pay = tool('pay', async (request) => {
      paid.push(request.arguments);
      return 'paid';
    }, new ToolMetadata('pays', { type: 'object' }).withEffect('non_idempotent', 'pay-1').withApproval('ops'));
    const runtime = createToolRuntime({ tools: [pay], grants: { agent: '*' }, approvers: { ops: async () => ({ decision: 'pending', note: 'a person must look' }) } });
    const host: RecoveryHost = { runtime, tools: [pay], caller: 'agent' };
    const gone = await store.acquire('s-approvals', { owner: 'gone', leaseMs: 100, heartbeat: false });
    await gone.startTask('t');
    const gateway = runtime.bind({ owner: gone, taskId: 't', caller: 'agent' });
    const requests: string[] = [];
    for (const amount of [1, 2, 3]) requests.push((await gateway.call('pay', { amount })).result.approval!.requestId);
    // The host died waiting; an operator decides two of the three requests from the CLI.
    await decisionInbox(store).approve(requests[0]!, { actor: 'alice' });
    await decisionInbox(store).deny(requests[1]!, { actor: 'alice', reason: 'duplicate' });
    const calls = (await store.loadHistory('s-approvals')).flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call.id] : []));

    const suspended = await recoveredOnce(store, host, { policy: 'suspend', leaseMs: 100, keep: false });
    assert.ok(suspended.action === 'taken_over', JSON.stringify(suspended));
    assert.deepEqual(suspended.retried, []);
    assert.deepEqual(suspended.left.map((c) => c.callId), calls);
    assert.match(suspended.left[0]!.reason, new RegExp(`^policy suspend: its approval request ${requests[0]} was approved by alice, and no attempt has used the decision yet; a host retries it`));
    assert.match(suspended.left[1]!.reason, /was denied by alice/);
    assert.match(suspended.left[2]!.reason, /^it waits for a person's decision on its approval request/);
    assert.deepEqual(paid, []);

    // Abandoned again (another host's crash), the routine under retry_safe uses the two decisions.
    const again = await store.acquire('s-approvals', { owner: 'gone-again', leaseMs: 100, heartbeat: false, takeover: true });
    assert.ok(again.epoch > 0);
    const safe = await recoveredOnce(store, host, { policy: 'retry_safe', leaseMs: 100 });
    assert.ok(safe.action === 'taken_over', JSON.stringify(safe));
    assert.deepEqual(safe.retried.map((r) => [r.callId, r.outcome]), [[calls[0], 'succeeded'], [calls[1], 'approval_denied']]);
    assert.deepEqual(safe.left.map((c) => c.callId), [calls[2]], 'the undecided one is left, said so');
    assert.deepEqual(paid, [{ amount: 1 }], 'the approved payment made once, the denied one never');
    const history = await store.loadHistory('s-approvals');
    const started = history.find((e) => e.kind.type === 'tool_started' && e.kind.approval !== undefined);
    assert.equal(started?.kind.type === 'tool_started' ? started.kind.approval?.actor : null, 'alice', 'the decision answered for the retry');
    // Approving it again says who decided and which attempt used it (u118: "consumed (by alice)" read as if alice had used it).
    await assert.rejects(decisionInbox(store).approve(requests[0]!, { actor: 'bob' }), new RegExp(`is consumed \\(approved by alice, and used by the attempt ${safe.retried[0]!.retryCallId} since\\); it takes one decision`));
    // Nothing is made twice by a later routine, nor by the host going on with the operation.
    await store.acquire('s-approvals', { owner: 'gone-third', leaseMs: 100, heartbeat: false, takeover: true });
    const third = await recoveredOnce(store, host, { policy: 'retry_safe', leaseMs: 100 });
    assert.ok(third.action === 'taken_over', JSON.stringify(third));
    assert.deepEqual(third.retried, []);
    assert.deepEqual(paid, [{ amount: 1 }]);
    await store.close();
  });

  it('an approval given after the routine left the call is used by the next routine with retry_safe, once; suspend and an undecided call do not take the session again; a tool redeployed since is left, saying the approved write was not made (u121)', async () => {
    const store = openSqliteStore(tempDbPath(dir));
    const paid: unknown[] = [];
    const payAs = (revision: string) => tool('pay', async (request) => {
      paid.push(request.arguments);
      return 'paid';
    }, new ToolMetadata('pays', { type: 'object' }).withEffect('non_idempotent', revision).withApproval('ops'));
    const hostOf = (revision: string): RecoveryHost => {
      const pay = payAs(revision);
      return { runtime: createToolRuntime({ tools: [pay], grants: { agent: '*' }, approvers: { ops: async () => ({ decision: 'pending', note: 'a person must look' }) } }), tools: [pay], caller: 'agent' };
    };
    const host = hostOf('pay-1');
    const gone = await store.acquire('s-late', { owner: 'gone', leaseMs: 100, heartbeat: false });
    await gone.startTask('t');
    const gateway = host.runtime.bind({ owner: gone, taskId: 't', caller: 'agent' });
    const requests: string[] = [];
    for (const amount of [1, 2, 3]) requests.push((await gateway.call('pay', { amount })).result.approval!.requestId);
    const calls = (await store.loadHistory('s-late')).flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call.id] : []));
    // The new host's routine runs before anyone decides: it leaves the three calls and releases the session.
    const first = await recoveredOnce(store, host, { policy: 'retry_safe', leaseMs: 100 });
    assert.ok(first.action === 'taken_over', JSON.stringify(first));
    assert.deepEqual(first.left.map((c) => c.callId), calls);
    assert.equal((await store.listSessions())[0]!.held, false, 'released');
    // A person approves one afterwards; a routine under suspend does not take the session, nor one with nothing decided.
    await decisionInbox(store).approve(requests[0]!, { actor: 'alice' });
    assert.deepEqual((await recoverAbandoned(store, host, 'suspend')).sessions, []);
    const used = (await recoverAbandoned(store, host, 'retry_safe')).sessions;
    assert.equal(used.length, 1);
    const session = used[0]!;
    assert.ok(session.action === 'approvals_used', JSON.stringify(session));
    assert.deepEqual(session.retried.map((r) => [r.callId, r.outcome]), [[calls[0], 'succeeded']]);
    assert.deepEqual(session.left.map((c) => c.callId), [calls[1], calls[2]], 'the undecided ones, said so');
    assert.deepEqual(paid, [{ amount: 1 }]);
    assert.equal((await store.listSessions())[0]!.held, false, 'released again');
    assert.deepEqual((await recoverAbandoned(store, host, 'retry_safe')).sessions, [], 'nothing decided is left to use: the session is not taken again');
    // Approved, then the tool redeployed under another revision: the retry is recorded refused before its body, and the
    // report says the approved write was not made (u121, MEDIUM).
    await decisionInbox(store).approve(requests[1]!, { actor: 'alice' });
    const redeployed = (await recoverAbandoned(store, hostOf('pay-2'), 'retry_safe')).sessions[0]!;
    assert.ok(redeployed.action === 'approvals_used', JSON.stringify(redeployed));
    assert.deepEqual(redeployed.retried.map((r) => r.callId), [calls[1]]);
    const reason = redeployed.left.find((c) => c.callId === calls[1])?.reason ?? '';
    assert.match(reason, /before its body: the approved write was not made, and the decision is spent .* a person decides whether to make it again/);
    // Not "unused": by then the retry has spent the decision (u123 #3).
    assert.match(reason, /^its approval request \S+ was approved by alice; the routine retried it once/);
    assert.doesNotMatch(reason, /no attempt has used the decision yet/);
    assert.deepEqual(paid, [{ amount: 1 }]);
    await store.close();
  });

  it('retry_safe keeps a session held when a review decision arrives while its retry is under way: the next routine journals it and decides again', async () => {
    const store = createMemoryStore();
    const puts = { count: 0 };
    let during: (() => Promise<unknown>) | null = null;
    const put = tool('put', async () => {
      puts.count += 1;
      if (puts.count === 1) throw new ToolBodyError('connection_reset', 'lost after the write');
      return 'stored';
    }, new ToolMetadata('stores a record', { type: 'object' }).withEffect('idempotent', 'p1'));
    const guard = async () => {
      const record = during;
      during = null;
      if (record !== null) await record();
      return null;
    };
    const host: RecoveryHost = { runtime: createToolRuntime({ tools: [put], grants: { agent: '*' }, guards: [guard] }), tools: [put], caller: 'agent' };
    const gone = await store.acquire('s-decided', { owner: 'gone', leaseMs: 100, heartbeat: false });
    await gone.startTask('t');
    const first = (await host.runtime.bind({ owner: gone, taskId: 't', caller: 'agent' }).call('put', {})).call.id;
    // While the routine's retry runs its guard, an operator records that the write was made.
    during = () => decisionInbox(store).recordReview({ sessionId: 's-decided', callId: first, outcome: 'completed', evidence: 'the record is there', actor: 'ops' });
    const refused = await recoveredOnce(store, host, { policy: 'retry_safe', leaseMs: 100 });
    assert.ok(refused.action === 'taken_over', JSON.stringify(refused));
    assert.deepEqual(refused.retried.map((r) => [r.outcome, r.error?.code]), [['refused', 'needs_review']]);
    assert.match(refused.left[0]?.reason ?? '', /the next routine decides it again/);
    assert.equal((await store.listSessions())[0]!.held, true, 'kept held, its lease left to run out');
    assert.deepEqual([refused.owner, refused.heldForNextRoutine], [null, true], 'and the report says so');
    // The next routine finds it abandoned again, journals the decision first, and the call is settled.
    const settled = await recoveredOnce(store, host, { policy: 'retry_safe', leaseMs: 100 });
    assert.ok(settled.action === 'taken_over', JSON.stringify(settled));
    assert.deepEqual(settled.reviewed.map((r) => [r.callId, r.outcome]), [[first, 'completed']]);
    assert.deepEqual(settled.retried, []);
    assert.equal(puts.count, 1, 'written once');
    assert.equal((await store.listSessions())[0]!.held, false, 'released');
    assert.equal(settled.heldForNextRoutine, false);
    await store.close();
  });

  it('retry_safe: a retry refused for good (the tool redeployed under another revision since) is left for a person, not dropped from the report', async () => {
    const store = createMemoryStore();
    let puts = 0;
    const putAs = (revision: string) => tool('put', async () => {
      puts += 1;
      throw new ToolBodyError('connection_reset', 'lost after the write');
    }, new ToolMetadata('stores a record', { type: 'object' }).withEffect('idempotent', revision));
    const before = putAs('p1');
    const gone = await store.acquire('s-redeployed', { owner: 'gone', leaseMs: 100, heartbeat: false });
    await gone.startTask('t');
    const first = (await createToolRuntime({ tools: [before], grants: { agent: '*' } }).bind({ owner: gone, taskId: 't', caller: 'agent' }).call('put', {})).call.id;
    const after = putAs('p2');
    const report = await recoveredOnce(store, { runtime: createToolRuntime({ tools: [after], grants: { agent: '*' } }), tools: [after], caller: 'agent' }, { policy: 'retry_safe', leaseMs: 100 });
    assert.ok(report.action === 'taken_over', JSON.stringify(report));
    assert.deepEqual(report.retried.map((r) => [r.outcome, r.error?.code]), [['refused', 'binding_changed']]);
    assert.deepEqual(report.left.map((c) => c.callId), [first], 'a host paging a person for what is left sees it');
    assert.match(report.left[0]!.reason, /^the retry was refused, nothing written: .*; a person reviews the call$/);
    assert.equal(puts, 1, 'nothing ran under the new revision');
    await store.close();
  });

  it('retry_safe: a retry recorded refused before its body (the grant withdrawn since) settles nothing, and the open call is left for a person', async () => {
    const store = createMemoryStore();
    let puts = 0;
    const put = tool('put', async () => {
      puts += 1;
      throw new ToolBodyError('connection_reset', 'lost after the write');
    }, new ToolMetadata('stores a record', { type: 'object' }).withEffect('idempotent', 'p1'));
    const gone = await store.acquire('s-withdrawn', { owner: 'gone', leaseMs: 100, heartbeat: false });
    await gone.startTask('t');
    await createToolRuntime({ tools: [put], grants: { agent: '*' } }).bind({ owner: gone, taskId: 't', caller: 'agent' }).call('put', {});
    const report = await recoveredOnce(store, { runtime: createToolRuntime({ tools: [put], grants: { ops: '*' } }), tools: [put], caller: 'agent' }, { policy: 'retry_safe', leaseMs: 100 });
    assert.ok(report.action === 'taken_over', JSON.stringify(report));
    assert.deepEqual(report.retried.map((r) => r.outcome), ['unavailable']);
    const open = openCalls(await store.loadHistory('s-withdrawn'));
    assert.deepEqual(open.map((c) => c.callId), [report.retried[0]!.retryCallId], 'the retry is the operation\'s latest attempt, and it is still open');
    assert.deepEqual(report.left.map((c) => [c.callId, c.attention]), open.map((c) => [c.callId, c.attention]), 'a host paging a person for what is left sees it');
    assert.match(report.left[0]!.reason, /^the retry \(call .*\) ended unavailable and settled nothing; a person reviews the call$/);
    assert.equal(puts, 1, 'the retry never ran');
    await store.close();
  });

  it("retry_safe retries a non-idempotent call only on a reconciler's not_executed, and its review says so", async () => {
    const store = createMemoryStore();
    const charges = { count: 0 };
    const charge: Tool = {
      ...tool('charge', async () => {
        charges.count += 1;
        if (charges.count === 1) throw new ToolBodyError('connection_reset', 'lost before the charge');
        return 'charged';
      }, new ToolMetadata('charges', { type: 'object' }).withEffect('non_idempotent', 'c1')),
      reconcile: () => ({ outcome: 'not_executed', evidence: 'the processor has no charge under this key' }),
    };
    const tools = [charge];
    const host: RecoveryHost = { runtime: createToolRuntime({ tools, grants: { agent: '*' } }), tools, caller: 'agent' };
    const owner = await store.acquire('s-3', { owner: 'gone', leaseMs: 100, heartbeat: false });
    await owner.startTask('t');
    await host.runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('charge', {});
    let report: RecoveryReport;
    do {
      await pause(25);
      report = await recoverAbandoned(store, host, 'retry_safe');
    } while (report.sessions.length === 0);
    const session = report.sessions[0]!;
    assert.ok(session.action === 'taken_over', JSON.stringify(session));
    assert.deepEqual(session.reconciled.map((c) => c.answer), ['not_executed']);
    assert.deepEqual(session.retried.map((r) => [r.outcome, r.review.actor, r.review.outcome]), [['succeeded', 'policy:retry_safe', 'not_executed']]);
    assert.match(session.retried[0]!.review.evidence, /reconciler:charge@c1: the processor has no charge under this key/);
    assert.deepEqual(session.left, []);
    assert.equal(charges.count, 2);
    await store.close();
  });

  for (const policy of ['retry_safe', 'suspend'] as const) it(`${policy} leaves a call whose person's not_executed review the tool's reconciler could not check, and the session to its lease until it answers`, async () => {
    const store = createMemoryStore();
    const charges = { count: 0 };
    const charge: Tool = {
      ...tool('charge', async () => {
        charges.count += 1;
        throw new ToolBodyError('connection_reset', 'lost after the charge');
      }, new ToolMetadata('charges', { type: 'object' }).withEffect('non_idempotent', 'c1')),
      reconcile: () => {
        if (processorDown) throw new Error('the processor is unreachable');
        return { outcome: 'completed', evidence: 'charge ch_1 in the processor' };
      },
    };
    let processorDown = true;
    const tools = [charge];
    const host: RecoveryHost = { runtime: createToolRuntime({ tools, grants: { agent: '*' } }), tools, caller: 'agent' };
    const owner = await store.acquire('s-4', { owner: 'gone', leaseMs: 100, heartbeat: false });
    await owner.startTask('t');
    const call = await host.runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('charge', {});
    await recordToolReview(owner, await store.loadHistory('s-4'), call.call.id, { actor: 'bob', outcome: 'not_executed', evidence: 'not in the dashboard yet' });
    const pass = () => recoveredOnce(store, host, { policy, leaseMs: 100 });
    const session = await pass();
    assert.ok(session.action === 'taken_over', JSON.stringify(session));
    assert.deepEqual(session.reconciled.map((c) => c.action), ['failed']);
    assert.deepEqual(session.retried, []);
    assert.match(session.left[0]!.reason, /reconciler could not check the not_executed review by bob: the processor is unreachable/);
    assert.equal(charges.count, 1, 'charged once');
    // Not released: its lease runs out, and the next routine asks the reconciler again; failing again, again.
    const second = await pass();
    assert.ok(second.action === 'taken_over', JSON.stringify(second));
    assert.deepEqual(second.reconciled.map((c) => c.action), ['failed']);
    assert.equal(second.left.length, 1);
    processorDown = false;
    const later = await pass();
    assert.ok(later.action === 'taken_over', JSON.stringify(later));
    assert.deepEqual(later.reconciled.map((c) => [c.action, c.answer]), [['recorded', 'completed']]);
    assert.deepEqual(later.left, []);
    assert.equal(charges.count, 1, 'the reconciler found the charge: not charged again');
    await store.close();
  });

  it("suspend: a person's not_executed review recorded after the reconciler could not check one is their decision: the session is released, not held for the reconciler", async () => {
    const store = createMemoryStore();
    const charge: Tool = {
      ...tool('charge', async () => { throw new ToolBodyError('connection_reset', 'lost after the charge'); }, new ToolMetadata('charges', { type: 'object' }).withEffect('non_idempotent', 'c1')),
      reconcile: () => { throw new Error('the processor is unreachable'); },
    };
    const tools = [charge];
    const host: RecoveryHost = { runtime: createToolRuntime({ tools, grants: { agent: '*' } }), tools, caller: 'agent' };
    const owner = await store.acquire('s-8', { owner: 'gone', leaseMs: 100, heartbeat: false });
    await owner.startTask('t');
    const call = await host.runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('charge', {});
    await recordToolReview(owner, await store.loadHistory('s-8'), call.call.id, { actor: 'bob', outcome: 'not_executed', evidence: 'not in the dashboard yet' });
    const pass = () => recoveredOnce(store, host, { leaseMs: 100 });
    const first = await pass();
    assert.ok(first.action === 'taken_over' && first.reconciled[0]?.review?.outcome === 'uncertain', JSON.stringify(first));
    assert.equal((await store.listSessions())[0]!.held, true, 'held for the reconciler');
    await pause(150);
    const again = await store.acquire('s-8', { owner: 'ops console', takeover: 'expired', leaseMs: 100, heartbeat: false });
    await recordToolReview(again, await store.loadHistory('s-8'), call.call.id, { actor: 'bob', outcome: 'not_executed', evidence: 'the processor confirmed by phone: no charge' });
    const decided = await pass();
    assert.ok(decided.action === 'taken_over', JSON.stringify(decided));
    assert.deepEqual([decided.reconciled[0]?.action, decided.reconciled[0]?.review], ['failed', null]);
    assert.equal((await store.listSessions())[0]!.held, false, 'released: the person decided');
    await store.close();
  });

  it("a routine cancelled while the reconciler is asked about a person's not_executed review marks the review unchecked in the journal and leaves the session to its lease", async () => {
    for (const policy of ['suspend', 'retry_safe'] as const) {
      const store = createMemoryStore();
      const charges = { count: 0 };
      let answering = false;
      const stop = new AbortController();
      const charge: Tool = {
        ...tool('charge', async () => {
          charges.count += 1;
          throw new ToolBodyError('connection_reset', 'lost after the charge');
        }, new ToolMetadata('charges', { type: 'object' }).withEffect('non_idempotent', 'c1')),
        reconcile: async () => {
          if (!answering) {
            stop.abort(new Error('the host is shutting down'));
            return new Promise<never>(() => {});
          }
          return { outcome: 'completed', evidence: 'charge ch_1 in the processor' };
        },
      };
      const tools = [charge];
      const host: RecoveryHost = { runtime: createToolRuntime({ tools, grants: { agent: '*' } }), tools, caller: 'agent' };
      const owner = await store.acquire('s-5', { owner: 'gone', leaseMs: 100, heartbeat: false });
      await owner.startTask('t');
      const call = await host.runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('charge', {});
      await recordToolReview(owner, await store.loadHistory('s-5'), call.call.id, { actor: 'bob', outcome: 'not_executed', evidence: 'not in the dashboard yet' });
      const pass = (signal?: AbortSignal) => recoveredOnce(store, host, { policy, leaseMs: 100, ...(signal ? { signal } : {}) });
      const cancelled = await pass(stop.signal);
      assert.ok(cancelled.action === 'taken_over', JSON.stringify(cancelled));
      assert.deepEqual(cancelled.reconciled.map((c) => c.action), ['failed']);
      assert.match(cancelled.reconciled[0]!.review?.evidence ?? '', /could not check the not_executed review by bob: the host is shutting down/);
      assert.deepEqual(cancelled.retried, []);
      const history = await store.loadHistory('s-5');
      assert.throws(() => prepareToolRetry(history, call.call.id), { name: 'ToolRetryError' }, `${policy}: no host gets a plan from the unchecked review`);
      assert.equal((await store.listSessions())[0]!.held, true, `${policy}: left to its lease, not released`);
      answering = true;
      const later = await pass();
      assert.ok(later.action === 'taken_over', JSON.stringify(later));
      assert.deepEqual(later.reconciled.map((c) => [c.action, c.answer]), [['recorded', 'completed']]);
      assert.equal(charges.count, 1, `${policy}: the reconciler found the charge: not charged again`);
      await store.close();
    }
  });

  it('a routine fenced by another host while it retries reports the session failed (stale owner), not taken over with the retry refused', async () => {
    const store = createMemoryStore();
    let calls = 0;
    const lookup = tool('lookup', async () => {
      calls += 1;
      if (calls === 1) throw new ToolBodyError('connection_reset', 'lost');
      await store.acquire('s-6', { owner: 'another host', takeover: true });
      return 'ok';
    }, new ToolMetadata('reads', { type: 'object' }).withEffect('read_only', 'r1'));
    const tools = [lookup];
    const host: RecoveryHost = { runtime: createToolRuntime({ tools, grants: { agent: '*' } }), tools, caller: 'agent' };
    const owner = await store.acquire('s-6', { owner: 'gone', leaseMs: 100, heartbeat: false });
    await owner.startTask('t');
    await host.runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('lookup', {});
    const session = await recoveredOnce(store, host, 'retry_safe');
    assert.equal(session.action, 'failed', JSON.stringify(session));
    assert.ok(session.action === 'failed');
    assert.match(`${session.error.code} ${session.error.message}`, /stale/);
    assert.equal(calls, 2);
    await store.close();
  });

  it('a retry whose result the store could not write is reported recording_failed with its call id, not refused: its body ran', async () => {
    const store = openSqliteStore(tempDbPath(dir));
    let calls = 0;
    let breakCommits = false;
    const lookup = tool('lookup', async () => {
      calls += 1;
      if (calls === 1) throw new ToolBodyError('connection_reset', 'lost');
      breakCommits = true;
      return 'ok';
    }, new ToolMetadata('reads', { type: 'object' }).withEffect('read_only', 'r1'));
    const tools = [lookup];
    const host: RecoveryHost = { runtime: createToolRuntime({ tools, grants: { agent: '*' } }), tools, caller: 'agent' };
    const owner = await store.acquire('s-7', { owner: 'gone', leaseMs: 100, heartbeat: false });
    await owner.startTask('t');
    await host.runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('lookup', {});
    setFaultHook((point) => { if (point === 'commit:before' && breakCommits) throw new Error('the disk is full'); });
    try {
      const session = await recoveredOnce(store, host, 'retry_safe');
      assert.ok(session.action === 'taken_over', JSON.stringify(session));
      assert.equal(session.retried[0]?.outcome, 'recording_failed');
      assert.match(session.retried[0]?.error?.message ?? '', /could not record the result of lookup/);
      const retryCallId = session.retried[0]?.retryCallId;
      assert.ok(typeof retryCallId === 'string');
      breakCommits = false;
      assert.ok((await store.loadHistory('s-7')).some((e) => e.kind.type === 'tool_call' && e.kind.call.id === retryCallId), 'the attempt is in the journal');
    } finally {
      setFaultHook(null);
    }
    await store.close();
  });

  it('host.runtime must be the runtime createToolRuntime made (a Proxy of it passes, a wrapper cannot show its tools) and host.tools exactly its tools: one left out, or a copy without its reconciler, is refused before anything is read', async () => {
    const store = createMemoryStore();
    const charge: Tool = {
      ...tool('charge', async () => 'charged', new ToolMetadata('charges', { type: 'object' }).withEffect('non_idempotent', 'c1')),
      reconcile: () => ({ outcome: 'completed', evidence: 'in the ledger' }),
    };
    const runtime = createToolRuntime({ tools: [charge], grants: { agent: '*' } });
    const { reconcile: _dropped, ...copy } = charge;
    await assert.rejects(recoverAbandoned(store, { runtime, tools: [], caller: 'agent' }, 'retry_safe'), { name: 'InvalidInputError', field: 'host.tools', message: /missing: charge/ });
    await assert.rejects(recoverAbandoned(store, { runtime, tools: [copy as Tool], caller: 'agent' }, 'retry_safe'), { name: 'InvalidInputError', field: 'host.tools[0]' });
    const wrapper: typeof runtime = { bind: (binding) => runtime.bind(binding), get inFlight() { return runtime.inFlight; } };
    const borrowed = Object.setPrototypeOf({ bind: wrapper.bind }, Object.getPrototypeOf(runtime)) as typeof runtime;
    for (const [wrapped, tools] of [[wrapper, []], [wrapper, [charge]], [borrowed, [charge]]] as const) {
      await assert.rejects(recoverAbandoned(store, { runtime: wrapped, tools: [...tools], caller: 'agent' }, 'retry_safe'), { name: 'InvalidInputError', field: 'host.runtime' });
    }
    const proxied = new Proxy(runtime, {});
    await assert.rejects(recoverAbandoned(store, { runtime: proxied, tools: [], caller: 'agent' }, 'retry_safe'), { name: 'InvalidInputError', field: 'host.tools' });
    assert.deepEqual((await recoverAbandoned(store, { runtime: proxied, tools: [charge], caller: 'agent' }, 'retry_safe')).sessions, []);
    const report = await recoverAbandoned(store, { runtime, tools: [charge], caller: 'agent' }, 'retry_safe');
    assert.deepEqual(report.sessions, []);
    await store.close();
  });

  it('a session that became live between listing and takeover is skipped and reported, never fenced', async () => {
    const store = createMemoryStore();
    const { host } = failing();
    const live = await store.acquire('s-live', { owner: 'alive' });
    const listed = (await store.listSessions())[0]!;
    const racing: SessionStore = Object.create(store, { listExpiredSessions: { value: async () => [{ ...listed, leaseExpired: true }] } });
    const report = await recoverAbandoned(racing, host, 'retry_safe');
    assert.equal(report.sessions.length, 1);
    const session = report.sessions[0]!;
    assert.equal(session.action, 'skipped');
    assert.ok(session.action === 'skipped' && session.reason === 'live');
    assert.equal(session.holder, 'alive');
    assert.equal(typeof session.leaseExpiresAt, 'number');
    await live.append([{ turnId: 't1', kind: { type: 'user_message', text: 'still mine' } }]);
    assert.equal(live.epoch, 1);
    await live.release();
    await store.close();
  });

  it('routines that start together do not recover one session twice: one another routine recovered and released since the listing is skipped, one it left abandoned again is taken over (pass r51 #2)', async () => {
    const store = createMemoryStore();
    const { host, lookups } = failing();
    await abandoned(store, host, 's-done');
    await abandoned(store, host, 's-again');
    await pause(150);
    // The listing a second routine made as the first began: both sessions abandoned.
    const stale = await store.listExpiredSessions();
    assert.deepEqual(stale.map((x) => x.sessionId).sort(), ['s-again', 's-done']);
    const before = lookups.count;
    // The first routine recovered s-done and released it, and died inside s-again (its owner never released).
    const first = await recoverAbandoned(Object.create(store, { listExpiredSessions: { value: async () => stale.filter((x) => x.sessionId === 's-done') } }), host, 'retry_safe');
    assert.equal(first.sessions[0]!.action, 'taken_over');
    assert.equal(lookups.count, before + 1, 'the first routine retried s-done\'s failed lookup once');
    const dying = await store.acquire('s-again', { owner: 'routine-1', takeover: 'abandoned', leaseMs: 100, heartbeat: false });
    await pause(150);
    const done = (await store.loadHistory('s-done')).length;

    const second = await recoverAbandoned(Object.create(store, { listExpiredSessions: { value: async () => stale } }), host, 'retry_safe');
    const by = new Map(second.sessions.map((x) => [x.sessionId, x]));
    assert.deepEqual(by.get('s-done'), { sessionId: 's-done', action: 'skipped', reason: 'released' }, 'recovered and released by the first routine: not again');
    assert.equal((await store.loadHistory('s-done')).length, done, 'nothing journaled in it twice');
    const again = by.get('s-again')!;
    assert.ok(again.action === 'taken_over', JSON.stringify(again));
    assert.equal(again.epoch, dying.epoch + 1);
    assert.equal(again.previousOwner, null, 'not the owner the stale listing named: the routine that took it since');
    assert.equal(lookups.count, before + 1, 'no second retry of s-done\'s lookup');
    assert.deepEqual(again.left.map((c) => c.name), ['charge'], 'the charge in doubt reported once more, by the routine that now holds it');
    await assert.rejects(store.acquire('s-done', { owner: 'x', takeover: 'abandoned' }), { code: 'stale_owner' });
    await store.close();
  });

  it("a released session's review decisions waiting in the inbox are journaled by the routine; a held session's are left to its host (pass r51 #1)", async () => {
    const store = createMemoryStore();
    const { host } = failing();
    const finished = async (sessionId: string) => {
      const owner = await store.acquire(sessionId, { owner: 'worker' });
      await owner.startTask('t');
      await host.runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('charge', {});
      return owner;
    };
    const done = await finished('s-finished');
    await done.release();
    const live = await finished('s-live');
    const inbox = decisionInbox(store);
    const callOf = async (sessionId: string) => openCalls(await store.loadHistory(sessionId))[0]!.callId;
    const review = await inbox.recordReview({ sessionId: 's-finished', callId: await callOf('s-finished'), outcome: 'completed', evidence: 'in the provider log', actor: 'ana' });
    await inbox.recordReview({ sessionId: 's-live', callId: await callOf('s-live'), outcome: 'completed', evidence: 'in the provider log', actor: 'ana' });

    const report = await recoverAbandoned(store, host, 'retry_safe');
    assert.deepEqual(report.sessions.map((x) => [x.sessionId, x.action]), [['s-finished', 'reviews_journaled']], 'the live host\'s session is its own');
    const entry = report.sessions[0]!;
    assert.ok(entry.action === 'reviews_journaled');
    assert.deepEqual(entry.reviewed.map((r) => r.decisionId), [review.id]);
    assert.deepEqual(openCalls(await store.loadHistory('s-finished')), [], 'the call is settled in its journal');
    assert.equal((await store.listSessions()).find((x) => x.sessionId === 's-finished')?.held, false, 'released again');
    assert.equal((await inbox.get(review.id))!.state, 'consumed');
    assert.deepEqual((await recoverAbandoned(store, host, 'retry_safe')).sessions, [], 'nothing left for a next routine');
    await live.release();
    await store.close();
  });

  // u145 F4: two routines at once; the second listed the session before the first journaled its review, acquired it
  // after, and reported `reviews_journaled` with nothing journaled.
  it('a released session another routine did between the listing and the acquire is not reported', async () => {
    const store = createMemoryStore();
    const { host } = failing();
    const owner = await store.acquire('s-raced', { owner: 'worker' });
    await owner.startTask('t');
    await host.runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('charge', {});
    await owner.release();
    const callId = openCalls(await store.loadHistory('s-raced'))[0]!.callId;
    await decisionInbox(store).recordReview({ sessionId: 's-raced', callId, outcome: 'completed', evidence: 'in the provider log', actor: 'ana' });
    let first: Awaited<ReturnType<typeof recoverAbandoned>> | null = null;
    const racing = Object.create(store, {
      acquire: {
        value: async (...args: Parameters<typeof store.acquire>) => {
          first ??= await recoverAbandoned(store, host, 'retry_safe');
          return store.acquire(...args);
        },
      },
    }) as typeof store;
    const second = await recoverAbandoned(racing, host, 'retry_safe');
    assert.deepEqual(first!.sessions.map((x) => [x.sessionId, x.action]), [['s-raced', 'reviews_journaled']]);
    assert.deepEqual(second.sessions, [], 'nothing was done by the second');
    await store.close();
  });

  it("a released session whose journal does not verify, with a review waiting, is reported failed and left released: a host's acquire is not refused (pass r52 #6)", async () => {
    const path = tempDbPath(dir);
    const store = openSqliteStore(path);
    const { host } = failing();
    const owner = await store.acquire('s-damaged', { owner: 'worker' });
    await owner.startTask('t');
    await host.runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('charge', {});
    await owner.release();
    await decisionInbox(store).recordReview({ sessionId: 's-damaged', callId: openCalls(await store.loadHistory('s-damaged'))[0]!.callId, outcome: 'completed', evidence: 'in the ledger', actor: 'ana' });
    const raw = new Database(path);
    assert.equal(raw.prepare("UPDATE jw_events SET body = replace(body, 'charge', 'chargf') WHERE seq = (SELECT min(seq) FROM jw_events WHERE body LIKE '%charge%')").run().changes, 1);
    raw.close();
    for (let i = 0; i < 2; i += 1) {
      const report = await recoverAbandoned(store, host, 'retry_safe');
      const entry = report.sessions.find((x) => x.sessionId === 's-damaged');
      assert.ok(entry?.action === 'failed' && entry.error.code === 'journal_corrupt', JSON.stringify(entry));
      assert.equal((await store.listSessions()).find((x) => x.sessionId === 's-damaged')?.held, false, 'released as it was found');
    }
    const next = await store.acquire('s-damaged', { owner: 'another-host' });
    await next.release();
    await store.close();
  });

  it('a session it cannot recover (a corrupt journal) stays held with its lease left to run out: not writable, and reported again by the next routine', async () => {
    const path = tempDbPath(dir);
    const store = openSqliteStore(path);
    const { host } = failing();
    await abandoned(store, host, 's-corrupt');
    // Someone edits a journaled event: the chain no longer verifies.
    const raw = new Database(path);
    const edited = raw.prepare("UPDATE jw_events SET body = replace(body, 'lookup', 'lookuq') WHERE seq = (SELECT min(seq) FROM jw_events WHERE body LIKE '%lookup%')").run();
    assert.equal(edited.changes, 1);
    raw.close();
    const failedOnce = async () => {
      for (;;) {
        const report = await recoverAbandoned(store, host, { policy: 'retry_safe', leaseMs: 300 });
        const session = report.sessions.find((s) => s.sessionId === 's-corrupt');
        if (session !== undefined) return session;
        await pause(25);
      }
    };
    const first = await failedOnce();
    assert.ok(first.action === 'failed' && first.error.code === 'journal_corrupt', JSON.stringify(first));
    const listed = (await store.listSessions()).find((s) => s.sessionId === 's-corrupt')!;
    assert.deepEqual([listed.held, listed.owner], [true, 'jingwei-recover'], 'not released: held by the routine, its lease left to run out');
    await assert.rejects(store.acquire('s-corrupt', { owner: 'another-host' }), { code: 'session_busy' });
    // Its lease runs out (nothing renews it): the next routine finds it abandoned again and reports it again.
    const again = await failedOnce();
    assert.ok(again.action === 'failed' && again.error.code === 'journal_corrupt');
    await store.close();
  });

  it('bad input is a typed error and changes nothing; a closed store is store_closed', async () => {
    const store = createMemoryStore();
    const { host } = failing();
    await abandoned(store, host, 's-2');
    await assert.rejects(recoverAbandoned(store, host, 'retry_all' as never), (e: unknown) => e instanceof InvalidInputError && e.code === 'invalid_input' && /retry_all/.test(e.message));
    await assert.rejects(recoverAbandoned(store, { ...host, caller: '' }, 'suspend'), { code: 'invalid_input' });
    await assert.rejects(recoverAbandoned(store, { ...host, tools: undefined as never }, 'suspend'), { code: 'invalid_input' });
    let listed = 0;
    while (listed === 0) {
      await pause(25);
      listed = (await store.listExpiredSessions()).length;
    }
    await assert.rejects(recoverAbandoned(store, host, { policy: 'suspend', leaseMs: 5 }), { code: 'invalid_input' });
    assert.equal((await store.listSessions())[0]!.owner, 'gone', 'nothing was taken over');
    await store.close();
    await assert.rejects(recoverAbandoned(store, host, 'suspend'), { code: 'store_closed' });
  });
});
