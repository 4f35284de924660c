export { openSqliteStore } from './backend.js';
export { SQLITE_SCHEMA_VERSION } from './schema.js';
export type { SqliteDatabase, SqliteStatement, SqliteStoreOptions } from './options.js';
export { SqliteIdempotencyStore } from './idempotency.js';
