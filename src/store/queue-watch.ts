/**
 * Live queue views (docs/design.md#the-review-console): a store that pushes its commits (PostgreSQL LISTEN/NOTIFY)
 * tells a watcher when the attention index or the decision inbox changed, in any process; other stores are polled.
 */
import { JournalStore } from './journal-store.js';
import type { SessionStore } from './types.js';

/** What changed: an operation's attention row in a session, or an approval or review decision row. */
export type QueueChange = { readonly kind: 'attention'; readonly sessionId: string } | { readonly kind: 'decision'; readonly id: string };

/**
 * Calls `onChange` after any process commits a change to the queue (`store.attention()` or the decision inbox).
 * Resolves to the function that stops watching, or to null on a store that does not push changes: poll then.
 * A change is a hint to read again, never the data itself.
 */
export async function watchQueue(store: SessionStore, onChange: (change: QueueChange) => void): Promise<(() => Promise<void>) | null> {
  const backend = store instanceof JournalStore ? store.backend : undefined;
  if (!backend?.watchAttention) return null;
  const stopAttention = await backend.watchAttention((sessionId) => onChange({ kind: 'attention', sessionId }));
  let stopDecisions: (() => Promise<void>) | null = null;
  try {
    if (backend.inbox?.watchDecisions) stopDecisions = await backend.inbox.watchDecisions((id) => onChange({ kind: 'decision', id }));
  } catch (error) {
    await stopAttention();
    throw error;
  }
  return async () => {
    await Promise.all([stopAttention(), stopDecisions?.()]);
  };
}
