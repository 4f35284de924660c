/**
 * What a store learnt about a history while it decoded and verified it from its stored rows, kept per history array
 * with the event objects it held then (docs/design.md#a-loaded-history-keeps-its-size): the compact wire size of
 * each event (its stored text) and each event id (distinct, as verification proved). The evidence checks use them
 * only for an event still at its place: an array or an event not read from a store, or built, moved or replaced by
 * hand, is measured and checked as before.
 */
import type { SessionEvent } from './types.js';

interface DecodedHistory {
  /** The event objects as decoded, by place (the returned array may be changed by its holder). */
  readonly events: readonly SessionEvent[];
  /** The UTF-8 size of each one's stored wire text. */
  readonly bytes: readonly number[];
  /** Each one's event id as decoded; no two equal. */
  readonly eventIds: readonly string[];
}

const histories = new WeakMap<readonly SessionEvent[], DecodedHistory>();

/**
 * Records that `history[i]` was decoded from stored wire text of `bytes[i]` UTF-8 bytes and has the event id
 * `eventIds[i]`, for every i, and that those ids are distinct.
 */
export function noteDecodedHistory(history: readonly SessionEvent[], bytes: readonly number[], eventIds: readonly string[]): void {
  histories.set(history, { events: history.slice(), bytes, eventIds });
}

/** Looks up recorded sizes of a history by place; undefined for an event without one. */
export type WireBytesOf = (i: number) => number | undefined;

const NONE: WireBytesOf = () => undefined;

/** The recorded sizes of `history`'s events, when a store decoded it. */
export function knownWireBytes(history: readonly SessionEvent[]): WireBytesOf {
  const decoded = histories.get(history);
  if (decoded === undefined) return NONE;
  const { events, bytes } = decoded;
  return (i) => (i < events.length && events[i] === history[i] ? bytes[i] : undefined);
}

/**
 * Whether the event ids of `history` are known to be distinct: a store decoded it and every event id is, place by
 * place, the one verification saw (whatever objects now hold them).
 */
export function knownDistinctIds(history: readonly SessionEvent[]): boolean {
  const decoded = histories.get(history);
  if (decoded === undefined || decoded.eventIds.length !== history.length) return false;
  const ids = decoded.eventIds;
  for (let i = 0; i < ids.length; i++) {
    if (history[i]?.eventId !== ids[i]) return false;
  }
  return true;
}
