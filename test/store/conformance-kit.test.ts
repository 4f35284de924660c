/**
 * The conformance kit catches what it is for: run in child processes against small backends with one defect each,
 * it fails them naming the problem, skips (never passes) the two-handle cases without `reopen`, and gives up on a
 * lease that never expires instead of hanging. The backends wrap the memory backend as an optimistic engine would
 * work: read, decide, a round trip in which another handle may write, then a write that the engine checks.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { JournalStore } from '../../src/store/journal-store.js';
import { createMemoryStore } from '../../src/store/memory.js';
import type { SessionId } from '../../src/ids.js';
import type { InboxBackend } from '../../src/store/inbox-rows.js';
import type { AttentionScan, JournalBackend, OperationBinding, SessionRow, TxReads, TxState, TxWrites } from '../../src/store/rows.js';
import type { SessionStore } from '../../src/store/types.js';
import { StoreClosedError } from '../../src/errors.js';
import { runStoreConformance } from '../../src/testing/index.js';

type Defect = 'none' | 'ignore-expect' | 'no-lease';

/** One handle on a shared memory backend, checking `expect` at write time as a compare-and-set engine does. */
class OptimisticBackend implements JournalBackend {
  readonly kind = 'optimistic-memory';
  private closed = false;
  constructor(readonly inner: JournalBackend, private readonly defect: Defect) {}

  private check(): void {
    if (this.closed) throw new StoreClosedError(this.kind);
  }

  async transact<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>): Promise<R> {
    this.check();
    const state = await this.inner.transact(sessionId, reads, (read) => ({ result: read }));
    const writes = decide(state);
    await new Promise((resolve) => setImmediate(resolve));
    return this.inner.transact(sessionId, {}, (current) => {
      const session = writes.session;
      if (!session) return writes;
      let row: SessionRow = session.row;
      if (this.defect === 'no-lease') {
        const { leaseExpiresAt: _dropped, ...rest } = row;
        row = rest;
      }
      const now = current.session;
      const expect = this.defect === 'ignore-expect' ? (now ? { epoch: now.epoch, lastSeq: now.lastSeq } : null) : session.expect;
      return { ...writes, session: { row, expect } };
    });
  }

  async snapshot(id: SessionId) {
    this.check();
    return this.inner.snapshot(id);
  }

  async readTask(id: SessionId, taskId: string) {
    this.check();
    return this.inner.readTask(id, taskId);
  }

  async listSessions() {
    this.check();
    return this.inner.listSessions();
  }

  async readOperation(id: SessionId, taskId: string, key: string) {
    this.check();
    return this.inner.readOperation!(id, taskId, key);
  }

  async scanAttention(scan: AttentionScan) {
    this.check();
    return this.inner.scanAttention!(scan);
  }

  async findAttention(id: SessionId, binding: OperationBinding) {
    this.check();
    return this.inner.findAttention!(id, binding);
  }

  get inbox(): InboxBackend {
    return this.inner.inbox!;
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

const child = process.env.JINGWEI_KIT_CHILD;
if (child) {
  const [defect, withReopen] = child.split(':') as [Defect, string];
  const shared = new WeakMap<SessionStore, JournalBackend>();
  const open = (inner: JournalBackend): SessionStore => {
    const store = new JournalStore(new OptimisticBackend(inner, defect));
    shared.set(store, inner);
    return store;
  };
  runStoreConformance({
    name: `kit child ${child}`,
    open: () => open((createMemoryStore() as JournalStore).backend),
    ...(withReopen === 'reopen' ? { reopen: (store: SessionStore) => open(shared.get(store)!) } : {}),
  });
} else {
  const self = fileURLToPath(import.meta.url);

  /** Runs the kit in a child on the backend `spec` names, only the cases matching `pattern`; its TAP output. */
  const runKit = (spec: string, pattern: string) =>
    new Promise<{ code: number | null; out: string }>((resolve, reject) => {
      // Without NODE_TEST_CONTEXT, which the runner sets for its own children, the child runs as a test run of its own.
      const { NODE_TEST_CONTEXT: _runner, ...env } = process.env;
      const proc = spawn(process.execPath, ['--test', '--test-reporter=tap', `--test-name-pattern=${pattern}`, self], {
        env: { ...env, JINGWEI_KIT_CHILD: spec },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      proc.stdout.on('data', (chunk: Buffer) => { out += chunk.toString(); });
      proc.stderr.on('data', (chunk: Buffer) => { out += chunk.toString(); });
      proc.on('error', reject);
      proc.on('close', (code) => resolve({ code, out }));
    });
  const count = (out: string, what: 'pass' | 'fail') => Number(new RegExp(`^# ${what} (\\d+)$`, 'm').exec(out)?.[1]);
  const failed = (out: string) => [...out.matchAll(/^\s*not ok \d+ - (two handles.*|the backend.*|a lease.*)$/gm)].map((m) => m[1]);

  describe('the store conformance kit', () => {
    // The four children run at the same time: the lease case waits out the kit's deadline of a few seconds.
    let runs: Record<'good' | 'bad' | 'single' | 'noLease', Promise<{ code: number | null; out: string }>>;
    before(() => {
      const twoHandles = 'two handles|the backend';
      runs = {
        good: runKit('none:reopen', twoHandles),
        bad: runKit('ignore-expect:reopen', twoHandles),
        single: runKit('none:single', 'two handles|a second handle'),
        noLease: runKit('no-lease:reopen', 'a lease nobody renews'),
      };
    });

    it('passes a correct optimistic backend on two handles, and fails one that ignores expect, naming it', async () => {
      const [good, bad] = await Promise.all([runs.good, runs.bad]);
      assert.equal(good.code, 0, good.out);
      assert.equal(count(good.out, 'pass'), 6, good.out);
      assert.notEqual(bad.code, 0);
      assert.deepEqual(failed(bad.out), [
        'two handles: concurrent first acquires of a new session, exactly one wins and the other is refused',
        'two handles: concurrent takeovers get one epoch each, and only the newest owner can write',
        "two handles: a fenced owner's appends racing the takeover and the new owner's appends never land after the takeover",
        'the backend itself refuses an owner-row write whose expected epoch or lastSeq no longer holds, writing none of its rows',
      ]);
      assert.match(bad.out, /2 of two concurrent first acquires of c-first-0 succeeded/);
      assert.match(bad.out, /two concurrent takeovers of c-takeover-0 were both given epoch 2/);
      assert.match(bad.out, /the backend applied an owner-row update expecting the epoch before the takeover/);
    });

    it('reports the two-handle cases as skipped without reopen, and fails a backend that drops leases within its deadline', async () => {
      const [single, noLease] = await Promise.all([runs.single, runs.noLease]);
      assert.equal(single.code, 0, single.out);
      assert.equal(count(single.out, 'pass'), 0, single.out);
      assert.equal(single.out.match(/# SKIP not run: needs a second handle/g)?.length, 5);
      assert.notEqual(noLease.code, 0);
      assert.deepEqual(failed(noLease.out), ["a lease nobody renews runs out: listed as expired, then taken over by takeover 'expired'"]);
      assert.match(noLease.out, /lease: session l-gone, held under a 100 ms lease that nobody renews, was still not listed as expired/);
    });
  });
}
