/** better-sqlite3, an optional peer dependency: loaded once, and DriverMissingError naming it when absent. */
import type BetterSqlite3 from 'better-sqlite3';
import { loadDriver } from '../driver.js';

export type Database = BetterSqlite3.Database;
export type Transaction<F extends (...args: never[]) => unknown> = BetterSqlite3.Transaction<F>;

export const Database: typeof BetterSqlite3 = (await loadDriver('better-sqlite3', 'jingwei/sqlite', () => import('better-sqlite3'))).default;
export type Statement<P extends unknown[] | object = unknown[], R = unknown> = BetterSqlite3.Statement<P, R>;
