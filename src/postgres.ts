export { openPostgresStore, POSTGRES_DEFAULTS, POSTGRES_SCHEMA_VERSION, type PostgresStoreOptions } from './store/postgres.js';
export { PostgresIdempotencyStore } from './tool/idempotency-postgres.js';
