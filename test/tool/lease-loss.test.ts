/**
 * A lost session stops its calls. A host whose lease ran out while it was alive (a stalled event loop, a suspended
 * VM) was taken over; an operator reviewed its running call `not_executed`, the new host retried, and the old host's
 * body, waiting on the bank with its abort signal, went on and made the transfer too. A host now tells its running
 * calls to stop, through their signal, as soon as it learns its session is lost (a write or heartbeat refused as
 * fenced) or may be (a heartbeat finding the lease not renewed for a whole lease), before the body goes on.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { ToolBodyError, ToolRecordingError } from '../../src/errors.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { assessSession } from '../../src/tool/assess.js';
import { inspectToolRecovery } from '../../src/index.js';
import { decisionInbox } from '../../src/store/inbox.js';
import { journalInboxReviews } from '../../src/tool/inbox-review.js';
import { prepareToolRetry } from '../../src/tool/retry-plan.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { SessionStore } from '../../src/store/types.js';
import type { ToolExecution } from '../../src/tool/types.js';
import { untilBodyEnded } from '../support/body-ended.js';
import { sleep, tool } from '../support/runtime.js';
import { setFaultHook } from '../../src/fault.js';
import { forEachStore } from '../support/stores.js';
import { ChildProcess } from '../support/child.js';
import { fileURLToPath } from 'node:url';

const ownerChild = fileURLToPath(new URL('../store/children/owner-child.js', import.meta.url));

const TRANSFER = new ToolMetadata('moves money', { type: 'object' }).withEffect('non_idempotent', 'v1');
/** Long enough that a loaded machine's own pauses do not outlast it; the stalls below do, twice over. */
const LEASE_MS = 1_000;
const STALL_MS = 2 * LEASE_MS;
/** How long the old host's body waits on "the bank": past the stall, so it would go on after the host wakes. */
const BANK_MS = STALL_MS + 1_500;

/** A transfer whose body waits `waitMs` on "the bank", honouring its signal, then makes the transfer as `host`. */
function transfer(host: string, made: string[], waitMs: number, seen?: { reason?: unknown }) {
  return tool('transfer', async (_request, signal) => {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, waitMs);
      signal.addEventListener('abort', () => {
        clearTimeout(timer);
        if (seen) seen.reason = signal.reason;
        reject(signal.reason);
      }, { once: true });
    });
    made.push(host);
    return 'sent';
  }, TRANSFER);
}

/** Blocks the event loop: no timer, heartbeat or I/O callback runs meanwhile. */
function stall(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) { /* a stalled process */ }
}

/**
 * Host A holds `sessionId` with the test's lease, runs a task and starts a transfer whose body waits `bankMs`;
 * resolves once `reader` sees the body's start marker journaled.
 */
async function startTransfer(a: SessionStore, reader: SessionStore, sessionId: string, made: string[], bankMs: number, seen?: { reason?: unknown }) {
  const owner = await a.acquire(sessionId, { owner: 'host-a', leaseMs: LEASE_MS });
  await owner.startTask('t');
  const call = createToolRuntime({ tools: [transfer('A', made, bankMs, seen)], grants: { agent: '*' } })
    .bind({ owner, taskId: 't', caller: 'agent' }).call('transfer', {});
  call.catch(() => undefined);
  while (!(await reader.loadHistory(sessionId)).some((e) => e.kind.type === 'tool_started')) await sleep(10);
  return { owner, call };
}

const settled = (call: Promise<ToolExecution>) => call.then((e) => ({ ok: e }), (error: unknown) => ({ error: error as { code?: string } }));

forEachStore('a host that loses its session', (target) => {
  it('stops its running call through the signal as soon as a heartbeat is refused as fenced', async () => {
    const location = target.fresh();
    const a = await location.open();
    const b = await location.open();
    const made: string[] = [];
    const seen: { reason?: unknown } = {};
    const call = settled((await startTransfer(a, b, 's-fenced', made, 10_000, seen)).call);
    const successor = await b.acquire('s-fenced', { owner: 'host-b', takeover: true });
    const ended = await Promise.race([call, sleep(5_000).then(() => 'still running' as const)]);
    assert.notEqual(ended, 'still running', 'the body was told to stop within a heartbeat');
    assert.match(String((seen.reason as Error | undefined)?.message), /taken over or released/);
    assert.deepEqual(made, [], 'no transfer from the fenced host');
    assert.ok('error' in (ended as object), 'its result cannot be written by a fenced owner');
    await successor.release();
    await a.close();
    await b.close();
  });

  it('stops its running call when a stall outlived its lease, before the body goes on; a retry after review runs once', async () => {
    const location = target.fresh();
    const a = await location.open();
    const b = await location.open();
    const operator = await location.open();
    const made: string[] = [];
    const seen: { reason?: unknown } = {};
    const callA = settled((await startTransfer(a, b, 's-stall', made, BANK_MS, seen)).call);
    stall(STALL_MS);
    // Host B finds the lease run out and takes over; an operator, seeing no transfer at the bank, reviews the call.
    const ownerB = await b.acquire('s-stall', { owner: 'host-b', takeover: 'expired', leaseMs: 30_000 });
    // The first heartbeat after the stall tells the body; on a loaded machine it may come later than a fixed pause.
    for (let waited = 0; seen.reason === undefined && waited < 5_000; waited += 10) await sleep(10);
    assert.match(String((seen.reason as Error | undefined)?.message), /may have run out: last renewed \d+ ms ago|taken over or released/, "told to stop on the first heartbeat after the stall (or its renewal refused as fenced)");
    const history = await b.loadHistory('s-stall');
    const started = history.find((e) => e.kind.type === 'tool_call');
    assert.ok(started?.kind.type === 'tool_call');
    const callId = started.kind.call.id;
    // The stopped body's end reaches the journal through host B (the same database, in this process); the operator
    // reviews once it has, as the operator guide asks (a decision made before it would be stale).
    const end = await untilBodyEnded(b, 's-stall', callId);
    assert.deepEqual(end.kind.type === 'custom' && end.kind.payload, { callId, ended: 'threw' });
    await decisionInbox(operator).recordReview({ sessionId: 's-stall', callId, outcome: 'not_executed', evidence: 'the bank shows nothing', actor: 'ops' });
    await journalInboxReviews(ownerB, b, await b.loadHistory('s-stall'));
    const plan = prepareToolRetry(await b.loadHistory('s-stall'), callId);
    const retried = await createToolRuntime({ tools: [transfer('B', made, 10)], grants: { agent: '*' } })
      .bind({ owner: ownerB, taskId: 't', caller: 'agent' }).callWithOptions('transfer', {}, { retry: plan });
    assert.equal(retried.result.outcome.status, 'succeeded');
    await callA;
    await sleep(BANK_MS);
    assert.deepEqual(made, ['B'], 'the transfer was made once, by the retry');
    assert.equal(assessSession(await b.loadHistory('s-stall')).calls.at(-1)?.nextStep, 'completed');
    await ownerB.release();
    await a.close();
    await b.close();
    await operator.close();
  });

  it('records a call stopped by a lapse that nobody took over as cancelled after its start: in doubt, never not-run', async () => {
    const location = target.fresh();
    const store = await location.open();
    const made: string[] = [];
    const { owner, call } = await startTransfer(store, store, 's-lapse', made, BANK_MS);
    stall(STALL_MS);
    const execution = await call;
    assert.deepEqual(made, []);
    assert.deepEqual(
      { ...execution.result.outcome, message: undefined },
      { status: 'failed', category: 'cancelled', code: 'tool_cancelled', message: undefined, retryable: false },
    );
    assert.match(execution.result.outcome.status === 'failed' ? execution.result.outcome.message : '', /lost its hold on the session, or may have/);
    assert.equal(assessSession(await store.loadHistory('s-lapse')).calls[0]?.status, 'outcome_unknown', 'the body started: in doubt');
    // The lease was renewed again: the next transfer (another one: the in-doubt guard holds the same one) runs as usual.
    const next = await createToolRuntime({ tools: [transfer('A', made, 10)], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' }).call('transfer', { to: 'another' });
    assert.deepEqual(next.result.outcome, { status: 'succeeded', output: 'sent' });
    await owner.release();
    await store.close();
  });

  it("does not call a body whose marker's commit answered after a stall that outlived the lease: another host may have retried it meanwhile", async () => {
    const store = await target.fresh().open();
    const made: string[] = [];
    const owner = await store.acquire('s-woken', { owner: 'host-a', leaseMs: LEASE_MS });
    await owner.startTask('t');
    // The process stalls as the marker's commit answers (another call's synchronous body, a paused process): the
    // heartbeat and the call's timers have not run when it wakes.
    let stalled = false;
    setFaultHook((point) => {
      if (point === 'started:after' && !stalled) {
        stalled = true;
        stall(STALL_MS);
      }
    });
    const gateway = createToolRuntime({ tools: [transfer('A', made, 10)], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
    const execution = await gateway.call('transfer', {}).finally(() => setFaultHook(null));
    assert.equal(stalled, true);
    assert.deepEqual(made, [], 'the body was never called');
    const outcome = execution.result.outcome;
    assert.equal(outcome.status === 'failed' ? outcome.code : outcome.status, 'tool_stopped_before_body');
    assert.match(outcome.status === 'failed' ? outcome.message : '', /may have run out.*before the body was called/);
    const history = await store.loadHistory('s-woken');
    const recovery = inspectToolRecovery(history, execution.call.id);
    assert.equal(recovery.status, 'not_executed', `read as a body never called, which a retry may follow: ${recovery.fact}`);
    await owner.release();
    await store.close();
  });

  it('leaves a call whose body has not started alone: its marker, not a heartbeat, settles whether the session is still its own', async () => {
    const store = await target.fresh().open();
    const made: string[] = [];
    const owner = await store.acquire('s-before', { owner: 'host-a', leaseMs: LEASE_MS });
    await owner.startTask('t');
    // The approver stalls the process past the lease before it answers: nobody took over, so the call goes on.
    const approver = async () => {
      stall(STALL_MS);
      await sleep(150);
      return { decision: 'approved' as const };
    };
    const gateway = createToolRuntime({ tools: [{ ...transfer('A', made, 10), metadata: TRANSFER.withApproval('desk') }], grants: { agent: '*' }, approvers: { desk: approver } })
      .bind({ owner, taskId: 't', caller: 'agent' });
    const execution = await gateway.call('transfer', {});
    assert.deepEqual(execution.result.outcome, { status: 'succeeded', output: 'sent' });
    assert.deepEqual(made, ['A']);
    await owner.release();
    await store.close();
  });

  // u123: a process woken from a pause runs its timers in the order they fell due, so a body's own short wait resumed
  // it, and its check of the signal found nothing, before the heartbeat's timer could tell it; another host had
  // retried the transfer meanwhile, and it was made twice.
  for (const poll of ['aborted', 'throwIfAborted()'] as const) {
    it(`stops a body that a woken process resumes before the heartbeat runs, at its check of signal.${poll}`, async () => {
      const store = await target.fresh().open();
      const made: string[] = [];
      const owner = await store.acquire(`s-poll-${poll.length}`, { owner: 'host-a', leaseMs: LEASE_MS });
      await owner.startTask('t');
      let resume!: () => void;
      let waiting!: () => void;
      const bodyWaits = new Promise<void>((resolve) => { waiting = resolve; });
      const transferAfterWait = tool('transfer', async (_request, signal) => {
        await new Promise<void>((resolve) => {
          resume = resolve;
          waiting();
        });
        if (poll === 'aborted') {
          if (signal.aborted) throw signal.reason;
        } else signal.throwIfAborted();
        made.push('A');
        return 'sent';
      }, TRANSFER);
      const call = createToolRuntime({ tools: [transferAfterWait], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' }).call('transfer', {});
      await bodyWaits;
      // The body's wait ends on a timer that falls due first once the process wakes: before the heartbeat's.
      setTimeout(() => resume(), 1);
      stall(STALL_MS);
      const execution = await call;
      assert.deepEqual(made, [], 'the body saw the lapse at its check and made no transfer');
      const outcome = execution.result.outcome;
      assert.equal(outcome.status === 'failed' ? outcome.code : outcome.status, 'tool_cancelled');
      assert.match(outcome.status === 'failed' ? outcome.message : '', /lost its hold on the session, or may have/);
      await owner.release();
      await store.close();
    });
  }

  it('leaves the signal of a call that has ended as it was: a read after its deadline does not abort it', async () => {
    const store = await target.fresh().open();
    const owner = await store.acquire('s-ended', { owner: 'host-a' });
    await owner.startTask('t');
    let kept: AbortSignal | undefined;
    const quick = tool('quick', async (_request, signal) => {
      kept = signal;
      return 'done';
    }, TRANSFER);
    const execution = await createToolRuntime({ tools: [quick], grants: { agent: '*' }, defaultTimeoutMs: 50 }).bind({ owner, taskId: 't', caller: 'agent' }).call('quick', {});
    assert.deepEqual(execution.result.outcome, { status: 'succeeded', output: 'done' });
    await sleep(120);
    assert.equal(kept?.aborted, false);
    await owner.release();
    await store.close();
  });
});

/** Another host's takeover, made synchronously through a raw connection: the epoch raised under the owner's feet. */
function fenceNow(path: string, sessionId: string): void {
  const raw = new Database(path, { timeout: 5_000 });
  try {
    raw.prepare("UPDATE jw_sessions SET epoch = epoch + 1, owner = 'host-b' WHERE session_id = ?").run(sessionId);
  } finally {
    raw.close();
  }
}

describe('a host fenced after a call\'s start marker (SQLite, the takeover made synchronously)', () => {
  it('is told the body was not called when the runtime stopped it before the body, and never when the body ran (r108 F2, r109 #1)', async () => {
    const path = tempDbPath(tempDir(), 'fenced');
    const store = openSqliteStore(path);
    try {
      const owner = await store.acquire('s-fenced', { owner: 'host-a', leaseMs: LEASE_MS });
      await owner.startTask('t');
      const made: string[] = [];
      // The stall outlives the lease, and another host takes the session over meanwhile: the body is never called.
      let stalled = false;
      setFaultHook((point) => {
        if (point === 'started:after' && !stalled) {
          stalled = true;
          stall(STALL_MS);
          fenceNow(path, 's-fenced');
        }
      });
      const gateway = createToolRuntime({ tools: [transfer('A', made, 10)], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
      await assert.rejects(gateway.call('transfer', {}).finally(() => setFaultHook(null)), (error: unknown) =>
        error instanceof ToolRecordingError && error.stage === 'result' && error.result?.outcome.status === 'failed' &&
        error.result.outcome.code === 'tool_stopped_before_body' && error.message.includes('. The body was not called: this host lost its hold'));
      assert.deepEqual(made, [], 'the body was never called');

      // A body that ran and failed with that very code of its own, its host fenced meanwhile: never "not called".
      const other = await store.acquire('s-ran', { owner: 'host-a' });
      await other.startTask('t');
      const ran: string[] = [];
      const ownCode = tool('transfer', async () => {
        ran.push('B');
        fenceNow(path, 's-ran');
        throw new ToolBodyError('tool_stopped_before_body', 'the bank said it stopped');
      }, TRANSFER);
      await assert.rejects(createToolRuntime({ tools: [ownCode], grants: { agent: '*' } }).bind({ owner: other, taskId: 't', caller: 'agent' }).call('transfer', {}),
        (error: unknown) => error instanceof ToolRecordingError && error.stage === 'result' && error.result?.outcome.status === 'failed' &&
          error.result.outcome.category === 'body_failure' && !error.message.includes('not called'));
      assert.deepEqual(ran, ['B'], 'the body ran');
    } finally {
      setFaultHook(null);
      await store.close();
    }
  });
});

// u138 #3: a host whose session a host in another process took over had its body return after it: the result could
// not be written (fenced), nor the body's end, and nothing anywhere said the body had returned.
describe('a host fenced by another process while its body runs', () => {
  it('warns that its body returned and that no journal here can take that end', async () => {
    const path = tempDbPath(tempDir('jingwei-fenced-'), 'journal');
    const a = openSqliteStore(path);
    const owner = await a.acquire('s-away', { owner: 'host-a' });
    await owner.startTask('t');
    let proceed!: () => void;
    let running!: () => void;
    const bodyRuns = new Promise<void>((resolve) => (running = resolve));
    const pay = tool('pay', async () => {
      running();
      // A body that ignores its signal: it goes on to its write whatever the host learns meanwhile.
      await new Promise<void>((resolve) => (proceed = resolve));
      return 'paid';
    }, TRANSFER);
    const call = settled(createToolRuntime({ tools: [pay], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' }).call('pay', {}));
    await bodyRuns;
    const warnings: Error[] = [];
    const heard = (warning: Error) => warnings.push(warning);
    process.on('warning', heard);
    const child = new ChildProcess(ownerChild, [path, 's-away', 'host-b']);
    try {
      assert.deepEqual(await child.next(), { ready: true }, child.stderr);
      child.send('acquire 1');
      assert.equal((await child.next<{ ok: boolean }>()).ok, true, child.stderr);
      child.send('exit');
      await child.exited;
      proceed();
      const ended = await call;
      assert.ok('error' in ended, 'its result cannot be written by a fenced owner');
      for (let waited = 0; !warnings.some((w) => (w as { code?: string }).code === 'JINGWEI_BODY_END_UNJOURNALED') && waited < 5_000; waited += 10) await sleep(10);
      const warning = warnings.find((w) => (w as { code?: string }).code === 'JINGWEI_BODY_END_UNJOURNALED');
      assert.match(String(warning?.message), /the body of call \S+ in session "s-away" returned \(it most likely made its write\) after this process's hold on the session ended/);
    } finally {
      process.off('warning', heard);
      await a.close();
    }
  });
});
