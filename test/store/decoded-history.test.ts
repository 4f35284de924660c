/**
 * A loaded history keeps what verification learnt (docs/design.md#a-loaded-history-keeps-its-size): each event's
 * stored size and the distinct event ids, used only while the event at each place is the one decoded.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeEvent } from '../../src/event/codec.js';
import { knownDistinctIds, knownWireBytes } from '../../src/event/decoded-history.js';
import { validatePhysicalLog } from '../../src/event/physical-log.js';
import type { SessionEvent } from '../../src/event/types.js';
import { PhysicalLogError } from '../../src/errors.js';
import type { SessionStore } from '../../src/store/types.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir('jingwei-decoded-');
const message = (text: string) => ({ turnId: 'turn-1', kind: { type: 'user_message' as const, text } });

async function loaded(store: SessionStore): Promise<SessionEvent[]> {
  const owner = await store.acquire('s', { owner: 'h' });
  await owner.append([message('a'), message('é ✓ 𝄞'), message('"quoted"\n\\')]);
  await owner.append([message('x'.repeat(300))]);
  return store.loadHistory('s');
}

const stores = (): [string, SessionStore][] => [
  ['memory', createMemoryStore()],
  ['sqlite', openSqliteStore(tempDbPath(dir, `decoded-${Math.random()}`))],
];

const duplicate = (events: SessionEvent[]) => assert.throws(() => validatePhysicalLog('s', events), (e: unknown) => e instanceof PhysicalLogError && e.violation === 'duplicate_event_id' && e.index === 2);

describe('a loaded history', () => {
  for (const [name, store] of stores()) {
    it(`keeps each event's stored size, which is its compact wire size (${name})`, async () => {
      const history = await loaded(store);
      const sizeOf = knownWireBytes(history);
      for (const [i, e] of history.entries()) assert.equal(sizeOf(i), Buffer.byteLength(JSON.stringify(encodeEvent(e))));
      assert.equal(knownDistinctIds(history), true);
      await store.close();
    });
  }

  it('forgets the size and ids of an event moved, replaced or added, and of a copied array', async () => {
    const store = createMemoryStore();
    const history = await loaded(store);
    assert.equal(knownWireBytes([...history])(0), undefined);
    assert.equal(knownDistinctIds([...history]), false);
    const changed = history;
    changed[1] = { ...changed[1]! };
    changed.push({ ...changed[0]!, seq: 4 });
    const sizeOf = knownWireBytes(changed);
    assert.notEqual(sizeOf(0), undefined);
    assert.equal(sizeOf(1), undefined);
    assert.equal(sizeOf(4), undefined);
    assert.equal(knownDistinctIds(changed), false);
  });

  it('still refuses a duplicate event id made after loading, in place or by replacing an event', async () => {
    const store = createMemoryStore();
    const inPlace = await loaded(store);
    (inPlace[2] as { eventId: string }).eventId = inPlace[0]!.eventId;
    duplicate(inPlace);
    const replaced = await store.loadHistory('s');
    replaced[2] = { ...replaced[2]!, eventId: replaced[1]!.eventId };
    duplicate(replaced);
    const untouched = await store.loadHistory('s');
    validatePhysicalLog('s', untouched);
  });
});
