/**
 * The task ledger against the hash chain (docs/design.md#the-task-ledger-in-the-chain). Every task change writes a
 * `task_ledger` event in the same transaction as the task row; between two changes, the row moves only with the
 * task's own tool evidence. So from a session's verified journal this recomputes, for each task whose changes are
 * journaled, what its stored row must say, and names the task whose row disagrees.
 */
import { JournalCorruptError } from '../errors.js';
import type { SessionEvent, TaskLedgerRecord } from '../event/types.js';
import type { SessionId } from '../ids.js';
import { utf8Length } from '../text.js';
import { ledgerRecord } from './decisions.js';
import type { EventRow, TaskRow } from './rows.js';

/** Which tasks of a session had their stored rows checked against the chain, and which could not be. */
export interface TaskLedgerReport {
  /** Tasks with a `task_ledger` event in the chain: their rows were recomputed and match. */
  readonly covered: readonly string[];
  /**
   * Tasks with tool calls but no `task_ledger` event (written before the store journaled task changes), or with
   * journaled changes but no stored row (an imported session): not covered by the chain.
   */
  readonly notCovered: readonly string[];
}

/** What the chain proves about one task after its last journaled change. */
interface Expected {
  ledger: TaskLedgerRecord;
  seq: number;
  toolCalls: number;
  journalBytes: number;
  /** Output bytes the task was charged at least: every succeeded result is charged its size. */
  outputAtLeast: number;
}

function corrupt(sessionId: SessionId, seq: number, taskId: string, detail: string): JournalCorruptError {
  return new JournalCorruptError(sessionId, seq, 'task_ledger', `task ${JSON.stringify(taskId)}: ${detail}`);
}

function fail(sessionId: SessionId, seq: number, taskId: string, detail: string): never {
  throw corrupt(sessionId, seq, taskId, detail);
}

/** Checks that a later ledger (journaled, or the stored row) follows from `expected` and the evidence in between. */
function checkFollows(sessionId: SessionId, expected: Expected, actual: TaskLedgerRecord, what: string): void {
  const { ledger, seq } = expected;
  const id = ledger.taskId;
  for (const k of ['toolCalls', 'toolOutputBytes', 'journalBytes'] as const) {
    if (actual.limits[k] !== ledger.limits[k]) fail(sessionId, seq, id, `${what} has limit ${k} ${actual.limits[k]}, the chain records ${ledger.limits[k]}`);
  }
  if (actual.charged.toolCalls !== expected.toolCalls) {
    fail(sessionId, seq, id, `${what} has charged ${actual.charged.toolCalls} tool calls, the chain records ${expected.toolCalls}`);
  }
  if (actual.charged.journalBytes !== expected.journalBytes) {
    fail(sessionId, seq, id, `${what} has charged ${actual.charged.journalBytes} journal bytes, the chain records ${expected.journalBytes}`);
  }
  const output = actual.charged.toolOutputBytes;
  if (output < expected.outputAtLeast || output > ledger.limits.toolOutputBytes) {
    fail(sessionId, seq, id, `${what} has charged ${output} output bytes, the chain records at least ${expected.outputAtLeast} and at most the limit ${ledger.limits.toolOutputBytes}`);
  }
  if (output + actual.reservedOutputBytes > ledger.limits.toolOutputBytes) {
    fail(sessionId, seq, id, `${what} has ${output} output bytes charged and ${actual.reservedOutputBytes} reserved, over the limit ${ledger.limits.toolOutputBytes}`);
  }
}

/**
 * Recomputes each journaled task's ledger from the chain and compares it with its stored row (`rows`, by task id;
 * undefined when the store has none). Throws JournalCorruptError (reason `task_ledger`, at the seq of the task's last
 * journaled change, naming the task) on the first disagreement.
 */
export function checkTaskLedger(sessionId: SessionId, events: readonly SessionEvent[], chain: readonly EventRow[], rows: ReadonlyMap<string, TaskRow | undefined>): TaskLedgerReport {
  const expected = new Map<string, Expected>();
  // Disagreements between journaled changes, raised only for a task whose row this store holds: an imported
  // session's changes were measured in the file it came from (its session id, so its sizes, may differ).
  const pending = new Map<string, JournalCorruptError>();
  const callTask = new Map<string, string>();
  const withCalls = new Set<string>();
  // Calls with no result yet: the only ones that can still hold a reservation.
  const open = new Set<string>();
  events.forEach((event, i) => {
    const kind = event.kind;
    const bytes = utf8Length(chain[i]!.body);
    if (kind.type === 'task_ledger') {
      const l = kind.ledger;
      // A start is journaled only when the store had no row of that id: a repeated start is a task created anew (an
      // imported session's task, started again in the importing store), so the ledger starts over from it.
      const before = l.change === 'started' ? undefined : expected.get(l.taskId);
      if (l.change === 'started') pending.delete(l.taskId);
      try {
        if (before) {
          checkFollows(sessionId, before, l, `the ledger event at seq ${event.seq}`);
          if (before.ledger.state !== 'running') fail(sessionId, event.seq, l.taskId, `changed to ${l.state} after it was already ${before.ledger.state}`);
        } else if (l.change === 'started' && (l.charged.toolCalls !== 0 || l.charged.journalBytes !== 0 || l.charged.toolOutputBytes !== 0)) {
          fail(sessionId, event.seq, l.taskId, 'started with charges already recorded');
        }
      } catch (error) {
        if (!(error instanceof JournalCorruptError)) throw error;
        if (!pending.has(l.taskId)) pending.set(l.taskId, error);
      }
      expected.set(l.taskId, {
        ledger: l, seq: event.seq, toolCalls: l.charged.toolCalls, journalBytes: l.charged.journalBytes, outputAtLeast: l.charged.toolOutputBytes,
      });
      return;
    }
    let taskId: string | undefined;
    if (kind.type === 'tool_call' && kind.call.operation) {
      taskId = kind.call.operation.taskId;
      callTask.set(kind.call.id, taskId);
      withCalls.add(taskId);
      open.add(kind.call.id);
    } else if (kind.type === 'tool_started') taskId = callTask.get(kind.callId);
    else if (kind.type === 'tool_result') {
      taskId = callTask.get(kind.result.callId);
      open.delete(kind.result.callId);
    }
    const e = taskId === undefined ? undefined : expected.get(taskId);
    if (!e) return;
    // The runtime writes each call, marker and result of a task under its budget: each is charged its wire size.
    e.journalBytes += bytes;
    if (kind.type === 'tool_call') e.toolCalls += 1;
    else if (kind.type === 'tool_result') {
      if (kind.result.outcome.status === 'succeeded') e.outputAtLeast += utf8Length(kind.result.outcome.output);
    }
  });
  const missing: string[] = [];
  for (const [taskId, e] of expected) {
    const row = rows.get(taskId);
    // An import writes no task rows: a task journaled in the file it came from has none until it is started here.
    if (!row) {
      missing.push(taskId);
      continue;
    }
    const earlier = pending.get(taskId);
    if (earlier) throw earlier;
    const stored = ledgerRecord(row, e.ledger.change);
    if (row.state !== e.ledger.state) fail(sessionId, e.seq, taskId, `the stored row says ${row.state}, the chain records ${e.ledger.state}`);
    if (row.stopReason !== e.ledger.stopReason) {
      fail(sessionId, e.seq, taskId, `the stored row's stop reason ${JSON.stringify(row.stopReason)} differs from the chain's ${JSON.stringify(e.ledger.stopReason)}`);
    }
    checkFollows(sessionId, e, stored, 'the stored row');
    const reserved = row.reservations.reduce((sum, r) => sum + r.bytes, 0);
    if (reserved !== row.reservedOutputBytes) fail(sessionId, e.seq, taskId, `the stored row reserves ${row.reservedOutputBytes} output bytes, its reservations sum to ${reserved}`);
    for (const r of row.reservations) {
      if (callTask.get(r.callId) !== taskId || !open.has(r.callId)) {
        fail(sessionId, e.seq, taskId, `the stored row holds a reservation for call ${JSON.stringify(r.callId)}, which the chain records as no open call of this task`);
      }
    }
  }
  return ledgerReport([...expected.keys()], withCalls, missing);
}

/**
 * The report of a check: tasks with journaled changes (`journaled`, in order) and a stored row are covered; those
 * with calls but no journaled change, and those whose row is `missing`, are not.
 */
function ledgerReport(journaled: readonly string[], withCalls: ReadonlySet<string>, missing: readonly string[]): TaskLedgerReport {
  const covered = journaled.filter((t) => !missing.includes(t));
  return { covered, notCovered: [...new Set([...withCalls].filter((t) => !journaled.includes(t)).concat(missing))] };
}

/**
 * Which tasks checkTaskLedger covers, for rows each checked on its own (journal-store's check of a live session):
 * tasks with journaled changes and a stored row are covered; those with calls but no journaled change, or with
 * changes but no row, are not. The order is checkTaskLedger's.
 */
export function taskLedgerCoverage(events: readonly SessionEvent[], rows: ReadonlyMap<string, TaskRow | undefined>): TaskLedgerReport {
  const journaled: string[] = [];
  const withCalls = new Set<string>();
  for (const event of events) {
    const kind = event.kind;
    if (kind.type === 'task_ledger' && !journaled.includes(kind.ledger.taskId)) journaled.push(kind.ledger.taskId);
    else if (kind.type === 'tool_call' && kind.call.operation) withCalls.add(kind.call.operation.taskId);
  }
  return ledgerReport(journaled, withCalls, journaled.filter((t) => !rows.get(t)));
}
