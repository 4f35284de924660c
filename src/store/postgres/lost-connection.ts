/**
 * A write transaction whose connection was lost (docs/design.md#a-lost-connection-is-tried-again): a pooled connection
 * the server ended while it sat idle (a restart, a failover, `idle_session_timeout`, `pg_terminate_backend`) fails
 * the first statement sent on it, and a connection can break under a commit. What the lost attempt may have written
 * decides whether, and how, the transaction runs again on another connection.
 */
import { StoreUnavailableError } from '../../errors.js';
import type { TxState, TxWrites } from '../rows.js';

/** Node's socket errors on a connection that was open. */
const BROKEN_SOCKET = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT']);
/** The server ended the session: an operator or shutdown (57P01), a crash (57P02), a restart (57P03), idle too long (57P05). */
const SERVER_ENDED = new Set(['57P01', '57P02', '57P03', '57P05']);
/** What the driver says of a connection that closed under a query, or that is checked out already broken. */
const DRIVER_LOST = /^(Connection terminated( unexpectedly)?|Client has encountered a connection error and is not queryable|Client was closed and is not queryable)$/;

/** Whether `error` (a driver error, or the store error that carries one as its cause) says the connection was lost. */
export function isConnectionLost(error: unknown): boolean {
  const raw = error instanceof StoreUnavailableError ? error.cause : error;
  const code = (raw as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (SERVER_ENDED.has(code) || BROKEN_SOCKET.has(code) || code.startsWith('08'))) return true;
  return raw instanceof Error && DRIVER_LOST.test(raw.message);
}

/** How far one attempt of a write transaction got: a connection checked out, then the writes it decided (and may have sent). */
export interface Attempt<R> {
  connected: boolean;
  writes?: TxWrites<R>;
}

/** The lost attempt's writes are all stored: its result stands, and nothing is written again. */
export class Landed<R> {
  constructor(readonly result: R) {}
}

/**
 * The decision of the attempt after one that lost its connection having decided `writes` (sent, perhaps committed):
 * under the owner row's lock, the stored row says which. The writes are all there (the head is theirs: the chain
 * hash covers every event's bytes) and their result is returned (Landed); nothing of them is there (epoch and head
 * as they were read) and the transaction is decided again on what is stored; anything else, or writes whose landing
 * the owner row cannot show, and the loss is reported as it is, the outcome unknown.
 */
export function afterLostWrites<R>(writes: TxWrites<R>, lost: unknown, decide: (state: TxState) => TxWrites<R>): (state: TxState) => TxWrites<R> {
  return (state) => {
    const session = writes.session;
    const stored = state.session;
    if (session?.expect == null || stored === undefined) throw lost;
    const { row, expect } = session;
    const appends = row.lastSeq > expect.lastSeq;
    if (appends && stored.epoch === row.epoch && stored.lastSeq === row.lastSeq && stored.headHash === row.headHash) {
      throw new Landed(writes.result);
    }
    // A write of the owner row alone (a renewed lease) is the same when made again; any other row it wrote might not be.
    const alone = !writes.events?.length && !writes.task && !writes.operations?.length && !writes.attention?.length && !writes.decisions?.length;
    if ((appends || alone) && stored.epoch === expect.epoch && stored.lastSeq === expect.lastSeq) return decide(state);
    throw lost;
  };
}
