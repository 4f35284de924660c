import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { runDraftValidation, runStoreConformance } from './conformance.js';

const dir = tempDir();
const factory = {
  open: async () => {
    const path = tempDbPath(dir);
    return { store: openSqliteStore(path), reopen: async () => openSqliteStore(path) };
  },
};
runStoreConformance('sqlite', factory);
runDraftValidation('sqlite', factory);
