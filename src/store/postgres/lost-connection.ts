/**
 * A write transaction whose connection was lost (docs/design.md#a-lost-connection-is-tried-again): a pooled connection
 * the server ended while it sat idle (a restart, a failover, `idle_session_timeout`, `pg_terminate_backend`) fails
 * the first statement sent on it, and a connection can break under a commit. What the lost attempt may have written
 * decides whether, and how, the transaction runs again on another connection.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { StoreUnavailableError } from '../../errors.js';
import { POSTGRES_DEFAULTS } from '../../limits.js';
import type { TxState, TxWrites } from '../rows.js';
import { mapPostgresError } from './errors.js';

/** Node's socket errors on a connection that was open. */
const BROKEN_SOCKET = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT']);
/** The server ended the session: an operator or shutdown (57P01), a crash (57P02), a restart (57P03), idle too long (57P05). */
const SERVER_ENDED = new Set(['57P01', '57P02', '57P03', '57P05']);
/** What the driver says of a connection that closed under a query, or that is checked out already broken. */
const DRIVER_LOST = /^(Connection terminated( unexpectedly)?|Client has encountered a connection error and is not queryable|Client was closed and is not queryable)$/;

/** The driver's error a store error carries, or the error itself. */
function driverError(error: unknown): unknown {
  return error instanceof StoreUnavailableError ? error.cause : error;
}

/** Whether `error` (a driver error, or the store error that carries one as its cause) says the connection was lost. */
export function isConnectionLost(error: unknown): boolean {
  const raw = driverError(error);
  const code = (raw as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (SERVER_ENDED.has(code) || BROKEN_SOCKET.has(code) || code.startsWith('08'))) return true;
  return raw instanceof Error && DRIVER_LOST.test(raw.message);
}

/**
 * Whether a connection could not be made because the server may be restarting: it refused the connection, said it
 * takes none now (starting up or shutting down, 57P03, which isConnectionLost counts; every slot taken, 53300), or
 * ended it as it opened.
 */
function isServerRestarting(error: unknown): boolean {
  const code = (driverError(error) as { code?: unknown } | null)?.code;
  // 53300: every connection slot is taken, as when every host reconnects at once after a restart.
  return code === 'ECONNREFUSED' || code === '53300' || isConnectionLost(error);
}

/** How far one attempt of a transaction got: a connection checked out, then the writes it decided (and may have sent). */
export interface Attempt<R> {
  connected: boolean;
  writes?: TxWrites<R>;
}

/**
 * The event a lost commit of events would have written last: its seq, and the hash the next attempt reads at that
 * seq under the owner row's lock (null: no event has it yet).
 */
export interface HeadProbe {
  readonly seq: number;
  hash: string | null | undefined;
}

/** The probe for `writes`, when they append events (their landing shows in the event row at their head). */
export function headProbe(writes: TxWrites<unknown>): HeadProbe | undefined {
  const session = writes.session;
  return session?.expect != null && session.row.lastSeq > session.expect.lastSeq ? { seq: session.row.lastSeq, hash: undefined } : undefined;
}

/** The lost attempt's writes are all stored: its result stands, and nothing is written again. */
export class Landed<R> {
  constructor(readonly result: R) {}
}

/**
 * Whether a transaction runs again after a failed attempt, and when. An attempt that lost its connection runs again
 * at once, as many times as the pool has connections and once more (every idle one may have been ended at once). A
 * connection the server refuses (it may be restarting: refused, starting up or shutting down, ended as it opened)
 * is tried again with a growing wait, for at most POSTGRES_DEFAULTS.reconnectWaitMs in all: a restart would
 * otherwise leave the results being written in doubt. A host that cannot be found or reached is not waited for.
 */
export class LostConnectionRetry {
  private lost = 0;
  private waits = 0;
  private waited = 0;
  /** The error of the attempt that lost its connection after sending writes: from then on, no failure says nothing was written. */
  private sentWrites: unknown = undefined;

  constructor(private readonly maxLost: number) {}

  /** After `attempt` failed with `error`: whether to run it again (having waited if the server is restarting). */
  async again(error: unknown, attempt: Attempt<unknown> | { connected: boolean }): Promise<boolean> {
    if (attempt.connected) {
      if (!isConnectionLost(error) || ++this.lost > this.maxLost) return false;
      if ('writes' in attempt && attempt.writes !== undefined) this.sentWrites = error;
      return true;
    }
    if (!isServerRestarting(error) || this.waited >= POSTGRES_DEFAULTS.reconnectWaitMs) return false;
    const delay = Math.min(25 * 2 ** this.waits++, POSTGRES_DEFAULTS.reconnectWaitMs - this.waited);
    await sleep(delay);
    this.waited += delay;
    return true;
  }

  /** How long the attempts have waited in all for a server that refused connections. */
  get waitedMs(): number {
    return this.waited;
  }

  /**
   * The error to report for `error`, the failure of the last attempt: itself, unless an earlier attempt lost its
   * connection after sending writes. Then no failure since (a lock or statement timeout, a busy pool, a server still
   * down) says whether those writes were stored, and callers read `store_busy` as "nothing was written".
   */
  report(context: string, error: unknown): unknown {
    if (this.sentWrites === undefined || error === this.sentWrites) return error;
    if (error instanceof StoreUnavailableError && error.cause === this.sentWrites) return error;
    return outcomeUnknown(context, this.sentWrites, `trying again failed (${(error as Error)?.message ?? String(error)})`);
  }
}

/**
 * Opening a store: a connection is made (and given back) first, waited for as a write waits while the server
 * restarts, so a host started while its PostgreSQL restarts opens its store once the server takes connections again.
 * Any other failure, or a server still refusing after POSTGRES_DEFAULTS.reconnectWaitMs, is thrown as it came.
 */
export async function connectOnceRestarted(pool: { connect(): Promise<{ release(): void }> }, context: string): Promise<void> {
  const retry = new LostConnectionRetry(0);
  for (;;) {
    try {
      (await pool.connect()).release();
      return;
    } catch (error) {
      if (await retry.again(error, { connected: false })) continue;
      const waited = retry.waitedMs > 0 ? ` (it refused connections for ${retry.waitedMs / 1000} s, waited for as a server restarting)` : '';
      throw mapPostgresError(error, `${context}${waited}`);
    }
  }
}

/** What the lost connection's driver said, in a few words. */
function lostHow(lost: unknown): string {
  const raw = driverError(lost) as { code?: unknown; message?: unknown } | null;
  const message = typeof raw?.message === 'string' ? raw.message : String(raw);
  return typeof raw?.code === 'string' && !message.includes(raw.code) ? `${message}, ${raw.code}` : message;
}

/** The store error of writes sent on a connection that was lost, whose landing nothing could show. */
export function outcomeUnknown(context: string, lost: unknown, why: string): StoreUnavailableError {
  return new StoreUnavailableError(
    'store_failure',
    `${context}: the connection to PostgreSQL was lost after this transaction's writes were sent (${lostHow(lost)}), and ${why}: ` +
      'whether they were stored is unknown; load the history again before deciding anything',
    { cause: lost },
  );
}

/** The writes of an attempt that lost its connection after sending them, and the probe of their head. */
export interface LostWrites<R> {
  readonly writes: TxWrites<R>;
  readonly probe: HeadProbe | undefined;
}

/**
 * The decision of the attempt after ones that lost their connection having decided writes (sent, perhaps committed,
 * perhaps still on their way to the server: a commit decided on known rows takes no lock until it arrives), read
 * under the owner row's lock. Any of them whose events are stored (the event at the seq it would have ended at is
 * its own: the chain hash covers every event's bytes and the chain before it) has landed, and its result is
 * returned (Landed). When none has, and the newest appended events, the transaction is decided again on what is
 * stored: none can land while this attempt holds the owner row, each was fenced on the head it was decided on, which
 * this attempt's commit moves, and if this attempt is lost in turn, the next one looks at all of them again. A write
 * of the owner row alone is decided again while epoch and head are as it read them. Anything else, and the outcome is
 * unknown (outcomeUnknown).
 */
export function afterLostWrites<R>(
  context: string,
  lost: readonly LostWrites<R>[],
  lostError: unknown,
  decide: (state: TxState) => TxWrites<R>,
): (state: TxState) => TxWrites<R> {
  return (state) => {
    const stored = state.session;
    for (const { writes, probe } of lost) {
      const row = writes.session?.row;
      if (row === undefined || probe === undefined) continue;
      const sameHead = stored !== undefined && stored.epoch === row.epoch && stored.lastSeq === row.lastSeq && stored.headHash === row.headHash;
      if (sameHead || (probe.seq === row.lastSeq && probe.hash === row.headHash)) throw new Landed(writes.result);
    }
    const { writes, probe } = lost[lost.length - 1]!;
    const session = writes.session;
    if (session?.expect == null) throw outcomeUnknown(context, lostError, 'they create or change rows the owner row does not show');
    if (stored === undefined) throw outcomeUnknown(context, lostError, 'the owner row is gone');
    const { row, expect } = session;
    const appends = row.lastSeq > expect.lastSeq;
    if (appends && probe !== undefined && lost.every((l) => l.probe === undefined || l.probe.hash !== undefined)) return decide(state);
    // A write of the owner row alone (a renewed lease) is the same when made again; any other row it wrote might not be.
    const alone = !writes.events?.length && !writes.task && !writes.operations?.length && !writes.attention?.length && !writes.decisions?.length;
    if ((appends || alone) && stored.epoch === expect.epoch && stored.lastSeq === expect.lastSeq) return decide(state);
    if (!appends && !alone) throw outcomeUnknown(context, lostError, 'they change rows the owner row does not show');
    throw outcomeUnknown(context, lostError,
      `the owner row has moved on since (epoch ${stored.epoch}, head at seq ${stored.lastSeq}; the writes were decided at epoch ${expect.epoch}, seq ${expect.lastSeq})`);
  };
}
