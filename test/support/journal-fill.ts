/**
 * Filling a session's journal near its limit (docs/design.md#a-result-always-has-room), for the tests of the room it
 * keeps for calls' results and reviews.
 */
import { encodeEventText } from '../../src/event/codec.js';
import type { TurnId } from '../../src/ids.js';
import { LIMITS } from '../../src/limits.js';
import { historyBytes } from '../../src/store/decisions.js';
import type { SessionOwner, SessionStore } from '../../src/store/types.js';

/** The compact-JSON size of the session's history, as the journal limit measures it. */
export async function used(store: SessionStore, sessionId: string): Promise<number> {
  const history = await store.loadHistory(sessionId);
  return historyBytes(history.length, history.reduce((sum, e) => sum + Buffer.byteLength(encodeEventText(e)), 0));
}

/** Appends user messages until at most `free` bytes (and at least `free` minus 1 KiB) of the journal are left. */
export async function fillUntil(store: SessionStore, owner: SessionOwner, free: number): Promise<void> {
  for (;;) {
    const left = LIMITS.maxHistoryBytes - (await used(store, owner.sessionId)) - free;
    if (left <= 0) return;
    const text = 'm'.repeat(Math.max(1, Math.min(left - 256, 1024 * 1024)));
    await owner.append([{ turnId: 'turn-fill' as TurnId, kind: { type: 'user_message', text } }]);
  }
}

