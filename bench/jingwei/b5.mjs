/**
 * B5: the attention queue over 1,000 sessions. Each session holds one non-idempotent call whose body started and a
 * few messages; every tenth call has no result (in doubt). Two pairs, each against its floor:
 * - `store.attention()` listing every open item (one page of up to 1,000) against the same SELECT of the index
 *   table on a raw connection (what attentionScanSql builds for this query);
 * - `jingwei queue <file> --limit 1000 --json` as a child process against a child process that opens the file with
 *   better-sqlite3, runs that SELECT and prints the rows as JSON (both pay for starting Node).
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { encodeEventText } from '../../dist/wire.js';
import { openSqliteStore } from '../../dist/sqlite.js';
import { Database, ROOT, scratchDir } from '../lib/env.mjs';
import { compare, timeSerial } from '../lib/stats.mjs';

const BASE = Date.UTC(2026, 0, 1, 10, 0, 0, 0);
const CLI = join(ROOT, 'dist', 'cli', 'main.js');
const OPEN = "SELECT session_id, task_id, key, call_id, tool, effect, revision, args_digest, start_marker, started, status, category, called_at, started_at, ended_at, updated_at, pending_since FROM jw_attention WHERE status IN ('no_result', 'outcome_unknown', 'reviewed_not_executed') ORDER BY session_id, task_id, key LIMIT 1000";

/** Session i as a JSONL journal: a started non-idempotent call (every tenth without a result) and `messages` messages. */
function journal(i, messages) {
  const sessionId = `s-${String(i).padStart(4, '0')}`;
  const lines = [];
  const push = (kind) => {
    const seq = lines.length;
    lines.push(encodeEventText({ eventId: `e${seq}`, sessionId, turnId: 't', seq, kind, recordedAt: new Date(BASE + i * 1000 + seq).toISOString() }));
  };
  const callId = `c-${i}`;
  push({
    type: 'tool_call',
    call: { id: callId, name: 'send_mail', arguments: { n: i }, operation: { taskId: `task-${i}`, key: `k-${i}`, contract: { effect: 'non_idempotent', revision: 'v1' }, retry: null, startMarker: true } },
  });
  push({ type: 'tool_started', callId });
  if (i % 10 !== 0) push({ type: 'tool_result', result: { callId, outcome: { status: 'succeeded', output: 'ok' } } });
  while (lines.length < 3 + messages) push({ type: 'user_message', text: 'x' });
  return `${lines.join('\n')}\n`;
}

export async function runB5({ runs, n, warmup, sessions = 1000, messages = 7, log }) {
  const scratch = scratchDir('b5');
  const path = scratch.path('b5.db');
  try {
    const built = process.hrtime.bigint();
    const writer = openSqliteStore(path);
    for (let i = 0; i < sessions; i++) await writer.importJsonl(journal(i, messages), { owner: 'bench' });
    await writer.close();
    const open = Math.ceil(sessions / 10);
    log(`  B5 store: ${sessions} sessions, ${open} open calls, written in ${(Number(process.hrtime.bigint() - built) / 1e6).toFixed(0)} ms`);
    const check = (count, what) => {
      if (count !== open) throw new Error(`B5: ${what} listed ${count} items, expected ${open}`);
    };
    const child = (args) => {
      const r = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 64 * 2 ** 20 });
      if (r.status !== 0) throw new Error(`B5: ${args.slice(0, 2).join(' ')} exited ${r.status}: ${r.stderr}`);
      return JSON.parse(r.stdout);
    };
    const floorScript = `const D = require(${JSON.stringify(join(ROOT, 'node_modules', 'better-sqlite3'))}); ` +
      `const db = new D(process.argv[1], { readonly: true }); process.stdout.write(JSON.stringify({ items: db.prepare(${JSON.stringify(OPEN)}).all() }));`;
    const pair = (id, title, jingwei, floor) => compare({ runs, log, variants: [{ against: `${id.toLowerCase()}-floor`, ...jingwei }, { name: `${id.toLowerCase()}-floor`, ...floor }] })
      .then((result) => ({ id, title, ...result }));
    const attention = await pair('B5', `store.attention() over ${sessions.toLocaleString('en-US')} sessions`, {
      name: 'b5-jingwei-attention',
      label: '`store.attention()`: every open item (1 page)',
      prepare: async () => {
        const store = openSqliteStore(path, { readonly: true });
        return {
          measure: () => timeSerial(async () => check((await store.attention({ limit: 1000 })).items.length, 'store.attention()'), { n, warmup }),
          close: () => store.close(),
        };
      },
    }, {
      label: 'floor: the same SELECT of the index on a raw connection',
      prepare: async () => {
        const db = new Database(path, { readonly: true });
        const select = db.prepare(OPEN);
        return { measure: () => timeSerial(() => check(select.all().length, 'the floor'), { n, warmup }), close: () => db.close() };
      },
    });
    const queue = await pair('B5-cli', `jingwei queue over ${sessions.toLocaleString('en-US')} sessions`, {
      name: 'b5-jingwei-queue',
      label: '`jingwei queue FILE --limit 1000 --json` (a process)',
      prepare: async () => ({ measure: () => timeSerial(() => check(child([CLI, 'queue', path, '--limit', '1000', '--json']).items.length, 'jingwei queue'), { n: Math.max(1, Math.ceil(n / 10)), warmup }) }),
    }, {
      label: 'floor: a Node process running the same SELECT',
      prepare: async () => ({ measure: () => timeSerial(() => check(child(['-e', floorScript, path]).items.length, 'the floor process'), { n: Math.max(1, Math.ceil(n / 10)), warmup }) }),
    });
    return [attention, queue];
  } finally {
    scratch.remove();
  }
}
