/**
 * A session whose owner row is gone while its events remain (deleted by hand, a partial restore): `acquire` created a
 * new owner row at epoch 1 over them, and every write then failed on a key the events already held, as a storage
 * failure. It is refused as a corrupt journal, naming what is missing, and nothing is written.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/sqlite.js';
import { adminPool, describePostgres, freshSchema, openPostgresStore } from '../support/postgres.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import type { SessionStore } from '../../src/store/types.js';

async function writeSession(store: SessionStore): Promise<void> {
  const owner = await store.acquire('s', { owner: 'host-a' });
  await owner.append([{ turnId: 'turn-1', kind: { type: 'user_message', text: 'pay the invoice' } }]);
  await owner.release();
}

const refusal = { code: 'journal_corrupt', reason: 'head_mismatch', message: /has events but no owner row/ };

describe('a session with events and no owner row', () => {
  it('sqlite: acquire is refused as a corrupt journal, and writes nothing', async () => {
    const path = tempDbPath(tempDir(), 'no-owner-row');
    const writer = openSqliteStore(path);
    await writeSession(writer);
    await writer.close();
    const db = new Database(path);
    db.prepare("DELETE FROM jw_sessions WHERE session_id = 's'").run();
    db.close();
    const store = openSqliteStore(path);
    await assert.rejects(store.acquire('s', { owner: 'host-b' }), refusal);
    const raw = new Database(path, { readonly: true });
    assert.equal(raw.prepare("SELECT count(*) FROM jw_sessions WHERE session_id = 's'").pluck().get(), 0, 'no owner row was created');
    raw.close();
    await store.close();
  });
});

describePostgres('a PostgreSQL session with events and no owner row', (url) => {
  it('acquire is refused as a corrupt journal, and writes nothing', async () => {
    const schema = freshSchema();
    const writer = await openPostgresStore(url, { schema });
    await writeSession(writer);
    await writer.close();
    await adminPool(url).query(`DELETE FROM "${schema}".jw_sessions WHERE session_id = 's'`);
    const store = await openPostgresStore(url, { schema });
    await assert.rejects(store.acquire('s', { owner: 'host-b' }), refusal);
    const rows = await adminPool(url).query(`SELECT 1 FROM "${schema}".jw_sessions WHERE session_id = 's'`);
    assert.equal(rows.rows.length, 0, 'no owner row was created');
    await store.close();
  });
});
