/**
 * An owner's verified read of its own session's journal, for the runtime's run loops (internal; never exported
 * from an entry point). Each read is fresh (one snapshot, verified) and is what the owner's `readOperation` then
 * answers replayed calls from until the owner's next write (docs/design.md#a-resume-reads-the-journal-once).
 */
import type { SessionEvent } from '../event/types.js';
import type { SessionOwner, SessionStore } from './types.js';

type Reader = () => Promise<SessionEvent[]>;

const readers = new WeakMap<object, Reader>();

/** Called by a store's owner once, as it is made. */
export function registerJournalReader(owner: SessionOwner, read: Reader): void {
  readers.set(owner, read);
}

/**
 * The session's verified journal read through `owner` when a store of this package made it (so that the replayed
 * calls that follow are checked against this one read), otherwise through `store`.
 */
export function readOwnJournal(owner: SessionOwner, store: Pick<SessionStore, 'loadHistory'>): Promise<SessionEvent[]> {
  const read = readers.get(owner);
  return read !== undefined ? read() : store.loadHistory(owner.sessionId);
}
