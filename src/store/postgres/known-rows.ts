/**
 * The rows this backend last committed or read for each session it writes, so that a commit can be decided on them
 * and sent in one round trip (docs/design.md#one-round-trip-per-write-on-postgresql). Nothing here is trusted: the
 * batch that carries such a write first checks, under the same row locks the ordinary path takes, that every stored
 * row the decision read is still exactly the known one (and that its event ids are still unused); any difference
 * aborts the batch before it writes, and the write runs again the ordinary way on freshly read rows.
 */
import { setNewest, trimOldest } from '../../bounded-map.js';
import type { SessionId } from '../../ids.js';
import type { AttentionRow, OperationRow, SessionRow, TaskRow, TxReads, TxState, TxWrites } from '../rows.js';
import { attentionValues, sessionValues, taskValues } from '../sql-rows.js';

export const OPERATION_COLUMNS = 'task_id, key, session_id, call_id, event_id';

interface Known {
  session: SessionRow;
  /** The database clock the session row's lease was last renewed from. */
  clock: number;
  readonly tasks: Map<string, TaskRow | null>;
  readonly operations: Map<string, OperationRow | null>;
  /** By call id; null: no row of this session carries that call id. */
  readonly attention: Map<string, AttentionRow | null>;
  /** The call id each known attention row of an operation (task, key) carries, so a newer one supersedes it at once. */
  readonly attentionByOperation: Map<string, string>;
}

/** Rows kept per kind and session: a session's recent calls are what its next commits read. */
const PER_SESSION = 256;

const opKey = (taskId: string, key: string) => `${taskId}\u0000${key}`;

/**
 * A known row is compared as the JSON array of its columns' values in column order: the positional values the
 * driver is given, as `jsonb_build_array` over the same columns gives them (JSON.stringify writes a missing value as
 * null, as the server does). An array, not an object keyed by column: nothing to build per column, and the server
 * compares no keys.
 */
export const sessionJson = (row: SessionRow): string => JSON.stringify(sessionValues(row, (h) => h));

/** What the speculative batch checks besides the owner row: each as a JSON object keyed like the SQL builds it. */
export interface KnownReads {
  readonly task?: { readonly taskId: string; readonly expected: string };
  readonly operation?: { readonly taskId: string; readonly key: string; readonly expected: string };
  readonly attention?: { readonly callIds: string[]; readonly expected: string };
  readonly eventIds?: string[];
}

export class KnownSessions {
  private readonly bySession = new Map<string, Known>();
  constructor(private readonly max = 1024) {}

  forget(sessionId: string): void {
    this.bySession.delete(sessionId);
  }

  clear(): void {
    this.bySession.clear();
  }

  /** The state a decision would read, when every row `reads` names is known (never for inbox rows, read fresh). */
  state(sessionId: SessionId, reads: TxReads, now: number): { state: TxState; checks: KnownReads; clock: number } | undefined {
    const k = this.bySession.get(sessionId);
    if (!k || reads.approvals || reads.reviews || reads.writtenSince) return undefined;
    let task: TaskRow | undefined;
    let operation: OperationRow | undefined;
    const attention: AttentionRow[] = [];
    const checks: { -readonly [K in keyof KnownReads]: KnownReads[K] } = {};
    if (reads.taskId !== undefined) {
      if (!k.tasks.has(reads.taskId)) return undefined;
      task = k.tasks.get(reads.taskId) ?? undefined;
      const expected = task ? { [reads.taskId]: taskValues(task) } : {};
      checks.task = { taskId: reads.taskId, expected: JSON.stringify(expected) };
    }
    if (reads.operation) {
      const key = opKey(reads.operation.taskId, reads.operation.key);
      if (!k.operations.has(key)) return undefined;
      operation = k.operations.get(key) ?? undefined;
      const expected = operation
        ? { [operation.key]: [operation.taskId, operation.key, operation.sessionId, operation.callId, operation.eventId] }
        : {};
      checks.operation = { taskId: reads.operation.taskId, key: reads.operation.key, expected: JSON.stringify(expected) };
    }
    if (reads.attentionCalls?.length) {
      const expected: Record<string, unknown> = {};
      for (const id of reads.attentionCalls) {
        if (!k.attention.has(id)) return undefined;
        const row = k.attention.get(id);
        if (row) {
          attention.push(row);
          expected[id] = attentionValues(row, (b) => b);
        }
      }
      checks.attention = { callIds: [...reads.attentionCalls], expected: JSON.stringify(expected) };
    }
    if (reads.eventIds?.length) checks.eventIds = [...reads.eventIds];
    return {
      state: { session: k.session, task, operation, existingEventIds: [], attention, now: Math.max(now, k.clock + 1) },
      checks,
      clock: k.clock,
    };
  }

  /**
   * Records a committed transaction: the rows it read, overlaid with the rows it wrote. `clock` is the database clock
   * the written owner row's lease was renewed from.
   */
  record(sessionId: SessionId, state: TxState, reads: TxReads, writes: TxWrites<unknown>, clock: number): void {
    const session = writes.session?.row ?? state.session;
    if (!session?.held) {
      this.bySession.delete(sessionId);
      return;
    }
    const k: Known = this.bySession.get(sessionId) ??
      { session, clock, tasks: new Map(), operations: new Map(), attention: new Map(), attentionByOperation: new Map() };
    k.session = session;
    k.clock = clock;
    if (reads.taskId !== undefined) k.tasks.set(reads.taskId, state.task ?? null);
    if (reads.operation) k.operations.set(opKey(reads.operation.taskId, reads.operation.key), state.operation ?? null);
    for (const id of reads.attentionCalls ?? []) {
      const row = state.attention?.find((r) => r.callId === id) ?? null;
      k.attention.set(id, row);
      if (row) k.attentionByOperation.set(opKey(row.taskId, row.key), id);
    }
    if (writes.task) k.tasks.set(writes.task.row.taskId, writes.task.row);
    for (const o of writes.operations ?? []) k.operations.set(opKey(o.taskId, o.key), o);
    for (const a of writes.attention ?? []) {
      // The row of (task, key) now names this call: no row carries the call id it named before. (Knowledge that is
      // wrong only costs a miss: the commit's checks compare every row it read with the stored one.)
      const op = opKey(a.taskId, a.key);
      const before = k.attentionByOperation.get(op);
      if (before !== undefined && before !== a.callId) k.attention.set(before, null);
      k.attention.set(a.callId, a);
      k.attentionByOperation.set(op, a.callId);
    }
    for (const map of [k.tasks, k.operations, k.attention, k.attentionByOperation]) trimOldest(map, PER_SESSION);
    // Set last: the least recently written session is dropped first.
    setNewest(this.bySession, sessionId, k, this.max);
  }
}
