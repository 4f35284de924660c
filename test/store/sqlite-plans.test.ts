/**
 * How SQLite plans the reads a commit makes of the decision inbox. A plan is structure, not time: a read planned
 * through the wrong index reads every decision of the session on each commit, which no functional test notices.
 */
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { it } from 'node:test';
import { openSqliteStore } from '../../src/sqlite.js';
import { APPROVALS_OF_OPERATION } from '../../src/store/sqlite/inbox.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

it('an approval commit reads its operation\'s approval rows through the operation\'s index, not every decision of the session', async () => {
  const path = tempDbPath(tempDir(), 'plans');
  await openSqliteStore(path).close();
  const db = new Database(path);
  // Five thousand approvals already used in one session, as a long run that asks for approval on every call leaves.
  const insert = db.prepare("INSERT INTO jw_decisions (id, kind, session_id, call_id, state, task_id, op_key, detail) VALUES (?, 'approval', 's', ?, 'used', 't', ?, '{}')");
  db.transaction(() => { for (let i = 0; i < 5000; i++) insert.run(`d${String(i).padStart(6, '0')}`, `c${i}`, `k${i}`); })();
  for (const analyzed of [false, true]) {
    if (analyzed) db.exec('ANALYZE');
    const plan = db.prepare(`EXPLAIN QUERY PLAN ${APPROVALS_OF_OPERATION}`).all('s', 't', 'k77', null) as Array<{ detail: string }>;
    assert.deepEqual(plan.map((p) => p.detail).filter((d) => /jw_decisions/.test(d)), ['SEARCH jw_decisions USING INDEX jw_decisions_by_operation (task_id=? AND op_key=?)'],
      `${analyzed ? 'after ANALYZE' : 'without statistics'}: ${JSON.stringify(plan)}`);
  }
  db.close();
});
