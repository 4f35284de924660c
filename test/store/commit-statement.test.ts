/**
 * The PostgreSQL commit statement's text is written once per shape and cached (docs/design.md#one-round-trip-per-write-on-postgresql):
 * a statement built on a cached text must carry exactly the parameters a statement built from scratch carries, in
 * the same order, for every shape. Pure: no server needed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { SessionId, TaskId } from '../../src/ids.js';
import { commitStatement } from '../../src/store/postgres/commit-statement.js';
import type { KnownReads } from '../../src/store/postgres/known-rows.js';
import type { AttentionRow, EventRow, OperationRow, TaskRow, TxWrites } from '../../src/store/rows.js';

let unique = 0;
/** A schema name never used before, so the first statement of each shape in it is built from scratch. */
const freshSchema = () => `"cs_${process.pid}_${unique++}"`;

const event = (seq: number, session = 's'): EventRow => ({ sessionId: session as SessionId, seq, eventId: `evt-${seq}`, epoch: 2, body: `{"seq":${seq}}`, hash: `h${seq}` });
const operation = (i: number): OperationRow => ({ taskId: 't' as TaskId, key: `k${i}`, sessionId: 's' as SessionId, callId: `c${i}`, eventId: `evt-${i}` });
const attention = (i: number, session = 's'): AttentionRow => ({
  sessionId: session as SessionId, taskId: 't' as TaskId, key: `k${i}`, callId: `c${i}`, tool: 'send', effect: 'non_idempotent', revision: 'r1',
  argsDigest: `d${i}`, startMarker: true, started: i % 2 === 0, status: 'no_result', category: null, calledAt: 1000 + i, startedAt: null, endedAt: null, updatedAt: 1000 + i,
});
const task: TaskRow = {
  taskId: 't' as TaskId, sessionId: 's' as SessionId, state: 'running', limitToolCalls: 10, limitOutputBytes: 100, chargedToolCalls: 3,
  chargedOutputBytes: 7, reservedOutputBytes: 5, reservations: [{ callId: 'c1', bytes: 5, started: true, epoch: 2 }], stopReason: null,
  limitJournalBytes: 1000, chargedJournalBytes: 400,
};
const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

/** Every kind of part in counts on both sides of the switch from one parameter a value to one array a column. */
const WRITES: readonly { name: string; writes: TxWrites<unknown> }[] = [
  { name: 'a task row alone', writes: { task: { row: task, insert: false }, result: undefined } },
  { name: 'one event', writes: { events: [event(1)], result: undefined } },
  { name: 'a call: two events, task update, operation, attention', writes: { events: [event(1), event(2)], task: { row: task, insert: false }, operations: [operation(1)], attention: [attention(1)], result: undefined } },
  { name: 'a new task', writes: { events: [event(1)], task: { row: task, insert: true }, result: undefined } },
  { name: 'four of each', writes: { events: range(4).map((i) => event(i)), operations: range(4).map(operation), attention: range(4).map((i) => attention(i)), result: undefined } },
  { name: 'five of each, two sessions notified', writes: { events: range(5).map((i) => event(i)), operations: range(5).map(operation), attention: [...range(4).map((i) => attention(i)), attention(9, 's2')], result: undefined } },
  { name: 'many rows', writes: { events: range(40).map((i) => event(i)), operations: range(12).map(operation), attention: range(30).map((i) => attention(i)), result: undefined } },
  { name: 'repeated operations: the last one kept', writes: { operations: [operation(1), operation(2), operation(1)], attention: [attention(1), attention(1)], result: undefined } },
];

const CHECKS: readonly { name: string; checks: KnownReads }[] = [
  { name: 'no checks', checks: {} },
  { name: 'task', checks: { task: { taskId: 't', expected: '{"t":[1]}' } } },
  { name: 'every check', checks: { task: { taskId: 't', expected: '{}' }, operation: { taskId: 't', key: 'k1', expected: '{}' }, attention: { callIds: ['c1', 'c2'], expected: '{}' }, eventIds: ['e1'] } },
];

const known = (checks: KnownReads) => ({
  session: { values: ['s', 'host', true, 2, 9, 'head', 400, 1000, 31000], leaseMs: 30000, expect: { epoch: 2, lastSeq: 7 }, knownJson: '["s"]' },
  checks,
});

/** The parameter numbers the text uses, each once at least, none beyond the values. */
function placeholders(text: string): number[] {
  return [...new Set([...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])))].sort((a, b) => a - b);
}

describe('PostgreSQL commit statement: a cached text carries the same parameters as one built from scratch', () => {
  for (const w of WRITES) {
    for (const k of [undefined, ...CHECKS]) {
      it(`${w.name}, ${k ? `known rows (${k.name})` : 'ordinary path'}`, () => {
        const S = freshSchema();
        const args = [S, w.writes, 'jw_channel', k ? known(k.checks) : undefined] as const;
        const built = commitStatement(...args);
        const cached = commitStatement(...args);
        assert.equal(cached.shape, built.shape);
        assert.equal(cached.text, built.text);
        assert.deepEqual(cached.values, built.values);
        assert.deepEqual(placeholders(built.text), range(built.values.length, 1), 'every value has its placeholder');
        // Another schema gets its own text, with the same parameters.
        const other = commitStatement(freshSchema(), w.writes, 'jw_channel', k ? known(k.checks) : undefined);
        assert.notEqual(other.text, built.text);
        assert.deepEqual(other.values, built.values);
      });
    }
  }

  it('statements of different shapes in one schema keep their own texts', () => {
    const S = freshSchema();
    const texts = new Map<string, string>();
    for (const w of WRITES) {
      const s = commitStatement(S, w.writes, 'jw_channel');
      const earlier = texts.get(s.shape);
      if (earlier !== undefined) assert.equal(s.text, earlier, `shape ${s.shape}`);
      texts.set(s.shape, s.text);
      assert.deepEqual(commitStatement(S, w.writes, 'jw_channel').text, s.text);
    }
    assert.ok(texts.size >= 6, `${texts.size} shapes`);
  });
});
