/**
 * B2: one durable tool call end to end (a no-op read-only tool) through the canonical runtime on SQLite, against
 * the floor of the same number of raw synced transactions carrying the same bytes (the wire bodies of the call's
 * own events):
 *   - no approval: 2 transactions (call + started marker, then result), floor 2;
 *   - with approval (an approver that approves at once): 3 transactions, floor 3;
 *   - 16 sessions on 16 owners calling concurrently through one store and one runtime, floor: 16 concurrent lanes
 *     of 2 raw transactions each on one connection.
 */
import { openSqliteStore } from '../../dist/sqlite.js';
import { ATTENTION_COLUMNS, ATTENTION_UPDATE } from '../../dist/store/sql-rows.js';
import { JOURNAL_PAGE_SIZE } from '../../dist/store/sqlite/schema.js';
import { FAKE_HASH, openFloor, scratchDir } from '../lib/env.mjs';
import { compare, timeConcurrent, timeSerial } from '../lib/stats.mjs';
import { benchRuntime, bodiesOf, checkedCall, NOOP, NOOP_APPROVED, openRig } from './rig.mjs';

/** The raw floor of one call: one IMMEDIATE transaction per group, each inserting the group's bodies. */
export function floorCall(db, insert, groups, sessionId) {
  let seq = 0;
  return groups.map((bodies) =>
    db.transaction(() => {
      for (const body of bodies) insert.run(sessionId, seq++, 'evt_floor', 1, body, FAKE_HASH);
    }),
  );
}

/**
 * Diagnostic, not a floor: the rows a Jingwei call touches, written with raw SQL and no library code: per
 * transaction read the owner and task rows, advance the owner row conditionally, insert the events, update the
 * task row, (first transaction) record the operation, and write the operation's attention row as the store does
 * (inserted with the call, then read by call id and upserted with the result: every column but the key, so its
 * indexes too). Between the floor and this lies the cost of the extra rows the evidence needs; between this and
 * Jingwei, the library's own CPU. The file at `path` is made by the store (its schema and pages); returns the raw
 * connection and one transaction per group of `groups`.
 */
export async function openRawShape(path, groups) {
  const store = openSqliteStore(path);
  await openRig(store, benchRuntime(), { sessionId: 'bench-b2-shape', taskId: 'bench-b2-shape-task' });
  await store.close();
  const { db, insert } = openFloor(path);
  const session = db.prepare('SELECT * FROM jw_sessions WHERE session_id = ?');
  const task = db.prepare('SELECT * FROM jw_tasks WHERE session_id = ? AND task_id = ?');
  const advance = db.prepare('UPDATE jw_sessions SET last_seq = ?, head_hash = ?, body_bytes = body_bytes + ? WHERE session_id = ? AND epoch = ? AND last_seq = ?');
  const charge = db.prepare(
    'UPDATE jw_tasks SET charged_tool_calls = ?, reserved_output_bytes = ?, charged_journal_bytes = charged_journal_bytes + ? WHERE session_id = ? AND task_id = ?',
  );
  const operation = db.prepare(
    'INSERT INTO jw_operations VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, task_id, key) DO UPDATE SET call_id = excluded.call_id',
  );
  const attention = db.prepare(
    `INSERT INTO jw_attention (${ATTENTION_COLUMNS}) VALUES (${ATTENTION_COLUMNS.split(', ').map(() => '?').join(', ')}) ` +
      `ON CONFLICT (session_id, task_id, key) DO UPDATE SET ${ATTENTION_UPDATE}`,
  );
  const attentionOfCall = db.prepare('SELECT * FROM jw_attention WHERE session_id = ? AND call_id = ?');
  let call = 0;
  const txns = groups.map((bodies, g) =>
    db.transaction(() => {
      const s = session.get('bench-b2-shape');
      const t = task.get('bench-b2-shape', 'bench-b2-shape-task');
      const info = advance.run(s.last_seq + bodies.length, FAKE_HASH, 1000, 'bench-b2-shape', s.epoch, s.last_seq);
      if (info.changes !== 1) throw new Error('raw shape: owner row did not advance');
      let seq = s.last_seq;
      for (const body of bodies) insert.run('bench-b2-shape', ++seq, 'evt_shape', s.epoch, body, FAKE_HASH);
      charge.run(t.charged_tool_calls + (g === 0 ? 1 : 0), t.reserved_output_bytes, 1000, 'bench-b2-shape', 'bench-b2-shape-task');
      if (g === 0) {
        call++;
        operation.run('bench-b2-shape-task', `operation_${call}`, 'bench-b2-shape', `toolcall_${call}`, 'evt_shape');
      } else if (!attentionOfCall.get('bench-b2-shape', `toolcall_${call}`)) {
        throw new Error('raw shape: the attention row is missing');
      }
      const last = g === groups.length - 1;
      const now = Date.now();
      attention.run('bench-b2-shape', 'bench-b2-shape-task', `operation_${call}`, `toolcall_${call}`, 'noop', 'read_only', 'bench-1', FAKE_HASH,
        1, 1, last ? 'completed' : 'no_result', null, now, now, last ? now : null, now, null);
    }),
  );
  return { db, txns };
}

function rawShape(scratch, groups, n, warmup) {
  return {
    name: 'b2-raw-shape',
    label: 'diagnostic: the rows Jingwei touches, raw SQL, no library',
    against: 'b2-floor',
    prepare: async (r) => {
      const { db, txns } = await openRawShape(scratch.path(`shape-${r}.db`), groups);
      return {
        measure: () => timeSerial(async () => { for (const t of txns) t.immediate(); }, { n, warmup }),
        close: () => db.close(),
      };
    },
  };
}

/** The wire bodies of one sample call without and one with approval, grouped by transaction (bodiesOf). */
export async function sampleBodies(scratch) {
  const store = openSqliteStore(scratch.path('sample.db'));
  try {
    const { gateway } = await openRig(store, benchRuntime(), { sessionId: 'bench-b2-sample' });
    return {
      plain: bodiesOf(await checkedCall(gateway, NOOP), false),
      approval: bodiesOf(await checkedCall(gateway, NOOP_APPROVED), true),
    };
  } finally {
    await store.close();
  }
}

export async function runB2({ runs, n, warmup, lanes = 16, concurrentN = n * 4, log }) {
  const scratch = scratchDir('b2');
  try {
    const bodies = await sampleBodies(scratch);
    const serial = (tool, groups, suffix) => [
      {
        name: `b2-jingwei${suffix}`,
        label: `Jingwei \`gateway.call\`${tool === NOOP_APPROVED ? ', with approval' : ''} (${groups.length} txns)`,
        against: `b2-floor${suffix}`,
        prepare: async (r) => {
          const store = openSqliteStore(scratch.path(`jingwei${suffix}-${r}.db`));
          const { gateway } = await openRig(store, benchRuntime(), { sessionId: `bench-b2${suffix}` });
          return {
            measure: () => timeSerial(() => gateway.call(tool, {}), { n, warmup }),
            close: () => store.close(),
          };
        },
      },
      {
        name: `b2-floor${suffix}`,
        label: `floor: ${groups.length} raw synced txns, same bytes`,
        prepare: async (r) => {
          const { db, insert } = openFloor(scratch.path(`floor${suffix}-${r}.db`), { pageSize: JOURNAL_PAGE_SIZE });
          const txns = floorCall(db, insert, groups, 'bench-b2-floor');
          return {
            measure: () => timeSerial(async () => { for (const t of txns) t.immediate(); }, { n, warmup }),
            close: () => db.close(),
          };
        },
      },
    ];
    const plain = await compare({ runs, log, variants: [...serial(NOOP, bodies.plain, ''), rawShape(scratch, bodies.plain, n, warmup)] });
    const approval = await compare({ runs, log, variants: serial(NOOP_APPROVED, bodies.approval, '-approval') });
    const concurrent = await compare({
      runs,
      log,
      variants: [
        {
          name: 'b2-jingwei-c16',
          label: `Jingwei, ${lanes} sessions on ${lanes} owners, concurrent`,
          against: 'b2-floor-c16',
          prepare: async (r) => {
            const store = openSqliteStore(scratch.path(`jingwei-c16-${r}.db`));
            const runtime = benchRuntime();
            const gateways = [];
            for (let k = 0; k < lanes; k++) {
              gateways.push((await openRig(store, runtime, { sessionId: `bench-b2-c16-${k}`, owner: `host-${k}` })).gateway);
            }
            return {
              measure: () => timeConcurrent((k) => gateways[k].call(NOOP, {}), { n: concurrentN, lanes, warmup: 1 }),
              close: () => store.close(),
            };
          },
        },
        {
          name: 'b2-floor-c16',
          label: `floor: ${lanes} lanes × 2 raw synced txns`,
          prepare: async (r) => {
            const { db, insert } = openFloor(scratch.path(`floor-c16-${r}.db`), { pageSize: JOURNAL_PAGE_SIZE });
            const perLane = Array.from({ length: lanes }, (_, k) => floorCall(db, insert, bodies.plain, `bench-b2-floor-${k}`));
            return {
              measure: () =>
                timeConcurrent(async (k) => {
                  const [first, second] = perLane[k];
                  first.immediate();
                  await null; // the other lanes may run between a call's two transactions, as they do for Jingwei
                  second.immediate();
                }, { n: concurrentN, lanes, warmup: 1 }),
              close: () => db.close(),
            };
          },
        },
      ],
    });
    return [
      { id: 'B2', title: 'One durable tool call (no-op, read-only, no approval) on SQLite', ...plain },
      { id: 'B2-approval', title: 'One durable tool call with approval (approver approves at once) on SQLite', ...approval },
      { id: 'B2-c16', title: `${lanes} sessions on separate owners, calling concurrently (one store, one process)`, ...concurrent },
    ];
  } finally {
    scratch.remove();
  }
}
