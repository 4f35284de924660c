export { openPostgresStore, POSTGRES_DEFAULTS, POSTGRES_SCHEMA_VERSION, type PostgresStoreOptions } from './store/postgres.js';
