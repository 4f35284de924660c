/**
 * `jingwei queue` and SessionStore.attention over 1,000 sessions holding 100,000 events in all: the answer comes
 * from the attention index alone (the test counts journal loads and snapshots: none), and the CLI prints times.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { encodeEventText } from '../../src/event/codec.js';
import type { SessionEvent } from '../../src/event/types.js';
import { openSqliteStore } from '../../src/sqlite.js';
import type { JournalStore } from '../../src/store/journal-store.js';
import { createMemoryStore } from '../../src/store/memory.js';
import type { AttentionItem, SessionStore } from '../../src/store/types.js';
import { describePostgres, freshSchema, openPostgresStore } from '../support/postgres.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { cli } from './helpers.js';

const SESSIONS = 1_000;
const PER_SESSION = 100;
const BASE = Date.UTC(2025, 0, 1, 10, 0, 0, 0);

/** Session i: one non-idempotent call whose body started; every 10th has no result (in doubt), the rest succeeded. */
function journal(i: number): string {
  const sessionId = `s-${String(i).padStart(4, '0')}` as SessionEvent['sessionId'];
  const lines: string[] = [];
  const push = (kind: SessionEvent['kind']) => {
    const seq = lines.length;
    lines.push(encodeEventText({
      eventId: `e${seq}` as SessionEvent['eventId'], sessionId, turnId: 't' as SessionEvent['turnId'], seq, kind,
      recordedAt: new Date(BASE + i * 1000 + seq).toISOString(),
    }));
  };
  const callId = `c-${i}` as never;
  push({
    type: 'tool_call',
    call: { id: callId, name: 'send_mail', arguments: { n: i }, operation: { taskId: `task-${i}` as never, key: `k-${i}` as never, contract: { effect: 'non_idempotent', revision: 'v1' }, retry: null, startMarker: true } },
  });
  push({ type: 'tool_started', callId });
  if (i % 10 !== 0) push({ type: 'tool_result', result: { callId, outcome: { status: 'succeeded', output: 'ok' } } });
  while (lines.length < PER_SESSION) push({ type: 'user_message', text: 'x' });
  return lines.join('\n') + '\n';
}

async function fill(store: SessionStore): Promise<void> {
  for (let i = 0; i < SESSIONS; i++) await store.importJsonl(journal(i), { owner: 'builder' });
}

/** Counts every read of whole journals (snapshots) and session listings the store makes. */
function countLoads(store: SessionStore): { snapshots: number; listings: number } {
  const backend = (store as JournalStore).backend;
  const counts = { snapshots: 0, listings: 0 };
  const snapshot = backend.snapshot.bind(backend);
  const list = backend.listSessions.bind(backend);
  Object.assign(backend, {
    snapshot: (id: Parameters<typeof snapshot>[0]) => { counts.snapshots += 1; return snapshot(id); },
    listSessions: () => { counts.listings += 1; return list(); },
  });
  return counts;
}

async function everyItem(store: SessionStore, limit: number): Promise<AttentionItem[]> {
  const items: AttentionItem[] = [];
  let cursor: string | null = null;
  do {
    const page = await store.attention({ limit, cursor });
    items.push(...page.items);
    cursor = page.next;
  } while (cursor !== null);
  return items;
}

async function checkQueue(store: SessionStore): Promise<void> {
  const counts = countLoads(store);
  const items = await everyItem(store, 37);
  assert.equal(items.length, SESSIONS / 10);
  assert.ok(items.every((i) => i.inDoubt && i.status === 'no_result' && i.started && i.tool === 'send_mail'));
  assert.equal(items[0]!.calledAt, new Date(BASE).toISOString());
  assert.equal(items[0]!.startedAt, new Date(BASE + 1).toISOString());
  const completed = await store.attention({ status: 'completed', limit: 1000 });
  assert.equal(completed.items.length, SESSIONS - SESSIONS / 10);
  assert.deepEqual(counts, { snapshots: 0, listings: 0 }, 'no journal was loaded, no session listed');
}

describe('the attention queue over 1,000 sessions and 100,000 events', () => {
  it('on memory: answered from the index alone', async () => {
    const store = createMemoryStore();
    await fill(store);
    await checkQueue(store);
    await store.close();
  });

  const dir = tempDir('jingwei-queue-');
  const path = tempDbPath(dir, 'queue');
  before(async () => {
    const store = openSqliteStore(path);
    await fill(store);
    await store.close();
  });

  it('on SQLite: answered from the index alone', async () => {
    const store = openSqliteStore(path, { readonly: true });
    const sessions = await store.listSessions();
    assert.equal(sessions.length, SESSIONS);
    assert.equal(sessions.reduce((n, s) => n + s.events, 0), SESSIONS * PER_SESSION);
    await checkQueue(store);
    await store.close();
  });

  it('jingwei queue prints times and durations, pages with a cursor, and filters', () => {
    const r = cli(['queue', path, '--limit', '10']);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.split('\n');
    assert.match(lines[0]!, /^CALLED AT\s+SESSION\s+CALL\s+TOOL\s+EFFECT\s+STATUS\s+RESULT\s+TIMES$/);
    assert.match(lines[1]!, /^2025-01-01 10:00:00\.000Z\s+s-0000\s+c-0\s+send_mail\s+non_idempotent\s+no_result IN DOUBT\s+-\s+body started .* ago, no result$/);
    assert.match(r.stdout, /10 items; more: --cursor \S+/);
    const cursor = /--cursor (\S+)/.exec(r.stdout)![1]!;
    const next = JSON.parse(cli(['queue', path, '--limit', '10', '--cursor', cursor, '--json']).stdout) as { items: Array<{ session_id: string; called_at: string }> };
    assert.equal(next.items[0]!.session_id, 's-0100');
    assert.equal(next.items[0]!.called_at, '2025-01-01T10:01:40.000Z');
    const done = JSON.parse(cli(['queue', path, '--status', 'completed', '--session', 's-0001', '--json']).stdout) as { items: Array<{ call_id: string; ended_at: string }> };
    assert.deepEqual(done.items.map((i) => [i.call_id, i.ended_at]), [['c-1', '2025-01-01T10:00:01.002Z']]);
    assert.match(cli(['queue', path, '--status', 'completed', '--session', 's-0001']).stdout, /body ran 1 ms/);
    assert.equal(JSON.parse(cli(['queue', path, '--older-than', '1d', '--json']).stdout).items.length, 100, 'all of them were called more than a day ago');
    assert.equal(cli(['queue', path, '--status', 'open']).code, 2);
    assert.equal(cli(['queue', path, '--older-than', 'soon']).code, 2);
    assert.equal(cli(['queue', path, '--limit', '5000']).code, 2);
    assert.equal(cli(['queue', path, '--cursor', 'nonsense']).code, 2);
  });
});

describePostgres('the attention queue on postgres', (url) => {
  it('over 1,000 sessions and 100,000 events: answered from the index alone', async () => {
    const store = await openPostgresStore(url, { schema: freshSchema(), poolSize: 2 });
    await fill(store);
    await checkQueue(store);
    await store.close();
  });
});
