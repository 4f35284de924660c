/**
 * Minted ids: UUIDv7 (version 7, variant 10) that increase strictly within a process, so whatever lists by id (the
 * decision inbox, oldest first) lists in the order things were created, also within one millisecond.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { uuidv7 } from '../../src/ids.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const millis = (id: string) => Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16);

function assertIncreasing(ids: readonly string[]): void {
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i - 1]! < ids[i]!, `${ids[i - 1]} < ${ids[i]} (id ${i})`);
}

describe('minted ids', () => {
  it('are UUIDv7 carrying the time they were minted at', () => {
    const before = Date.now();
    const id = uuidv7();
    assert.match(id, UUID_V7);
    assert.ok(millis(id) >= before && millis(id) <= Date.now() + 1);
    assert.equal(millis(uuidv7(Date.UTC(2030, 0, 1))), Date.UTC(2030, 0, 1));
  });

  it('increase strictly in minting order: in a tight loop, many in one millisecond, and when the clock goes back', () => {
    const loop = Array.from({ length: 20_000 }, () => uuidv7());
    const sameMs = Array.from({ length: 10_000 }, () => uuidv7(Date.UTC(2031, 0, 1)));
    const back = [uuidv7(Date.UTC(2032, 0, 1, 0, 0, 1)), uuidv7(Date.UTC(2032, 0, 1)), uuidv7(Date.UTC(2032, 0, 1))];
    for (const ids of [loop, sameMs, back]) {
      assertIncreasing(ids);
      for (const id of ids) assert.match(id, UUID_V7);
    }
    assert.equal(new Set(loop).size, loop.length);
    // 10,000 ids in one millisecond overflow its 4,096 counts: they borrow the next milliseconds, never repeat.
    assert.ok(millis(sameMs.at(-1)!) > Date.UTC(2031, 0, 1) && millis(sameMs.at(-1)!) <= Date.UTC(2031, 0, 1) + 5);
  });

  it('count up in rand_a within a millisecond and carry 62 random bits each', () => {
    const hex = (id: string) => id.replace(/-/g, '');
    const counter = (id: string) => Number.parseInt(hex(id).slice(13, 16), 16);
    const ids = Array.from({ length: 64 }, () => uuidv7(Date.UTC(2033, 0, 1)));
    assert.ok(counter(ids[0]!) < 2048, 'each millisecond starts its count below 2048');
    for (let i = 1; i < ids.length; i++) assert.equal(counter(ids[i]!), counter(ids[i - 1]!) + 1);
    // The 62 bits after the variant: distinct per id, and every one of them set in some id and clear in another.
    const randomBits = ids.map((id) => BigInt(`0x${hex(id).slice(16)}`) & ((1n << 62n) - 1n));
    assert.equal(new Set(randomBits).size, ids.length);
    const some = randomBits.reduce((a, b) => a | b);
    const all = randomBits.reduce((a, b) => a & b);
    assert.equal(some, (1n << 62n) - 1n);
    assert.equal(all, 0n);
  });
});
