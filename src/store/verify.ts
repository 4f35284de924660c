import { JournalCorruptError, type JournalCorruptReason } from '../errors.js';
import { decodeEvent } from '../event/codec.js';
import { noteDecodedHistory } from '../event/decoded-history.js';
import { deepFreeze } from '../json/freeze.js';
import { utf8Length } from '../text.js';
import type { SessionEvent } from '../event/types.js';
import type { SessionId } from '../ids.js';
import { chainHash, GENESIS_HASH } from './chain.js';
import type { EventRow, SessionRow } from './rows.js';

/**
 * A stored seq for a message. A driver reading an integer column as a number rounds one beyond 2^53 - 1 to a
 * neighbour, so such a value is named by its range rather than printed as a number it is not.
 */
function storedSeq(seq: number): string {
  if (!Number.isInteger(seq) || Number.isSafeInteger(seq)) return String(seq);
  return seq > 0 ? 'a seq beyond 2^53 - 1 (not exactly representable, so not shown)' : 'a seq below -(2^53 - 1) (not exactly representable, so not shown)';
}

/**
 * A verified read of a session's journal: its rows as stored, the events decoded from them, and each body's UTF-8
 * size. A later read checked against it (verifyJournalAgainst) skips the decode and the hash of each row stored
 * byte for byte as it was then.
 */
export interface VerifiedRead {
  readonly rows: readonly EventRow[];
  readonly events: readonly SessionEvent[];
  readonly bytes: readonly number[];
}

/**
 * Verifies a session's stored journal against its owner row and returns the decoded events. Checks, row by row in
 * seq order: contiguous seq from 0, well-formed wire JSON, payload seq and session, unique event ids, non-decreasing
 * recorded times, non-decreasing epochs no newer than the owner's, and the hash chain; then that the last row is the owner row's head. The first
 * violation throws JournalCorruptError; nothing is skipped, repaired or truncated.
 *
 * Event ids are checked for uniqueness once, after the rows (sorting them costs a fraction of a set of 100,000 fresh
 * strings); a violation found on the way first asks whether an earlier row repeated an id, so the error reported is
 * still the first in seq order, with the checks of one row in the order listed above.
 */
export function verifyJournal(sessionId: SessionId, session: SessionRow | undefined, rows: Iterable<EventRow>): SessionEvent[] {
  return verifyRows(sessionId, session, rows, null).events;
}

/**
 * verifyJournal of `rows`, checked against an earlier verified read of the same session (docs/design.md#an-owner-reads-its-journal-again):
 * the same result and the same errors. A row stored byte for byte as the earlier read's row at its place (seq, event
 * id, epoch, body and hash), with every row before it so, is the event decoded then, and its link of the chain is the
 * one checked then, since a link's hash covers only the hash before it, the epoch and the body; every other check of
 * the row (its seq, id, time and epoch against the rows before it and the owner row) is made again. From the first
 * row that differs, every row is decoded and hashed.
 */
export function verifyJournalAgainst(
  sessionId: SessionId,
  session: SessionRow | undefined,
  rows: readonly EventRow[],
  earlier: VerifiedRead | null,
): { readonly events: SessionEvent[]; readonly read: VerifiedRead } {
  const { events, bytes, reused } = verifyRows(sessionId, session, rows, earlier);
  // Events kept to be handed out again are frozen, so that no holder's change to one reaches a later read.
  for (let i = reused; i < events.length; i++) deepFreeze(events[i]);
  return { events, read: { rows: keptRows(rows, earlier, reused), events: events.slice(), bytes } };
}

/**
 * The earlier read's rows where they match (the same bytes), then the new ones: the rows just read then die young, and
 * a host that resumes a run again and again keeps one copy of its journal's texts instead of a new one each time.
 */
function keptRows(rows: readonly EventRow[], earlier: VerifiedRead | null, reused: number): readonly EventRow[] {
  if (earlier === null || reused === 0) return rows;
  if (reused === rows.length && reused === earlier.rows.length) return earlier.rows;
  return earlier.rows.slice(0, reused).concat(rows.slice(reused));
}

function verifyRows(sessionId: SessionId, session: SessionRow | undefined, rows: Iterable<EventRow>, earlier: VerifiedRead | null): { events: SessionEvent[]; bytes: number[]; reused: number } {
  const events: SessionEvent[] = [];
  const bytes: number[] = [];
  /** Each verified row's event id, by seq, pushed where the row's duplicate check stands in the order above. */
  const ids: string[] = [];
  const corrupt = (seq: number, reason: JournalCorruptReason, message: string, options?: ErrorOptions): JournalCorruptError =>
    repeatedId(sessionId, ids) ?? new JournalCorruptError(sessionId, seq, reason, message, options);
  let previousHash = GENESIS_HASH;
  let previousEpoch = 0;
  let previousTime = '';
  // The earlier read's rows still matched, from row 0: none once one differs.
  let same = earlier !== null && earlier.rows.length > 0 ? earlier : null;
  let reused = 0;
  // Rows are read one at a time (a backend may stream them), so their stored texts need not all be held at once.
  for (const row of rows) {
    const i = events.length;
    if (!session) throw new JournalCorruptError(sessionId, 0, 'head_mismatch', 'events exist but the owner row is missing');
    if (row.seq !== i) throw corrupt(i, 'seq_gap', `expected seq ${i}, found ${storedSeq(row.seq)}`);
    if (same !== null && !(i < same.rows.length && sameRow(row, same.rows[i]!))) same = null;
    let event: SessionEvent;
    if (same !== null) {
      // Decoded from these bytes before: its seq, session and event id were checked against this row then.
      event = same.events[i]!;
      reused = i + 1;
      ids.push(row.eventId);
    } else {
      try {
        event = decodeEvent(JSON.parse(row.body));
      } catch (error) {
        throw corrupt(i, 'malformed_event', (error as Error).message, { cause: error });
      }
      if (event.seq !== row.seq) throw corrupt(i, 'order', `event claims seq ${event.seq} but is stored at ${row.seq}`);
      if (event.sessionId !== sessionId) throw corrupt(i, 'wrong_session', `event belongs to session ${event.sessionId}`);
      ids.push(row.eventId);
      if (row.eventId !== event.eventId) {
        // The body names another event: a duplicate when an earlier row holds that id, else the row was re-keyed.
        if (ids.indexOf(event.eventId) !== -1) throw corrupt(i, 'duplicate_id', `event id ${event.eventId} appears twice`);
        throw corrupt(i, 'hash_mismatch', 'stored event id differs from the event body');
      }
    }
    // Recorded times are canonical ISO text of one length, so text order is time order (docs/design.md#recorded-times).
    if (event.recordedAt !== undefined) {
      if (event.recordedAt < previousTime) {
        throw corrupt(i, 'order', `recorded at ${event.recordedAt}, before the event before it (${previousTime})`);
      }
      previousTime = event.recordedAt;
    }
    if (!Number.isSafeInteger(row.epoch) || row.epoch < Math.max(1, previousEpoch) || row.epoch > session.epoch) {
      throw corrupt(i, 'epoch', `epoch ${row.epoch} after ${previousEpoch}, owner epoch ${session.epoch}`);
    }
    if (same === null) {
      const hash = chainHash(previousHash, row.epoch, row.body);
      if (hash !== row.hash) throw corrupt(i, 'hash_mismatch', 'the hash chain is broken');
    }
    previousHash = row.hash;
    previousEpoch = row.epoch;
    bytes.push(same !== null ? same.bytes[i]! : utf8Length(row.body));
    events.push(event);
  }
  if (!session) return { events: [], bytes: [], reused: 0 };
  const repeated = repeatedId(sessionId, ids);
  if (repeated) throw repeated;
  const count = events.length;
  if (session.lastSeq !== count - 1) {
    const seq = Math.min(session.lastSeq, count);
    throw new JournalCorruptError(sessionId, Math.max(seq, 0), 'head_mismatch', `owner row records head seq ${session.lastSeq}, journal ends at ${count - 1}`);
  }
  if (session.headHash !== previousHash) {
    throw new JournalCorruptError(sessionId, Math.max(count - 1, 0), 'head_mismatch', 'the last event does not match the head hash on the owner row');
  }
  noteDecodedHistory(events, bytes, ids);
  return { events, bytes, reused };
}

/** Whether two stored rows hold the same bytes at the same place. */
function sameRow(a: EventRow, b: EventRow): boolean {
  return a.seq === b.seq && a.body === b.body && a.hash === b.hash && a.epoch === b.epoch && a.eventId === b.eventId;
}

/** The duplicate_id error of the first id in `ids` that an earlier one repeats, or null when they are distinct. */
function repeatedId(sessionId: SessionId, ids: readonly string[]): JournalCorruptError | null {
  if (ids.length < 2) return null;
  const sorted = ids.slice().sort();
  let distinct = true;
  for (let k = 1; k < sorted.length; k++) {
    if (sorted[k] === sorted[k - 1]) {
      distinct = false;
      break;
    }
  }
  if (distinct) return null;
  const seen = new Set<string>();
  for (let seq = 0; seq < ids.length; seq++) {
    const id = ids[seq]!;
    if (seen.has(id)) return new JournalCorruptError(sessionId, seq, 'duplicate_id', `event id ${id} appears twice`);
    seen.add(id);
  }
  return null;
}
