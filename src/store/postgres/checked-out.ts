/** What `releasing` needs of a connection checked out of a pool; a pg.PoolClient is one. */
export interface CheckedOutClient {
  query(text: string): Promise<unknown>;
  on(event: 'error', listener: (error: unknown) => void): unknown;
  off(event: 'error', listener: (error: unknown) => void): unknown;
  release(error?: Error): void;
}

/**
 * Runs `body` in a transaction on a connection checked out of a pool, then returns the connection to the pool. A
 * throw rolls the transaction back. An error the server sends while the connection is checked out (its session
 * ended by a timeout, say) is kept here: pg emits it on the client, where nothing else listens, and unheard it would
 * end the process. A connection that failed so, or whose ROLLBACK failed, is destroyed instead of returned.
 */
export async function releasing<T>(client: CheckedOutClient, body: () => Promise<T>): Promise<T> {
  let broken: unknown;
  const onError = (error: unknown) => {
    broken = error;
  };
  client.on('error', onError);
  try {
    const result = await body();
    client.off('error', onError);
    client.release();
    return result;
  } catch (error) {
    if (broken === undefined) {
      try {
        await client.query('ROLLBACK');
      } catch (rollbackError) {
        broken = rollbackError;
      }
    }
    client.off('error', onError);
    client.release(broken === undefined ? undefined : broken instanceof Error ? broken : new Error(String(broken)));
    throw error;
  }
}
