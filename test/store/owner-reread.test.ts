/**
 * An owner checks a later read of its journal against its last verified one (docs/design.md#an-owner-reads-its-journal-again):
 * rows stored byte for byte as then are not decoded and hashed again. The result and the errors must be exactly a
 * fresh verification's, whatever changed in between (rows appended, a row edited by hand, its hash recomputed, the
 * owner row moved), and the events it hands out again cannot be changed by a holder.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { resumeAgent, runAgent, scriptedModel, type ChatResponse } from '../../src/agent.js';
import { JournalCorruptError } from '../../src/errors.js';
import { newTurnId, type SessionId } from '../../src/ids.js';
import { chainHash, GENESIS_HASH } from '../../src/store/chain.js';
import type { JournalStore } from '../../src/store/journal-store.js';
import { createMemoryStore } from '../../src/store/memory.js';
import type { EventRow, SessionRow } from '../../src/store/rows.js';
import { verifyJournal, verifyJournalAgainst, type VerifiedRead } from '../../src/store/verify.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const SESSION = 's' as SessionId;

/** The session's owner row and rows after `count` appended messages, as the backend reads them. */
async function journal(count: number): Promise<{ session: SessionRow; rows: EventRow[]; more: (n: number) => Promise<{ session: SessionRow; rows: EventRow[] }> }> {
  const store = createMemoryStore() as unknown as JournalStore;
  const owner = await store.acquire(SESSION, { owner: 'writer' });
  const turnId = newTurnId();
  const read = async () => {
    const { session, events } = await store.backend.snapshot(SESSION);
    return { session: session!, rows: events.map((r) => ({ ...r })) };
  };
  const append = async (n: number) => {
    for (let i = 0; i < n; i++) await owner.append([{ turnId, kind: { type: 'user_message', text: `message ${Math.random()}` } }]);
  };
  await append(count);
  return { ...(await read()), more: async (n) => { await append(n); return read(); } };
}

/** What a fresh verification gives: the events, or the error's reason, seq and message. */
function outcome(verify: () => readonly unknown[]): unknown {
  try {
    return { events: verify() };
  } catch (error) {
    assert.ok(error instanceof JournalCorruptError, String(error));
    return { reason: error.reason, seq: error.seq, message: error.message };
  }
}

/** Each way to change a stored journal by hand, at row `k`. */
const edits: Record<string, (rows: EventRow[], session: SessionRow, k: number) => { rows: EventRow[]; session: SessionRow }> = {
  'a body changed': (rows, session, k) => ({ session, rows: rows.map((r, i) => (i === k ? { ...r, body: r.body.replace('message', 'massage') } : r)) }),
  'a body changed, its hash recomputed': (rows, session, k) => ({
    session,
    rows: rows.map((r, i) => {
      if (i !== k) return r;
      const body = r.body.replace('message', 'massage');
      return { ...r, body, hash: chainHash(k === 0 ? GENESIS_HASH : rows[k - 1]!.hash, r.epoch, body) };
    }),
  }),
  'a hash changed': (rows, session, k) => ({ session, rows: rows.map((r, i) => (i === k ? { ...r, hash: r.hash.replace(/^./, (c) => (c === 'a' ? 'b' : 'a')) } : r)) }),
  'an epoch changed': (rows, session, k) => ({ session, rows: rows.map((r, i) => (i === k ? { ...r, epoch: r.epoch + 1 } : r)) }),
  'an event id changed': (rows, session, k) => ({ session, rows: rows.map((r, i) => (i === k ? { ...r, eventId: `${r.eventId}x` } : r)) }),
  'a row removed': (rows, session, k) => ({ session, rows: rows.filter((_, i) => i !== k) }),
  'rows cut from here, the owner row set back': (rows, session, k) => ({ session: { ...session, lastSeq: k - 1 }, rows: rows.slice(0, k) }),
  'the owner row on an older epoch': (rows, session) => ({ session: { ...session, epoch: 0 }, rows }),
};

describe('an owner\'s later read, checked against its last one', () => {
  it('gives a fresh verification\'s events, reusing those of rows stored as they were, and decoding appended ones', async () => {
    const j = await journal(12);
    const first = verifyJournalAgainst(SESSION, j.session, j.rows, null);
    assert.deepEqual(first.events, verifyJournal(SESSION, j.session, j.rows));
    const copies = j.rows.map((r) => ({ ...r }));
    const again = verifyJournalAgainst(SESSION, j.session, copies, first.read);
    assert.deepEqual(again.events, verifyJournal(SESSION, j.session, copies));
    assert.ok(again.events.every((e, i) => e === first.read.events[i]), 'rows stored as they were are not decoded again');
    const grown = await j.more(5);
    const third = verifyJournalAgainst(SESSION, grown.session, grown.rows, again.read);
    assert.deepEqual(third.events, verifyJournal(SESSION, grown.session, grown.rows));
    assert.equal(third.events.length, 17);
  });

  for (const [name, edit] of Object.entries(edits)) {
    it(`${name}: the same error as a fresh verification, wherever the row is`, async () => {
      const j = await journal(10);
      const earlier: VerifiedRead = verifyJournalAgainst(SESSION, j.session, j.rows, null).read;
      for (const k of [0, 1, 5, 9]) {
        const edited = edit(j.rows, j.session, k);
        const fresh = outcome(() => verifyJournal(SESSION, edited.session, edited.rows));
        assert.ok(!('events' in (fresh as object)) || name === 'rows cut from here, the owner row set back', `${name} at ${k} is caught by a fresh read`);
        assert.deepEqual(outcome(() => verifyJournalAgainst(SESSION, edited.session, edited.rows, earlier).events), fresh, `${name} at row ${k}`);
      }
    });
  }

  it('the events it hands out again are frozen: a holder cannot change what a later read reuses', async () => {
    const j = await journal(3);
    const first = verifyJournalAgainst(SESSION, j.session, j.rows, null);
    assert.throws(() => { (first.events[1]!.kind as { text: string }).text = 'changed'; }, TypeError);
    first.events.length = 0;
    const again = verifyJournalAgainst(SESSION, j.session, j.rows, first.read);
    assert.deepEqual(again.events, verifyJournal(SESSION, j.session, j.rows));
  });
});

describe('a run resumed again by the owner that read it', () => {
  const dir = tempDir();
  const STOP = 'stopped before the last answer';

  it('a row edited by hand between two resumes is caught by the second, as a new owner would catch it', async () => {
    const path = tempDbPath(dir);
    const store = openSqliteStore(path);
    const metadata = new ToolMetadata('echoes', { type: 'object' }).withEffect('read_only', 'r1');
    const runtime = createToolRuntime({ tools: [{ name: 'echo', metadata, execute: async () => 'ok' }], grants: { agent: '*' } });
    const owner = await store.acquire('run', { owner: 'host' });
    await owner.startTask('t');
    const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent' });
    const turns: ChatResponse[] = Array.from({ length: 3 }, (_, s) => ({ text: null, toolCalls: [{ id: `c-${s}`, name: 'echo', arguments: '{}' }] }));
    const stop = () => { throw new Error(STOP); };
    const options = { owner, gateway, store, maxSteps: 5 };
    await assert.rejects(runAgent({ ...options, input: 'go', model: scriptedModel([...turns, stop]) }), { message: STOP });
    const runId = ((await store.loadHistory('run')).find((e) => e.kind.type === 'custom')!.kind as unknown as { payload: { runId: string } }).payload.runId;
    await assert.rejects(resumeAgent({ ...options, runId, model: scriptedModel([stop]) }), { message: STOP });
    const result = (await store.loadHistory('run')).findIndex((e) => e.kind.type === 'tool_result');
    const raw = new Database(path);
    raw.prepare("UPDATE jw_events SET body = replace(body, '\"ok\"', '\"no\"') WHERE session_id = 'run' AND seq = ?").run(result);
    raw.close();
    const corrupt = (error: unknown) => error instanceof JournalCorruptError && error.reason === 'hash_mismatch' && error.seq === result;
    await assert.rejects(resumeAgent({ ...options, runId, model: scriptedModel([stop]) }), corrupt);
    await assert.rejects(store.loadHistory('run'), corrupt);
    await store.close();
  });
});
