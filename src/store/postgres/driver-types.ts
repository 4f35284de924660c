/**
 * The parts of a `pg` pool and client the library uses, declared structurally so the published types do not need
 * `@types/pg`. A `pg.Pool` is a PgPool and a `pg.PoolClient` is a PgClient.
 */
export interface PgQueryResult<R> {
  readonly rows: R[];
  readonly rowCount: number | null;
}

/** A connection checked out of the pool, inside the transaction the library opened. */
export interface PgClient {
  query<R extends object = Record<string, unknown>>(text: string, values?: unknown[]): Promise<PgQueryResult<R>>;
}

/** A `pg.Pool` you own; pass it instead of a URL to share connections. */
export interface PgPool {
  connect(): Promise<PgClient & { release(error?: Error | boolean): void }>;
  query<R extends object = Record<string, unknown>>(text: string, values?: unknown[]): Promise<PgQueryResult<R>>;
  end(): Promise<void>;
}
