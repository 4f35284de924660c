/**
 * `jingwei/sqlite`: the SQLite journal store and the idempotency helper for tools that write to SQLite. Needs the
 * optional peer dependency `better-sqlite3`; without it, importing this entry fails with DriverMissingError.
 */
export * from './store/sqlite/index.js';
