import { InvalidInputError, JingweiError, StoreBusyError, StoreUnavailableError } from '../../errors.js';

/** Node's socket errors: the server is gone or unreachable. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

/** Maps the driver's errors onto the library's typed ones; our own errors pass through. */
export function mapPostgresError(error: unknown, context: string): unknown {
  if (error instanceof JingweiError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  if (code === '55P03') return new StoreBusyError(`${context}: another writer holds the lock (lock_timeout)`, { cause: error });
  if (code === '57014') return new StoreBusyError(`${context}: the statement was cancelled (statement_timeout, or pg_cancel_backend): ${message}`, { cause: error });
  if (code === '40001' || code === '40P01') return new StoreBusyError(`${context}: ${message} (${code})`, { cause: error });
  if (code === '22021' || code === '22P05') {
    return new InvalidInputError('text', `PostgreSQL cannot store this text (U+0000 or an invalid character): ${message}`, { cause: error });
  }
  if (code === '42P01' || code === '3F000') {
    return new StoreUnavailableError('store_failure', `${context}: the store's tables are missing (${message})`, { cause: error });
  }
  // pg's client-side answer timeout (query_timeout), which then closes the connection.
  if (message === 'Query read timeout') {
    return new StoreUnavailableError('store_failure', `${context}: PostgreSQL did not answer in time (the server or the network is down); the connection was closed`, { cause: error });
  }
  if (typeof code === 'string' && NETWORK_CODES.has(code)) {
    const at = error as { address?: unknown; port?: unknown; hostname?: unknown };
    const where = typeof at.address === 'string' ? ` at ${at.address}${typeof at.port === 'number' ? `:${at.port}` : ''}`
      : typeof at.hostname === 'string' ? ` at ${at.hostname}` : '';
    return new StoreUnavailableError('store_failure', `${context}: PostgreSQL is unreachable (${code}${where})`, { cause: error });
  }
  return new StoreUnavailableError('store_failure', `${context}: PostgreSQL failed: ${message}${typeof code === 'string' ? ` (${code})` : ''}`, { cause: error });
}

/** A concurrent transaction created the same session or task first: the whole transaction runs once more. */
export class LostCreationRace {
  constructor(readonly error: unknown) {}
}

/**
 * pg emits a connection's errors as 'error' events, and an event nobody hears ends the process. The pool hears an idle
 * connection's; every connection also gets a listener from its first moment, since a server that ends a connection
 * as it finishes connecting (a restart, a failover, pg_terminate_backend) sends its error before anyone checked the
 * connection out. The failure still reaches the query that meets it, as a typed store error.
 */
export function listenForDriverErrors(pool: { on(event: 'error', listener: () => void): unknown; on(event: 'connect', listener: (client: { on(event: 'error', listener: () => void): unknown }) => void): unknown }): void {
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
}
