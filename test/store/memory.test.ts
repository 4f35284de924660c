import { createMemoryStore } from '../../src/store/memory.js';
import { runDraftValidation, runStoreConformance } from './conformance.js';

const factory = { open: async () => ({ store: createMemoryStore() }) };
runStoreConformance('memory', factory);
runDraftValidation('memory', factory);
