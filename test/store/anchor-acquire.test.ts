/**
 * A journal put back from a backup is refused at acquire (u125 #1). A host anchored its heads in a file, paid an order
 * under a caller key and died; an operator restored a backup of the journal taken before the payment; the startup
 * routine and the next host took the session, the journal said the order was never paid, and it was paid again. An
 * owner whose anchor can read its checkpoints back (fileAnchorSink's file, or `anchor.checkpoints`) now checks the
 * stored journal against them before it takes the session.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { appendFileSync, copyFileSync, existsSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { AnchorError, InvalidInputError } from '../../src/errors.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { encodeCheckpoint, fileAnchorSink, parseCheckpoints, type Checkpoint } from '../../src/store/anchors.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { recoverAbandoned, type RecoveryHost } from '../../src/review.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { SessionOwner } from '../../src/store/types.js';
import { sleep, tool } from '../support/runtime.js';
import { tempDir } from '../support/tmp.js';

const keys = generateKeyPairSync('ed25519');
const otherKeys = generateKeyPairSync('ed25519');
const PAY = new ToolMetadata('pays an order', { type: 'object' }).withEffect('non_idempotent', 'pay-1');
const message = (text: string) => [{ turnId: 't', kind: { type: 'user_message' as const, text } }];

/** A journal file, its anchor file, and a copy of the journal taken as a backup is (all its files checkpointed into one). */
function place() {
  const dir = tempDir();
  const journal = join(dir, 'journal.db');
  const anchors = join(dir, 'anchors.jsonl');
  const backup = join(dir, 'backup.db');
  const anchor = { privateKey: keys.privateKey, sink: fileAnchorSink(anchors) };
  /** Copies the closed journal to the backup. */
  const takeBackup = () => copyFileSync(journal, backup);
  /** Puts the backup back as an operator restoring it would: the journal's -wal and -shm removed first. */
  const restore = () => {
    for (const suffix of ['-wal', '-shm']) rmSync(journal + suffix, { force: true });
    copyFileSync(backup, journal);
  };
  return { journal, anchors, backup, anchor, takeBackup, restore };
}

async function payOnce(owner: SessionOwner, paid: string[], who: string) {
  const pay = tool('pay', async () => {
    paid.push(who);
    return 'paid';
  }, PAY);
  return createToolRuntime({ tools: [pay], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' })
    .callWithOptions('pay', { order: 'o-1' }, { operationKey: 'order-o-1' });
}

describe('an anchored owner checks the stored journal against its checkpoints before it acquires', () => {
  it('refuses a journal restored from a backup taken before a payment: the startup routine and the host take nothing, nothing is paid again', async () => {
    const p = place();
    const paid: string[] = [];
    let store = openSqliteStore(p.journal);
    const owner = await store.acquire('s1', { owner: 'host-a', anchor: p.anchor, leaseMs: 1_000 });
    await owner.startTask('t');
    // An online backup while host A holds the session, then the payment.
    const raw = new Database(p.journal, { readonly: true });
    await raw.backup(p.backup);
    raw.close();
    assert.equal((await payOnce(owner, paid, 'A')).result.outcome.status, 'succeeded');
    // Host A dies holding the session; the operator restores the backup, and the lease it holds there runs out.
    await store.close();
    await sleep(1_100);
    p.restore();
    store = openSqliteStore(p.journal);
    const before = (await store.loadHistory('s1')).length;
    const tools = [tool('pay', async () => { paid.push('B'); return 'paid'; }, PAY)];
    const host: RecoveryHost = { runtime: createToolRuntime({ tools, grants: { agent: '*' } }), tools, caller: 'agent' };
    const report = await recoverAbandoned(store, host, { policy: 'retry_safe', anchor: p.anchor });
    assert.equal(report.sessions.length, 1, 'the restored session is abandoned: held by host A in the backup');
    for (const session of report.sessions) {
      assert.equal(session.action, 'failed', JSON.stringify(session));
      assert.equal(session.action === 'failed' && session.error.code, 'anchor_mismatch');
    }
    const refused = await store.acquire('s1', { owner: 'host-b', anchor: p.anchor, takeover: true }).then(() => null, (error: unknown) => error);
    assert.ok(refused instanceof AnchorError, String(refused));
    assert.equal(refused.code, 'anchor_mismatch');
    assert.equal(refused.reason, 'truncated');
    assert.match(refused.message, /a backup restored.*acquire refused, nothing written/);
    assert.equal((await store.loadHistory('s1')).length, before, 'nothing was written on the restored journal');
    assert.deepEqual(paid, ['A'], 'paid once');
    await store.close();
  });

  it('refuses a restored journal written on since (another event at an anchored seq) and one restored from before the session existed', async () => {
    const p = place();
    let store = openSqliteStore(p.journal);
    const early = await store.acquire('early', { owner: 'h' });
    await early.release();
    await store.close();
    p.takeBackup();
    store = openSqliteStore(p.journal);
    let owner = await store.acquire('s2', { owner: 'h', anchor: p.anchor });
    await owner.append(message('one'));
    await owner.append(message('two'));
    await owner.release();
    await store.close();
    p.restore();
    store = openSqliteStore(p.journal);
    // A session the backup does not have at all.
    const missing = await store.acquire('s2', { owner: 'h', anchor: p.anchor }).then(() => null, (error: unknown) => error);
    assert.ok(missing instanceof AnchorError && missing.reason === 'truncated', String(missing));
    assert.equal(await store.listSessions().then((list) => list.some((s) => s.sessionId === 's2')), false, 'no session was started in its place');
    // The same journal taken on without the anchor (a host that does not check) writes other events at the anchored seqs.
    owner = await store.acquire('s2', { owner: 'h' });
    await owner.append(message('other one'));
    await owner.append(message('other two'));
    await owner.append(message('other three'));
    await owner.release();
    const rewritten = await store.acquire('s2', { owner: 'h', anchor: p.anchor }).then(() => null, (error: unknown) => error);
    assert.ok(rewritten instanceof AnchorError && rewritten.reason === 'rewritten', String(rewritten));
    await store.close();
  });

  it('takes a journal its checkpoints vouch for, a session never anchored, and ignores checkpoints of another key', async () => {
    const p = place();
    const store = openSqliteStore(p.journal);
    let owner = await store.acquire('s3', { owner: 'h', anchor: p.anchor });
    await owner.append(message('one'));
    await owner.release();
    // Events appended since the newest checkpoint (a host without the anchor) are not a mismatch.
    owner = await store.acquire('s3', { owner: 'h' });
    await owner.append(message('two'));
    await owner.release();
    owner = await store.acquire('s3', { owner: 'h', anchor: p.anchor });
    await owner.release();
    const fresh = await store.acquire('never-anchored', { owner: 'h', anchor: p.anchor });
    await fresh.release();
    // Checkpoints by another key in the same file (another host's) are not this owner's to check.
    const other = { privateKey: otherKeys.privateKey, sink: fileAnchorSink(p.anchors) };
    owner = await store.acquire('s4', { owner: 'h', anchor: other });
    await owner.append(message('x'));
    await owner.release();
    const memory = createMemoryStore();
    const mine = await memory.acquire('s4', { owner: 'h', anchor: p.anchor });
    await mine.release();
    await store.close();
  });

  it('reads the appends made to the file since its last read, by any writer, and skips a damaged line with a warning', async () => {
    const p = place();
    const store = openSqliteStore(p.journal);
    const warnings: unknown[] = [];
    const anchor = { ...p.anchor, onError: (e: unknown) => warnings.push(e) };
    let owner = await store.acquire('s5', { owner: 'h', anchor });
    await owner.release();
    // Two appends that ran into each other (a sink that died mid-line), then more checkpoints after it.
    appendFileSync(p.anchors, '{"checkpoint":1,"session_id":"s5","seq":0{"checkpoint":\n');
    // A copy of the store's file taken now, put back after the next write, is caught by a checkpoint read since.
    await store.close();
    copyFileSync(p.journal, `${p.journal}.copy`);
    const again = openSqliteStore(p.journal);
    owner = await again.acquire('s5', { owner: 'h', anchor });
    await owner.append(message('after'));
    await owner.release();
    await again.close();
    assert.equal(warnings.length, 1);
    assert.ok(warnings[0] instanceof AnchorError && (warnings[0] as AnchorError).reason === 'malformed');
    for (const suffix of ['-wal', '-shm']) rmSync(p.journal + suffix, { force: true });
    copyFileSync(`${p.journal}.copy`, p.journal);
    assert.ok(existsSync(p.journal));
    const restored = openSqliteStore(p.journal);
    await assert.rejects(restored.acquire('s5', { owner: 'h', anchor }), (error: unknown) => error instanceof AnchorError && error.reason === 'rolled_back');
    await restored.close();
  });

  it('checks against anchor.checkpoints when given (checkpoints or their wire form), and refuses an answer that holds anything else', async () => {
    const p = place();
    const kept: Checkpoint[] = [];
    const anchor = { privateKey: keys.privateKey, sink: (c: Checkpoint) => void kept.push(c), checkpoints: (id: string) => kept.filter((c) => c.sessionId === id) };
    let store = openSqliteStore(p.journal);
    const owner = await store.acquire('s6', { owner: 'h', anchor });
    await owner.release();
    await store.close();
    p.takeBackup();
    store = openSqliteStore(p.journal);
    const again = await store.acquire('s6', { owner: 'h', anchor });
    await again.append(message('one'));
    await again.release();
    await store.close();
    p.restore();
    store = openSqliteStore(p.journal);
    await assert.rejects(store.acquire('s6', { owner: 'h', anchor }), (error: unknown) => error instanceof AnchorError && error.reason === 'rolled_back');
    // The anchor file's own form, parsed lines, is read as the checkpoints it holds.
    const wire = { ...anchor, checkpoints: (id: string) => kept.filter((c) => c.sessionId === id).map((c) => JSON.parse(JSON.stringify(encodeCheckpoint(c))) as Checkpoint) };
    await assert.rejects(store.acquire('s6', { owner: 'h', anchor: wire }), (error: unknown) => error instanceof AnchorError && error.reason === 'rolled_back');
    // u126 #3: junk in the answer let the restored journal through.
    for (const junk of ['none', ['a checkpoint'], [{}], [null], [{ ...kept[0]!, seq: 'one' }], [{ checkpoint: 1, session_id: 's6' }]]) {
      await assert.rejects(store.acquire('s6', { owner: 'h', anchor: { ...anchor, checkpoints: () => junk as unknown as Checkpoint[] } }), InvalidInputError, JSON.stringify(junk));
    }
    await assert.rejects(store.acquire('s6', { owner: 'h', anchor: { ...anchor, checkpoints: 3 as unknown as () => Checkpoint[] } }), InvalidInputError);
    assert.equal((await store.loadHistory('s6')).length, 0, 'nothing was written');
    await store.close();
  });

  // u126 #5, #6: checkpoints of a session of the same id in another journal refused a legitimate one for good.
  it('checks only checkpoints of its own journal: a plain import elsewhere, a second store sharing the anchor file, a memory store after a restart', async () => {
    const p = place();
    const store = openSqliteStore(p.journal);
    const owner = await store.acquire('main', { owner: 'h', anchor: p.anchor });
    await owner.append(message('one'));
    await owner.append(message('two'));
    await owner.release();
    const history = await store.loadHistory('main');
    await store.close();
    // Another journal: the same session id started afresh, and the session imported as a new chain.
    const second = openSqliteStore(join(dirname(p.journal), 'second.db'));
    const fresh = await second.acquire('main', { owner: 'h', anchor: p.anchor });
    await fresh.release();
    const imported = await second.acquire('moved', { owner: 'h' });
    await imported.append(history.map((e) => ({ turnId: e.turnId, kind: e.kind })));
    await imported.release();
    const movedAgain = await second.acquire('moved', { owner: 'h', anchor: p.anchor });
    await movedAgain.release();
    await second.close();
    for (let restart = 0; restart < 2; restart++) {
      const memory = createMemoryStore();
      await (await memory.acquire('main', { owner: 'h', anchor: p.anchor })).release();
    }
    // The first journal itself is still checked.
    p.takeBackup();
    const first = openSqliteStore(p.journal);
    await (await first.acquire('main', { owner: 'h', anchor: p.anchor })).release();
    await first.close();
  });

  it('a torn append is a line of its own: the next checkpoint stays readable to verify and to acquire', async () => {
    const p = place();
    const store = openSqliteStore(p.journal);
    const owner = await store.acquire('s7', { owner: 'h', anchor: p.anchor });
    await owner.release();
    appendFileSync(p.anchors, '{"checkpoint":1,"session_id":"s7","se');
    const warnings: unknown[] = [];
    const again = await store.acquire('s7', { owner: 'h', anchor: { ...p.anchor, onError: (e: unknown) => warnings.push(e) } });
    await again.append(message('after the torn line'));
    await again.release();
    assert.deepEqual(warnings, [], 'a torn line is skipped quietly at acquire');
    const torn: number[] = [];
    const checkpoints = parseCheckpoints(readFileSync(p.anchors, 'utf8'), (line) => torn.push(line));
    assert.deepEqual(torn, [2], 'the torn line is reported, and only it');
    assert.ok(checkpoints.some((c) => c.sessionId === 's7' && c.seq === 0), 'the checkpoint after it is read');
    await store.close();
  });

  it('keeps what it read of an anchor file that is rotated away, and says once that a sink of its own cannot be read back', async () => {
    const p = place();
    let store = openSqliteStore(p.journal);
    await (await store.acquire('s8', { owner: 'h', anchor: p.anchor })).release();
    await store.close();
    p.takeBackup();
    store = openSqliteStore(p.journal);
    const owner = await store.acquire('s8', { owner: 'h', anchor: p.anchor });
    await owner.append(message('paid'));
    await owner.release();
    // Another acquire reads the file since: the payment's checkpoint is known in this process.
    await (await store.acquire('s-other', { owner: 'h', anchor: p.anchor })).release();
    await store.close();
    renameSync(p.anchors, `${p.anchors}.1`);
    p.restore();
    store = openSqliteStore(p.journal);
    await assert.rejects(store.acquire('s8', { owner: 'h', anchor: p.anchor }), (error: unknown) => error instanceof AnchorError && error.reason === 'rolled_back');
    const warned: string[] = [];
    const onWarning = (warning: Error & { code?: string }) => void warned.push(String(warning.code));
    process.on('warning', onWarning);
    try {
      const file = fileAnchorSink(`${p.anchors}.2`);
      const wrapped = { privateKey: keys.privateKey, sink: async (c: Checkpoint) => file(c) };
      await (await store.acquire('s9', { owner: 'h', anchor: wrapped })).release();
      await (await store.acquire('s9', { owner: 'h', anchor: wrapped })).release();
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
    }
    assert.deepEqual(warned.filter((c) => c === 'JINGWEI_ANCHOR_UNCHECKED'), ['JINGWEI_ANCHOR_UNCHECKED']);
    await store.close();
  });
});
