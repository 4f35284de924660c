import { InvalidInputError, JingweiError, StoreBusyError, StoreUnavailableError } from '../../errors.js';

/** Node's socket errors: the server is gone or unreachable. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

/** Maps the driver's errors onto the library's typed ones; our own errors pass through. */
export function mapPostgresError(error: unknown, context: string): unknown {
  if (error instanceof JingweiError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  if (code === '55P03') return new StoreBusyError(`${context}: another writer holds the lock (lock_timeout)`, { cause: error });
  if (code === '57014') return new StoreBusyError(`${context}: the statement was cancelled (statement_timeout): ${message}`, { cause: error });
  if (code === '40001' || code === '40P01') return new StoreBusyError(`${context}: ${message} (${code})`, { cause: error });
  if (code === '22021' || code === '22P05') {
    return new InvalidInputError('text', `PostgreSQL cannot store this text (U+0000 or an invalid character): ${message}`, { cause: error });
  }
  if (code === '42P01' || code === '3F000') {
    return new StoreUnavailableError('store_failure', `${context}: the store's tables are missing (${message})`, { cause: error });
  }
  if (typeof code === 'string' && NETWORK_CODES.has(code)) {
    return new StoreUnavailableError('store_failure', `${context}: PostgreSQL is unreachable (${code})`, { cause: error });
  }
  return new StoreUnavailableError('store_failure', `${context}: PostgreSQL failed: ${message}${typeof code === 'string' ? ` (${code})` : ''}`, { cause: error });
}

/** A concurrent transaction created the same session or task first: the whole transaction runs once more. */
export class LostCreationRace {
  constructor(readonly error: unknown) {}
}
