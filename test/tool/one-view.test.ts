/**
 * One view of running calls per database in a process (docs/design.md#one-view-of-running-calls-per-database): two
 * stores opened on one database (another handle, a symlink, another pool) see the same calls running and the same
 * bodies ending, so a takeover in the same process cannot review, retry or repeat a write whose body still runs, and
 * a body's end this process knows of reaches the journal before anything is decided on it.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, renameSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/sqlite.js';
import type { SessionStore } from '../../src/store/types.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { recordToolReview } from '../../src/tool/review.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool } from '../../src/tool/types.js';
import { bodyEnded, untilBodyEnded } from '../support/body-ended.js';
import { sleep } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const review = { actor: 'ops', outcome: 'not_executed', evidence: 'the bank shows nothing yet' } as const;

/** A transfer whose first body ignores its signal and waits for `release`; every body counts itself in `runs`. */
function heldTransfer() {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => { release = resolve; });
  let entered!: () => void;
  const inBody = new Promise<void>((resolve) => { entered = resolve; });
  const state = { runs: 0 };
  const transfer: Tool = {
    name: 'transfer',
    metadata: new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'wire-v1'),
    async execute() {
      state.runs += 1;
      if (state.runs === 1) {
        entered();
        await gate;
      }
      return `transfer ${state.runs}`;
    },
  };
  return { transfer, state, inBody, release, runtime: createToolRuntime({ tools: [transfer], grants: { agent: '*' } }) };
}

/** Host A's call of the held transfer, its body running; its call id. */
async function callInFlight(store: SessionStore, held: ReturnType<typeof heldTransfer>, options: { timeoutMs?: number } = {}, beforeCall = async () => {}) {
  const owner = await store.acquire('s', { owner: 'host-a' });
  await owner.startTask('t');
  await beforeCall();
  const pending = held.runtime.bind({ owner, taskId: 't', caller: 'agent' }).callWithOptions('transfer', {}, options)
    .then((execution) => execution, (error: unknown) => error);
  await held.inBody;
  const call = (await store.loadHistory('s')).find((e) => e.kind.type === 'tool_call');
  assert.ok(call?.kind.type === 'tool_call');
  return { owner, pending, callId: call.kind.call.id };
}

/**
 * Another handle `b` on the journal takes the session over while host A's body runs: its review of the call is
 * refused, the body's end reaches the journal through it once the body returns, and the transfer was made once.
 */
async function takeOverWhileItRuns(b: SessionStore, held: ReturnType<typeof heldTransfer>, pending: Promise<unknown>, callId: string) {
  const ownerB = await b.acquire('s', { owner: 'host-b', takeover: true });
  await assert.rejects(recordToolReview(ownerB, await b.loadHistory('s'), callId, review), { code: 'call_in_flight' });
  held.release();
  await pending;
  await untilBodyEnded(b, 's', callId);
  assert.equal(held.state.runs, 1, 'the transfer was made once');
}

/** A fresh SQLite journal with host A's call of the held transfer in flight. */
async function sqliteCallInFlight(options: { busyTimeoutMs?: number } = {}) {
  const path = tempDbPath(tempDir('jingwei-one-view-'), 'journal');
  const store = openSqliteStore(path, options);
  const held = heldTransfer();
  return { path, store, held, ...(await callInFlight(store, held)) };
}

/** The held body returns while another connection holds the write lock: its owner cannot write its result. */
async function bodyEndsWhileBusy(path: string, held: ReturnType<typeof heldTransfer>, pending: Promise<unknown>) {
  const locker = new Database(path);
  locker.exec('BEGIN IMMEDIATE');
  held.release();
  assert.equal(((await pending) as { code?: string }).code, 'recording_failed', 'the result could not be written');
  locker.exec('ROLLBACK');
  locker.close();
}

/** Another handle on the journal's file through a symlink to the file, or to its directory. */
function linkedPath(path: string, how: 'file' | 'directory'): string {
  if (how === 'file') {
    const link = join(dirname(path), 'link-to-journal.db');
    symlinkSync(path, link);
    return link;
  }
  const linkDir = `${dirname(path)}-link`;
  symlinkSync(dirname(path), linkDir);
  return join(linkDir, path.slice(dirname(path).length + 1));
}

/** Two tenant journals copied from one template file: they share its journal id, and so one view here. */
async function tenantCopies(): Promise<[string, string]> {
  const dir = tempDir('jingwei-one-view-');
  const template = tempDbPath(dir, 'template');
  await openSqliteStore(template).close();
  const copies: [string, string] = [tempDbPath(dir, 'tenant-1'), tempDbPath(dir, 'tenant-2')];
  for (const copy of copies) copyFileSync(template, copy);
  return copies;
}

for (const how of ['file', 'directory'] as const) {
  it(`a second handle through a symlink to the ${how} is the same file: no review or retry while the body runs, and its end is journaled`, async () => {
    const dir = join(tempDir('jingwei-one-view-'), how);
    mkdirSync(dir);
    const path = tempDbPath(dir, 'journal');
    const a = openSqliteStore(path);
    const held = heldTransfer();
    const { pending, callId } = await callInFlight(a, held);
    const b = openSqliteStore(linkedPath(path, how));
    const ownerB = await b.acquire('s', { owner: 'host-b', takeover: true });
    await assert.rejects(recordToolReview(ownerB, await b.loadHistory('s'), callId, review), { code: 'call_in_flight' });
    const plan = prepareToolRetry(await b.loadHistory('s'), callId, review);
    const gateway = held.runtime.bind({ owner: ownerB, taskId: 't', caller: 'agent' });
    await assert.rejects(gateway.callWithOptions('transfer', {}, { retry: plan }), { code: 'body_running' });
    held.release();
    await pending;
    const end = await untilBodyEnded(b, 's', callId);
    assert.deepEqual(end.kind.type === 'custom' && end.kind.payload, { callId, ended: 'returned' });
    await assert.rejects(gateway.callWithOptions('transfer', {}, { retry: plan }), { code: 'needs_review' });
    assert.equal(held.state.runs, 1, 'the transfer was made once');
    await b.close();
    await a.close();
  });
}

it('a journal replaced at its path by a copy of itself (a compaction, a restore) is the same view: no review while the body runs', async () => {
  const { path, store: a, held, pending, callId } = await sqliteCallInFlight();
  const copy = `${path}.copy`;
  const raw = new Database(path);
  raw.exec(`VACUUM INTO '${copy.replaceAll("'", "''")}'`);
  raw.close();
  renameSync(copy, path);
  const b = openSqliteStore(path);
  await takeOverWhileItRuns(b, held, pending, callId);
  await b.close();
  await a.close();
});

it('a body whose owner could not write its result (the store busy) has its end journaled before that owner reviews or calls again', async () => {
  const { path, store, held, owner, pending, callId } = await sqliteCallInFlight({ busyTimeoutMs: 50 });
  await bodyEndsWhileBusy(path, held, pending);
  const blind = await store.loadHistory('s');
  assert.equal(bodyEnded(blind, callId), undefined);
  // A review decided on the history without the end is refused: the end goes in first, and the history moved on.
  await assert.rejects(recordToolReview(owner, blind, callId, review), { code: 'history_changed' });
  const end = bodyEnded(await store.loadHistory('s'), callId);
  assert.deepEqual(end?.kind.type === 'custom' && end.kind.payload, { callId, ended: 'returned' });
  assert.equal(held.state.runs, 1);
  await store.close();
});

it('a journal rotated away (renamed to an archive) and the new journal made at its path are two views: no body end crosses', async () => {
  const { path, store: a, held, pending, callId } = await sqliteCallInFlight();
  renameSync(path, `${path}.archive`);
  renameSync(`${path}-wal`, `${path}.archive-wal`);
  const b = openSqliteStore(path);
  await (await b.acquire('s', { owner: 'host-b' })).startTask('t');
  held.release();
  await pending;
  await sleep(50);
  assert.equal(bodyEnded(await b.loadHistory('s'), callId), undefined, 'the archived journal\'s body end is not written into the new one');
  await b.close();
  await a.close();
});

it('two journals copied from one template share an id, and so a view, yet a body end of one is never written into the other', async () => {
  const [one, two] = await tenantCopies();
  const a = openSqliteStore(one);
  const b = openSqliteStore(two);
  const held = heldTransfer();
  const { owner, pending, callId } = await callInFlight(a, held, { timeoutMs: 100 });
  await pending;
  // Its release waits, the session held, for the body its deadline stopped (it ignores its signal).
  const releasing = owner.release();
  // Tenant 2 holds a session of the same id: the newest owner of the shared view.
  await (await b.acquire('s', { owner: 'tenant-2-host' })).startTask('t');
  held.release();
  await releasing;
  await sleep(100);
  assert.equal(bodyEnded(await b.loadHistory('s'), callId), undefined, 'not written into the other tenant\'s journal');
  // Tenant 1's own journal has it, written by its owner before it let the session go.
  await a.acquire('s', { owner: 'tenant-1-host' });
  const end = bodyEnded(await a.loadHistory('s'), callId);
  assert.deepEqual(end?.kind.type === 'custom' && end.kind.payload, { callId, ended: 'returned' });
  await b.close();
  await a.close();
});

it('a tenant journal copied from one template: a body end its owner could not write is journaled as its store closes, though the other tenant holds a session of the same id', async () => {
  const [one, two] = await tenantCopies();
  const a = openSqliteStore(one, { busyTimeoutMs: 50 });
  const b = openSqliteStore(two);
  const held = heldTransfer();
  const { pending, callId } = await callInFlight(a, held);
  await bodyEndsWhileBusy(one, held, pending);
  // Tenant 2's owner of a session of the same id is now the newest owner of the shared view; its journal refuses the end.
  await b.acquire('s', { owner: 'tenant-2-host' });
  await a.close();
  const reader = openSqliteStore(one);
  const end = bodyEnded(await reader.loadHistory('s'), callId);
  assert.deepEqual(end?.kind.type === 'custom' && end.kind.payload, { callId, ended: 'returned' }, 'written through the owner that kept it');
  assert.equal(bodyEnded(await b.loadHistory('s'), callId), undefined);
  await reader.close();
  await b.close();
});

for (const how of ['holds', 'held and released'] as const) {
  it(`a tenant journal copied from one template: its store's close waits for its body though the other tenant ${how} a session of the same id (pass r61 #1)`, async () => {
    const [one, two] = await tenantCopies();
    const a = openSqliteStore(one);
    const b = openSqliteStore(two);
    const held = heldTransfer();
    // Released after tenant 1's acquire and before its body starts (a release while it ran would wait for it: one
    // view, one session id): the view's newest owner of the id, tenant 1's, was replaced, then let go.
    const tenant2 = async () => { await (await b.acquire('s', { owner: 'tenant-2-host' })).release(); };
    const { pending, callId } = await callInFlight(a, held, {}, how === 'held and released' ? tenant2 : undefined);
    if (how === 'holds') await b.acquire('s', { owner: 'tenant-2-host' });
    let closed = false;
    const closing = a.close().then(() => { closed = true; });
    await sleep(300);
    assert.equal(closed, false, 'tenant 1\'s close waits for its own body, still running');
    held.release();
    await closing;
    await pending;
    const reader = openSqliteStore(one);
    const end = bodyEnded(await reader.loadHistory('s'), callId);
    assert.deepEqual(end?.kind.type === 'custom' && end.kind.payload, { callId, ended: 'returned' }, 'journaled before the close returned');
    assert.equal(held.state.runs, 1);
    await reader.close();
    await b.close();
  });
}

it('a tenant journal copied from one template, its session taken over by another handle while a late body runs: that handle\'s close journals the end, though the other tenant holds the same id (pass r62 #1)', async () => {
  const [one, two] = await tenantCopies();
  const a = openSqliteStore(one);
  const taker = openSqliteStore(one);
  const b = openSqliteStore(two);
  const held = heldTransfer();
  const { pending, callId } = await callInFlight(a, held, { timeoutMs: 100 });
  await pending;
  await taker.acquire('s', { owner: 'host-b', takeover: true });
  // Tenant 2's owner of a session of the same id: the newest owner of the shared view, whose journal refuses the end.
  await b.acquire('s', { owner: 'tenant-2-host' });
  let closed = false;
  const closing = taker.close().then(() => { closed = true; });
  await sleep(300);
  assert.equal(closed, false, 'the close waits for the body');
  held.release();
  await closing;
  const reader = openSqliteStore(one);
  const end = bodyEnded(await reader.loadHistory('s'), callId);
  assert.deepEqual(end?.kind.type === 'custom' && end.kind.payload, { callId, ended: 'returned' }, 'journaled through the owner that took the session over, before its store closed');
  assert.equal(bodyEnded(await b.loadHistory('s'), callId), undefined, 'not into the other tenant\'s journal');
  await reader.close();
  await b.close();
  await a.close();
});

it('an owner that took the session over without a heartbeat and that the host dropped: its store\'s close still waits for the body, renewing the lease (pass r61 #2)', async () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const path = tempDbPath(tempDir('jingwei-one-view-'), 'journal');
  const a = openSqliteStore(path);
  const b = openSqliteStore(path);
  const rescuer = openSqliteStore(path);
  const held = heldTransfer();
  const { pending } = await callInFlight(a, held);
  await (async () => { await b.acquire('s', { owner: 'host-b', takeover: true, heartbeat: false, leaseMs: 300 }); })();
  for (let i = 0; i < 5; i += 1) {
    gc();
    await sleep(20);
  }
  let closed = false;
  const closing = b.close().then(() => { closed = true; });
  await sleep(900);
  assert.equal(closed, false, 'the close waits for the body the first owner started');
  await assert.rejects(rescuer.acquire('s', { owner: 'rescuer', takeover: 'abandoned' }), { code: 'session_busy' }, 'its lease renewed meanwhile');
  held.release();
  await closing;
  await pending;
  assert.equal(held.state.runs, 1);
  await rescuer.close();
  await a.close();
});

it('a journal whose id row was removed gets a new one at its next open, rather than opening as a view of its own', async () => {
  const path = tempDbPath(tempDir('jingwei-one-view-'), 'journal');
  await openSqliteStore(path).close();
  const raw = new Database(path);
  const before = raw.prepare('SELECT id FROM jw_journal').pluck().get();
  raw.exec('DELETE FROM jw_journal');
  raw.close();
  await openSqliteStore(path).close();
  const check = new Database(path, { readonly: true });
  const after = check.prepare('SELECT id FROM jw_journal').pluck().get();
  check.close();
  assert.match(String(after), /^[0-9a-f]{32}$/);
  assert.notEqual(after, before);
});

for (const how of ['release', 'close'] as const) {
  it(`a body end its owner could not write yet is journaled as the host lets go: ${how}()`, async () => {
    const { path, store, held, owner, pending, callId } = await sqliteCallInFlight({ busyTimeoutMs: 50 });
    await bodyEndsWhileBusy(path, held, pending);
    if (how === 'release') await owner.release();
    else await store.close();
    const reader = openSqliteStore(path);
    const end = bodyEnded(await reader.loadHistory('s'), callId);
    assert.deepEqual(end?.kind.type === 'custom' && end.kind.payload, { callId, ended: 'returned' }, 'the next process sees how the body ended');
    await reader.close();
    if (how === 'release') await store.close();
  });
}

forEachStore('one view of running calls per database', (target) => {
  it('two stores opened on one database: a review of the other\'s running call is refused, and the body\'s end reaches the journal', async () => {
    const location = target.fresh();
    const a = await location.open();
    const b = await location.open();
    const held = heldTransfer();
    const { pending, callId } = await callInFlight(a, held);
    await takeOverWhileItRuns(b, held, pending, callId);
    await b.close();
    await a.close();
  });

  it('a plan prepared while its source had no result, refused while the body ran, is not taken once the body has ended', async () => {
    const location = target.fresh();
    const store = await location.open();
    const held = heldTransfer();
    const { pending, callId } = await callInFlight(store, held);
    const ownerB = await store.acquire('s', { owner: 'host-b', takeover: true });
    const gateway = held.runtime.bind({ owner: ownerB, taskId: 't', caller: 'agent' });
    const blind = prepareToolRetry(await store.loadHistory('s'), callId, review);
    await assert.rejects(gateway.callWithOptions('transfer', {}, { retry: blind }), { code: 'body_running' });
    held.release();
    assert.equal((await pending as { code?: string }).code, 'recording_failed', 'the fenced host cannot record its result');
    await untilBodyEnded(store, 's', callId);
    await assert.rejects(gateway.callWithOptions('transfer', {}, { retry: blind }), { code: 'needs_review' });
    assert.equal(held.state.runs, 1, 'the blind plan made no second transfer');
    // A review decided on a history that shows how the body ended is the host's informed call, and is taken.
    const informed = prepareToolRetry(await store.loadHistory('s'), callId, { ...review, despiteLateReturn: true });
    assert.equal((await gateway.callWithOptions('transfer', {}, { retry: informed })).result.outcome.status, 'succeeded');
    assert.equal(held.state.runs, 2);
    await store.close();
  });

  it('the in-doubt guard passes over only the calls its own owner runs: after a takeover here, a repeat of the running call is in doubt', async () => {
    const location = target.fresh();
    const store = await location.open();
    const held = heldTransfer();
    const { pending } = await callInFlight(store, held);
    const ownerB = await store.acquire('s', { owner: 'host-b', takeover: true });
    const repeat = await held.runtime.bind({ owner: ownerB, taskId: 't', caller: 'agent' }).call('transfer', {});
    assert.deepEqual([repeat.result.outcome.status, repeat.result.outcome.status === 'failed' && repeat.result.outcome.code], ['failed', 'tool_in_doubt']);
    held.release();
    await pending;
    assert.equal(held.state.runs, 1, 'the repeat made no second transfer');
    await store.close();
  });

  it('a late body whose session another handle here took over: that handle\'s close waits for it and journals its end before letting go', async () => {
    const location = target.fresh();
    const a = await location.open();
    const held = heldTransfer();
    const { pending, callId } = await callInFlight(a, held, { timeoutMs: 100 });
    assert.equal(((await pending) as { result: { outcome: { status: string } } }).result.outcome.status, 'failed', 'its deadline is recorded');
    // Another handle takes the session over and closes: the close waits, the session held, for the body to return
    // (before, it let the session go and nobody here could journal the end until the next owner acquired).
    const b = await location.open();
    await b.acquire('s', { owner: 'host-b', takeover: true });
    let closed = false;
    const closing = b.close().then(() => { closed = true; });
    await sleep(50);
    assert.equal(closed, false, 'the close waits for the body');
    assert.equal(bodyEnded(await a.loadHistory('s'), callId), undefined, 'the body has not ended yet');
    held.release();
    await closing;
    const ownerC = await a.acquire('s', { owner: 'host-c', takeover: true });
    const end = bodyEnded(await a.loadHistory('s'), callId);
    assert.deepEqual(end?.kind.type === 'custom' && end.kind.payload, { callId, ended: 'returned' });
    // So a review decided now is decided knowing it.
    // The body returned: the person says they checked the bank all the same.
    assert.ok((await recordToolReview(ownerC, await a.loadHistory('s'), callId, { ...review, despiteLateReturn: true })).seq > end!.seq);
    await a.close();
  });
});
