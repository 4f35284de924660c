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

/** Listens on `channel` until the returned function is called; `what` names the listener in errors. */
export async function listenOn(pool: Pool, channel: string, what: string, onPayload: (payload: string) => void): Promise<() => Promise<void>> {
  let client: PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw mapPostgresError(error, what);
  }
  let broken: unknown;
  const onError = (error: unknown) => {
    broken = error;
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
