import { InvalidInputError, JournalFullError, JournalImportError } from '../errors.js';
import { decodeEvent, encodeEventText } from '../event/codec.js';
import { validatePhysicalLog } from '../event/physical-log.js';
import type { SessionEvent } from '../event/types.js';
import { checkId, type SessionId } from '../ids.js';
import { parseJson } from '../json/parse.js';
import { LIMITS, STORE_DEFAULTS } from '../limits.js';
import { utf8Length } from '../text.js';
import { checkToolEvidence } from '../tool/recovery.js';
import { chainEvents, decideImport, importDrafts } from './decisions.js';
import { GENESIS_HASH } from './chain.js';
import type { EventRow, JournalBackend } from './rows.js';
import { checkChainTrailer, splitChainTrailer } from './export-chain.js';
import { checkLoaderRules } from './rust-format.js';
import type { ImportReport } from './types.js';

/** One wire event per line, in physical order: the same form the JSONL store of Jingwei for Rust writes. */
export function exportJournal(events: readonly SessionEvent[]): string {
  let out = '';
  for (const e of events) out += encodeEventText(e) + '\n';
  return out;
}

/** Parses and verifies a JSONL journal (ours or one written by Jingwei for Rust) without touching any store. */
export function parseJournal(text: string): SessionEvent[] {
  return parseJournalFile(text).events;
}

/**
 * The epochs a chained export carries, which its import keeps (docs/design.md#anchored-signed-heads): each event's,
 * and the owner's when it was exported. `differsAt`: null when the lines as this version stores them chain to the
 * file's hashes, so the imported chain is the exported one and the checkpoints signed over it still match; else the
 * first seq whose line this version stores in another form (written by an earlier version), from which they cannot.
 */
export interface ImportedChain {
  readonly epochs: readonly number[];
  readonly ownerEpoch: number;
  readonly differsAt: number | null;
}

/** A parsed and verified journal file, with the chain its trailer carries (null: a file without one). */
export function parseJournalFile(text: string): { events: SessionEvent[]; chain: ImportedChain | null } {
  if (typeof text !== 'string') throw new InvalidInputError('jsonl', 'must be a string');
  // A chained export ends with a trailer of hashes and checkpoints: the lines must still match it.
  const { journal, trailer } = splitChainTrailer(text);
  if (trailer) checkChainTrailer(journal, trailer);
  const lines = journal.split('\n');
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  if (lines.length === 0) throw new JournalImportError(1, 'the journal is empty');
  checkLoaderRules(lines, journal.endsWith('\n'));
  if (lines.length > LIMITS.maxHistoryEvents) {
    throw new JournalImportError(LIMITS.maxHistoryEvents + 1, `more than ${LIMITS.maxHistoryEvents} events`);
  }
  const events: SessionEvent[] = [];
  let bytes = 2 + (lines.length - 1);
  lines.forEach((raw, i) => {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    bytes += utf8Length(line);
    if (bytes > LIMITS.maxHistoryBytes) throw new JournalImportError(i + 1, `the journal exceeds ${LIMITS.maxHistoryBytes} bytes`);
    try {
      events.push(decodeEvent(parseJson(line, { maxBytes: LIMITS.maxJsonlLineBytes })));
    } catch (error) {
      throw new JournalImportError(i + 1, (error as Error).message, { cause: error });
    }
  });
  try {
    validatePhysicalLog(events[0]!.sessionId, events);
  } catch (error) {
    const index = (error as { index?: number }).index ?? 0;
    throw new JournalImportError(index + 1, (error as Error).message, { cause: error });
  }
  // The same evidence pass recovery runs: a file recovery would refuse (a forged marker, a second result, a
  // contradiction) never enters a store (docs/design.md#only-the-runtime-writes-tool-evidence).
  try {
    checkToolEvidence(events);
  } catch (error) {
    const at = /\bevent (\d+)/.exec((error as Error).message);
    throw new JournalImportError(at ? Number(at[1]) + 1 : 1, (error as Error).message, { cause: error });
  }
  const epochs = trailer ? trailer.links.map((l) => l.epoch) : null;
  const rows = checkStorable(events, epochs);
  checkNotAhead(events);
  if (!trailer) return { events, chain: null };
  const differs = rows.findIndex((row, i) => row.hash !== trailer.links[i]!.hash);
  return { events, chain: { epochs: epochs!, ownerEpoch: trailer.epoch, differsAt: differs === -1 ? null : differs } };
}

/**
 * Refuses an event recorded further ahead of this host's clock than STORE_DEFAULTS.importAheadMs: no store records a
 * time it has not reached, give or take skew, and since times never decrease, the session's every later event would
 * repeat it (docs/design.md#recorded-times).
 */
function checkNotAhead(events: readonly SessionEvent[]): void {
  const limit = Date.now() + STORE_DEFAULTS.importAheadMs;
  const at = events.findIndex((e) => e.recordedAt !== undefined && Date.parse(e.recordedAt) > limit);
  if (at >= 0) {
    throw new JournalImportError(at + 1, `event ${at}: recorded_at ${events[at]!.recordedAt} is more than ${STORE_DEFAULTS.importAheadMs / 3_600_000} hours ahead of this host's clock (${new Date().toISOString()}); no store records a time it has not reached`);
  }
}

/**
 * Runs what the import's transaction runs on the events (decideImport → chainEvents: recorded times never
 * decreasing, every record written and read back, the history limits) on a fresh session, so that a file the
 * store would refuse is refused here, by line, before any store is opened or created.
 */
function checkStorable(events: readonly SessionEvent[], epochs: readonly number[] | null): readonly EventRow[] {
  const fresh = { sessionId: events[0]!.sessionId, owner: null, held: false, epoch: 1, lastSeq: -1, headHash: GENESIS_HASH, bodyBytes: 0, recordedAt: null, leaseExpiresAt: null };
  try {
    return chainEvents(fresh, epochs ?? 1, importDrafts(events)).rows;
  } catch (error) {
    if (error instanceof InvalidInputError) {
      // The field names the draft (`events[3].recordedAt`); the file's words are its line and its wire field.
      const at = /^events\[(\d+)\]\.?/.exec(error.field);
      const index = at ? Number(at[1]) : 0;
      const path = at ? error.field.slice(at[0].length) : error.field;
      const detail = error.message.slice(error.field.length + 2);
      const what = path === 'recordedAt' ? `recorded_at ${detail}` : path === '' ? detail : `${path}: ${detail}`;
      throw new JournalImportError(index + 1, `event ${index}: ${what}`, { cause: error });
    }
    // checkToolEvidence measured the history as stored already; this is the transaction's own limit, kept in step.
    if (error instanceof JournalFullError) throw new JournalImportError(events.length, error.message, { cause: error });
    throw error;
  }
}

/** The session of a parsed journal; refused (line 1) when the caller expected another one. */
export function journalSession(events: readonly SessionEvent[], expected?: string): SessionId {
  const sessionId = events[0]!.sessionId;
  if (expected !== undefined && checkId<SessionId>('sessionId', expected) !== sessionId) {
    throw new JournalImportError(1, `the journal belongs to session ${sessionId}, not ${expected}`);
  }
  return sessionId;
}

export async function importJournal(
  backend: JournalBackend,
  text: string,
  options: { owner: string; sessionId?: string },
): Promise<ImportReport> {
  const owner = checkId<string>('owner', options?.owner);
  const { events, chain } = parseJournalFile(text);
  const sessionId = journalSession(events, options.sessionId);
  const count = await backend.transact(sessionId, {}, decideImport(sessionId, owner, events, chain));
  return { sessionId, events: count };
}
