/**
 * What a verified read of B6's journal costs at the least, part by part, against B6's floor (the store's SELECT of
 * the session's rows on a raw connection plus JSON.parse of every body): the SELECT, JSON.parse of every body, the
 * hash chain (one SHA-256 of each row's previous hash, epoch and body, as the store computes it) and decoding each
 * parsed body into an event, each timed alone over the same rows; then `loadHistory` on a second handle (the whole
 * verified read: the parts plus the checks between them) and B6's `resumeAgent` (the read plus the replay of 500
 * calls). Rounds alternate the variants; the report gives the median over rounds of each one's p50.
 *
 *   node bench/read-parts.mjs [--rounds=N] [--n=N]      (run `npm run build` first)
 *
 * A verified read does at least the floor's work plus the chain and the decode, so the floor plus those two, over
 * the floor, is the lowest ratio B6 could reach with every check kept (the SELECT and JSON.parse alone are shown
 * for scale: timed without keeping what they read, they cost less than the floor, which keeps every parsed body).
 */
import { chainHash, GENESIS_HASH } from '../dist/store/chain.js';
import { decodeEvent } from '../dist/event/codec.js';
import { openSqliteStore } from '../dist/sqlite.js';
import { openB6Rig } from './jingwei/b6.mjs';
import { floorRead, numberArg, openFloor, scratchDir } from './lib/env.mjs';
import { median } from './lib/stats.mjs';

const ROUNDS = numberArg('rounds', 7);
const N = numberArg('n', 40);
const SESSION = 'bench-b6';

const scratch = scratchDir('read-parts');
const rig = await openB6Rig(scratch.path('b6.db'), { steps: 50, perStep: 10 });
const floor = openFloor(scratch.path('b6.db'));
const second = openSqliteStore(scratch.path('b6.db'));
try {
  const select = floor.db.prepare('SELECT seq, event_id, epoch, body, hash FROM jw_events WHERE session_id = ? ORDER BY seq').raw(true);
  const rows = select.all(SESSION);
  const parsed = rows.map((r) => JSON.parse(r[3]));
  const read = floorRead(floor.db);
  const variants = [
    ['floor: SELECT + JSON.parse', () => read(SESSION)],
    ['SELECT', () => select.all(SESSION)],
    ['JSON.parse of every body', () => { for (const r of rows) JSON.parse(r[3]); }],
    ['hash chain (SHA-256 a row)', () => {
      let hash = GENESIS_HASH;
      for (const r of rows) hash = chainHash(hash, r[2], r[3]);
      if (hash !== rows[rows.length - 1][4]) throw new Error('read-parts: the chain does not match the stored hashes');
    }],
    ['decode every parsed body', () => { for (const p of parsed) decodeEvent(p); }],
    ['loadHistory (second handle)', () => second.loadHistory(SESSION)],
    ['resumeAgent (B6)', () => rig.resume()],
  ];
  const p50s = new Map(variants.map(([name]) => [name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, op] of variants) {
      for (let i = 0; i < 5; i++) await op();
      const samples = [];
      for (let i = 0; i < N; i++) {
        const t = process.hrtime.bigint();
        await op();
        samples.push(Number(process.hrtime.bigint() - t) / 1e6);
      }
      p50s.get(name).push(median(samples));
    }
  }
  const at = (name) => median(p50s.get(name));
  const floorMs = at('floor: SELECT + JSON.parse');
  process.stdout.write(`B6 journal: ${rows.length} events, ${rows.reduce((s, r) => s + Buffer.byteLength(r[3]), 0)} body bytes; ${ROUNDS} rounds of ${N}\n`);
  for (const [name] of variants) process.stdout.write(`  ${name.padEnd(30)} ${at(name).toFixed(2).padStart(6)} ms  ${(at(name) / floorMs).toFixed(2)}× the floor\n`);
  const least = floorMs + at('hash chain (SHA-256 a row)') + at('decode every parsed body');
  process.stdout.write(`  floor + hash chain + decode    ${least.toFixed(2).padStart(6)} ms  ${(least / floorMs).toFixed(2)}× the floor: the least a read that checks the chain and decodes can cost\n`);
} finally {
  floor.db.close();
  await second.close();
  await rig.close();
  scratch.remove();
}
