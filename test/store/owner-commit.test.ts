/**
 * Only the runtime writes tool evidence: the runtime's write primitive is not on the published SessionOwner type,
 * nor reachable as a property of an owner; the runtime writes only through owners a store returned.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createMemoryStore } from '../../src/store/memory.js';
import type { SessionOwner } from '../../src/store/types.js';
import { createToolRuntime } from '../../src/tool/runtime.js';

describe('the runtime\'s write path is internal', () => {
  it('an owner has no commit: not in its type, not as a property', async () => {
    const store = createMemoryStore();
    const owner: SessionOwner = await store.acquire('s', { owner: 'h' });
    // @ts-expect-error commit is not part of the published SessionOwner type
    assert.equal(owner.commit, undefined);
    assert.equal('commit' in owner, false);
    assert.deepEqual(Object.getOwnPropertyNames(Object.getPrototypeOf(owner)).filter((n) => /commit/i.test(n)), []);
    await store.close();
  });

  it('a gateway refuses an owner no store returned (a look-alike cannot reach the journal)', async () => {
    const store = createMemoryStore();
    const real = await store.acquire('s', { owner: 'h' });
    const lookalike: SessionOwner = {
      sessionId: real.sessionId, epoch: real.epoch, owner: real.owner,
      startTask: (id, o) => real.startTask(id, o), stopTask: (id, r) => real.stopTask(id, r), completeTask: (id) => real.completeTask(id),
      task: (id) => real.task(id), append: (e) => real.append(e), onTaskStopped: (l) => real.onTaskStopped(l), release: () => real.release(),
      readOperation: (t, k) => real.readOperation(t, k), leaseMs: real.leaseMs, renewLease: () => real.renewLease(), heartbeating: real.heartbeating,
    };
    const runtime = createToolRuntime({ tools: [], grants: { agent: '*' } });
    assert.throws(() => runtime.bind({ owner: lookalike, taskId: 't', caller: 'agent' }), { code: 'invalid_input' });
    await store.close();
  });
});
