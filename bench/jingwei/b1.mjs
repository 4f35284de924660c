/**
 * B1: one journal append (one ~1 KiB event, one transaction) on SQLite with synchronous=FULL, against the storage
 * floor: a raw better-sqlite3 IMMEDIATE transaction inserting a row of the same bytes into the same table, with the
 * same pragmas. Each run uses fresh database files for both sides.
 */
import { newEventId } from '../../dist/ids.js';
import { encodeEventText } from '../../dist/wire.js';
import { openSqliteStore } from '../../dist/sqlite.js';
import { JOURNAL_PAGE_SIZE } from '../../dist/store/sqlite/schema.js';
import { FAKE_HASH, openFloor, scratchDir } from '../lib/env.mjs';
import { compare, timeSerial } from '../lib/stats.mjs';

export const B1_TEXT_BYTES = 900;

export async function runB1({ runs, n, warmup, log }) {
  const scratch = scratchDir('b1');
  const sessionId = 'bench-b1';
  const draft = { turnId: 'turn-b1', kind: { type: 'user_message', text: 'x'.repeat(B1_TEXT_BYTES) } };
  // The exact wire text the store writes for such an event (seq padded to the same width as the timed ones).
  const body = encodeEventText({ eventId: newEventId(), sessionId, turnId: draft.turnId, seq: 100, kind: draft.kind });
  const eventId = newEventId();
  try {
    const result = await compare({
      runs,
      log,
      variants: [
        {
          name: 'b1-jingwei',
          label: 'Jingwei `owner.append` (1 event)',
          against: 'b1-floor',
          prepare: async (r) => {
            const store = openSqliteStore(scratch.path(`jingwei-${r}.db`));
            const owner = await store.acquire(sessionId, { owner: 'bench' });
            return {
              measure: () => timeSerial(() => owner.append([draft]), { n, warmup }),
              close: () => store.close(),
            };
          },
        },
        {
          name: 'b1-floor',
          label: 'floor: raw insert, 1 synced txn',
          prepare: async (r) => {
            const { db, insert } = openFloor(scratch.path(`floor-${r}.db`), { pageSize: JOURNAL_PAGE_SIZE });
            let seq = 0;
            const append = db.transaction(() => insert.run(sessionId, seq++, eventId, 1, body, FAKE_HASH));
            return {
              measure: () => timeSerial(() => append.immediate(), { n, warmup }),
              close: () => db.close(),
            };
          },
        },
      ],
    });
    return {
      id: 'B1',
      title: 'Journal append on SQLite (synchronous=FULL), one ~1 KiB event per transaction',
      eventBytes: Buffer.byteLength(body),
      ...result,
    };
  } finally {
    scratch.remove();
  }
}
