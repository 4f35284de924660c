/** pg, an optional peer dependency: loaded once, and DriverMissingError naming it when absent. */
import type { Pool as PgDriverPool, PoolClient, QueryResult, QueryResultRow } from 'pg';
import { loadDriver } from '../driver.js';

const driver = (await loadDriver('pg', 'jingwei/postgres', () => import('pg'))).default;

export const Pool = driver.Pool;
/** A single connection: never a pool, though it has `connect` and `query` too. */
export const Client = driver.Client;
export type Pool = PgDriverPool;
export type { PoolClient, QueryResult, QueryResultRow };
