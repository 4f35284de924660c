import type { EventId, TurnId } from '../ids.js';
import { sha256Hex } from '../sha256.js';

/** The hash before the first event of every session. */
export const GENESIS_HASH = '0'.repeat(64);

/**
 * Each event's hash covers the previous hash, the writer's epoch and the exact stored wire text, so a changed
 * byte, a moved row or a re-stamped epoch breaks the chain from that point on.
 */
export function chainHash(previous: string, epoch: number, body: string): string {
  // One input, hashed in one call: the same bytes as updating with previous, '\n', epoch, '\n' and body in turn,
  // since every joint is an ASCII '\n' (UTF-8 of the joined text is the joined UTF-8, lone surrogates included).
  return sha256Hex(`${previous}\n${epoch}\n${body}`);
}

/**
 * The ids of an event the store writes itself (a task's ledger change), derived from the head it follows. Nobody
 * can name them in advance: an id taken by an earlier event would have to predict the hash of a chain that already
 * includes that event.
 */
export function chainedEventIds(headHash: string, seq: number): { eventId: EventId; turnId: TurnId } {
  const digest = chainHash(headHash, seq, 'store event').slice(0, 32);
  return { eventId: `evt_store_${digest}` as EventId, turnId: `turn_store_${digest}` as TurnId };
}
