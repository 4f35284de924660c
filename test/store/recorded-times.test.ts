/**
 * Recorded times (docs/design.md#recorded-times): decided by the store inside the commit from its clock, never
 * decreasing within a session even when the clock goes back, inside the hash chain (changing one breaks verify),
 * and strictly decoded.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeEvent, encodeEvent } from '../../src/event/codec.js';
import { JournalImportError, WireDecodeError } from '../../src/errors.js';
import type { EventId } from '../../src/ids.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { openPostgresStore } from '../../src/postgres.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { recordToolReview } from '../../src/tool/review.js';
import { assessSession } from '../../src/tool/assess.js';
import { attentionTimes } from '../../src/cli/assessment.js';
import { exportRustJournal } from '../../src/store/rust-format.js';
import type { AttentionItem, SessionOwner, SessionStore } from '../../src/store/types.js';
import type { Tool } from '../../src/tool/types.js';
import type { ToolRetryPlan } from '../../src/tool/retry-plan.js';
import { PG_URL, freshSchema } from '../support/postgres.js';
import { parseJournal } from '../../src/store/jsonl.js';
import { cli, tamper } from '../cli/helpers.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir('jingwei-times-');
const message = (text: string) => ({ turnId: 'turn-1', kind: { type: 'user_message' as const, text } });

describe('recorded times', () => {
  it('come from the store\'s clock and never decrease when the clock goes back', async () => {
    const ticks = [Date.UTC(2026, 11, 1, 10), Date.UTC(2026, 11, 1, 9), Date.UTC(2026, 11, 1, 11)];
    let i = 0;
    const store = createMemoryStore({ clock: () => ticks[Math.min(i++, ticks.length - 1)]! });
    const owner = await store.acquire('s', { owner: 'h' });
    await owner.append([message('a'), message('b')]);
    await owner.append([message('c')]);
    await owner.append([message('d')]);
    assert.deepEqual((await store.loadHistory('s')).map((e) => e.recordedAt), [
      '2026-12-01T10:00:00.000Z', '2026-12-01T10:00:00.000Z', '2026-12-01T10:00:00.000Z', '2026-12-01T11:00:00.000Z',
    ]);
  });

  it('a task change is recorded on the same clock, and the same history writes the same ledger event on every store', async () => {
    const at = Date.UTC(2025, 11, 1, 8);
    const written = [];
    for (const store of [createMemoryStore({ clock: () => at }), openSqliteStore(tempDbPath(dir, 'ledger-clock'), { clock: () => at })]) {
      const owner = await store.acquire('s', { owner: 'h' });
      await owner.append([{ ...message('a'), eventId: 'evt-a' as EventId }]);
      await owner.startTask('t');
      await owner.completeTask('t');
      const events = await store.loadHistory('s');
      assert.deepEqual(events.map((e) => e.recordedAt), Array(3).fill('2025-12-01T08:00:00.000Z'));
      written.push({ events, export: await store.exportJsonl('s') });
      await store.close();
    }
    const [memory, sqlite] = written;
    assert.equal(sqlite!.export, memory!.export);
    const ledger = memory!.events.slice(1);
    assert.equal(new Set(ledger.map((e) => e.eventId)).size, 2, 'each ledger event has its own id');
    for (const e of ledger) assert.match(e.eventId, /^evt_store_[0-9a-f]{32}$/);
  });

  it('a clock that returns no usable time fails the commit as bad input, nothing written', async () => {
    const store = createMemoryStore({ clock: () => Number.NaN });
    const owner = await store.acquire('s', { owner: 'h' });
    await assert.rejects(owner.append([message('a')]), { code: 'invalid_input' });
    assert.deepEqual(await store.loadHistory('s'), []);
  });

  it('are inside the hash chain: changing one breaks loadHistory and jingwei verify', async () => {
    const path = tempDbPath(dir, 'times');
    const store = openSqliteStore(path, { clock: () => Date.UTC(2026, 11, 1, 10, 0, 0, 123) });
    const owner = await store.acquire('s', { owner: 'h' });
    await owner.append([message('a'), message('b')]);
    await owner.release();
    await store.close();
    assert.equal(cli(['verify', path, 's']).code, 0);
    tamper(path, `UPDATE jw_events SET body = replace(body, '10:00:00.123Z', '09:00:00.123Z') WHERE session_id = 's' AND seq = 1`);
    const r = cli(['verify', path, 's', '--json']);
    assert.equal(r.code, 1, r.stdout);
    assert.equal((JSON.parse(r.stdout) as { corruption: { seq: number; reason: string } }).corruption.seq, 1);
    const reopened = openSqliteStore(path);
    await assert.rejects(reopened.loadHistory('s'), { code: 'journal_corrupt' });
    await reopened.close();
  });

  it('an imported file whose times go back is refused at that line as import_rejected, by parseJournal and importJsonl alike, and nothing is written', async () => {
    const times = ['2026-12-01T10:00:00.000Z', '2026-12-01T10:00:01.000Z', '2026-12-01T10:00:02.000Z', '2020-01-01T00:00:00.000Z', '2026-12-01T10:00:03.000Z'];
    const text = times.map((at, seq) => JSON.stringify({ event_id: `e${seq}`, session_id: 's', turn_id: 't', seq, recorded_at: at, kind: { type: 'user_message', text: `m${seq}` } }) + '\n').join('');
    const backwards = (e: unknown) => e instanceof JournalImportError && e.code === 'import_rejected' && e.line === 4 &&
      e.message === 'line 4: event 3: recorded_at 2020-01-01T00:00:00.000Z is earlier than the event before it (2026-12-01T10:00:02.000Z); recorded times never decrease';
    assert.throws(() => parseJournal(text), backwards);
    for (const store of [createMemoryStore(), openSqliteStore(tempDbPath(dir, 'backwards'))]) {
      await assert.rejects(store.importJsonl(text, { owner: 'h' }), backwards);
      assert.deepEqual(await store.listSessions(), []);
      await store.close();
    }
    // Equal times, and an event with no time between timed ones, are fine.
    const fine = text.replace('2020-01-01T00:00:00.000Z', '2026-12-01T10:00:02.000Z').replace(/,"recorded_at":"2026-12-01T10:00:01.000Z"/, '');
    assert.equal(parseJournal(fine).length, 5);
  });

  it('an imported event recorded more than a day ahead of this host\'s clock is refused at its line: every later event of the session would repeat it', async () => {
    const hour = 60 * 60 * 1000;
    const file = (ahead: number) => [Date.now() - hour, Date.now() + ahead].map((ms, seq) => JSON.stringify({ event_id: `e${seq}`, session_id: 's', turn_id: 't', seq, recorded_at: new Date(ms).toISOString(), kind: { type: 'user_message', text: `m${seq}` } }) + '\n').join('');
    const future = file(365 * 24 * hour);
    const refused = (e: unknown) => e instanceof JournalImportError && e.code === 'import_rejected' && e.line === 2 && /event 1: recorded_at .* is more than 24 hours ahead of this host's clock/.test(e.message);
    assert.throws(() => parseJournal(future), refused);
    const store = openSqliteStore(tempDbPath(dir, 'ahead-import'));
    await assert.rejects(store.importJsonl(future, { owner: 'h' }), refused);
    assert.deepEqual(await store.listSessions(), []);
    // An hour ahead (a host's clock that ran fast) is imported.
    assert.equal((await store.importJsonl(file(hour), { owner: 'h' })).events, 2);
    await store.close();
  });

  it('decode strictly: only the canonical ISO form with milliseconds; absent stays absent', () => {
    const base = { event_id: 'e', session_id: 's', turn_id: 't', seq: 0, kind: { type: 'user_message', text: 'x' } };
    assert.equal(decodeEvent(base).recordedAt, undefined);
    const timed = decodeEvent({ ...base, recorded_at: '2026-12-01T10:00:00.000Z' });
    assert.equal(timed.recordedAt, '2026-12-01T10:00:00.000Z');
    assert.deepEqual(Object.keys(encodeEvent(timed)), ['event_id', 'session_id', 'turn_id', 'seq', 'recorded_at', 'kind']);
    for (const bad of ['2026-12-01T10:00:00Z', '2026-12-01 10:00:00.000Z', '2026-02-30T10:00:00.000Z', '2026-12-01T10:00:00.000+01:00', 1764583200000]) {
      assert.throws(() => decodeEvent({ ...base, recorded_at: bad }), (e: unknown) => e instanceof WireDecodeError && e.path === 'recorded_at', String(bad));
    }
  });
  it('a call recorded while the clock ran ahead is not hidden from an age filter once it is right again: every later event of its session repeats that time', async () => {
    const day = 24 * 60 * 60 * 1000;
    let ahead = day;
    const clock = () => Date.now() + ahead;
    const stores = await clockedStores('ahead', clock);
    for (const [name, store] of stores) {
      ahead = day;
      const callId = await callInDoubt(store);
      ahead = 0;
      const listed = await store.attention({ olderThanMs: 10 * 60 * 1000 });
      assert.deepEqual(listed.items.map((i) => i.callId), [callId], `${name}: a time a day ahead says nothing of its age`);
      assert.deepEqual((await store.attention({ olderThanMs: 2 * day })).items.map((i) => i.callId), [callId], name);
      await store.close();
    }
    // A call just recorded on a clock within the skew the filter allows is recent.
    ahead = 1_000;
    const near = createMemoryStore({ clock });
    await callInDoubt(near);
    ahead = 0;
    assert.deepEqual((await near.attention({ olderThanMs: 10 * 60 * 1000 })).items, []);
  });
  it('the age filter measures an operation from its start marker: a body that started a moment ago after a long wait for its approver is young', async () => {
    const hour = 60 * 60 * 1000;
    let offset = -hour;
    const clock = () => Date.now() + offset;
    const stores = await clockedStores('aged-from-marker', clock);
    for (const [name, store] of stores) {
      offset = -hour;
      // The call is recorded an hour ago; its approver answers now, and the body starts (and is lost after its write).
      const callId = await callInDoubt(store, () => { offset = 0; });
      const [item] = (await store.attention()).items;
      assert.ok(item !== undefined && item.callId === callId && Date.parse(item.startedAt!) - Date.parse(item.calledAt!) >= hour - 1_000, `${name}: ${JSON.stringify(item)}`);
      assert.deepEqual((await store.attention({ olderThanMs: 10 * 60 * 1000 })).items, [],
        `${name}: a body that started a moment ago is young, however long ago its call was recorded`);
      assert.deepEqual((await store.attention({ olderThanMs: 0 })).items.map((i) => i.callId), [callId], name);
      offset = 20 * 60 * 1000;
      assert.deepEqual((await store.attention({ olderThanMs: 10 * 60 * 1000 })).items.map((i) => i.callId), [callId], `${name}: twenty minutes after its marker`);
      await store.close();
    }
  });

  it('the age filter measures an operation from its result: a body that ran two hours and whose failure was recorded a moment ago is young', async () => {
    const hour = 60 * 60 * 1000;
    let offset = -2 * hour;
    const clock = () => Date.now() + offset;
    const stores = await clockedStores('aged-from-result', clock);
    for (const [name, store] of stores) {
      offset = -2 * hour;
      // Called and started two hours ago; its body fails now, after a write that may have been made.
      const callId = await callInDoubt(store, undefined, () => { offset = 0; });
      const [item] = (await store.attention()).items;
      assert.ok(item !== undefined && item.callId === callId && Date.parse(item.endedAt!) - Date.parse(item.startedAt!) >= 2 * hour - 1_000, `${name}: ${JSON.stringify(item)}`);
      assert.deepEqual((await store.attention({ olderThanMs: 10 * 60 * 1000 })).items, [], `${name}: a result recorded a moment ago is young`);
      offset = 20 * 60 * 1000;
      assert.deepEqual((await store.attention({ olderThanMs: 10 * 60 * 1000 })).items.map((i) => i.callId), [callId], `${name}: twenty minutes after its result`);
      await store.close();
    }
  });

  it('the age filter does not restart at a retry refused before its body: a write reviewed not made and refused every hour stays as old as its doubt', async () => {
    const hour = 60 * 60 * 1000;
    let offset = -3 * hour;
    const clock = () => Date.now() + offset;
    const stores = await clockedStores('aged-across-retries', clock);
    for (const [name, store] of stores) {
      offset = -3 * hour;
      const { owner, callId } = await reviewedNotMade(store);
      const [first] = (await store.attention()).items;
      assert.equal(first?.status, 'reviewed_not_executed');
      assert.equal(first?.pendingSince, null, `${name}: the reviewed attempt itself is aged by its activity`);
      // The host's retries of it are refused before their body (its caller's grant withdrawn), two hours and one hour ago.
      let source = callId;
      for (const at of [-2 * hour, -hour]) {
        offset = at;
        const plan = prepareToolRetry(await store.loadHistory('s'), source);
        const refused = await createToolRuntime({ tools: [wireTool()], grants: { other: '*' } }).bind({ owner, taskId: 't', caller: 'agent' })
          .callWithOptions('wire', {}, { retry: plan });
        assert.equal(refused.result.outcome.status === 'failed' ? refused.result.outcome.category : 'succeeded', 'unavailable', name);
        source = refused.call.id;
      }
      offset = 0;
      const [item] = (await store.attention({ olderThanMs: 90 * 60 * 1000 })).items;
      assert.equal(item?.callId, source,
        `${name}: a write due for three hours, retried and refused an hour ago, must pass a 90-minute age filter: the refused retry made nothing`);
      assert.equal(item?.status, 'reviewed_not_executed', name);
      assert.equal(item?.pendingSince, first?.endedAt, `${name}: pending since the reviewed attempt's failure`);
      assert.ok(Date.parse(item!.calledAt!) - Date.parse(item!.pendingSince!) >= 2 * hour - 1_000, `${name}: the latest retry was called two hours later`);
      assert.deepEqual((await store.attention({ olderThanMs: 4 * hour })).items, [], `${name}: but not older than its doubt`);
      assert.notEqual((await store.checkLookupRows?.('s'))?.checked, false);
      await store.close();
    }
  });

  it('a due write\'s retry stopped after its start marker, before its body was called, leaves the write due and as old as before; while its body runs it is young', async () => {
    const hour = 60 * 60 * 1000;
    const stopper = new StoppingClock(-3 * hour);
    for (const [name, store] of await clockedStores('retry-stopped-at-marker', stopper.clock)) {
      stopper.offset = -3 * hour;
      const { owner, callId } = await reviewedNotMade(store);
      const reviewedAge = (await store.attention()).items[0]!.endedAt;
      stopper.offset = -hour;
      let ran = 0;
      const stopped = await stopper.retry(owner, { ...wireTool(), execute: async () => { ran += 1; return 'sent'; } }, prepareToolRetry(await store.loadHistory('s'), callId));
      stopper.offset = 0;
      assert.ok(stopped.startedEvent, `${name}: the retry's start marker is recorded`);
      assert.equal(stopped.result.outcome.status === 'failed' ? stopped.result.outcome.code : 'succeeded', 'tool_stopped_before_body', name);
      assert.equal(ran, 0);
      const [item] = (await store.attention()).items;
      assert.deepEqual([item?.callId, item?.status, item?.inDoubt], [stopped.call.id, 'reviewed_not_executed', false],
        `${name}: the retry never called its body, so the write a review found not made is still due and listed`);
      assert.equal(item?.pendingSince, reviewedAge, `${name}: due since the reviewed attempt`);
      assert.equal((await store.attention({ olderThanMs: 90 * 60 * 1000 })).items.length, 1, `${name}: and as old`);
      assert.match(attentionTimes(item!, new Date().toISOString()), /^reviewed: not executed \(a retry stopped before its body was called, \d+ ms after its start marker\); due since \S+ \S+, no later attempt ran its body$/);
      const assessed = assessSession(await store.loadHistory('s')).calls.find((c) => c.callId === stopped.call.id);
      assert.deepEqual([assessed?.attention, assessed?.nextStep], ['interrupted', 'retry_allowed'], `${name}: the journal's view agrees`);
      assert.match(assessed?.reason ?? '', /a review said attempt 1 \(\S+\) before it was not made, and its write is still due/);
      // The model asking again is refused: the reviewed write's retry is still to be made.
      const repeat = await createToolRuntime({ tools: [wireTool()], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' }).call('wire', {});
      assert.equal(repeat.result.outcome.status === 'failed' ? repeat.result.outcome.code : 'succeeded', 'tool_in_doubt', name);
      // The next retry's body runs: its owner is at work, so the item is young until its result.
      let whileRunning: readonly unknown[] = ['not run'];
      let runningItem: AttentionItem | undefined;
      const working = { ...wireTool(), execute: async () => {
        whileRunning = (await store.attention({ olderThanMs: 90 * 60 * 1000 })).items;
        runningItem = (await store.attention()).items[0];
        return 'sent';
      } };
      const made = await createToolRuntime({ tools: [working], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' })
        .callWithOptions('wire', {}, { retry: prepareToolRetry(await store.loadHistory('s'), stopped.call.id) });
      assert.equal(made.result.outcome.status, 'succeeded', name);
      assert.deepEqual(whileRunning, [], `${name}: a body that started a moment ago is young, whatever it is a retry of`);
      assert.deepEqual([runningItem?.status, runningItem?.pendingSince], ['no_result', null], `${name}: and shows no earlier age while it runs`);
      assert.match(attentionTimes(runningItem!, new Date().toISOString()), /^body started .+ ago, no result$/);
      assert.deepEqual((await store.attention()).items, [], `${name}: made: nothing is left`);
      assert.notEqual((await store.checkLookupRows?.('s'))?.checked, false);
      await store.close();
    }
  });

  it('an outcome left open keeps its age across a free retry stopped after its start marker; a due write with no recorded time is still due after one', async () => {
    const hour = 60 * 60 * 1000;
    const stopper = new StoppingClock(-3 * hour);
    for (const [name, store] of await clockedStores('open-stopped-at-marker', stopper.clock)) {
      // An idempotent transfer whose body failed three hours ago: its outcome is open, and a free retry is allowed.
      stopper.offset = -3 * hour;
      const owner = await store.acquire('s-idem', { owner: 'h' });
      await owner.startTask('t');
      const idempotent = { ...wireTool(), metadata: new ToolMetadata('wires money', { type: 'object' }).withEffect('idempotent', 'v1') };
      const first = await createToolRuntime({ tools: [{ ...idempotent, execute: async () => { throw new Error('lost after the write'); } }], grants: { agent: '*' } })
        .bind({ owner, taskId: 't', caller: 'agent' }).call('wire', {});
      stopper.offset = -hour;
      const stopped = await stopper.retry(owner, idempotent, prepareToolRetry(await store.loadHistory('s-idem'), first.call.id));
      assert.equal(stopped.result.outcome.status === 'failed' ? stopped.result.outcome.code : 'succeeded', 'tool_stopped_before_body', name);
      stopper.offset = 0;
      const [item] = (await store.attention({ sessionId: 's-idem', olderThanMs: 90 * 60 * 1000 })).items;
      assert.deepEqual([item?.callId, item?.status, item?.pendingSince], [stopped.call.id, 'outcome_unknown', first.resultEvent.recordedAt ?? 'no time'],
        `${name}: the retry stopped before its body made nothing: the outcome is as old as the first attempt's failure`);
      assert.match(attentionTimes(item!, new Date().toISOString()), /^a retry stopped before its body was called, \d+ ms after its start marker; open since /);

      // A journal whose reviewed attempt has no recorded time (Jingwei for Rust's), imported and reviewed here.
      await callInDoubt(store);
      const rust = exportRustJournal(await store.loadHistory('s')).replaceAll('"session_id":"s"', '"session_id":"s-rust"');
      assert.match(rust, /"session_id":"s-rust"/);
      await store.importJsonl(rust, { owner: 'import' });
      const host = await store.acquire('s-rust', { owner: 'host' });
      await host.startTask('t');
      const history = await store.loadHistory('s-rust');
      const rustCall = history.find((e) => e.kind.type === 'tool_call')!;
      const id = rustCall.kind.type === 'tool_call' ? rustCall.kind.call.id : '';
      assert.equal(rustCall.recordedAt, undefined, 'the imported attempt has no time');
      await recordToolReview(host, history, id, { actor: 'alice', outcome: 'not_executed', evidence: 'no transfer' });
      const again = await stopper.retry(host, wireTool(), prepareToolRetry(await store.loadHistory('s-rust'), id));
      assert.equal(again.result.outcome.status === 'failed' ? again.result.outcome.code : 'succeeded', 'tool_stopped_before_body', name);
      const due = (await store.attention({ sessionId: 's-rust' })).items;
      assert.deepEqual(due.map((i) => [i.callId, i.status]), [[again.call.id, 'reviewed_not_executed']],
        `${name}: a due write whose reviewed attempt has no time is still due after a retry stopped before its body`);
      assert.notEqual((await store.checkLookupRows?.('s-rust'))?.checked, false);
      await store.close();
    }
  });
});

/**
 * A store clock `offset` ms off, which aborts a retry's signal at its first read after the retry's approver answered:
 * the start marker's commit, so the retry is stopped after its marker, before its body is called.
 */
class StoppingClock {
  private armed = false;
  private pending: AbortController | null = null;
  constructor(public offset: number) {}

  readonly clock = (): number => {
    if (this.armed && this.pending !== null) {
      this.pending.abort(new Error('host shutting down'));
      this.pending = null;
    }
    return Date.now() + this.offset;
  };

  async retry(owner: SessionOwner, tool: Tool, plan: ToolRetryPlan) {
    this.pending = new AbortController();
    const approvers = { ops: async () => { this.armed = true; return { decision: 'approved' as const }; } };
    try {
      return await createToolRuntime({ tools: [{ ...tool, metadata: tool.metadata.withApproval('ops') }], grants: { agent: '*' }, approvers })
        .bind({ owner, taskId: 't', caller: 'agent' }).callWithOptions(tool.name, {}, { retry: plan, signal: this.pending.signal });
    } finally {
      this.armed = false;
      this.pending = null;
    }
  }
}

/** A memory, a SQLite and (with JINGWEI_PG_URL) a PostgreSQL store on `clock`, each named. */
async function clockedStores(file: string, clock: () => number): Promise<[string, SessionStore][]> {
  const stores: [string, SessionStore][] = [['memory', createMemoryStore({ clock })], ['sqlite', openSqliteStore(tempDbPath(dir, file), { clock })]];
  if (PG_URL !== undefined) stores.push(['postgres', await openPostgresStore(PG_URL, { schema: freshSchema(), clock })]);
  return stores;
}

function wireTool() {
  return { name: 'wire', metadata: new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1'), execute: async () => 'sent' };
}

/** callInDoubt, then a person's `not_executed` review of it, journaled by a host that took the session over. */
async function reviewedNotMade(store: SessionStore): Promise<{ owner: SessionOwner; callId: string }> {
  const callId = await callInDoubt(store);
  const owner = await store.acquire('s', { owner: 'host-2', takeover: true });
  await recordToolReview(owner, await store.loadHistory('s'), callId, { actor: 'alice', outcome: 'not_executed', evidence: 'no transfer in the bank\'s statement' });
  return { owner, callId };
}

/** A non-idempotent transfer in session `s` of `store` that failed after its write: its call in doubt. */
async function callInDoubt(store: SessionStore, whenApproved?: () => void, whenBodyRuns?: () => void): Promise<string> {
  const owner = await store.acquire('s', { owner: 'h' });
  await owner.startTask('t');
  const metadata = new ToolMetadata('wires money', { type: 'object' }).withEffect('non_idempotent', 'v1');
  const wire = {
    name: 'wire',
    metadata: whenApproved ? metadata.withApproval('ops') : metadata,
    execute: async () => { whenBodyRuns?.(); throw new Error('lost after the write'); },
  };
  const approvers = { ops: async () => { whenApproved?.(); return { decision: 'approved' as const }; } };
  return (await createToolRuntime({ tools: [wire], grants: { agent: '*' }, approvers }).bind({ owner, taskId: 't', caller: 'agent' }).call('wire', {})).call.id;
}
