/**
 * A file the import's transaction would refuse is refused by parseJournal first, as import_rejected naming its line,
 * so importJsonl and `jingwei import` refuse it before a store is touched (docs/design.md#only-the-runtime-writes-tool-evidence).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { JournalImportError } from '../../src/errors.js';
import { parseJournal } from '../../src/store/jsonl.js';
import { createMemoryStore } from '../../src/store/memory.js';

const line = (seq: number, payload: unknown): string =>
  JSON.stringify({ event_id: `e${seq}`, session_id: 's', turn_id: 't', seq, kind: { type: 'custom', plugin: 'p', kind: 'k', payload } });

async function refused(text: string, expected: (e: JournalImportError) => boolean): Promise<void> {
  const match = (e: unknown) => e instanceof JournalImportError && e.code === 'import_rejected' && expected(e);
  assert.throws(() => parseJournal(text), match);
  const store = createMemoryStore();
  await assert.rejects(store.importJsonl(text, { owner: 'h' }), match);
  assert.deepEqual(await store.listSessions(), [], 'nothing was written');
}

describe('import refuses what the store would refuse, by line', () => {
  it('a record that cannot be journaled (an integer beyond 2^53) names its line', async () => {
    const text = `${line(0, { n: 1 })}\n${line(1, { n: 0 }).replace('"n":0', '"n":1e20')}\n`;
    await refused(text, (e) => e.line === 2 && /^line 2: event 1: cannot be journaled: the integer 100000000000000000000 at \$\.kind\.payload\.n/.test(e.message));
  });
});
