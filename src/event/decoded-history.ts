/**
 * The compact wire size of events read back from a journal: recorded when a store decodes an event from its stored
 * text, so that the evidence checks' history-size step sums it instead of encoding every event again
 * (docs/design.md#a-loaded-history-keeps-its-size). Keyed by the event object; an event not read from a store (or
 * built by hand) has no recorded size and is encoded as before.
 */
import type { SessionEvent } from './types.js';

const sizes = new WeakMap<SessionEvent, number>();

/** Records that `event` was decoded from stored wire text of `bytes` UTF-8 bytes. */
export function noteWireBytes(event: SessionEvent, bytes: number): void {
  sizes.set(event, bytes);
}

/** The UTF-8 size of the stored wire text `event` was decoded from, when a store recorded one. */
export function knownWireBytes(event: SessionEvent): number | undefined {
  return sizes.get(event);
}
