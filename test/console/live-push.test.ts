/**
 * The live queue is pushed on PostgreSQL: `watchQueue` hears a commit that changed attention rows or the decision
 * inbox from another connection (another process's pool), and the console's event stream sends the new queue when
 * told, though its own polling is slowed to once in ten minutes. SQLite and memory do not push: `watchQueue` says so
 * with null, and the console keeps polling there.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { it } from 'node:test';
import { startConsole } from '../../src/cli/console/server.js';
import { watchQueue, type QueueChange } from '../../src/decisions.js';
import { createMemoryStore } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { describePostgres, freshSchema, openPostgresStore } from '../support/postgres.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { pendingApprovalsIn } from './support.js';

/** Resolves with the first change that `accept` takes; a guard rejects if none comes (a failure, never a timing). */
function waitFor(changes: QueueChange[], accept: (c: QueueChange) => boolean, what: string): { seen: (c: QueueChange) => void; done: Promise<QueueChange> } {
  let resolve!: (c: QueueChange) => void;
  const done = new Promise<QueueChange>((res, rej) => {
    resolve = res;
    setTimeout(() => rej(new Error(`no notification: ${what}; heard ${JSON.stringify(changes)}`)), 60_000).unref();
  });
  return { seen: (c) => { changes.push(c); if (accept(c)) resolve(c); }, done };
}

it('SQLite and memory stores do not push: watchQueue resolves to null', async () => {
  const memory = createMemoryStore();
  assert.equal(await watchQueue(memory, () => {}), null);
  const sqlite = openSqliteStore(tempDbPath(tempDir('jingwei-live-push-'), 'push'));
  try {
    assert.equal(await watchQueue(sqlite, () => {}), null);
  } finally {
    await sqlite.close();
  }
});

describePostgres('the live queue on PostgreSQL is pushed', (url) => {
  it('watchQueue hears attention and decision commits made through another pool', async () => {
    const schema = freshSchema();
    const watched = await openPostgresStore(url, { schema });
    const writer = await openPostgresStore(url, { schema });
    const changes: QueueChange[] = [];
    let attention!: ReturnType<typeof waitFor>;
    let decision!: ReturnType<typeof waitFor>;
    attention = waitFor(changes, (c) => c.kind === 'attention' && c.sessionId === 'refunds-push', 'attention of refunds-push');
    decision = waitFor(changes, (c) => c.kind === 'decision', 'a decision row');
    const stop = await watchQueue(watched, (c) => { attention.seen(c); decision.seen(c); });
    assert.ok(stop, 'a PostgreSQL store pushes');
    try {
      const [made] = await pendingApprovalsIn(writer, ['refunds-push']);
      await attention.done;
      assert.deepEqual(await decision.done, { kind: 'decision', id: made!.requestId });
    } finally {
      await stop();
      await writer.close();
      await watched.close();
    }
  });

  it('the console stream sends a new approval request when told, not when it polls', async () => {
    const schema = freshSchema();
    const store = await openPostgresStore(url, { schema });
    const writer = await openPostgresStore(url, { schema });
    const running = await startConsole({ store, actor: null, readOnly: true, pollMs: 600_000 });
    try {
      const port = Number(new URL(running.origin).port);
      const token = new URL(running.link).searchParams.get('token')!;
      const prefix = new URL(running.base).pathname;
      const events: string[] = [];
      let arrived!: (data: string) => void;
      let wanted = '';
      const matched = new Promise<string>((res, rej) => {
        arrived = res;
        setTimeout(() => rej(new Error(`the stream did not send the new request; it sent ${events.length} events`)), 60_000).unref();
      });
      const first = new Promise<void>((resolveFirst, reject) => {
        const req = request({ host: '127.0.0.1', port, path: `${prefix}/events`, headers: { Host: `127.0.0.1:${port}`, Cookie: `jingwei_console=${token}` } }, (res) => {
          assert.equal(res.statusCode, 200);
          res.setEncoding('utf8');
          let buffer = '';
          res.on('data', (chunk: string) => {
            buffer += chunk;
            for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
              const event = buffer.slice(0, end);
              buffer = buffer.slice(end + 2);
              events.push(event);
              if (events.length === 1) resolveFirst();
              if (wanted !== '' && event.includes(wanted)) arrived(event);
            }
          });
        });
        req.on('error', reject);
        req.end();
      });
      await first;
      assert.match(events[0]!, /^event: queue/);
      const [made] = await pendingApprovalsIn(writer, ['refunds-live']);
      wanted = made!.requestId;
      for (const e of events) if (e.includes(wanted)) arrived(e);
      assert.match(await matched, /^event: queue/);
    } finally {
      await running.close();
      await writer.close();
      await store.close();
    }
  });
});
