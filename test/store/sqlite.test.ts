import { openSqliteStore } from '../../src/sqlite.js';
import type { SessionStore } from '../../src/store/types.js';
import { runStoreConformance } from '../../src/testing/index.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir();
const paths = new WeakMap<SessionStore, string>();
runStoreConformance({
  name: 'sqlite',
  open: () => {
    const path = tempDbPath(dir);
    const store = openSqliteStore(path);
    paths.set(store, path);
    return store;
  },
  reopen: (store) => openSqliteStore(paths.get(store)!),
});
