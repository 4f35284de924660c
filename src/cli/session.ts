/** Opening a store for one command, finding the session an argument names, and loading it with progress. */
import type { SessionEvent } from '../event/types.js';
import type { SessionStore, SessionSummary } from '../store/types.js';
import { UsageError } from './exit.js';
import { num, quotedId, safeId } from './format.js';
import type { Io } from './io.js';
import { Progress } from './progress.js';
import { openStoreFromTarget, type OpenTargetOptions } from './target.js';

/** Runs `fn` with the store open, and closes it whatever happens. */
export async function withStore<T>(target: string, fn: (store: SessionStore) => Promise<T>, options: OpenTargetOptions = {}): Promise<T> {
  const store = await openStoreFromTarget(target, options);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

/** `\uXXXX` escapes as the CLI prints invisible characters of an id (escape.ts), turned back into those characters. */
const unescapeId = (text: string): string => text.replace(/\\u([0-9a-fA-F]{4})/g, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16)));

/**
 * Ids are the exact id, or any part of one that matches exactly one candidate (tables show `…` and the last 8
 * characters; a leading `…` is ignored). An id as the CLI printed it, its invisible characters (and a backslash that
 * would read as an escape) shown as `\uXXXX`, names the id it was printed from; an id holding such text literally is
 * found as typed when no id matches the printed form's meaning.
 */
export function matchId<T>(items: readonly T[], idOf: (item: T) => string, wanted: string, what: string): T | undefined {
  if (!/\\u[0-9a-fA-F]{4}/.test(wanted)) return matchTyped(items, idOf, wanted, what);
  return matchTyped(items, idOf, unescapeId(wanted), what) ?? matchTyped(items, idOf, wanted, what);
}

function matchTyped<T>(items: readonly T[], idOf: (item: T) => string, wanted: string, what: string): T | undefined {
  const exact = items.find((item) => idOf(item) === wanted);
  if (exact !== undefined) return exact;
  const part = wanted.replace(/^(…|\.\.\.)/, '');
  if (part.length < 4) return undefined;
  const matches = items.filter((item) => idOf(item).includes(part));
  if (matches.length > 1) {
    const shown = matches.slice(0, 5).map((m) => `  ${safeId(idOf(m))}`).join('\n');
    throw new UsageError(`${quotedId(wanted)} matches ${num(matches.length)} ${what}s; give more of the id:\n${shown}`);
  }
  return matches[0];
}

export interface LoadedSession {
  readonly summary: SessionSummary | null;
  readonly sessionId: string;
  readonly history: SessionEvent[];
  /** Still showing the load; the caller may name further phases, and must call done() before printing. */
  readonly progress: Progress;
}

/**
 * Finds the session and loads its confirmed, verified journal (JournalCorruptError propagates). A session id with
 * events but no owner row is loaded too, so that damage is reported as damage and not as "no such session".
 */
export async function loadSession(store: SessionStore, wanted: string, io: Io, exact = false): Promise<LoadedSession> {
  const sessions = await store.listSessions();
  // `exact`: an id the store listed, taken as it is; a typed one may be a printed form (`s\u00A0x`) or a part of one.
  const summary = (exact ? sessions.find((s) => s.sessionId === wanted) : matchId(sessions, (s) => s.sessionId, wanted, 'session')) ?? null;
  const sessionId = summary?.sessionId ?? wanted;
  const progress = Progress.for(io, summary?.events ?? 0);
  progress.update(`loading and verifying ${num(summary?.events ?? 0)} events of ${safeId(sessionId)}`);
  let history: SessionEvent[];
  try {
    history = await store.loadHistory(sessionId);
  } catch (error) {
    progress.done();
    throw error;
  }
  if (summary === null && history.length === 0) {
    progress.done();
    // Ids are journal text: one with a newline must not pass for two sessions (escape.ts).
    const known = sessions.slice(0, 5).map((s) => `  ${safeId(s.sessionId)}`).join('\n');
    throw new UsageError(
      `no session ${quotedId(wanted)} in this store`,
      sessions.length === 0 ? 'The store holds no sessions.' : `Sessions (run 'jingwei sessions' for all):\n${known}`,
    );
  }
  return { summary, sessionId, history, progress };
}
