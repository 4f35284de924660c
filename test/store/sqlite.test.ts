import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { runStoreConformance } from './conformance.js';

const dir = tempDir();
runStoreConformance('sqlite', {
  open: async () => {
    const path = tempDbPath(dir);
    return { store: openSqliteStore(path), reopen: async () => openSqliteStore(path) };
  },
});
