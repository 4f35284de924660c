/** Signing heads from an owner: when checkpoints are made, what a failing sink does, and the checks on keys. */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { describe, it } from 'node:test';
import { AnchorError, InvalidInputError } from '../../src/errors.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { checkAnchors, encodeCheckpoint, parseCheckpoints, signCheckpoint, verifyCheckpoint, type Checkpoint } from '../../src/store/anchors.js';
import { exportChainedJsonl, verifySessionAnchors } from '../../src/store/anchor-store.js';
import { checkExportAnchors, splitChainTrailer } from '../../src/store/export-chain.js';

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

  it('nothing vouches for a session without a checkpoint of its own: checkAnchors, verifySessionAnchors and checkExportAnchors say unanchored', async () => {
    const store = createMemoryStore();
    const seen: Checkpoint[] = [];
    const owner = await store.acquire('orders-1', { owner: 'h', anchor: { privateKey: keys.privateKey, sink: (c) => void seen.push(c) } });
    await owner.append(message('refund 800'));
    await owner.release();
    // The same journal under a look-alike id (U+2010 for the hyphen), imported: a chain of its own, no checkpoint.
    const lookalike = 'orders\u20101';
    await store.importJsonl((await store.exportJsonl('orders-1')).replaceAll('"orders-1"', JSON.stringify(lookalike)), { owner: 'h' });
    const unanchored = (e: unknown) => e instanceof AnchorError && e.reason === 'unanchored' && e.code === 'anchor_mismatch' && e.seq === -1 &&
      e.message.includes(`no signed checkpoint is of this id, "${lookalike}"; the 2 checkpoints given are of "orders-1"`);
    await assert.rejects(verifySessionAnchors(store, lookalike, { publicKey: keys.publicKey, checkpoints: seen }), unanchored);
    assert.throws(() => checkAnchors(lookalike, [], 1, seen, keys.publicKey), unanchored);
    assert.throws(() => checkAnchors('s', [], 1, [], keys.publicKey), /no checkpoints were given/);
    assert.deepEqual(await verifySessionAnchors(store, 'orders-1', { publicKey: keys.publicKey, checkpoints: seen }), { checkpoints: 2, anchoredSeq: 0, unanchoredEvents: 0 });

    // A chained export: the checkpoints it carries cannot vouch for it alone; those kept outside it must.
    const text = await exportChainedJsonl(store, 'orders-1', seen);
    const { journal, trailer } = splitChainTrailer(text);
    assert.equal(trailer!.checkpoints.length, 2);
    assert.throws(() => checkExportAnchors('orders-1', journal, trailer, keys.publicKey, []), /\(unanchored\): .*no checkpoints were kept outside the file/);
    assert.deepEqual(checkExportAnchors('orders-1', journal, trailer, keys.publicKey, seen), { checkpoints: 2, anchoredSeq: 0, unanchoredEvents: 0 });
  });

  it('a checkpoint whose fields were changed no longer verifies', () => {
    const c = signCheckpoint(keys.privateKey, { sessionId: 's', seq: 4, headHash: 'a'.repeat(64), epoch: 2 });
    assert.throws(() => verifyCheckpoint(keys.publicKey, { ...c, seq: 5 }), (e: unknown) => e instanceof AnchorError && e.code === 'anchor_invalid');
    assert.throws(() => checkAnchors('s', [], 2, [{ ...c, epoch: 1 }], keys.publicKey), /bad_signature/);
  });

  it('a last line torn mid-append is skipped and reported; any other bad line is refused', () => {
    const lines = [0, 1, 2].map((seq) => JSON.stringify(encodeCheckpoint(signCheckpoint(keys.privateKey, { sessionId: 's', seq, headHash: 'a'.repeat(64), epoch: 1 }))));
    const whole = lines.join('\n') + '\n';
    const torn = whole + lines[2]!.slice(0, 40);
    const reported: [number, string][] = [];
    const kept = parseCheckpoints(torn, (line, text) => void reported.push([line, text]));
    assert.deepEqual(kept.map((c) => c.seq), [0, 1, 2]);
    assert.equal(reported.length, 1);
    assert.equal(reported[0]![0], 4);
    assert.match(reported[0]![1], /line 4 has no newline and is not a whole checkpoint/);
    const malformed = (e: unknown) => e instanceof AnchorError && e.code === 'anchor_invalid' && e.reason === 'malformed';
    // A line cut short is torn wherever it is: the sink starts a new line after a torn tail (u126 #4), which leaves it
    // in the middle, ending in a newline; the checkpoints around it count.
    const middle: number[] = [];
    assert.deepEqual(parseCheckpoints(torn + '\n', (line) => void middle.push(line)).map((c) => c.seq), [0, 1, 2]);
    assert.deepEqual(parseCheckpoints(lines[0] + '\n' + lines[2]!.slice(0, 40) + '\n' + lines[1], (line) => void middle.push(line)).map((c) => c.seq), [0, 1]);
    assert.deepEqual(middle, [4, 2]);
    // Any other bad line is refused, in the middle too: whole JSON that is not a checkpoint, or text that is not JSON.
    assert.throws(() => parseCheckpoints(lines[0] + '\n{"checkpoint":1}\n' + lines[1], () => assert.fail('not torn')), malformed);
    assert.throws(() => parseCheckpoints(lines[0] + '\nnot a checkpoint\n' + lines[1], () => assert.fail('not torn')), malformed);
    // A last line without its newline that is whole JSON but not a checkpoint was not torn.
    assert.throws(() => parseCheckpoints(whole + '{"checkpoint":1}', () => assert.fail('not torn')), malformed);
    assert.deepEqual(parseCheckpoints(whole + lines[2], () => assert.fail('not torn')).map((c) => c.seq), [0, 1, 2, 2]);
  });

  it('links with a hole, or a link that is not { epoch, hash }, are refused as invalid_input', () => {
    const c = signCheckpoint(keys.privateKey, { sessionId: 's', seq: 1, headHash: 'a'.repeat(64), epoch: 1 });
    const link = { epoch: 1, hash: 'a'.repeat(64) };
    assert.deepEqual(checkAnchors('s', [link, link], 1, [c], keys.publicKey), { checkpoints: 1, anchoredSeq: 1, unanchoredEvents: 0 });
    const sparse: { epoch: number; hash: string }[] = [];
    sparse[1] = link;
    const invalid = (field: string) => (e: unknown) => e instanceof InvalidInputError && e.code === 'invalid_input' && e.field === field;
    assert.throws(() => checkAnchors('s', sparse, 1, [c], keys.publicKey), invalid('links[0]'));
    assert.throws(() => checkAnchors('s', [link, null as unknown as typeof link], 1, [c], keys.publicKey), invalid('links[1]'));
  });
});
