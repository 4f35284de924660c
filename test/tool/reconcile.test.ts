/**
 * Reconcilers (docs/design.md#reconcilers), on SQLite and PostgreSQL: reconcileUncertainCalls asks the idempotency
 * helper's reconciler about every uncertain call of a tool that writes through it, journals each answer as a
 * review by `reconciler:<tool>@<revision>`, and leaves only what stays unknown for a person.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolBodyError } from '../../src/errors.js';
import { assessSession, inspectToolRecovery, prepareToolRetry } from '../../src/index.js';
import type { JsonValue } from '../../src/json/types.js';
import { LIMITS } from '../../src/limits.js';
import { PostgresIdempotencyStore } from '../../src/postgres.js';
import { reconcileUncertainCalls, recordToolReview } from '../../src/review.js';
import { reconcileCalls } from '../../src/tool/reconcile.js';
import { SqliteIdempotencyStore } from '../../src/sqlite.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime, gatewayPanicDescriber, hostPanicDescriber } from '../../src/tool/runtime.js';
import type { IdempotencyRequest } from '../../src/tool/idempotency.js';
import type { Tool, ToolReconcileAnswer } from '../../src/tool/types.js';
import { PG_URL, freshSchema } from '../support/postgres.js';
import { rig, tool } from '../support/runtime.js';
import { forEachStore, type StoreTarget } from '../support/stores.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

/** The idempotency helper of the journal's engine, reduced to what these tests use. */
interface Helper {
  run(request: IdempotencyRequest, item: string): Promise<JsonValue>;
  reconcile(request: IdempotencyRequest): Promise<ToolReconcileAnswer>;
  rows(): Promise<number>;
  close(): Promise<void>;
}

const dir = tempDir();
async function helperFor(target: StoreTarget): Promise<Helper> {
  if (target.name === 'sqlite') {
    const store = new SqliteIdempotencyStore(tempDbPath(dir, 'business'));
    store.db.exec('CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)');
    return {
      run: async (request, item) => store.run(request, (db) => ({ order: Number(db.prepare('INSERT INTO orders (item) VALUES (?)').run(item).lastInsertRowid) })).result,
      reconcile: async (request) => store.reconcile(request),
      rows: async () => (store.db.prepare('SELECT count(*) AS n FROM orders').get() as { n: number }).n,
      close: async () => store.close(),
    };
  }
  const schema = freshSchema();
  const store = await PostgresIdempotencyStore.open(PG_URL!, { schema });
  await store.pool.query(`CREATE TABLE "${schema}".orders (id SERIAL PRIMARY KEY, item TEXT NOT NULL)`);
  return {
    run: async (request, item) => (await store.run(request, async (client) => {
      const { rows } = await client.query<{ id: number }>(`INSERT INTO "${schema}".orders (item) VALUES ($1) RETURNING id`, [item]);
      return { order: rows[0]!.id };
    })).result,
    reconcile: (request) => store.reconcile(request),
    rows: async () => Number((await store.pool.query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".orders`)).rows[0]!.n),
    close: () => store.close(),
  };
}

/**
 * Declared non_idempotent (without a reconciler its uncertain calls need a person), written through the helper.
 * Its first attempt of an operation fails `before` or `after` its write, as a lost connection would.
 */
function placeOrder(helper: Helper, bodies: { count: number }): Tool {
  return {
    ...tool('place_order', async (request) => {
      const args = request.arguments as { item: string; fail?: 'before' | 'after' };
      bodies.count += 1;
      const first = request.operation.retry === null;
      if (first && args.fail === 'before') throw new ToolBodyError('connection_reset', 'lost before the write');
      const result = await helper.run(request, args.item);
      if (first && args.fail === 'after') throw new ToolBodyError('connection_reset', 'lost after the write');
      return result;
    }, new ToolMetadata('places an order', { type: 'object' }).withEffect('non_idempotent', 'orders-r3')),
    reconcile: (request) => helper.reconcile(request),
  };
}

forEachStore('reconcilers', (target) => {
  it('the idempotency helper resolves uncertain calls without a person; only a tool without a reconciler is left', async () => {
    const helper = await helperFor(target);
    const bodies = { count: 0 };
    const unsure: Tool = {
      ...tool('ask_vendor', async () => { throw new ToolBodyError('gateway_timeout', 'no answer'); }, new ToolMetadata('asks', { type: 'object' }).withEffect('unknown', 'v1')),
      reconcile: () => ({ outcome: 'unknown', evidence: 'the vendor keeps no record of requests' }),
    };
    const mute = tool('notify', async () => { throw new ToolBodyError('smtp_reset', 'lost'); }, new ToolMetadata('notifies', { type: 'object' }).withEffect('non_idempotent', 'n1'));
    const tools = [placeOrder(helper, bodies), unsure, mute];
    const r = await rig(target, { tools });
    const wrote = await r.gateway.call('place_order', { item: 'book', fail: 'after' });
    const lost = await r.gateway.call('place_order', { item: 'pen', fail: 'before' });
    const asked = await r.gateway.call('ask_vendor', {});
    const quiet = await r.gateway.call('notify', {});
    const history = await r.store.loadHistory(r.sessionId);
    assert.equal(assessSession(history).totals.byNextStep.needs_review, 4, 'four calls in doubt before reconciling');

    const report = await reconcileUncertainCalls(r.owner, tools, history);
    const byCall = new Map(report.calls.map((c) => [c.callId as string, c]));
    assert.equal(byCall.get(wrote.call.id)?.answer, 'completed');
    assert.deepEqual(byCall.get(wrote.call.id)?.output, { order: 1 }, 'the stored result comes back');
    assert.equal(byCall.get(wrote.call.id)?.review?.actor, 'reconciler:place_order@orders-r3');
    assert.equal(byCall.get(wrote.call.id)?.review?.source, 'reconciler');
    assert.equal(byCall.get(lost.call.id)?.answer, 'not_executed');
    assert.equal(byCall.get(asked.call.id)?.review?.outcome, 'uncertain');
    assert.equal(byCall.get(quiet.call.id)?.action, 'no_reconciler');
    assert.deepEqual([...report.needsReview].sort(), [asked.call.id, quiet.call.id].sort(), 'only what stays unknown needs a person');

    const reviewed = await r.store.loadHistory(r.sessionId);
    assert.deepEqual(reviewed, report.history, 'the report hands back the journal as it is now');
    assert.equal(inspectToolRecovery(reviewed, wrote.call.id).resolved, true);
    assert.throws(() => prepareToolRetry(reviewed, wrote.call.id), { code: 'completed' });
    const plan = prepareToolRetry(reviewed, lost.call.id);
    assert.equal(plan.review?.actor, 'reconciler:place_order@orders-r3');
    const retried = await r.gateway.callWithOptions('place_order', { item: 'pen', fail: 'before' }, { retry: plan });
    assert.equal(retried.result.outcome.status, 'succeeded');
    assert.equal(await helper.rows(), 2, 'each order was written once');

    // A second pass asks only what is still in doubt, and writes nothing when the answer has not changed.
    const now = await r.store.loadHistory(r.sessionId);
    const again = await reconcileUncertainCalls(r.owner, tools, now);
    assert.deepEqual(again.calls.map((c) => [c.name, c.action]), [['ask_vendor', 'unchanged'], ['notify', 'no_reconciler']]);
    assert.equal((await r.store.loadHistory(r.sessionId)).length, now.length);
    await helper.close();
    await r.store.close();
  });

  it('a reconciler that throws, answers nonsense, or belongs to another revision writes nothing', async () => {
    const failing = (reconcile: NonNullable<Tool['reconcile']>, revision = 'v1'): Tool => ({
      ...tool('flaky', async () => { throw new ToolBodyError('reset', 'lost'); }, new ToolMetadata('flaky', { type: 'object' }).withEffect('non_idempotent', revision)),
      reconcile,
    });
    const r = await rig(target, { tools: [failing(() => ({ outcome: 'unknown', evidence: 'x' }))] });
    await r.gateway.call('flaky', {});
    const history = await r.store.loadHistory(r.sessionId);
    const cases: [Tool, string][] = [
      [failing(() => { throw new Error('lookup service down'); }), 'failed'],
      [failing(() => ({ outcome: 'maybe', evidence: 'x' }) as never), 'failed'],
      [failing(() => ({ outcome: 'completed', evidence: '   ' })), 'failed'],
      [failing(() => ({ outcome: 'completed', evidence: 'seen' }), 'v2'), 'revision_changed'],
      [failing('not a function' as never), 'failed'],
    ];
    for (const [t, action] of cases) {
      const report = await reconcileUncertainCalls(r.owner, [t], history);
      assert.equal(report.calls[0]?.action, action);
      assert.equal(report.needsReview.length, 1);
    }
    // One that never answers, whether or not it heeds its signal, is given up after timeoutMs (30 s by default).
    let heard: unknown = null;
    for (const reconcile of [() => new Promise<never>(() => {}), (_: unknown, signal: AbortSignal) => new Promise<never>(() => { signal.addEventListener('abort', () => { heard = signal.reason; }); })]) {
      const report = await reconcileUncertainCalls(r.owner, [failing(reconcile as NonNullable<Tool['reconcile']>)], history, { timeoutMs: 30 });
      assert.equal(report.calls[0]?.action, 'failed');
      assert.match(report.calls[0]?.error ?? '', /did not answer within 30 ms/);
    }
    assert.match(String(heard), /did not answer within 30 ms/, 'and its signal said why');
    // The tool's own deadline, unless the call gives one.
    const late = (reconcileTimeoutMs: number): Tool => ({
      ...failing(async () => {
        await new Promise((resolve) => setTimeout(resolve, 60));
        return { outcome: 'unknown', evidence: 'no record either way' };
      }),
      reconcileTimeoutMs,
    });
    const cut = await reconcileUncertainCalls(r.owner, [late(20)], history);
    assert.match(cut.calls[0]?.error ?? '', /did not answer within 20 ms/);
    const overridden = await reconcileUncertainCalls(r.owner, [late(20)], history, { timeoutMs: 5_000 });
    assert.equal(overridden.calls[0]?.action, 'recorded', 'the call\'s timeoutMs wins');
    for (const reconcileTimeoutMs of [0, -1, 1.5, Number.NaN, 2 ** 31]) {
      await assert.rejects(reconcileUncertainCalls(r.owner, [late(reconcileTimeoutMs)], history), { name: 'InvalidInputError', field: 'tools[0].reconcileTimeoutMs' });
      assert.throws(() => createToolRuntime({ tools: [late(reconcileTimeoutMs)], grants: {} }), { name: 'ToolConfigError', message: /reconcileTimeoutMs must be a positive integer/ });
    }
    const written = (await r.store.loadHistory(r.sessionId)).length;
    for (const timeoutMs of [0, -1, 1.5, Number.NaN, 2 ** 31]) {
      await assert.rejects(reconcileUncertainCalls(r.owner, [], history, { timeoutMs }), { name: 'InvalidInputError', field: 'timeoutMs' });
    }
    assert.equal((await r.store.loadHistory(r.sessionId)).length, written, 'a refused deadline writes nothing');
    await r.store.close();
  });

  it('the store closing (a shutdown) or the owner releasing stops a pass waiting on a reconciler, whatever its deadline', async () => {
    for (const end of ['close', 'release'] as const) {
      let heard: AbortSignal | null = null;
      let asked!: () => void;
      const asking = new Promise<void>((resolve) => { asked = resolve; });
      const slow: Tool = {
        ...tool('slow_lookup', async () => { throw new ToolBodyError('reset', 'lost'); }, new ToolMetadata('slow', { type: 'object' }).withEffect('non_idempotent', 'v1')),
        // A batch lookup given minutes, which ignores its signal.
        reconcile: (_request, signal) => { heard = signal; asked(); return new Promise<never>(() => undefined); },
        reconcileTimeoutMs: 600_000,
      };
      const r = await rig(target, { tools: [slow] });
      await r.gateway.call('slow_lookup', {});
      const pass = reconcileUncertainCalls(r.owner, [slow], await r.store.loadHistory(r.sessionId));
      await asking;
      if (end === 'close') await r.store.close();
      else await r.owner.release();
      assert.equal(heard!.aborted, true, `${end}: the reconciler's signal is aborted before ${end} returns`);
      assert.match(String(heard!.reason), /the reconcile pass was stopped/);
      const report = await pass;
      assert.equal(report.calls[0]?.action, 'failed');
      assert.match(report.calls[0]?.error ?? '', /the reconcile pass was stopped/);
      if (end === 'release') await r.store.close();
    }
  });

  it("a person's not_executed review of a write that happened: the reconciler's completed answer overrides it, and nothing is retried", async () => {
    const helper = await helperFor(target);
    const bodies = { count: 0 };
    const tools = [placeOrder(helper, bodies)];
    const r = await rig(target, { tools });
    const wrote = await r.gateway.call('place_order', { item: 'book', fail: 'after' });
    const lost = await r.gateway.call('place_order', { item: 'pen', fail: 'before' });
    for (const call of [wrote, lost]) {
      await recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), call.call.id,
        { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'not in the bank view yet', source: 'human' });
    }
    const report = await reconcileUncertainCalls(r.owner, tools, await r.store.loadHistory(r.sessionId));
    const byCall = new Map(report.calls.map((c) => [c.callId as string, c]));
    assert.equal(byCall.get(wrote.call.id)?.action, 'recorded');
    assert.equal(byCall.get(wrote.call.id)?.review?.outcome, 'completed');
    assert.equal(byCall.get(lost.call.id)?.action, 'unchanged', 'an answer that agrees writes nothing');
    assert.equal(byCall.get(lost.call.id)?.answer, 'not_executed');
    const now = await r.store.loadHistory(r.sessionId);
    assert.deepEqual(now, report.history);
    assert.equal(inspectToolRecovery(now, wrote.call.id).resolved, true);
    assert.throws(() => prepareToolRetry(now, wrote.call.id), { code: 'completed' });
    assert.equal(prepareToolRetry(now, lost.call.id).review?.actor, 'ops@example.com');
    assert.equal(await helper.rows(), 1, 'the order written once, and not again');
    await helper.close();
    await r.store.close();
  });

  it("a person's not_executed review its reconciler cannot check is marked uncertain in the journal: no plan from it, and the call is back in the queue", async () => {
    let answer: 'throw' | 'not_executed' = 'throw';
    const checked: Tool = {
      ...tool('wire', async () => { throw new ToolBodyError('reset', 'lost after the write'); }, new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1')),
      reconcile: () => {
        if (answer === 'throw') throw new Error('the bank is down');
        return { outcome: 'not_executed', evidence: 'no transfer in the ledger' };
      },
    };
    const r = await rig(target, { tools: [checked] });
    const call = await r.gateway.call('wire', {});
    await recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), call.call.id,
      { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'not in the bank view yet', source: 'human' });
    const listed = async () => (await r.store.attention({ sessionId: r.sessionId })).items.map((i) => i.callId);
    const statuses = async () => (await r.store.attention({ sessionId: r.sessionId })).items.map((i) => [i.status, i.inDoubt]);
    assert.deepEqual(await statuses(), [['reviewed_not_executed', false]], 'the review settled the doubt; the write is still due');
    const report = await reconcileUncertainCalls(r.owner, [checked], await r.store.loadHistory(r.sessionId));
    assert.equal(report.calls[0]?.action, 'failed');
    assert.equal(report.calls[0]?.review?.outcome, 'uncertain');
    assert.equal(report.calls[0]?.review?.actor, 'reconciler:wire@v1');
    assert.match(report.calls[0]?.review?.evidence ?? '', /could not check the not_executed review by ops@example\.com: the bank is down/);
    assert.throws(() => prepareToolRetry(report.history, call.call.id), { name: 'ToolRetryError' }, 'the review no longer gives a plan');
    assert.deepEqual(report.needsReview, [call.call.id]);
    assert.deepEqual(await listed(), [call.call.id]);
    assert.deepEqual(await statuses(), [['outcome_unknown', true]], 'back in the queue, in doubt');
    const again = await reconcileUncertainCalls(r.owner, [checked], await r.store.loadHistory(r.sessionId));
    assert.equal(again.calls[0]?.review, null, 'failing again over its own uncertain review writes nothing more');
    answer = 'not_executed';
    const answered = await reconcileUncertainCalls(r.owner, [checked], await r.store.loadHistory(r.sessionId));
    assert.equal(answered.calls[0]?.action, 'recorded');
    assert.equal(prepareToolRetry(answered.history, call.call.id).review?.actor, 'reconciler:wire@v1', 'its own answer unlocks the retry');
    await r.store.close();
  });

  it("a reconciler's throw is described by the host's describePanic, for the journal and the report", async () => {
    const secret = 'GET https://bank/api?token=SECRET-TOKEN 500';
    const checked: Tool = {
      ...tool('wire', async () => { throw new ToolBodyError('reset', 'lost after the write'); }, new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1')),
      reconcile: () => { throw new Error(secret); },
    };
    const describePanic = (error: unknown) => String((error as Error).message).replace(/token=\S+/, 'token=[redacted]');
    const r = await rig(target, { tools: [checked], describePanic });
    const call = await r.gateway.call('wire', {});
    await recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), call.call.id,
      { actor: 'ops@example.com', outcome: 'not_executed', evidence: 'not in the bank view yet', source: 'human' });
    // The runtime's hook, as recoverAbandoned and a run's pass take it (none when the host gave none).
    assert.equal(hostPanicDescriber(createToolRuntime({ tools: [checked], grants: { agent: '*' }, describePanic })), describePanic);
    assert.equal(hostPanicDescriber(createToolRuntime({ tools: [checked], grants: { agent: '*' } })), undefined);
    assert.equal(gatewayPanicDescriber(r.gateway), describePanic);
    const report = await reconcileUncertainCalls(r.owner, [checked], await r.store.loadHistory(r.sessionId), { describePanic });
    assert.equal(report.calls[0]?.action, 'failed');
    assert.ok(!JSON.stringify(report.calls).includes('SECRET-TOKEN'), 'the report holds the described text');
    assert.match(report.calls[0]?.review?.evidence ?? '', /could not check the not_executed review by ops@example\.com: GET https:\/\/bank\/api\?token=\[redacted\] 500/);
    assert.ok(!JSON.stringify(await r.store.loadHistory(r.sessionId)).includes('SECRET-TOKEN'));
    await r.store.close();
  });

  it("a person's new not_executed review, recorded after the reconciler could not check one, is their decision: a reconciler that fails again leaves it, a completed answer still overrides it", async () => {
    let answer: 'throw' | 'completed' = 'throw';
    const checked: Tool = {
      ...tool('wire', async () => { throw new ToolBodyError('reset', 'lost after the write'); }, new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1')),
      reconcile: () => {
        if (answer === 'throw') throw new Error('the bank is down');
        return { outcome: 'completed', evidence: 'transfer tx_1 in the ledger' };
      },
    };
    const r = await rig(target, { tools: [checked] });
    const call = await r.gateway.call('wire', {});
    const review = async (evidence: string) => recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), call.call.id,
      { actor: 'ops@example.com', outcome: 'not_executed', evidence, source: 'human' });
    await review('not in the bank view yet');
    const marked = await reconcileUncertainCalls(r.owner, [checked], await r.store.loadHistory(r.sessionId));
    assert.equal(marked.calls[0]?.review?.outcome, 'uncertain', 'the first review is marked unchecked');
    await review('called the bank: no transfer under this reference');
    const decided = await reconcileUncertainCalls(r.owner, [checked], await r.store.loadHistory(r.sessionId));
    assert.equal(decided.calls[0]?.action, 'failed');
    assert.equal(decided.calls[0]?.review, null, 'nothing written over the decision');
    assert.equal(prepareToolRetry(decided.history, call.call.id).review?.evidence, 'called the bank: no transfer under this reference');
    answer = 'completed';
    const overridden = await reconcileUncertainCalls(r.owner, [checked], await r.store.loadHistory(r.sessionId));
    assert.equal(overridden.calls[0]?.review?.outcome, 'completed');
    assert.throws(() => prepareToolRetry(overridden.history, call.call.id), { name: 'ToolRetryError', code: 'completed' });
    await r.store.close();
  });

  it('asks the reconcilers of many calls at once, at most the bound at a time, and journals their answers in journal order', async () => {
    let inFlight = 0;
    let most = 0;
    const calls = LIMITS.maxConcurrentReconcilerAsks + 4;
    const flaky: Tool = {
      ...tool('flaky', async () => { throw new ToolBodyError('reset', 'lost'); }, new ToolMetadata('flaky', { type: 'object' }).withEffect('non_idempotent', 'v1')),
      // Later calls answer first, so answers arrive out of journal order.
      reconcile: async (request) => {
        const n = (request.arguments as { n: number }).n;
        inFlight += 1;
        most = Math.max(most, inFlight);
        await new Promise((resolve) => setTimeout(resolve, (calls - n) * 3));
        inFlight -= 1;
        return { outcome: n % 2 === 0 ? 'completed' : 'not_executed', evidence: `order ${n}` };
      },
    };
    const r = await rig(target, { tools: [flaky] });
    const ids: string[] = [];
    for (let n = 0; n < calls; n += 1) ids.push((await r.gateway.call('flaky', { n })).call.id);
    const report = await reconcileUncertainCalls(r.owner, [flaky], await r.store.loadHistory(r.sessionId));
    assert.equal(most, LIMITS.maxConcurrentReconcilerAsks, 'asked at once, up to the bound');
    assert.deepEqual(report.calls.map((c) => c.callId), ids);
    assert.ok(report.calls.every((c) => c.action === 'recorded'));
    const reviews = (await r.store.loadHistory(r.sessionId)).flatMap((e) => (e.kind.type === 'tool_review' ? [e.kind.review] : []));
    assert.deepEqual(reviews.map((v) => [v.callId, v.outcome, v.evidence]),
      ids.map((id, n) => [id, n % 2 === 0 ? 'completed' : 'not_executed', `order ${n}`]), 'each answer under its own call, in journal order');
    await r.store.close();
  });

  it('a reconciler that hands back one answer object and changes it for the next call: each call keeps the answer given about it', async () => {
    const shared = { outcome: 'unknown' as ToolReconcileAnswer['outcome'], evidence: '' };
    const flaky: Tool = {
      ...tool('flaky', async () => { throw new ToolBodyError('reset', 'lost'); }, new ToolMetadata('flaky', { type: 'object' }).withEffect('non_idempotent', 'v1')),
      // The first call's answer comes last: by then the object says what was answered about the second.
      reconcile: async (request) => {
        const n = (request.arguments as { n: number }).n;
        await new Promise((resolve) => setTimeout(resolve, n === 0 ? 20 : 0));
        shared.outcome = n === 0 ? 'completed' : 'not_executed';
        shared.evidence = `order ${n}`;
        return shared;
      },
    };
    const r = await rig(target, { tools: [flaky] });
    const first = (await r.gateway.call('flaky', { n: 0 })).call.id;
    const second = (await r.gateway.call('flaky', { n: 1 })).call.id;
    const report = await reconcileUncertainCalls(r.owner, [flaky], await r.store.loadHistory(r.sessionId));
    assert.deepEqual(report.calls.map((c) => [c.callId, c.answer, c.review?.evidence]), [[first, 'completed', 'order 0'], [second, 'not_executed', 'order 1']]);
    await r.store.close();
  });

  it('a reconciler that throws what has no text, answers through getters that change, or answers text nobody sees fails alone: the other calls\' answers are journaled (r97)', async () => {
    let n = 0;
    const odd: Record<number, () => unknown> = {
      0: () => { throw Object.create(null); },
      1: () => { throw new Error('down\u0000\ud800'); },
      2: () => ({ get outcome() { n += 1; return n === 1 ? 'completed' : 'bogus'; }, evidence: 'looked it up' }),
      3: () => { let reads = 0; return { outcome: 'not_executed', get evidence() { reads += 1; return reads <= 1 ? 'ok' : 42; } }; },
      4: () => ({ outcome: 'not_executed', evidence: '\u200b' }),
      5: () => ({ outcome: 'completed', evidence: 'paid', output: { amount: 10n } }),
      6: () => ({ outcome: 'completed', evidence: 'paid', output: { when: new Date(0) } }),
      7: () => ({ outcome: 10n, evidence: 'x' }),
      8: () => ({ outcome: 'completed', evidence: 'refund 8 is in the ledger', output: { refund: 8 } }),
      9: () => { let reads = 0; return { outcome: 'completed', evidence: 'receipt kept', output: { get receipt() { reads += 1; return reads === 1 ? 'r-1' : 10n; } } }; },
    };
    const flaky: Tool = {
      ...tool('flaky', async () => { throw new ToolBodyError('reset', 'lost'); }, new ToolMetadata('flaky', { type: 'object' }).withEffect('non_idempotent', 'v1')),
      reconcile: async (request) => odd[(request.arguments as { n: number }).n]!() as ToolReconcileAnswer,
    };
    const r = await rig(target, { tools: [flaky] });
    const ids: string[] = [];
    for (let i = 0; i <= 9; i += 1) ids.push((await r.gateway.call('flaky', { n: i })).call.id);
    const report = await reconcileUncertainCalls(r.owner, [flaky], await r.store.loadHistory(r.sessionId));
    assert.deepEqual(report.calls.map((c) => c.action), ['failed', 'failed', 'recorded', 'recorded', 'failed', 'failed', 'failed', 'failed', 'recorded', 'recorded']);
    assert.match(report.calls[0]!.error!, /cannot be described/);
    assert.equal(report.calls[1]!.error, 'down\ufffd\ufffd');
    assert.deepEqual([report.calls[2]!.answer, report.calls[2]!.review?.outcome, n], ['completed', 'completed', 1], 'the outcome read once, as checked');
    assert.deepEqual([report.calls[3]!.answer, report.calls[3]!.review?.evidence], ['not_executed', 'ok'], 'the evidence read once, as checked');
    assert.match(report.calls[4]!.error!, /no evidence text/);
    assert.match(report.calls[5]!.error!, /output that is not JSON data/);
    assert.match(report.calls[6]!.error!, /output that is not JSON data/);
    assert.match(report.calls[7]!.error!, /outcome a bigint \(10\)/);
    assert.deepEqual([report.calls[8]!.review?.outcome, report.calls[8]!.output], ['completed', { refund: 8 }]);
    assert.deepEqual(report.calls[9]!.output, { receipt: 'r-1' }, 'the output read once, as checked (r98 #3)');
    const assessed = assessSession(report.history).calls;
    assert.equal(assessed.find((c) => c.callId === ids[8])?.nextStep, 'completed', 'the write that happened is settled');
    assert.equal(assessed.find((c) => c.callId === ids[4])?.nextStep, 'needs_review', 'text nobody sees unblocks nothing');
    await r.store.close();
  });

  it('a journal write that fails mid-pass (the owner fenced) ends the pass: no lookup still queued starts, and those under way are told to stop', async () => {
    let started = 0;
    let stopped = 0;
    let fence = (): Promise<unknown> => Promise.resolve();
    const flaky: Tool = {
      ...tool('flaky', async () => { throw new ToolBodyError('reset', 'lost'); }, new ToolMetadata('flaky', { type: 'object' }).withEffect('non_idempotent', 'v1')),
      reconcile: async (request, signal) => {
        started += 1;
        if ((request.arguments as { n: number }).n === 0) {
          await fence();
          return { outcome: 'completed', evidence: 'seen' };
        }
        return new Promise<never>((_resolve, reject) => signal.addEventListener('abort', () => { stopped += 1; reject(signal.reason); }));
      },
    };
    const r = await rig(target, { tools: [flaky] });
    const calls = LIMITS.maxConcurrentReconcilerAsks + 4;
    for (let n = 0; n < calls; n += 1) await r.gateway.call('flaky', { n });
    fence = () => r.store.acquire(r.sessionId, { owner: 'another host', takeover: true });
    await assert.rejects(reconcileUncertainCalls(r.owner, [flaky], await r.store.loadHistory(r.sessionId), { timeoutMs: 200 }), { name: 'StaleOwnerError' });
    await new Promise((resolve) => setTimeout(resolve, 400));
    // The first answer freed a turn, taken by the next lookup before the write failed; the last three never start.
    assert.equal(started, LIMITS.maxConcurrentReconcilerAsks + 1, 'the queued lookups never started');
    assert.equal(stopped, LIMITS.maxConcurrentReconcilerAsks, 'the ones under way were told to stop');
    await r.store.close();
  });

  it("a run's pass that reads the journal again (another writer moved it) skips a call that writer settled meanwhile, instead of failing on it", async () => {
    const holder: { settle?: () => Promise<unknown> } = {};
    const flaky: Tool = {
      ...tool('flaky', async () => { throw new ToolBodyError('reset', 'lost'); }, new ToolMetadata('flaky', { type: 'object' }).withEffect('non_idempotent', 'v1')),
      reconcile: async (request) => {
        if ((request.arguments as { n: number }).n === 0) await holder.settle!();
        return { outcome: 'completed', evidence: `order ${(request.arguments as { n: number }).n}` };
      },
    };
    const r = await rig(target, { tools: [flaky] });
    const first = (await r.gateway.call('flaky', { n: 0 })).call.id;
    const second = (await r.gateway.call('flaky', { n: 1 })).call.id;
    const read = await r.store.loadHistory(r.sessionId);
    // Another run's pass settles the second call while this pass asks about the first.
    holder.settle = async () => recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), second, { actor: 'reconciler:flaky@v1', outcome: 'completed', evidence: 'order 1', source: 'reconciler' });
    const report = await reconcileCalls(r.owner, [flaky], read, { reload: () => r.store.loadHistory(r.sessionId) });
    assert.deepEqual(report.calls.map((c) => [c.callId, c.action]), [[first, 'recorded'], [second, 'unchanged']]);
    const reviews = (await r.store.loadHistory(r.sessionId)).flatMap((e) => (e.kind.type === 'tool_review' ? [e.kind.review.callId] : []));
    assert.deepEqual(reviews, [second, first], 'each settled once');
    await r.store.close();
  });

  it("a retry of a call whose reconciler a pass here is asking is refused, plan untaken, and the answer journaled; a pass does not ask about a call a retry here supersedes", async () => {
    const held = heldWire();
    const { r, callId } = await misreviewed(target, held.wire);
    const pass = reconcileCalls(r.owner, [held.wire], await r.store.loadHistory(r.sessionId), { reload: () => r.store.loadHistory(r.sessionId) });
    await held.asked;
    const plan = prepareToolRetry(await r.store.loadHistory(r.sessionId), callId);
    await assert.rejects(r.gateway.callWithOptions('wire', {}, { retry: plan }), { name: 'ToolRetryError', code: 'being_reconciled' });
    held.answer();
    const report = await pass;
    assert.deepEqual(report.calls.map((c) => c.action), ['recorded']);
    assert.deepEqual(held.writes, ['first'], 'the retry made no second write');
    assert.equal(inspectToolRecovery(report.history, callId).review?.outcome, 'completed', "the reconciler's answer is journaled");
    // The plan was not taken by the refusal, and is refused now for the review journaled since its history was read:
    // the store's row of the source says "settled" before and after.
    await assert.rejects(r.gateway.callWithOptions('wire', {}, { retry: plan }), { name: 'StoreConflictError', code: 'history_changed' });
    assert.deepEqual(held.writes, ['first']);

    // The other way round: a retry under way here when a pass begins; the pass does not ask about the call it supersedes.
    const second = (await r.gateway.call('wire', { n: 2 })).call.id;
    await recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), second, { actor: 'ops', outcome: 'not_executed', evidence: 'checked the bank: nothing' });
    const read = await r.store.loadHistory(r.sessionId);
    const retry = r.gateway.callWithOptions('wire', { n: 2 }, { retry: prepareToolRetry(read, second) });
    await held.retrying;
    const during = await reconcileCalls(r.owner, [held.wire], read, { reload: () => r.store.loadHistory(r.sessionId) });
    assert.deepEqual(during.calls.map((c) => [c.callId, c.action]), [[second, 'body_running']]);
    assert.equal(held.asks(), 1, 'not asked');
    held.finishRetry();
    assert.equal((await retry).result.outcome.status, 'succeeded');
    await r.store.close();
  });

  it("an answer that comes after another owner here took the session over is written through that owner: the retry it refused while asking stays refused", async () => {
    const held = heldWire();
    const { r, callId } = await misreviewed(target, held.wire);
    const pass = reconcileCalls(r.owner, [held.wire], await r.store.loadHistory(r.sessionId), { reload: () => r.store.loadHistory(r.sessionId) });
    await held.asked;
    const successor = await r.store.acquire(r.sessionId, { owner: 'another host here', takeover: true });
    const gateway = createToolRuntime({ tools: [held.wire], grants: { agent: '*' } }).bind({ owner: successor, taskId: r.taskId, caller: 'agent' });
    const plan = prepareToolRetry(await r.store.loadHistory(r.sessionId), callId);
    await assert.rejects(gateway.callWithOptions('wire', {}, { retry: plan }), { name: 'ToolRetryError', code: 'being_reconciled' });
    held.answer();
    assert.deepEqual((await pass).calls.map((c) => c.action), ['recorded']);
    const now = await r.store.loadHistory(r.sessionId);
    assert.equal(inspectToolRecovery(now, callId).review?.outcome, 'completed');
    assert.throws(() => prepareToolRetry(now, callId), { name: 'ToolRetryError', code: 'completed' });
    assert.deepEqual(held.writes, ['first'], 'written once');
    await r.store.close();
  });

  it("an answer no owner here can journal any more (the session taken over here and let go) is kept: a retry of the call here is refused, the write having happened", async () => {
    const { held, r, callId } = await keptAnswer(target);
    const next = await r.store.acquire(r.sessionId, { owner: 'the host again' });
    const gateway = createToolRuntime({ tools: [held.wire], grants: { agent: '*' } }).bind({ owner: next, taskId: r.taskId, caller: 'agent' });
    const plan = prepareToolRetry(await r.store.loadHistory(r.sessionId), callId);
    await assert.rejects(gateway.callWithOptions('wire', {}, { retry: plan }), { name: 'ToolRetryError', code: 'completed', message: /answered in this process that call .* completed/ });
    assert.deepEqual(held.writes, ['first'], 'written once');
    // Another person's not_executed, who never saw the answer, does not set it aside.
    await recordToolReview(next, await r.store.loadHistory(r.sessionId), callId, { actor: 'ops-2', outcome: 'not_executed', evidence: 'nothing in the bank view' });
    const again = prepareToolRetry(await r.store.loadHistory(r.sessionId), callId);
    await assert.rejects(gateway.callWithOptions('wire', {}, { retry: again }), { name: 'ToolRetryError', code: 'completed' });
    assert.deepEqual(held.writes, ['first']);
    // Once that answer is journaled (a person records it, or a later pass), the journal itself refuses the retry.
    await recordToolReview(next, await r.store.loadHistory(r.sessionId), callId, { actor: 'ops', outcome: 'completed', evidence: 'the reconciler said so' });
    const now = await r.store.loadHistory(r.sessionId);
    assert.throws(() => prepareToolRetry(now, callId), { name: 'ToolRetryError', code: 'completed' });
    await r.store.close();
  });

  it("a completed answer kept here is journaled by the next pass of an owner here, without asking the reconciler again: the call is settled", async () => {
    const { held, r, callId } = await keptAnswer(target);
    // The startup routine's owner (or a resumed run's) asks about the call again: the answer this process has is used.
    const next = await r.store.acquire(r.sessionId, { owner: 'the routine' });
    const report = await reconcileUncertainCalls(next, [held.wire], await r.store.loadHistory(r.sessionId));
    assert.deepEqual(report.calls.map((c) => [c.callId, c.action, c.answer]), [[callId, 'recorded', 'completed']]);
    assert.equal(held.asks(), 1, 'the reconciler was not asked again');
    assert.throws(() => prepareToolRetry(report.history, callId), { name: 'ToolRetryError', code: 'completed' });
    assert.deepEqual(held.writes, ['first'], 'written once');
    await r.store.close();
  });

  it("reconcileUncertainCalls, fenced by another owner here that keeps the session, keeps a completed answer it cannot write: that owner's retry is refused", async () => {
    const held = heldWire();
    const { r, callId } = await misreviewed(target, held.wire);
    const pass = reconcileUncertainCalls(r.owner, [held.wire], await r.store.loadHistory(r.sessionId));
    await held.asked;
    const successor = await r.store.acquire(r.sessionId, { owner: 'another host here', takeover: true });
    held.answer();
    await assert.rejects(pass, { name: 'StaleOwnerError' });
    const gateway = createToolRuntime({ tools: [held.wire], grants: { agent: '*' } }).bind({ owner: successor, taskId: r.taskId, caller: 'agent' });
    await assert.rejects(gateway.callWithOptions('wire', {}, { retry: prepareToolRetry(await r.store.loadHistory(r.sessionId), callId) }), { name: 'ToolRetryError', code: 'completed' });
    assert.deepEqual(held.writes, ['first'], 'written once');
    await r.store.close();
  });

  it("a reconciler's completed answer about an attempt a retry superseded before the pass asked is reported, not dropped as unchanged", async () => {
    const wire: Tool = {
      ...tool('wire', async (request) => {
        if (request.operation.retry === null) throw new Error('lost after the write');
        return 'sent';
      }, new ToolMetadata('wire', { type: 'object' }).withEffect('non_idempotent', 'v1')),
      reconcile: async () => ({ outcome: 'completed', evidence: 'the ledger shows it' }),
    };
    const r = await rig(target, { tools: [wire] });
    const callId = (await r.gateway.call('wire', {})).call.id;
    await recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), callId, { actor: 'ops', outcome: 'not_executed', evidence: 'nothing in the bank view' });
    // The pass read the journal before the retry was made and recorded.
    const read = await r.store.loadHistory(r.sessionId);
    await r.gateway.callWithOptions('wire', {}, { retry: prepareToolRetry(read, callId) });
    const report = await reconcileCalls(r.owner, [wire], read, { reload: () => r.store.loadHistory(r.sessionId) });
    assert.deepEqual(report.calls.map((c) => [c.callId, c.action, c.answer]), [[callId, 'failed', 'completed']]);
    assert.match(report.calls[0]?.error ?? '', /may have been made twice/);
    await r.store.close();
  });

  it("a person's review under the reconciler's actor name is not taken for the reconciler's own answer", async () => {
    const unsure: Tool = {
      ...tool('flaky', async () => { throw new ToolBodyError('reset', 'lost'); }, new ToolMetadata('flaky', { type: 'object' }).withEffect('non_idempotent', 'v1')),
      reconcile: () => ({ outcome: 'unknown', evidence: 'the vendor does not say' }),
    };
    const r = await rig(target, { tools: [unsure] });
    const call = await r.gateway.call('flaky', {});
    await recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), call.call.id,
      { actor: 'reconciler:flaky@v1', outcome: 'uncertain', evidence: 'typed by a person', source: 'human' });
    const report = await reconcileUncertainCalls(r.owner, [unsure], await r.store.loadHistory(r.sessionId));
    assert.equal(report.calls[0]?.action, 'recorded', 'the reconciler records its own answer');
    assert.equal(report.calls[0]?.review?.source, 'reconciler');
    const again = await reconcileUncertainCalls(r.owner, [unsure], await r.store.loadHistory(r.sessionId));
    assert.equal(again.calls[0]?.action, 'unchanged', 'and only its own answer stays unchanged');
    await r.store.close();
  });
});

/**
 * A non-idempotent transfer whose first attempt fails after its write, and whose reconciler, once asked, waits for
 * `answer()` and then says the write happened (`completed`). A retry's body, once running (`retrying`), waits for
 * `finishRetry()`.
 */
function heldWire() {
  const writes: string[] = [];
  let asks = 0;
  let answer: () => void = () => {};
  let asked: () => void = () => {};
  let started: () => void = () => {};
  let finish: () => void = () => {};
  const askedOnce = new Promise<void>((resolve) => { asked = resolve; });
  const answered = new Promise<void>((resolve) => { answer = resolve; });
  const retrying = new Promise<void>((resolve) => { started = resolve; });
  const finished = new Promise<void>((resolve) => { finish = resolve; });
  const wire: Tool = {
    ...tool('wire', async (request) => {
      writes.push(request.operation.retry === null ? 'first' : 'retry');
      if (request.operation.retry === null) throw new Error('lost after the write');
      started();
      await finished;
      return 'sent';
    }, new ToolMetadata('wire', { type: 'object' }).withEffect('non_idempotent', 'v1')),
    reconcile: async () => {
      asks += 1;
      asked();
      await answered;
      return { outcome: 'completed', evidence: 'the ledger shows it' };
    },
  };
  return { wire, writes, asked: askedOnce, answer: () => answer(), asks: () => asks, retrying, finishRetry: () => finish() };
}

/**
 * misreviewed, with the reconciler's completed answer kept by this process: the session was taken over here and let
 * go while the pass asked, so no owner here could journal it.
 */
async function keptAnswer(target: StoreTarget) {
  const held = heldWire();
  const { r, callId } = await misreviewed(target, held.wire);
  const pass = reconcileCalls(r.owner, [held.wire], await r.store.loadHistory(r.sessionId), { reload: () => r.store.loadHistory(r.sessionId) });
  await held.asked;
  await (await r.store.acquire(r.sessionId, { owner: 'another host here', takeover: true })).release();
  held.answer();
  await assert.rejects(pass, { name: 'StaleOwnerError' });
  return { held, r, callId };
}

/** A rig whose first call of `wire` is in doubt, with a person's wrong `not_executed` review of it journaled. */
async function misreviewed(target: StoreTarget, wire: Tool) {
  const r = await rig(target, { tools: [wire] });
  const callId = (await r.gateway.call('wire', {})).call.id;
  await recordToolReview(r.owner, await r.store.loadHistory(r.sessionId), callId, { actor: 'ops', outcome: 'not_executed', evidence: 'nothing in the bank view' });
  return { r, callId };
}
