/** Signing heads from an owner: when checkpoints are made, what a failing sink does, and the checks on keys. */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, it } from 'node:test';
import { AnchorError, InvalidInputError } from '../../src/errors.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { checkAnchors, signCheckpoint, verifyCheckpoint, type Checkpoint } from '../../src/store/anchors.js';
import { verifySessionAnchors } from '../../src/store/anchor-store.js';

const keys = generateKeyPairSync('ed25519');
const message = (text: string) => [{ turnId: 't', kind: { type: 'user_message' as const, text } }];

describe('anchored owners', () => {
  it('every: 3 signs at acquire, after every third event, and at release for the rest', async () => {
    const store = createMemoryStore();
    const seen: Checkpoint[] = [];
    const owner = await store.acquire('s', { owner: 'h', anchor: { privateKey: keys.privateKey, sink: (c) => void seen.push(c), every: 3 } });
    for (let i = 0; i < 7; i++) await owner.append(message(`m${i}`));
    await owner.release();
    assert.deepEqual(seen.map((c) => c.seq), [-1, 2, 5, 6]);
    for (const c of seen) verifyCheckpoint(keys.publicKey, c);
    const report = await verifySessionAnchors(store, 's', { publicKey: keys.publicKey, checkpoints: seen });
    assert.deepEqual(report, { checkpoints: 4, anchoredSeq: 6, unanchoredEvents: 0 });
  });

  it('a failing sink never fails the durable commit; onError gets it, and the next commit anchors what was missed', async () => {
    const store = createMemoryStore();
    const seen: Checkpoint[] = [];
    const errors: unknown[] = [];
    let fail = false;
    const sink = (c: Checkpoint) => {
      if (fail) throw new Error('sink down');
      seen.push(c);
    };
    const owner = await store.acquire('s', { owner: 'h', anchor: { privateKey: keys.privateKey, sink, onError: (e) => errors.push(e) } });
    fail = true;
    await owner.append(message('kept'));
    assert.equal(errors.length, 1);
    assert.equal((await store.loadHistory('s')).length, 1, 'the commit stands');
    fail = false;
    await owner.append(message('next'));
    assert.deepEqual(seen.map((c) => c.seq), [-1, 1]);
  });

  it('refuses keys that are not Ed25519 private keys, and options that make no sense', async () => {
    const store = createMemoryStore();
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 });
    await assert.rejects(store.acquire('s', { owner: 'h', anchor: { privateKey: rsa.privateKey, sink: () => {} } }), InvalidInputError);
    await assert.rejects(store.acquire('s', { owner: 'h', anchor: { privateKey: keys.publicKey, sink: () => {} } }), InvalidInputError);
    await assert.rejects(store.acquire('s', { owner: 'h', anchor: { privateKey: keys.privateKey, sink: () => {}, every: 0 } }), InvalidInputError);
    assert.equal((await store.listSessions()).length, 0, 'a refused option acquires nothing');
  });

  it('a checkpoint whose fields were changed no longer verifies', () => {
    const c = signCheckpoint(keys.privateKey, { sessionId: 's', seq: 4, headHash: 'a'.repeat(64), epoch: 2 });
    assert.throws(() => verifyCheckpoint(keys.publicKey, { ...c, seq: 5 }), (e: unknown) => e instanceof AnchorError && e.code === 'anchor_invalid');
    assert.throws(() => checkAnchors('s', [], 2, [{ ...c, epoch: 1 }], keys.publicKey), /bad_signature/);
  });
});
