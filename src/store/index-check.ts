/**
 * The lookup rows a commit keeps beside the chain (docs/design.md#the-lookup-rows-are-checked): the attention index,
 * one row per operation, which the queue and the in-doubt guard read, and the operation rows, each operation's
 * latest attempt, which caller keys and replays read. Neither is in the hash chain, and both follow from it, so a
 * check recomputes them from the verified chain and compares: a row changed or deleted by hand would otherwise hide a
 * call in doubt from the queue and let its repeat run.
 */
import { JournalCorruptError } from '../errors.js';
import type { SessionEvent } from '../event/types.js';
import type { SessionId } from '../ids.js';
import { operationId } from '../tool/evidence.js';
import { attentionWrites } from './attention.js';
import type { AttentionRow, EventRow, OperationRow, SessionRow } from './rows.js';
import { utf8Length } from '../text.js';
import { knownWireBytes } from '../event/decoded-history.js';

/** What a check of a session's lookup rows covered. */
export interface LookupRowsReport {
  /** Whether the rows were compared: false when the session kept changing under every attempt to read it still. */
  readonly checked: boolean;
  readonly attentionRows: number;
  readonly operationRows: number;
}

/** Each operation's latest attempt in the chain: its call id, its call event's id and seq, by [taskId, key]. */
export function latestAttempts(events: readonly SessionEvent[]): Map<string, { taskId: string; key: string; callId: string; eventId: string; seq: number }> {
  const latest = new Map<string, { taskId: string; key: string; callId: string; eventId: string; seq: number }>();
  for (const e of events) {
    if (e.kind.type !== 'tool_call' || !e.kind.call.operation) continue;
    const { taskId, key } = e.kind.call.operation;
    latest.set(operationId(taskId, key), { taskId, key, callId: e.kind.call.id, eventId: e.eventId, seq: e.seq });
  }
  return latest;
}

const FIELDS: readonly (keyof AttentionRow)[] = [
  'sessionId', 'taskId', 'key', 'callId', 'tool', 'effect', 'revision', 'argsDigest', 'startMarker', 'started', 'status',
  'category', 'calledAt', 'startedAt', 'endedAt', 'updatedAt', 'pendingSince',
];

/**
 * The first disagreement between the stored lookup rows and the ones `events` make, as a JournalCorruptError (reason
 * `attention_index` or `operation_index`, at the seq of the operation's latest call), or null when they agree.
 * `operations` holds the stored operation rows by operation (every row of the session, or those of the chain's
 * operations, undefined for none), or is null for a store without operation rows; `attention` every stored attention row of the session, or null without an index.
 */
export function lookupRowsDisagreement(
  sessionId: SessionId,
  events: readonly SessionEvent[],
  attention: readonly AttentionRow[] | null,
  operations: ReadonlyMap<string, OperationRow | undefined> | null,
): JournalCorruptError | null {
  const latest = latestAttempts(events);
  const head = Math.max(events.length - 1, 0);
  const where = (taskId: string, key: string) => latest.get(operationId(taskId, key))?.seq ?? head;
  if (attention !== null) {
    const expected = new Map(attentionWrites(sessionId, events).map((r) => [operationId(r.taskId, r.key), r]));
    const stored = new Map(attention.map((r) => [operationId(r.taskId, r.key), r]));
    for (const [id, want] of expected) {
      const have = stored.get(id);
      if (have === undefined) {
        return new JournalCorruptError(sessionId, where(want.taskId, want.key), 'attention_index', `operation ${want.key} of task ${want.taskId} has no attention row; the chain gives it ${want.status}`);
      }
      // A backend may store no `pendingSince` for null (the field is optional in the row).
      const field = FIELDS.find((f) => (have[f] ?? null) !== (want[f] ?? null));
      if (field !== undefined) {
        return new JournalCorruptError(
          sessionId, where(want.taskId, want.key), 'attention_index',
          `the attention row of operation ${want.key} of task ${want.taskId} has ${field} ${JSON.stringify(have[field])}; the chain gives ${JSON.stringify(want[field])}`,
        );
      }
    }
    for (const [id, have] of stored) {
      if (!expected.has(id)) return new JournalCorruptError(sessionId, head, 'attention_index', `an attention row names operation ${have.key} of task ${have.taskId}, which the chain does not hold`);
    }
  }
  if (operations !== null) {
    for (const [id, have] of operations) {
      if (have !== undefined && !latest.has(id)) {
        return new JournalCorruptError(sessionId, head, 'operation_index', `an operation row names operation ${have.key} of task ${have.taskId} (call ${have.callId}), which the chain does not hold`);
      }
    }
    for (const [id, want] of latest) {
      const have = operations.get(id);
      if (have === undefined) {
        return new JournalCorruptError(sessionId, want.seq, 'operation_index', `operation ${want.key} of task ${want.taskId} has no operation row, or the index over those rows is damaged; its latest attempt is call ${want.callId}`);
      }
      if (have.callId !== want.callId || have.eventId !== want.eventId || have.sessionId !== sessionId) {
        return new JournalCorruptError(
          sessionId, want.seq, 'operation_index',
          `the operation row of ${want.key} of task ${want.taskId} names call ${have.callId} (event ${have.eventId}); the chain's latest attempt is call ${want.callId} (event ${want.eventId})`,
        );
      }
    }
  }
  return null;
}

/**
 * The owner row's running totals against the chain: the bytes of its events (what the 16 MiB limit is counted from)
 * and the last recorded time (no next event is stamped earlier). Neither is in the hash chain, and an edit of either
 * went unnoticed: a time set ahead stamped every later event with it, a byte count set low let a session grow past
 * what a load accepts. A JournalCorruptError (`head_mismatch`, at the head), or null when they agree.
 */
export function ownerRowDisagreement(sessionId: SessionId, session: SessionRow | undefined, rows: readonly EventRow[], events: readonly SessionEvent[]): JournalCorruptError | null {
  if (session === undefined || rows.length === 0) return null;
  const head = rows.length - 1;
  // The sizes verification measured as it decoded the rows; measured again only for a history it did not decode.
  const known = knownWireBytes(events);
  let bytes = 0;
  rows.forEach((row, i) => { bytes += known(i) ?? utf8Length(row.body); });
  if (session.bodyBytes !== bytes) {
    return new JournalCorruptError(sessionId, head, 'head_mismatch', `the owner row counts ${session.bodyBytes} bytes of events; the journal holds ${bytes}`);
  }
  let last: string | undefined;
  for (const e of events) if (e.recordedAt !== undefined) last = e.recordedAt;
  const want = last === undefined ? null : Date.parse(last);
  const have = session.recordedAt ?? null;
  if (have !== want) {
    return new JournalCorruptError(sessionId, head, 'head_mismatch',
      `the owner row's last recorded time is ${have === null ? 'none' : Math.abs(have) <= 8.64e15 ? new Date(have).toISOString() : String(have)}; the journal's last event was recorded at ${last ?? 'no time'}`);
  }
  return null;
}
