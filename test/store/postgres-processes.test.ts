import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { newTurnId } from '../../src/ids.js';
import { ChildProcess } from '../support/child.js';
import { adminPool, describePostgres, freshSchema, openPostgresStore } from '../support/postgres.js';

const script = fileURLToPath(new URL('./children/owner-child.js', import.meta.url));
const text = (t: string) => ({ turnId: newTurnId(), kind: { type: 'user_message' as const, text: t } });
type Answer = { ok: boolean; epoch?: number; seq?: number; code?: string };

async function startChild(url: string, schema: string, session: string, name: string): Promise<ChildProcess> {
  const child = new ChildProcess(script, [url, session, name, schema]);
  assert.deepEqual(await child.next(), { ready: true }, child.stderr);
  return child;
}

describePostgres('PostgreSQL ownership across real processes', (url) => {
  const admin = adminPool(url);

  it('three processes on three connections race to take over one session: epochs strictly increase, only the current owner appends, the journal verifies', async () => {
    const schema = freshSchema();
    // The three children also race to create the schema on open (the advisory-locked migration).
    const children = await Promise.all([0, 1, 2].map((i) => startChild(url, schema, 's-race', `racer-${i}`)));
    const ask = async (command: string) => {
      for (const c of children) c.send(command);
      return Promise.all(children.map((c) => c.next<Answer>()));
    };

    // Round 0: all create the session at once without takeover; exactly one gets epoch 1.
    const first = await ask('acquire 0');
    assert.deepEqual(first.filter((a) => a.ok).map((a) => a.epoch), [1]);
    for (const a of first) if (!a.ok) assert.equal(a.code, 'session_busy');

    let highest = 1;
    const rounds = 5;
    const winners: string[] = [];
    for (let round = 1; round <= rounds; round++) {
      const taken = await ask('acquire 1');
      const epochs = taken.map((a) => {
        assert.equal(a.ok, true, JSON.stringify(a));
        return a.epoch!;
      });
      assert.deepEqual([...epochs].sort((x, y) => x - y), [highest + 1, highest + 2, highest + 3], 'each epoch went to exactly one owner, above every earlier one');
      highest += 3;
      const appended = await ask(`append round-${round}`);
      const ok = appended.map((a, i) => ({ a, i })).filter(({ a }) => a.ok);
      assert.equal(ok.length, 1, JSON.stringify(appended));
      assert.equal(epochs[ok[0]!.i], highest, 'only the current (highest-epoch) owner appends');
      assert.equal(ok[0]!.a.seq, round - 1, 'no seq was consumed by the stale writers');
      for (const a of appended) if (!a.ok) assert.equal(a.code, 'stale_owner');
      winners.push(`round-${round}`);
    }

    const store = await openPostgresStore(url, { schema });
    const history = await store.loadHistory('s-race');
    assert.deepEqual(history.map((e) => (e.kind as { text: string }).text), winners);
    const epochs = await admin.query<{ epoch: string }>(`SELECT epoch FROM "${schema}".jw_events ORDER BY seq`);
    assert.deepEqual(epochs.rows.map((r) => Number(r.epoch)), [4, 7, 10, 13, 16], 'every event carries the epoch current at its commit');
    for (const c of children) c.send('exit');
    await Promise.all(children.map((c) => c.exited));
    await store.close();
  });

  it('a paused owner (SIGSTOP) is fenced by a takeover and its append is rejected after SIGCONT', async () => {
    const schema = freshSchema();
    const child = await startChild(url, schema, 's-pause', 'child');
    child.send('acquire 0');
    assert.equal((await child.next<Answer>()).epoch, 1);
    child.send('append before-pause');
    assert.equal((await child.next<Answer>()).seq, 0);
    child.proc.kill('SIGSTOP');
    const store = await openPostgresStore(url, { schema });
    const parent = await store.acquire('s-pause', { owner: 'parent', takeover: true });
    assert.equal(parent.epoch, 2);
    await parent.append([text('by parent')]);
    child.proc.kill('SIGCONT');
    child.send('append after-resume');
    const answer = await child.next<Answer>();
    assert.equal(answer.ok, false);
    assert.equal(answer.code, 'stale_owner');
    assert.deepEqual((await store.loadHistory('s-pause')).map((e) => (e.kind as { text: string }).text), ['before-pause', 'by parent']);
    child.send('exit');
    await child.exited;
    await store.close();
  });

  it('an append that returned survives a SIGKILL of its process', async () => {
    const schema = freshSchema();
    const child = await startChild(url, schema, 's-kill', 'child');
    child.send('acquire 0');
    await child.next();
    child.send('append-and-die durable');
    const answer = await child.next<Answer & { eventId: string }>();
    assert.equal((await child.exited).signal, 'SIGKILL');
    const store = await openPostgresStore(url, { schema });
    const history = await store.loadHistory('s-kill');
    assert.deepEqual(history.map((e) => e.eventId), [answer.eventId]);
    await assert.rejects(store.acquire('s-kill', { owner: 'recovery' }), { code: 'session_busy' });
    assert.equal((await store.acquire('s-kill', { owner: 'recovery', takeover: true })).epoch, 2);
    await store.close();
  });
});
