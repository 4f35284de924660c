import assert from 'node:assert/strict';
import { readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { JournalCorruptError } from '../../src/errors.js';
import { openSqliteStore } from '../../src/sqlite.js';
import type { SessionStore } from '../../src/store/types.js';
import { newTurnId } from '../../src/ids.js';
import { chainHash } from '../../src/store/chain.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir();
const SESSION = 's-corrupt';

const messageText = (seq: number, pad = 8) => `msg-${seq}:`.padEnd(pad, '.');

/** A closed store file holding `count` events whose text is `msg-<seq>:` padded to `pad` characters, `batch` an append. */
async function journalFile(count: number, pad = 8, batch = 1): Promise<string> {
  const path = tempDbPath(dir);
  const store = openSqliteStore(path);
  const owner = await store.acquire(SESSION, { owner: 'writer' });
  const turnId = newTurnId();
  for (let i = 0; i < count; i += batch) {
    const seqs = Array.from({ length: Math.min(batch, count - i) }, (_, k) => i + k);
    await owner.append(seqs.map((seq) => ({ turnId, kind: { type: 'user_message' as const, text: messageText(seq, pad) } })));
  }
  await store.close();
  return path;
}

/** Tampers through a separate raw connection, after the store is closed, then closes it again. */
function tamper(path: string, sql: string): void {
  const raw = new Database(path);
  raw.exec(sql);
  raw.close();
}

/** `read` defaults to loadHistory; checkTaskLedger takes the store's other read (one whole verified snapshot). */
async function expectCorrupt(path: string, seq: number, reason: string, read: (store: SessionStore) => Promise<unknown> = (s) => s.loadHistory(SESSION)): Promise<void> {
  const store = openSqliteStore(path);
  try {
    await assert.rejects(read(store), (error: unknown) => {
      assert.ok(error instanceof JournalCorruptError, `expected JournalCorruptError, got ${String(error)}`);
      assert.equal(error.reason, reason, error.message);
      assert.equal(error.seq, seq, error.message);
      assert.equal(error.sessionId, SESSION);
      return true;
    });
  } finally {
    await store.close();
  }
}

describe('SQLite journal corruption is always detected, never repaired', () => {
  it('one changed payload byte: hash_mismatch', async () => {
    const path = await journalFile(10);
    tamper(path, `UPDATE jw_events SET body = replace(body, 'msg-4:', 'msg-X:') WHERE seq = 4`);
    await expectCorrupt(path, 4, 'hash_mismatch');
  });

  it('a deleted middle row: seq_gap', async () => {
    const path = await journalFile(10);
    tamper(path, 'DELETE FROM jw_events WHERE seq = 5');
    await expectCorrupt(path, 5, 'seq_gap');
  });

  it('a deleted last row, which the chain alone cannot see: head_mismatch', async () => {
    const path = await journalFile(10);
    tamper(path, 'DELETE FROM jw_events WHERE seq = 9');
    await expectCorrupt(path, 9, 'head_mismatch');
  });

  it('a duplicated event id: duplicate_id', async () => {
    const path = await journalFile(10);
    tamper(path, `UPDATE jw_events SET event_id = (SELECT event_id FROM jw_events WHERE seq = 2),
      body = replace(body, (SELECT event_id FROM jw_events WHERE seq = 6), (SELECT event_id FROM jw_events WHERE seq = 2)) WHERE seq = 6`);
    await expectCorrupt(path, 6, 'duplicate_id');
  });

  describe('a repeated event id is the first violation in seq order, whenever it is found', () => {
    /** Row `at` takes the event id of row `from`, in its column and in its body (so only the repeat is wrong). */
    const repeatId = (from: number, at: number) => `UPDATE jw_events SET event_id = (SELECT event_id FROM jw_events WHERE seq = ${from}),
      body = replace(body, (SELECT event_id FROM jw_events WHERE seq = ${at}), (SELECT event_id FROM jw_events WHERE seq = ${from})) WHERE seq = ${at};`;

    /** Each: the tampering of a 10-event journal, and the one violation loadHistory must report. */
    const cases: Array<{ name: string; sql: string; seq: number; reason: string }> = [
      {
        name: 'a repeat before a broken link further on: duplicate_id at the repeat',
        sql: `${repeatId(2, 5)} UPDATE jw_events SET body = replace(body, 'msg-8:', 'msg-X:') WHERE seq = 8`,
        seq: 5,
        reason: 'duplicate_id',
      },
      {
        name: 'a broken link before a repeat: hash_mismatch at the link',
        sql: `${repeatId(1, 7)} UPDATE jw_events SET body = replace(body, 'msg-3:', 'msg-X:') WHERE seq = 3`,
        seq: 3,
        reason: 'hash_mismatch',
      },
      {
        name: 'a repeat on a row whose epoch is also wrong: duplicate_id (a row\'s ids are checked before its epoch)',
        sql: `${repeatId(0, 4)} UPDATE jw_events SET epoch = 9 WHERE seq = 4`,
        seq: 4,
        reason: 'duplicate_id',
      },
      {
        name: 'a repeat on a row whose body also claims another seq: order (a row\'s seq is checked before its ids)',
        sql: `${repeatId(0, 4)} UPDATE jw_events SET body = replace(body, '"seq":4', '"seq":40') WHERE seq = 4`,
        seq: 4,
        reason: 'order',
      },
      {
        name: 'a body naming an earlier event while its column keeps its own id: duplicate_id',
        sql: 'UPDATE jw_events SET body = replace(body, event_id, (SELECT event_id FROM jw_events WHERE seq = 1)) WHERE seq = 6',
        seq: 6,
        reason: 'duplicate_id',
      },
      {
        name: 'a body naming an id no row holds: hash_mismatch',
        sql: "UPDATE jw_events SET body = replace(body, event_id, 'evt_never_written') WHERE seq = 6",
        seq: 6,
        reason: 'hash_mismatch',
      },
    ];
    for (const { name, sql, seq, reason } of cases) {
      it(name, async () => {
        const path = await journalFile(10);
        tamper(path, sql);
        await expectCorrupt(path, seq, reason);
      });
    }

    it('a repeat whose chain and head were rewritten to match: duplicate_id (only the id check can see it)', async () => {
      const path = await journalFile(10);
      tamper(path, repeatId(0, 9));
      const raw = new Database(path);
      const [before, last] = raw.prepare('SELECT hash, epoch, body FROM jw_events WHERE seq >= 8 ORDER BY seq').all() as { hash: string; epoch: number; body: string }[];
      const hash = chainHash(before!.hash, last!.epoch, last!.body);
      raw.prepare('UPDATE jw_events SET hash = ? WHERE seq = 9').run(hash);
      raw.prepare('UPDATE jw_sessions SET head_hash = ?').run(hash);
      raw.close();
      await expectCorrupt(path, 9, 'duplicate_id');
    });
  });

  it('swapped seq values: order', async () => {
    const path = await journalFile(10);
    tamper(path, `UPDATE jw_events SET seq = -1 WHERE seq = 3; UPDATE jw_events SET seq = 3 WHERE seq = 4;
      UPDATE jw_events SET seq = 4 WHERE seq = -1`);
    await expectCorrupt(path, 3, 'order');
  });

  it('truncated JSON: malformed_event', async () => {
    const path = await journalFile(10);
    tamper(path, 'UPDATE jw_events SET body = substr(body, 1, length(body) - 7) WHERE seq = 7');
    await expectCorrupt(path, 7, 'malformed_event');
  });

  it('a wrong epoch: epoch', async () => {
    const path = await journalFile(10);
    tamper(path, 'UPDATE jw_events SET epoch = 7 WHERE seq = 2');
    await expectCorrupt(path, 2, 'epoch');
  });

  it('a wrong head on the owner row: head_mismatch', async () => {
    const path = await journalFile(10);
    tamper(path, `UPDATE jw_sessions SET head_hash = '${'f'.repeat(64)}'`);
    await expectCorrupt(path, 9, 'head_mismatch');
  });

  it('flipped bytes inside the file: JournalCorruptError, never a shorter journal', async () => {
    const path = await journalFile(300, 400);
    const bytes = readFileSync(path);
    const at = bytes.indexOf(Buffer.from('msg-150:'));
    assert.ok(at > 0, 'the payload is in the main database file after close');
    bytes[at + 4] = bytes[at + 4]! ^ 0x01;
    writeFileSync(path, bytes);
    await expectCorrupt(path, 150, 'hash_mismatch');
  });

  it('damaged b-tree pages: JournalCorruptError from the storage layer', async () => {
    const path = await journalFile(300, 400);
    const bytes = readFileSync(path);
    const pageSize = bytes.readUInt16BE(16);
    for (let page = 2; page * pageSize < bytes.length; page++) bytes.fill(0xa5, page * pageSize, page * pageSize + 12);
    writeFileSync(path, bytes);
    await assertNeverShorter(path);
  });

  it('a database file truncated to half: JournalCorruptError, never a shorter journal', async () => {
    const path = await journalFile(300, 400);
    truncateSync(path, Math.floor(readFileSync(path).length / 2));
    await assertNeverShorter(path);
  });
});

describe('a journal longer than one read page (the store reads 1,000 rows a statement)', () => {
  const longJournal = (count: number) => journalFile(count, 8, 500);

  /** Both reads of the journal: the streamed one (loadHistory) and the whole one (checkTaskLedger's verified read). */
  async function expectCorruptBothWays(path: string, seq: number, reason: string): Promise<void> {
    await expectCorrupt(path, seq, reason);
    await expectCorrupt(path, seq, reason, (store) => store.checkTaskLedger!(SESSION));
  }

  it('reads every row once and in order, through both reads', async () => {
    const path = await longJournal(2_345);
    const store = openSqliteStore(path);
    try {
      const events = await store.loadHistory(SESSION);
      assert.equal(events.length, 2_345);
      events.forEach((e, i) => {
        assert.equal(e.seq, i);
        assert.deepEqual(e.kind, { type: 'user_message', text: messageText(i) });
      });
      assert.deepEqual(await store.checkTaskLedger!(SESSION), { covered: [], notCovered: [] });
    } finally {
      await store.close();
    }
  });

  it('a deleted first row of the second page: seq_gap', async () => {
    const path = await longJournal(2_345);
    tamper(path, 'DELETE FROM jw_events WHERE seq = 1000');
    await expectCorruptBothWays(path, 1000, 'seq_gap');
  });

  it('a row moved before the first (a negative seq): seq_gap at 0', async () => {
    const path = await longJournal(2_345);
    tamper(path, 'UPDATE jw_events SET seq = -7 WHERE seq = 1999');
    await expectCorruptBothWays(path, 0, 'seq_gap');
  });

  it('a seq stored as 2^53 + 1 is not reported as the number it reads as (2^53)', async () => {
    const path = await journalFile(10);
    tamper(path, 'UPDATE jw_events SET seq = 9007199254740993 WHERE seq = 9');
    const store = openSqliteStore(path);
    try {
      await assert.rejects(store.loadHistory(SESSION), (error: unknown) => {
        assert.ok(error instanceof JournalCorruptError && error.reason === 'seq_gap' && error.seq === 9, String(error));
        assert.doesNotMatch(error.message, /9007199254740992/);
        assert.match(error.message, /expected seq 9, found a seq beyond 2\^53 - 1/);
        return true;
      });
    } finally {
      await store.close();
    }
  });

  it('rows moved past 2^53 (no longer exact as numbers), one ending the first page: seq_gap where they start', async () => {
    const path = await longJournal(2_345);
    // Seqs from 999 on become 2^60 + seq: the first page ends with the first of them, which cannot be bound exactly.
    tamper(path, 'UPDATE jw_events SET seq = 1152921504606846976 + seq WHERE seq >= 999');
    await expectCorruptBothWays(path, 999, 'seq_gap');
  });
});

/** Opening or loading must fail with JournalCorruptError; a successful, shorter load is the bug we rule out. */
async function assertNeverShorter(path: string): Promise<void> {
  let store;
  try {
    store = openSqliteStore(path);
  } catch (error) {
    assert.ok(error instanceof JournalCorruptError, `open failed with ${String(error)}`);
    return;
  }
  try {
    await assert.rejects(store.loadHistory(SESSION), (error: unknown) => {
      assert.ok(error instanceof JournalCorruptError, `expected JournalCorruptError, got ${String(error)}`);
      return true;
    });
  } finally {
    await store.close();
  }
}
