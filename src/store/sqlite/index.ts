export { openSqliteStore } from './backend.js';
export { SQLITE_SCHEMA_VERSION, type SqliteDatabase, type SqliteStatement, type SqliteStoreOptions } from './options.js';
export { SqliteIdempotencyStore } from './idempotency.js';
export { StorePathError, StoreReplacedError, type StorePathErrorCode } from '../../errors.js';
