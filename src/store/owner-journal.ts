/**
 * An owner's verified read of its own session's journal, for the runtime's run loops (internal; never exported
 * from an entry point). Each read is fresh (one snapshot, verified) and is what the owner's `readOperation` then
 * answers replayed calls from until the owner's next write (docs/design.md#a-resume-reads-the-journal-once); the
 * run loops' own lookups in a journal they only read (the reviews of a recorded failure) use that read too.
 */
import type { SessionEvent } from '../event/types.js';
import type { SessionOwner, SessionStore } from './types.js';

interface JournalReader {
  /** A fresh verified read, kept by the owner when no write of its own overlapped it. */
  readonly read: () => Promise<SessionEvent[]>;
  /** The read the owner keeps: none once it has written since. */
  readonly kept: () => SessionEvent[] | null;
}

const readers = new WeakMap<object, JournalReader>();

/** Called by a store's owner once, as it is made. */
export function registerJournalReader(owner: SessionOwner, reader: JournalReader): void {
  readers.set(owner, reader);
}

/**
 * The session's verified journal read through `owner` when a store of this package made it (so that the replayed
 * calls that follow are checked against this one read), otherwise through `store`.
 */
export function readOwnJournal(owner: SessionOwner, store: Pick<SessionStore, 'loadHistory'>): Promise<SessionEvent[]> {
  const reader = readers.get(owner);
  return reader !== undefined ? reader.read() : store.loadHistory(owner.sessionId);
}

/**
 * The journal `owner` last read and verified, when it has written nothing since (every event of its session is
 * written through it while it holds the session: one owner's reviews, results and body ends included), else a fresh
 * read. For lookups only: whatever is decided on it is written with checks of its own.
 */
export async function keptOwnJournal(owner: SessionOwner, store: Pick<SessionStore, 'loadHistory'>): Promise<readonly SessionEvent[]> {
  return (await keptJournalOf(owner)) ?? store.loadHistory(owner.sessionId);
}

/** keptOwnJournal's read for an owner a store of this package made; null for any other owner (it has no reader). */
export function keptJournalOf(owner: SessionOwner): Promise<readonly SessionEvent[]> | null {
  const reader = readers.get(owner);
  if (reader === undefined) return null;
  const kept = reader.kept();
  return kept !== null ? Promise.resolve(kept) : reader.read();
}
