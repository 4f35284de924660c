/**
 * Plans are checked against the journal at use, including what became of their source. A host read a session while
 * another host's call waited for approval (no start marker: `not_executed`, a free retry); the call was then
 * approved and succeeded; the first host took the session over and retried from the history it had read. The
 * latest-attempt check passed (the source was still the latest attempt), so the card was charged twice. The commit
 * now also checks the source's row in the attention index against the plan's history: a source that started or got a
 * result or review since is `history_changed`, nothing written, nothing run.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateKeyPairSync } from 'node:crypto';
import { createMemoryStore } from '../../src/store/memory.js';
import type { SessionOwner, SessionStore } from '../../src/store/types.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/recovery.js';
import { recordToolReview } from '../../src/tool/review.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { sleep, tool } from '../support/runtime.js';
import { forEachStore, type StoreTarget } from '../support/stores.js';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const reviewHost = fileURLToPath(new URL('./children/review-host.js', import.meta.url));

function scenario(open: () => Promise<{ a: SessionStore; b: SessionStore }>): void {
  it('a plan made before the source was approved and succeeded is refused at use; the card is charged once', async () => {
    const { a, b } = await open();
    let charges = 0;
    let approve = () => {};
    // Approved only once the approver is asked: the call may be journaled before it is, and an approval given
    // earlier would reach no one, leaving the call to wait for its approver until it gives up.
    let markAsked = () => {};
    const asked = new Promise<void>((resolve) => { markAsked = resolve; });
    const charge = tool('charge', async () => { charges += 1; return 'charged'; },
      new ToolMetadata('charges a card', { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('boss'));
    const host = (approver: () => Promise<{ decision: 'approved' }>) => createToolRuntime({ tools: [charge], grants: { agent: '*' }, approvers: { boss: approver } });
    const owner = await a.acquire('s', { owner: 'host-a' });
    await owner.startTask('t');
    const first = host(() => new Promise((resolve) => { approve = () => resolve({ decision: 'approved' }); markAsked(); }))
      .bind({ owner, taskId: 't', caller: 'agent' }).call('charge', { cents: 500 });
    let early = await b.loadHistory('s');
    while (!early.some((e) => e.kind.type === 'tool_call')) {
      await sleep(10);
      early = await b.loadHistory('s');
    }
    const sourceEvent = early.find((e) => e.kind.type === 'tool_call')!;
    const sourceId = sourceEvent.kind.type === 'tool_call' ? sourceEvent.kind.call.id : '';
    // Read while approval is pending: no marker, so the plan needs no review.
    const stale = prepareToolRetry(early, sourceId);
    await asked;
    approve();
    assert.equal((await first).result.outcome.status, 'succeeded');
    assert.equal(charges, 1);
    const successor = await b.acquire('s', { owner: 'host-b', takeover: true });
    const gateway = host(async () => ({ decision: 'approved' })).bind({ owner: successor, taskId: 't', caller: 'agent' });
    const before = (await b.loadHistory('s')).length;
    await assert.rejects(gateway.callWithOptions('charge', { cents: 500 }, { retry: stale }), { name: 'StoreConflictError', code: 'history_changed', message: /moved on/ });
    assert.equal(charges, 1, 'charged once');
    assert.equal((await b.loadHistory('s')).length, before, 'nothing written');
    // Prepared again from the journal as it is now, the plan is refused for what it is: a completed call.
    const now = await b.loadHistory('s');
    assert.throws(() => prepareToolRetry(now, sourceId), { name: 'ToolRetryError', code: 'completed' });
    await a.close();
    if (b !== a) await b.close();
  });
}

describe('a stale plan on memory', () => scenario(async () => {
  const store = createMemoryStore();
  return { a: store, b: store };
}));
forEachStore('a stale plan', (target) => scenario(async () => {
  const location = target.fresh();
  return { a: await location.open(), b: await location.open() };
}));

forEachStore('a plan made before a completed review', (target) => {
  it("a plan made on a person's not_executed review is refused once a completed review is journaled here, though the source's row says settled before and after", async () => {
    const store = await target.fresh().open();
    const { owner, gateway, callId, writes } = await reviewedNotExecuted(store, await store.acquire('s', { owner: 'host' }));
    const plan = prepareToolRetry(await store.loadHistory('s'), callId);
    // The ledger says otherwise, and a colleague records it (or the reconciler answers it) before the plan is used.
    await recordToolReview(owner, await store.loadHistory('s'), callId, { actor: 'ops-2', outcome: 'completed', evidence: 'the ledger shows the transfer' });
    const before = (await store.loadHistory('s')).length;
    await assert.rejects(gateway.callWithOptions('wire', {}, { retry: plan }), { name: 'StoreConflictError', code: 'history_changed', message: /was journaled in this process/ });
    assert.equal(writes(), 1, 'written once');
    assert.equal((await store.loadHistory('s')).length, before, 'nothing written');
    const now = await store.loadHistory('s');
    assert.throws(() => prepareToolRetry(now, callId), { name: 'ToolRetryError', code: 'completed' });
    await store.close();
  });

  it('a plan is refused from the moment a review of its source is being journaled, before the commit returns (an anchor sink still writing)', async () => {
    const store = await target.fresh().open();
    let sinking: () => void = () => {};
    let hold = false;
    const sunk = new Promise<void>((resolve) => { sinking = resolve; });
    let release: () => void = () => {};
    const sink = async () => {
      if (!hold) return;
      sinking();
      await new Promise<void>((resolve) => { release = resolve; });
    };
    const anchored = await store.acquire('s', { owner: 'host', anchor: { privateKey: generateKeyPairSync('ed25519').privateKey, sink } });
    const { owner, gateway, callId, writes } = await reviewedNotExecuted(store, anchored);
    const plan = prepareToolRetry(await store.loadHistory('s'), callId);
    hold = true;
    const review = recordToolReview(owner, await store.loadHistory('s'), callId, { actor: 'ops-2', outcome: 'completed', evidence: 'the ledger shows the transfer' });
    await sunk;
    await assert.rejects(gateway.callWithOptions('wire', {}, { retry: plan }), { name: 'StoreConflictError', code: 'history_changed', message: /is being journaled/ });
    hold = false;
    release();
    await review;
    assert.equal(writes(), 1, 'written once');
    await store.close();
  });

  it("an older review's commit that returns after a newer one's does not take the count back", async () => {
    const store = await target.fresh().open();
    let holdNext = false;
    let held: () => void = () => {};
    let sinking: () => void = () => {};
    const sunk = new Promise<void>((resolve) => { sinking = resolve; });
    const sink = async () => {
      if (!holdNext) return;
      holdNext = false;
      sinking();
      await new Promise<void>((resolve) => { held = resolve; });
    };
    const anchored = await store.acquire('s', { owner: 'host', anchor: { privateKey: generateKeyPairSync('ed25519').privateKey, sink } });
    const { owner, gateway, callId, writes } = await reviewedNotExecuted(store, anchored);
    // A colleague's not_executed, whose commit's anchor is slow to write; a plan made on it.
    holdNext = true;
    const slow = recordToolReview(owner, await store.loadHistory('s'), callId, { actor: 'ops-2', outcome: 'not_executed', evidence: 'nothing in the bank view either' });
    await sunk;
    const plan = prepareToolRetry(await store.loadHistory('s'), callId);
    // The reconciler's completed answer, whose commit returns first; then the colleague's.
    await recordToolReview(owner, await store.loadHistory('s'), callId, { actor: 'reconciler:wire@v1', outcome: 'completed', evidence: 'the ledger shows it', source: 'reconciler' });
    held();
    await slow;
    await assert.rejects(gateway.callWithOptions('wire', {}, { retry: plan }), { name: 'StoreConflictError', code: 'history_changed' });
    assert.equal(writes(), 1, 'written once');
    await store.close();
  });
});

/**
 * On `owner`'s session `s`: a non-idempotent transfer whose first attempt failed after its write, and a person's
 * wrong `not_executed` review of it journaled.
 */
async function reviewedNotExecuted(store: SessionStore, owner: SessionOwner) {
  let writes = 0;
  const wire = tool('wire', async () => {
    writes += 1;
    if (writes === 1) throw new Error('lost after the write');
    return 'sent';
  }, new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1'));
  await owner.startTask('t');
  const gateway = createToolRuntime({ tools: [wire], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
  const callId = (await gateway.call('wire', {})).call.id;
  await recordToolReview(owner, await store.loadHistory('s'), callId, { actor: 'ops', outcome: 'not_executed', evidence: 'nothing in the bank view' });
  return { owner, gateway, callId, writes: () => writes };
}

/**
 * Host A's transfer lost after its write, a person's not_executed review of it, and a plan made on that review; then
 * another process takes the session over, journals a review with `outcome`, and lets it go; host A takes it back.
 */
async function planHeldAcrossTakeover(target: StoreTarget, outcome: 'completed' | 'not_executed') {
  const location = target.fresh();
  const store = await location.open();
  let writes = 0;
  const wire = tool('wire', async () => { writes += 1; throw new Error('the connection reset after the transfer was sent'); },
    new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1'));
  const runtime = createToolRuntime({ tools: [wire], grants: { agent: '*' } });
  const owner = await store.acquire('s', { owner: 'host-a' });
  await owner.startTask('t');
  const first = (await runtime.bind({ owner, taskId: 't', caller: 'agent' }).call('wire', { cents: 500 })).call.id;
  await recordToolReview(owner, await store.loadHistory('s'), first, { actor: 'ops', outcome: 'not_executed', evidence: 'nothing in the bank view' });
  const plan = prepareToolRetry(await store.loadHistory('s'), first);
  const other = JSON.parse(execFileSync(process.execPath, [reviewHost, location.target, location.schema ?? '-', 's', first, outcome], { encoding: 'utf8' })) as { reviewed: number };
  assert.ok(other.reviewed > 0);
  const again = await store.acquire('s', { owner: 'host-a', takeover: true });
  const retry = () => runtime.bind({ owner: again, taskId: 't', caller: 'agent' }).callWithOptions('wire', { cents: 500 }, { retry: plan });
  return { store, first, retry, writes: () => writes };
}

forEachStore('a plan held across another host\'s takeover', (target) => {
  it("a plan made on a person's not_executed review is refused after another process journaled a completed review and let the session go", async () => {
    // No review was journaled in this process. The source's row went from reviewed_not_executed to resolved.
    const { store, first, retry, writes } = await planHeldAcrossTakeover(target, 'completed');
    await assert.rejects(retry(), { code: 'history_changed', message: /moved on since the history the plan was made from was read \(started, reviewed_not_executed; now started, resolved\)/ });
    assert.equal(writes(), 1, 'the transfer was made once');
    await assert.rejects(async () => prepareToolRetry(await store.loadHistory('s'), first), { code: 'completed' });
    await store.close();
  });

  it("a plan is refused after another process journaled a review that left its source's row as it was, and let the session go", async () => {
    // A second not_executed review: the source's row says reviewed_not_executed before and after, and only the events
    // an earlier owner wrote since the plan's history tell the plan that it is stale.
    const { store, retry, writes } = await planHeldAcrossTakeover(target, 'not_executed');
    await assert.rejects(retry(), { code: 'history_changed', message: /written by an earlier owner/ });
    assert.equal(writes(), 1, 'nothing was retried on the stale plan');
    await store.close();
  });
});
