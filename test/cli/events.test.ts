/** `jingwei events` against a real SQLite store, run as the compiled program. */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { alphaHistory, cli, COLOUR, quietHistory, tamper, writeStore } from './helpers.js';

const dir = tempDir('jingwei-cli-events-');

describe('jingwei events', () => {
  let path: string;
  before(async () => {
    path = tempDbPath(dir, 'journal');
    await writeStore(path, { alpha: alphaHistory(), quiet: quietHistory(), 'sess_0194a3b2-7c1d-7e4f-8a9b-0c1d2e3f4a5b': quietHistory() });
  });

  it('prints every event readably, in order, with the ids an operator needs next', () => {
    const r = cli(['events', path, 'alpha']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    assert.doesNotMatch(r.stdout, COLOUR, 'no colour when stdout is not a terminal');
    const lines = r.stdout.trimEnd().split('\n');
    assert.equal(lines[0], 'Session alpha: 10 events');
    assert.match(lines[1]!, /^SEQ\s+RECORDED AT\s+TURN\s+TYPE\s+WHAT$/);
    assert.equal(lines.length, 12);
    assert.match(lines[2]!, /^\s*0\s+-\s+turn-a\s+user_message\s+"Place the order"$/);
    assert.match(lines[3]!, /^\s*1\s+-\s+turn-a\s+tool_call\s+check_stock\s+call c-ok\s+read_only\/v1\s+key k-ok\s+args \{"sku":"x"\}$/);
    assert.match(lines[4]!, /^\s*2\s+-\s+turn-a\s+tool_started\s+call c-ok\s+body starting$/);
    assert.match(lines[5]!, /^\s*3\s+-\s+turn-a\s+tool_result\s+call c-ok\s+succeeded \{"on_hand":3\}$/);
    assert.match(lines[8]!, /^\s*6\s+-\s+turn-a\s+tool_result\s+call c-idem\s+failed body_failure tool_body_failure: body_failure happened \(retryable\)$/);
    assert.match(lines[11]!, /^\s*9\s+-\s+turn-a\s+tool_call\s+ship_order\s+call c-ship\s+non_idempotent\/v1\s+key k-ship/);
  });

  it('--json prints the wire records, byte for byte what the store exports', async () => {
    const r = cli(['events', path, 'alpha', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const store = openSqliteStore(path);
    try {
      assert.equal(r.stdout, await store.exportJsonl('alpha'));
    } finally {
      await store.close();
    }
    const first = JSON.parse(r.stdout.split('\n')[1]!) as { kind: { type: string; call: { operation: { task_id: string } } } };
    assert.equal(first.kind.type, 'tool_call');
    assert.equal(first.kind.call.operation.task_id, 'retry-task', 'snake_case wire keys');
  });

  it('--from and --limit pick a window', () => {
    const r = cli(['events', path, 'alpha', '--from', '4', '--limit', '2']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^Session alpha: 10 events, showing 2 from seq 4\n/);
    assert.deepEqual(r.stdout.trimEnd().split('\n').slice(2).map((l) => l.trim().split(/\s+/)[0]), ['4', '5']);
    const json = cli(['events', path, 'alpha', '--json', '--from', '9']);
    assert.equal(json.stdout.trimEnd().split('\n').length, 1);
    assert.equal((JSON.parse(json.stdout) as { seq: number }).seq, 9);
  });

  it('accepts a unique part of a session id; an ambiguous or unknown one is a usage error (exit 2)', () => {
    const r = cli(['events', path, '2e3f4a5b']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^Session sess_0194a3b2-7c1d-7e4f-8a9b-0c1d2e3f4a5b: 4 events/);
    const none = cli(['events', path, 'nobody']);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /no session "nobody" in this store[\s\S]*alpha/);
    assert.equal(cli(['events', path, 'uiet']).code, 0, 'any unique part');
    const two = tempDbPath(dir, 'two');
    return writeStore(two, { 'order-1001': quietHistory(), 'order-1002': quietHistory() }).then(() => {
      const r2 = cli(['events', two, 'order']);
      assert.equal(r2.code, 2);
      assert.match(r2.stderr, /"order" matches 2 sessions/);
    });
  });

  it('a corrupt journal is reported, never printed in part (exit 1)', async () => {
    const damaged = tempDbPath(dir, 'damaged');
    await writeStore(damaged, { alpha: alphaHistory() });
    tamper(damaged, 'DELETE FROM jw_events WHERE seq = 5');
    const r = cli(['events', damaged, 'alpha']);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /journal corrupt: session alpha, seq 5, reason seq_gap/);
  });
});
