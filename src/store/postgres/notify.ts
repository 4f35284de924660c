/**
 * LISTEN/NOTIFY on a dedicated connection: the decision inbox and the attention index both announce their commits
 * this way (a `pg_notify` in the writing transaction, delivered only if it commits), so that a waiting host or an
 * operator's view wakes at once instead of polling.
 */
import { createHash } from 'node:crypto';
import type { Pool, PoolClient } from './driver.js';
import { mapPostgresError } from './errors.js';

/** A short plain identifier for one schema's channel (a hash of the schema name keeps any schema name usable). */
export function channelName(prefix: string, schema: string): string {
  return `${prefix}_${createHash('sha256').update(schema).digest('hex').slice(0, 24)}`;
}

/**
 * Listens on `channel` until the returned function is called; `what` names the listener in errors. `onLost` is told
 * when the server ends the connection (the returned function still releases it).
 */
export async function listenOn(
  pool: Pool,
  channel: string,
  what: string,
  onPayload: (payload: string) => void,
  onLost?: (error: unknown) => void,
): Promise<() => Promise<void>> {
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw mapPostgresError(error, what);
  }
  let broken: unknown;
  const onError = (error: unknown) => {
    const first = broken === undefined;
    broken = error;
    if (first) onLost?.(error);
  };
  const onNotification = (msg: { channel: string; payload?: string | undefined }) => {
    if (msg.channel === channel && msg.payload !== undefined) onPayload(msg.payload);
  };
  client.on('error', onError);
  client.on('notification', onNotification);
  try {
    await client.query(`LISTEN ${channel}`);
  } catch (error) {
    client.off('notification', onNotification);
    client.off('error', onError);
    client.release(error instanceof Error ? error : new Error(String(error)));
    throw mapPostgresError(error, what);
  }
  return async () => {
    client.off('notification', onNotification);
    if (broken === undefined) await client.query(`UNLISTEN ${channel}`).catch((e: unknown) => { broken = e; });
    client.off('error', onError);
    client.release(broken === undefined ? undefined : broken instanceof Error ? broken : new Error(String(broken)));
  };
}

/** How long a shared listener waits before it listens again on a connection the server ended. */
const RELISTEN_MS = 500;

/**
 * One LISTEN connection per channel, shared by every subscriber of one store: a thousand hosts' waits for decisions
 * and a console's live views hold one pool connection between them, not one each, so they never starve the store's
 * writes and heartbeats (docs/design.md#one-listening-connection-per-channel). The first subscriber opens it, the
 * last one to leave releases it. When the server ends it, it is released and opened again while subscribers remain;
 * a notification sent meanwhile is missed, which is why every subscriber also reads again on its own timer.
 */
export class SharedListener {
  private readonly subscribers = new Set<(payload: string) => void>();
  private current: Promise<() => Promise<void>> | null = null;
  private retry: NodeJS.Timeout | null = null;

  constructor(private readonly pool: Pool, private readonly channel: string, private readonly what: string) {}

  /** Whether it holds (or is opening) its pool connection: someone listens. */
  get listening(): boolean {
    return this.current !== null;
  }

  /** Calls `onPayload` for each notification on the channel until the returned function is called. */
  async subscribe(onPayload: (payload: string) => void): Promise<() => Promise<void>> {
    this.subscribers.add(onPayload);
    try {
      await this.open();
    } catch (error) {
      this.subscribers.delete(onPayload);
      throw error;
    }
    let left = false;
    return async () => {
      if (left) return;
      left = true;
      this.subscribers.delete(onPayload);
      if (this.subscribers.size === 0) await this.close();
    };
  }

  private open(): Promise<() => Promise<void>> {
    if (this.current === null) {
      const opening = listenOn(this.pool, this.channel, this.what, (payload) => {
        for (const subscriber of [...this.subscribers]) subscriber(payload);
      }, () => this.lost(opening));
      this.current = opening;
      opening.catch(() => {
        if (this.current === opening) this.current = null;
      });
    }
    return this.current;
  }

  /** The server ended the connection: release it, and listen again while anyone is subscribed. */
  private lost(connection: Promise<() => Promise<void>>): void {
    if (this.current !== connection) return;
    this.current = null;
    void connection.then((stop) => stop()).catch(() => {});
    this.relistenLater();
  }

  private relistenLater(): void {
    if (this.retry !== null) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      if (this.subscribers.size > 0) this.open().catch(() => this.relistenLater());
    }, RELISTEN_MS);
    this.retry.unref();
  }

  /**
   * The store is closing: every subscriber is told once (the payload `''`, which names nothing) so a wait reads
   * again now, and meets the closed store, instead of at its next safety re-read; then the connection is released.
   */
  async shutdown(): Promise<void> {
    for (const subscriber of [...this.subscribers]) subscriber('');
    this.subscribers.clear();
    await this.close();
  }

  private async close(): Promise<void> {
    if (this.retry !== null) {
      clearTimeout(this.retry);
      this.retry = null;
    }
    const connection = this.current;
    this.current = null;
    if (connection === null) return;
    const stop = await connection.catch(() => null);
    await stop?.();
  }
}
