export { openPostgresStore } from './backend.js';
export { POSTGRES_DEFAULTS } from '../../limits.js';
export { POSTGRES_SCHEMA_VERSION, type PostgresStoreOptions } from './options.js';
export type { PgClient, PgPool, PgQueryResult } from './driver-types.js';
export { PostgresIdempotencyStore } from './idempotency.js';
export { StorePathError, type StorePathErrorCode } from '../../errors.js';
