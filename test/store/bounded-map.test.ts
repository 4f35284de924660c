/** The stores' bounded caches: newest last, the oldest dropped first. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setNewest, trimOldest } from '../../src/bounded-map.js';

describe('bounded maps', () => {
  it('setNewest moves a key set again to the end and drops the oldest beyond the bound', () => {
    const map = new Map<string, number>();
    for (const [key, value] of [['a', 1], ['b', 2], ['c', 3]] as const) setNewest(map, key, value, 3);
    setNewest(map, 'a', 10, 3);
    assert.deepEqual([...map], [['b', 2], ['c', 3], ['a', 10]]);
    setNewest(map, 'd', 4, 3);
    assert.deepEqual([...map], [['c', 3], ['a', 10], ['d', 4]], 'b, now the oldest, was dropped');
  });

  it('setNewest on a map holding only that key sets its value and keeps the bound, 0 included', () => {
    const map = new Map([['a', 1]]);
    setNewest(map, 'a', 2, 3);
    assert.deepEqual([...map], [['a', 2]]);
    setNewest(map, 'b', 3, 1);
    assert.deepEqual([...map], [['b', 3]], 'a, the oldest, was dropped');
    setNewest(map, 'b', 4, 0);
    assert.equal(map.size, 0, 'a bound of 0 keeps nothing, not even the key just set');
  });

  it('trimOldest keeps the newest entries only', () => {
    const map = new Map([['a', 1], ['b', 2], ['c', 3], ['d', 4]]);
    trimOldest(map, 2);
    assert.deepEqual([...map.keys()], ['c', 'd']);
    trimOldest(map, 5);
    assert.deepEqual([...map.keys()], ['c', 'd']);
    trimOldest(map, 0);
    assert.equal(map.size, 0);
  });
});
