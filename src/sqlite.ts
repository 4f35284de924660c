export { openSqliteStore, SQLITE_SCHEMA_VERSION, type SqliteStoreOptions } from './store/sqlite.js';
export { SqliteIdempotencyStore } from './tool/idempotency-sqlite.js';
