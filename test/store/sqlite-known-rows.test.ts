/**
 * Rows a SQLite write already knows (docs/design.md#rows-a-sqlite-write-already-knows): a write transaction decides
 * on the owner and task rows the connection's last write left, but only while no other connection has committed to
 * the file; a row changed by anyone else is read again, and a write that failed leaves nothing stale behind.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { setFaultHook } from '../../src/fault.js';
import { newCallId, newOperationKey, newTurnId, type TaskId } from '../../src/ids.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { commitAs } from '../../src/store/owner-commit.js';
import type { SessionOwner } from '../../src/store/types.js';
import { tamper } from '../cli/helpers.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir('jingwei-known-rows-');
const turn = newTurnId();
const message = (text: string) => ({ turnId: turn, kind: { type: 'user_message' as const, text } });

/** Admits one call of `task` against its budget, with its start marker, as the runtime does. */
function admitCall(owner: SessionOwner, task: string) {
  const id = newCallId();
  const call = { id, name: 'work', arguments: {}, operation: { taskId: task as TaskId, key: newOperationKey(), contract: { effect: 'idempotent' as const, revision: 'r1' }, retry: null, startMarker: true } };
  return commitAs(owner, {
    events: [{ turnId: turn, kind: { type: 'tool_call', call } }, { turnId: turn, kind: { type: 'tool_started', callId: id } }],
    budget: { taskId: task as TaskId, admit: { maxOutputBytes: 10 } },
  });
}

/** A store on a fresh file whose session `s` has task t1 (five calls allowed) and one admitted call. */
async function storeWithOneCall(name: string) {
  const path = tempDbPath(dir, name);
  const store = openSqliteStore(path);
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('t1', { limits: { toolCalls: 5 } });
  await admitCall(owner, 't1');
  return { path, store, owner };
}

describe('SQLite: rows a write already knows', () => {
  afterEach(() => setFaultHook(null));

  it('a task row another connection changed is read again: a limit lowered there refuses the next call here', async () => {
    const { path, store, owner } = await storeWithOneCall('task');
    await admitCall(owner, 't1');
    tamper(path, "UPDATE jw_tasks SET limit_tool_calls = 2 WHERE session_id = 's' AND task_id = 't1'");
    await assert.rejects(admitCall(owner, 't1'), (e: unknown) => {
      assert.equal((e as { code?: string }).code, 'budget_exhausted', String(e));
      return true;
    });
    assert.equal((await owner.task('t1')).charged.toolCalls, 2);
    await store.close();
  });

  it('an owner row another connection changed is read again: released there, the next write here is refused, not revived', async () => {
    const path = tempDbPath(dir, 'owner');
    const store = openSqliteStore(path);
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.append([message('one')]);
    tamper(path, "UPDATE jw_sessions SET held = 0 WHERE session_id = 's'");
    await assert.rejects(owner.append([message('two')]), (e: unknown) => {
      assert.equal((e as { code?: string }).code, 'stale_owner', String(e));
      assert.match(String(e), /released/);
      return true;
    });
    const reopened = openSqliteStore(path, { mustExist: true });
    assert.equal((await reopened.loadHistory('s')).length, 1);
    await reopened.close();
    await store.close();
  });

  it('a write rolled back after writing its rows leaves the next write deciding on the stored rows', async () => {
    const { store, owner } = await storeWithOneCall('rollback');
    setFaultHook((point) => {
      if (point === 'commit:before') throw new Error('the write fails after writing its rows');
    });
    await assert.rejects(admitCall(owner, 't1'), /the write fails/);
    setFaultHook(null);
    await admitCall(owner, 't1');
    await owner.append([message('after')]);
    assert.equal((await owner.task('t1')).charged.toolCalls, 2, 'the rolled-back call charged nothing');
    const history = await store.loadHistory('s');
    assert.deepEqual(history.map((e) => e.seq), history.map((_, i) => i), 'seq runs on without a gap');
    assert.equal(history.at(-1)?.kind.type, 'user_message');
    await store.close();
  });
});
