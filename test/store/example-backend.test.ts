/**
 * The example store in examples/, built only on `jingwei/backend`, passes the conformance suite exactly as a third
 * party would run it: both imported by package name, so through package.json's exports into dist/.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { runStoreConformance } from 'jingwei/testing';
import { createMapStore } from '../../examples/map-store.js';

runStoreConformance({ name: 'example map backend (examples/map-store.ts)', open: () => createMapStore() });

it('the example store reports its own kind', async () => {
  const store = createMapStore();
  assert.equal(store.kind, 'map');
  await store.close();
});
