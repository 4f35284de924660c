import { createMemoryStore } from '../../src/store/memory.js';
import { runStoreConformance } from '../../src/testing/index.js';

runStoreConformance({ name: 'memory', open: () => createMemoryStore() });
