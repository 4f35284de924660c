/**
 * `jingwei/postgres`: the PostgreSQL journal store and the idempotency helper for tools that write to PostgreSQL.
 * Needs the optional peer dependency `pg`; without it, importing this entry fails with DriverMissingError.
 */
export * from './store/postgres/index.js';
