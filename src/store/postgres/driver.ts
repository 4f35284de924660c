/** pg, an optional peer dependency: loaded once, and DriverMissingError naming it when absent. */
import type { Pool as PgDriverPool, PoolClient, QueryResult, QueryResultRow } from 'pg';
import { loadDriver } from '../driver.js';

const driver = (await loadDriver('pg', 'jingwei/postgres', () => import('pg'))).default;

export const Pool = driver.Pool;
export type Pool = PgDriverPool;
export type { PoolClient, QueryResult, QueryResultRow };
