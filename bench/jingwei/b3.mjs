/**
 * B3: recovery reads. A session of 80,000 events (about 16 MiB of wire JSON, just under the library's size limit) is
 * written once; each operation then runs `store.loadHistory` (read, decode strictly, verify seq, ids, epochs and
 * the hash chain against the owner row) plus `inspectToolRecovery` on the last call (the whole-history evidence
 * pass), against the floor: the store's own SELECT of the same rows on a raw connection plus JSON.parse of every
 * body.
 */
import { newCallId, newEventId, newOperationKey } from '../../dist/ids.js';
import { inspectToolRecovery, LIMITS } from '../../dist/index.js';
import { encodeEventText } from '../../dist/wire.js';
import { openSqliteStore } from '../../dist/sqlite.js';
import { floorRead, openFloor, scratchDir } from '../lib/env.mjs';
import { compare, median, timeSerial } from '../lib/stats.mjs';
import { commitAs } from '../../dist/store/owner-commit.js';

// Short ids: with its recorded time and a minted event id, each event's envelope is ~150 bytes, so 100,000 of them
// only fit under the 16 MiB limit with short session and turn ids.
const SESSION = 'b3';
const TASK = 'bench-b3-task';
const CONTRACT = { effect: 'read_only', revision: 'bench-1' };

/**
 * Drafts of a plausible agent session: `calls` tool calls (call, started marker, succeeded result) spread evenly
 * among user and assistant messages, a new turn every 25 units, message text sized so the whole history comes to
 * `targetBytes` of compact wire JSON.
 */
export function sessionDrafts(events, calls, targetBytes, sessionId = SESSION) {
  const messages = events - 3 * calls;
  if (messages < 0) throw new Error('more call events than events');
  const every = calls > 0 ? Math.max(1, Math.floor(messages / calls)) : Infinity;
  const units = [];
  let placed = 0;
  for (let m = 0; m < messages; m++) {
    units.push('message');
    if ((m + 1) % every === 0 && placed < calls) {
      units.push('call');
      placed++;
    }
  }
  while (placed++ < calls) units.push('call');
  const drafts = [];
  let turn = 0;
  let toolBytes = 0;
  let seq = 0;
  const messageIndexes = [];
  // Every event the store records carries its recorded time (one fixed-length ISO text), so size it with one.
  const size = (draft, s) => Buffer.byteLength(encodeEventText({ ...draft, sessionId, seq: s, recordedAt: '2026-01-01T00:00:00.000Z' }));
  let lastCallId;
  units.forEach((unit, u) => {
    if (u % 25 === 0) turn++;
    const turnId = `t${turn}`;
    if (unit === 'message') {
      const kind = drafts.length % 2 === 0 ? { type: 'user_message', text: '' } : { type: 'assistant_message', text: '' };
      const draft = { eventId: newEventId(), turnId, kind };
      messageIndexes.push(drafts.length);
      toolBytes += size(draft, seq++);
      drafts.push(draft);
      return;
    }
    const id = newCallId();
    lastCallId = id;
    const call = { id, name: 'noop', arguments: {}, operation: { taskId: TASK, key: newOperationKey(), contract: CONTRACT, retry: null, startMarker: true } };
    for (const kind of [
      { type: 'tool_call', call },
      { type: 'tool_started', callId: id },
      { type: 'tool_result', result: { callId: id, outcome: { status: 'succeeded', output: 'ok' } } },
    ]) {
      const draft = { eventId: newEventId(), turnId, kind };
      toolBytes += size(draft, seq++);
      drafts.push(draft);
    }
  });
  // Whole-array size: bodies plus brackets and commas; spread what is left over the message texts.
  const fixed = toolBytes + 2 + (drafts.length - 1);
  const textBytes = Math.max(1, Math.floor((targetBytes - fixed) / Math.max(1, messageIndexes.length)));
  const text = 'm'.repeat(textBytes);
  for (const i of messageIndexes) drafts[i] = { ...drafts[i], kind: { ...drafts[i].kind, text } };
  return { drafts, lastCallId, bytes: fixed + textBytes * messageIndexes.length };
}

/**
 * The most events a session near the 16 MiB limit can hold: with a recorded time and a minted id, an event's envelope
 * alone is ~200 bytes of wire JSON, so 100,000 events (LIMITS.maxHistoryEvents) no longer fit in LIMITS.maxHistoryBytes.
 */
export const B3_EVENTS = 80_000;

/**
 * Writes the B3 session through `owner` (the runtime's write path, 1,000 events a commit): `events` events of which
 * `calls` tool calls, sized a little under the 16 MiB limit, scaled down with the event count in quick mode.
 * Returns the number of events, their wire bytes and the last call's id.
 */
export async function writeB3Session(owner, { events = B3_EVENTS, calls = Math.round(events * 0.005) } = {}) {
  const target = Math.floor((LIMITS.maxHistoryBytes - 64 * 1024) * (events / B3_EVENTS));
  const { drafts, lastCallId, bytes } = sessionDrafts(events, calls, target, owner.sessionId);
  if (bytes > LIMITS.maxHistoryBytes) throw new Error(`B3: ${events} events with ${calls} calls need ${bytes} bytes, over the limit`);
  for (let i = 0; i < drafts.length; i += 1000) await commitAs(owner, { events: drafts.slice(i, i + 1000) }); // tool evidence: the runtime's write path
  return { count: drafts.length, bytes, lastCallId };
}

export async function runB3({ runs, n, warmup, events = B3_EVENTS, calls = Math.round(events * 0.005), log }) {
  const scratch = scratchDir('b3');
  const path = scratch.path('b3.db');
  const store = openSqliteStore(path);
  let floor;
  try {
    const built = process.hrtime.bigint();
    const owner = await store.acquire(SESSION, { owner: 'bench' });
    const { count, bytes, lastCallId } = await writeB3Session(owner, { events, calls });
    await owner.release();
    const buildMs = Number(process.hrtime.bigint() - built) / 1e6;
    log(`  B3 session: ${count} events, ${calls} calls, ${(bytes / 2 ** 20).toFixed(2)} MiB, written in ${buildMs.toFixed(0)} ms`);
    floor = openFloor(path);
    const read = floorRead(floor.db);
    let peakRss = 0;
    const result = await compare({
      runs,
      log,
      variants: [
        {
          name: 'b3-jingwei',
          label: 'Jingwei `loadHistory` + `inspectToolRecovery`',
          against: 'b3-floor',
          prepare: async () => {
            const load = [];
            const inspect = [];
            return {
              measure: async () => {
                const m = await timeSerial(async () => {
                  const t0 = process.hrtime.bigint();
                  const history = await store.loadHistory(SESSION);
                  const t1 = process.hrtime.bigint();
                  const assessment = inspectToolRecovery(history, lastCallId);
                  const t2 = process.hrtime.bigint();
                  if (history.length !== count || assessment.status !== 'completed') throw new Error('B3: unexpected recovery result');
                  load.push(Number(t1 - t0) / 1e6);
                  inspect.push(Number(t2 - t1) / 1e6);
                  peakRss = Math.max(peakRss, process.memoryUsage().rss);
                }, { n, warmup });
                return { ...m, extra: { loadMs: median(load), inspectMs: median(inspect) } };
              },
            };
          },
        },
        {
          name: 'b3-floor',
          label: 'floor: raw SELECT + JSON.parse',
          prepare: async () => ({
            measure: () =>
              timeSerial(() => {
                if (read(SESSION).length !== count) throw new Error('B3 floor: unexpected row count');
              }, { n, warmup }),
          }),
        },
      ],
    });
    const jingwei = result.variants.find((v) => v.name === 'b3-jingwei');
    return {
      id: 'B3',
      title: `Recovery read of a ${count.toLocaleString('en-US')}-event, ${(bytes / 2 ** 20).toFixed(1)} MiB session`,
      events: count,
      calls,
      bytes,
      split: {
        loadMs: median(jingwei.runs.map((r) => r.extra.loadMs)),
        inspectMs: median(jingwei.runs.map((r) => r.extra.inspectMs)),
      },
      peakRssMiB: peakRss / 2 ** 20,
      ...result,
    };
  } finally {
    floor?.db.close();
    await store.close();
    scratch.remove();
  }
}
