/**
 * The crash harness's checker: a pure function over what a host can read after a crash (the confirmed journal, the
 * external ledger, the task charges). It re-derives every fact from the raw events on purpose, instead of trusting
 * the recovery code it is checking; only the last step asks assessSession whether every call is classified.
 */
import { assessSession } from '../../src/index.js';
import { stoppedBeforeBody } from '../../src/tool/retry-policy.js';
import type { SessionEvent, ToolCall, ToolRecordedOutcome } from '../../src/event/types.js';
import type { LedgerRow } from './tools.js';

export interface InvariantCounts {
  /** Extra business rows: for every (task, operation key), rows beyond the first. Any effect counts. */
  duplicates: number;
  /**
   * Retries of an Unknown or NonIdempotent call whose source attempt had an unknown outcome when the retry was
   * written, and whose retry audit carries no `not_executed` review.
   */
  unreviewedReexecutions: number;
  /** Retries written after some attempt of the same operation had already succeeded. */
  retriedCompletions: number;
  /**
   * Tasks whose budget differs from what the journal justifies: tool calls charged ≠ attempts journaled; output
   * bytes charged ≠ the settled outputs plus the full reservation of every started attempt left without a result;
   * or a reservation still outstanding when no attempt can be in flight.
   */
  budgetMismatches: number;
  /** Ledger rows that no journaled, started attempt of their operation can account for: a lost write. */
  orphanWrites: number;
  /** Calls assessSession could not account for, or a history it refused. */
  unclassified: number;
}

export interface InvariantReport extends InvariantCounts {
  readonly problems: string[];
}

export const ZERO_COUNTS: Readonly<InvariantCounts> = Object.freeze({
  duplicates: 0,
  unreviewedReexecutions: 0,
  retriedCompletions: 0,
  budgetMismatches: 0,
  orphanWrites: 0,
  unclassified: 0,
});

export function addCounts(into: InvariantCounts, from: InvariantCounts): void {
  for (const key of Object.keys(ZERO_COUNTS) as Array<keyof InvariantCounts>) into[key] += from[key];
}

export function countsOf(report: InvariantReport): InvariantCounts {
  const { problems: _problems, ...counts } = report;
  return counts;
}

/** docs/design.md#recovery-status: the failure categories recorded only before a body starts. Listed here, not imported, on purpose. */
const PRE_BODY = new Set(['unavailable', 'invalid_arguments', 'denied', 'guard_fault', 'approval_unavailable', 'approval_denied', 'approval_fault']);
const NEEDS_REVIEW = new Set(['unknown', 'non_idempotent']);

interface Attempt {
  readonly call: ToolCall;
  readonly seq: number;
  started: boolean;
  outcome: ToolRecordedOutcome | null;
}

/** What the journal proves about one attempt at this point of the walk (docs/design.md#recovery-status). */
function statusOf(a: Attempt): 'completed' | 'not_executed' | 'outcome_unknown' {
  if (a.outcome?.status === 'succeeded') return 'completed';
  // Stopped after its start marker and before its body was called (a lease that may have run out, on a loaded machine
  // where the crash child's 100 ms lease lapses between the marker and the call): recorded so only when the body was
  // never called, so a retry of it is not a re-execution. The ledger's duplicate count checks that independently.
  if (stoppedBeforeBody(a.outcome)) return 'not_executed';
  if (a.call.operation?.startMarker === true) return a.started ? 'outcome_unknown' : 'not_executed';
  if (a.outcome === null) return 'outcome_unknown';
  return PRE_BODY.has(a.outcome.category) ? 'not_executed' : 'outcome_unknown';
}

const opId = (taskId: string, key: string) => JSON.stringify([taskId, key]);

/** A task's budget as its owner reads it. */
export interface TaskCharge {
  readonly toolCalls: number;
  readonly toolOutputBytes: number;
  readonly reservedOutputBytes: number;
}

/**
 * Output bytes an attempt is accountable for once its owner is gone (docs/design.md#tasks-and-budgets): nothing if its body never started;
 * the output's size if it succeeded; otherwise the whole reservation (a failure after the start, or no result at
 * all: the body may have produced anything). Null when the journal cannot say (an output_limit failure charges the
 * oversized output's length, which is not journaled).
 */
function outputCharge(a: Attempt, reservation: number): number | null {
  if (!a.started) return 0;
  if (a.outcome === null) return reservation;
  // Stopped between its start marker and its body: the body never ran, and its reservation is refunded
  // (docs/design.md#tasks-and-budgets).
  if (stoppedBeforeBody(a.outcome)) return 0;
  // Output is charged as the journal stores it, JSON-escaped (docs/design.md#output-is-counted-as-it-is-journaled).
  if (a.outcome.status === 'succeeded') return Buffer.byteLength(JSON.stringify(a.outcome.output), 'utf8') - 2;
  return a.outcome.category === 'output_limit' ? null : reservation;
}

/**
 * Checks a confirmed history (as loadHistory returned it: chain and head already verified), the ledger, and
 * `charged`: each task's budget as read by an owner newer than every attempt in the history (so nothing is in
 * flight), for at least every task the journal mentions. `reservation` is what one admission reserves (the
 * runtime's output limit, while the task's output budget is far from exhausted).
 */
export function checkInvariants(
  history: readonly SessionEvent[],
  ledger: readonly LedgerRow[],
  charged: Readonly<Record<string, TaskCharge>>,
  reservation: number,
): InvariantReport {
  const report: InvariantReport = { ...ZERO_COUNTS, problems: [] };
  const problem = (counter: keyof InvariantCounts | null, text: string) => {
    if (counter) report[counter] += 1;
    report.problems.push(text);
  };

  const attempts = new Map<string, Attempt>();
  const succeededOps = new Set<string>();
  const attemptsPerTask = new Map<string, number>();
  const attemptsOf = new Map<string, Attempt[]>();
  history.forEach((event, index) => {
    if (event.seq !== index) problem('unclassified', `event at index ${index} has seq ${event.seq}`);
    const kind = event.kind;
    if (kind.type === 'tool_call') {
      const call = kind.call;
      const op = call.operation;
      if (op) {
        attemptsPerTask.set(op.taskId, (attemptsPerTask.get(op.taskId) ?? 0) + 1);
        const retry = op.retry;
        if (retry) {
          const source = attempts.get(retry.callId);
          if (!source) problem('unclassified', `retry ${call.id} points at unknown call ${retry.callId}`);
          if (succeededOps.has(opId(op.taskId, op.key))) {
            problem('retriedCompletions', `retry ${call.id} of ${call.name} written after operation ${op.key} had succeeded`);
          }
          if (source && NEEDS_REVIEW.has(op.contract.effect) && statusOf(source) === 'outcome_unknown' && retry.review?.outcome !== 'not_executed') {
            problem('unreviewedReexecutions', `retry ${call.id} of ${op.contract.effect} ${call.name} after an unknown outcome, without a not_executed review`);
          }
        }
      }
      const attempt: Attempt = { call, seq: event.seq, started: false, outcome: null };
      attempts.set(call.id, attempt);
      if (op) attemptsOf.set(op.taskId, [...(attemptsOf.get(op.taskId) ?? []), attempt]);
    } else if (kind.type === 'tool_started') {
      const a = attempts.get(kind.callId);
      if (a) a.started = true;
      else problem('unclassified', `tool_started for unknown call ${kind.callId}`);
    } else if (kind.type === 'tool_result') {
      const a = attempts.get(kind.result.callId);
      if (!a) {
        problem('unclassified', `tool_result for unknown call ${kind.result.callId}`);
        return;
      }
      a.outcome = kind.result.outcome;
      const op = a.call.operation;
      if (op && kind.result.outcome.status === 'succeeded') succeededOps.add(opId(op.taskId, op.key));
    }
  });

  const tasks = new Set([...attemptsPerTask.keys()]);
  for (const taskId of tasks) {
    const attemptsHere = attemptsPerTask.get(taskId) ?? 0;
    const charge = charged[taskId];
    if (charge === undefined) {
      problem('budgetMismatches', `task ${taskId}: ${attemptsHere} attempts journaled, but the store has no such task`);
      continue;
    }
    if (charge.toolCalls !== attemptsHere) problem('budgetMismatches', `task ${taskId}: ${charge.toolCalls} tool calls charged, ${attemptsHere} attempts journaled`);
    const perAttempt = (attemptsOf.get(taskId) ?? []).map((a) => outputCharge(a, reservation));
    if (perAttempt.every((n) => n !== null)) {
      const expected = perAttempt.reduce<number>((sum, n) => sum + n!, 0);
      if (charge.toolOutputBytes !== expected) {
        problem('budgetMismatches', `task ${taskId}: ${charge.toolOutputBytes} output bytes charged, the journal justifies ${expected}`);
      }
    }
    if (charge.reservedOutputBytes !== 0) {
      problem('budgetMismatches', `task ${taskId}: ${charge.reservedOutputBytes} output bytes still reserved with no attempt in flight`);
    }
  }
  for (const [taskId, charge] of Object.entries(charged)) {
    if (!tasks.has(taskId) && (charge.toolCalls !== 0 || charge.toolOutputBytes !== 0 || charge.reservedOutputBytes !== 0)) {
      problem('budgetMismatches', `task ${taskId}: charged ${JSON.stringify(charge)} with no attempt journaled`);
    }
  }

  const rowsPerOp = new Map<string, LedgerRow[]>();
  for (const row of ledger) {
    const id = opId(row.taskId, row.key);
    const rows = rowsPerOp.get(id) ?? [];
    rows.push(row);
    rowsPerOp.set(id, rows);
    const writer = attempts.get(row.callId);
    const op = writer?.call.operation;
    if (!writer || !op || op.taskId !== row.taskId || op.key !== row.key || !writer.started) {
      problem('orphanWrites', `ledger row ${row.id} (${row.tool}, call ${row.callId}) has no started attempt of its operation in the journal`);
    }
  }
  for (const rows of rowsPerOp.values()) {
    if (rows.length > 1) {
      report.duplicates += rows.length - 1;
      report.problems.push(`operation ${rows[0]!.key} of ${rows[0]!.tool} has ${rows.length} business rows (calls ${rows.map((r) => r.callId).join(', ')})`);
    }
  }

  if (history.length > 0) {
    try {
      const assessment = assessSession(history);
      const { totals } = assessment;
      if (totals.calls !== attempts.size || totals.succeeded + totals.listed !== totals.calls) {
        problem('unclassified', `assessSession accounts for ${totals.succeeded} + ${totals.listed} of ${totals.calls} calls; the journal holds ${attempts.size}`);
      }
      for (const c of assessment.calls) {
        if (!['retry_allowed', 'needs_review', 'completed', 'superseded', 'legacy'].includes(c.nextStep)) {
          problem('unclassified', `call ${c.callId} has no next step (${String(c.nextStep)})`);
        }
      }
    } catch (error) {
      problem('unclassified', `assessSession refused the confirmed history: ${String(error)}`);
    }
  }
  return report;
}

const MINTED = /\b(sess|task|turn|evt|toolcall|operation)_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/g;

/**
 * Replaces every minted id (prefix + UUIDv7) and the given host-chosen ids with placeholders numbered in order of
 * first appearance, so two runs that differ only in ids compare equal.
 */
export function normalizeIds<T>(value: T, hostIds: Readonly<Record<string, string>> = {}): T {
  let text = JSON.stringify(value);
  for (const [label, id] of Object.entries(hostIds).sort((a, b) => b[1].length - a[1].length)) text = text.split(id).join(`<${label}>`);
  const seen = new Map<string, string>();
  text = text.replace(MINTED, (match, prefix: string) => {
    let name = seen.get(match);
    if (name === undefined) {
      name = `<${prefix}#${seen.size + 1}>`;
      seen.set(match, name);
    }
    return name;
  });
  return JSON.parse(text) as T;
}

/**
 * Replaces every recorded time (`recordedAt`) with a placeholder: times are information for people, never an input
 * to a recovery decision (docs/design.md#recorded-times), so two journals that differ only in when they were
 * written must lead recovery to the same view.
 */
export function normalizeTimes<T>(value: T): T {
  return JSON.parse(JSON.stringify(value, (key, v: unknown) => (key === 'recordedAt' && typeof v === 'string' ? '<time>' : v))) as T;
}

/** One line per event, with what the checker reads of it: what a failed case prints, so a rare failure can be read. */
export function journalSketch(history: readonly SessionEvent[]): string {
  return history.map((event) => {
    const kind = event.kind;
    const line = `${event.seq} ${kind.type}`;
    if (kind.type === 'tool_call') {
      const op = kind.call.operation;
      const retry = op?.retry ? ` retry-of=${op.retry.callId} review=${op.retry.review?.outcome ?? 'none'}` : '';
      return `${line} ${kind.call.name} ${kind.call.id} key=${op?.key ?? '-'}${retry}`;
    }
    if (kind.type === 'tool_started') return `${line} ${kind.callId}`;
    if (kind.type === 'tool_result') {
      const outcome = kind.result.outcome;
      return `${line} ${kind.result.callId} ${outcome.status === 'succeeded' ? 'succeeded' : `${outcome.category}/${outcome.code}`}`;
    }
    if (kind.type === 'tool_review') return `${line} ${kind.review.callId} ${kind.review.outcome} by ${kind.review.source}`;
    return line;
  }).join('\n');
}
