export { openSqliteStore, SQLITE_SCHEMA_VERSION, type SqliteStoreOptions } from './store/sqlite.js';
