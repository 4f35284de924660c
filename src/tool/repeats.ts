/**
 * Repeats the in-doubt guard refused (docs/design.md#the-in-doubt-guard), as the evidence pass reads them: which
 * identical operation each may have repeated, and whether that one has completed since, so a retry of the repeat is
 * never a second write.
 */
import { ToolEffect, type ToolCall } from '../event/types.js';
import { canonicalJson } from '../json/canonical.js';
import type { AttemptRecord, OperationRecord, SessionEvidence } from './evidence.js';

/**
 * The first event that settled an operation as made (a success, or a `completed` review), and its attempt.
 * `unseen`: its first attempt's caller was told something else (the write was confirmed by a review, or made by a
 * retry), so a repeat of it may come before or after that event.
 */
function completionOf(operation: OperationRecord): Completion | null {
  let first: Completion | null = null;
  for (const attempt of operation.attempts) {
    for (const { review, event } of attempt.reviews) {
      if (review.outcome === 'completed' && (first === null || event.seq < first.seq)) first = { operation, seq: event.seq, attempt, unseen: true };
    }
    const done = attempt.result?.outcome.status === 'succeeded' ? attempt.resultEvent!.seq : null;
    if (done !== null && (first === null || done < first.seq)) first = { operation, seq: done, attempt, unseen: attempt.attempt > 1 };
  }
  return first;
}

interface Completion {
  readonly operation: OperationRecord;
  readonly seq: number;
  readonly attempt: AttemptRecord;
  readonly unseen: boolean;
}

/** A call the in-doubt guard refused (docs/design.md#the-in-doubt-guard). */
const refusedAsRepeat = (record: AttemptRecord): boolean =>
  record.operation !== null && record.result?.outcome.status === 'failed' && record.result.outcome.category === 'in_doubt';

/** What the in-doubt guard compares: task, tool and canonical arguments; null for arguments that are not JSON. */
function repeatIdentity(call: ToolCall): string | null {
  try {
    return JSON.stringify([call.operation!.taskId, call.name, canonicalJson(call.arguments)]);
  } catch {
    return null;
  }
}

/** An operation the guard could have refused `record` for: another one, identical, begun before it, not read-only. */
const couldBeRepeated = (record: AttemptRecord, operation: OperationRecord): boolean => {
  const first = operation.attempts[0]!;
  return operation !== record.operation && first.event.seq < record.event.seq && first.call.operation!.contract.effect !== ToolEffect.ReadOnly;
};

/**
 * The operations of one identity: the completed ones, those completed behind their first caller's back by origin,
 * the others by the seq of their completion with the least origin from each position on, so each refused call is
 * linked in logarithmic time however many identical operations the history holds; and those not completed, by origin.
 */
class IdenticalOperations {
  readonly unseen: Completion[] = [];
  readonly seen: Completion[] = [];
  readonly open: OperationRecord[] = [];
  #leastOriginFrom: Completion[] = [];

  seal(): void {
    this.open.sort((a, b) => a.attempts[0]!.event.seq - b.attempts[0]!.event.seq);
    this.unseen.sort((a, b) => originOf(a) - originOf(b));
    this.seen.sort((a, b) => a.seq - b.seq);
    this.#leastOriginFrom = new Array<Completion>(this.seen.length);
    for (let i = this.seen.length - 1; i >= 0; i--) {
      const next = this.#leastOriginFrom[i + 1];
      this.#leastOriginFrom[i] = next !== undefined && originOf(next) < originOf(this.seen[i]!) ? next : this.seen[i]!;
    }
  }

  /**
   * An operation `record` may have repeated that is settled as made: one its caller was told of only after the
   * refusal (completed since), else one whose first caller was never told (a review or a retry made it), whenever.
   */
  linkFor(record: AttemptRecord): Completion | undefined {
    const before = record.event.seq;
    const refusedAt = record.resultEvent!.seq;
    let low = 0;
    let high = this.seen.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (this.seen[mid]!.seq > refusedAt) high = mid;
      else low = mid + 1;
    }
    const since = this.#leastOriginFrom[low];
    if (since !== undefined && since.operation !== record.operation && originOf(since) < before) return since;
    return this.unseen.slice(0, 2).find((c) => c.operation !== record.operation && originOf(c) < before);
  }

  /** The earliest identical operation begun before `record` and not completed: the write it may repeat, still open. */
  openFor(record: AttemptRecord): OperationRecord | undefined {
    return this.open.slice(0, 2).find((o) => o !== record.operation && o.attempts[0]!.event.seq < record.event.seq);
  }
}

const originOf = (c: Completion): number => c.operation.attempts[0]!.event.seq;

/**
 * Links each call the in-doubt guard refused to an identical operation it may have repeated that is settled as
 * made: same task, tool and canonical arguments, begun before the repeat, a recorded effect the guard reads; and
 * either settled after the refusal was recorded, or settled behind its first caller's back (a `completed` review, a
 * retry's success) at any time: such a settlement can land between the guard's read and the refusal's commit. An
 * operation whose first attempt succeeded before the refusal is a write its caller saw made, not what the guard
 * refused the repeat for. A refused call no settled write links is linked to an identical earlier operation not
 * settled as made, if there is one (`repeatedOpen`), for the guidance its assessment gives.
 */
export function linkSettledRepeats(attempts: readonly AttemptRecord[], operations: Iterable<OperationRecord>): void {
  const refused = attempts.filter(refusedAsRepeat);
  if (refused.length === 0) return;
  // Canonical arguments only for operations of a refused call's task and tool: a long history with one refusal pays
  // for its few candidates, not for every operation.
  const asked = new Set(refused.map((r) => JSON.stringify([r.call.operation!.taskId, r.call.name])));
  const identical = new Map<string, IdenticalOperations>();
  for (const operation of operations) {
    const first = operation.attempts[0]!.call;
    if (first.operation!.contract.effect === ToolEffect.ReadOnly || !asked.has(JSON.stringify([operation.taskId, first.name]))) continue;
    const done = completionOf(operation);
    // A repeat refused in its turn makes no write of its own: it is not one another repeat may repeat.
    if (done === null && refusedAsRepeat(operation.attempts[operation.attempts.length - 1]!)) continue;
    const id = repeatIdentity(first);
    if (id === null) continue;
    const of = identical.get(id) ?? new IdenticalOperations();
    identical.set(id, of);
    if (done === null) of.open.push(operation);
    else (done.unseen ? of.unseen : of.seen).push(done);
  }
  for (const of of identical.values()) of.seal();
  for (const record of refused) {
    const id = repeatIdentity(record.call);
    const of = id === null ? undefined : identical.get(id);
    const link = of?.linkFor(record);
    if (link !== undefined) {
      record.repeatedCompleted = link.attempt;
      continue;
    }
    const open = of?.openFor(record);
    if (open !== undefined) record.repeatedOpen = open.attempts[open.attempts.length - 1]!;
  }
}

/**
 * For a call the in-doubt guard refused, the latest attempts of the identical operations begun before it that have
 * not completed: the writes it may have repeated, still open or never made. Empty for any other call.
 */
export function repeatedOpenAttempts(evidence: SessionEvidence, record: AttemptRecord): AttemptRecord[] {
  if (!refusedAsRepeat(record)) return [];
  const id = repeatIdentity(record.call);
  const open = new Set<OperationRecord>();
  for (const other of evidence.attempts) {
    const operation = other.operation;
    if (operation === null || other.call.name !== record.call.name || open.has(operation) || !couldBeRepeated(record, operation)) continue;
    if (completionOf(operation) === null && repeatIdentity(other.call) === id) open.add(operation);
  }
  return [...open].map((operation) => operation.attempts[operation.attempts.length - 1]!);
}
