import { createHash } from 'node:crypto';

/** The hash before the first event of every session. */
export const GENESIS_HASH = '0'.repeat(64);

/**
 * Each event's hash covers the previous hash, the writer's epoch and the exact stored wire text, so a changed
 * byte, a moved row or a re-stamped epoch breaks the chain from that point on.
 */
export function chainHash(previous: string, epoch: number, body: string): string {
  return createHash('sha256').update(previous).update('\n').update(String(epoch)).update('\n').update(body).digest('hex');
}
