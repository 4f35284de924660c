/**
 * Repeats the in-doubt guard refused (docs/design.md#the-in-doubt-guard), as the evidence pass reads them: which
 * identical writes each may have repeated, and whether one of them has been made since, so a retry of the repeat is
 * never a second write.
 *
 * A repeat is an operation born refused: its first attempt, and the attempt asked about, refused as `in_doubt`. An
 * operation whose first attempt ran is an intent of its own (a model's parallel identical calls both are), even when a
 * retry of it is refused beside an identical call in doubt.
 */
import { ToolEffect, type ToolCall } from '../event/types.js';
import { canonicalJson } from '../json/canonical.js';
import type { AttemptRecord, OperationRecord, SessionEvidence } from './evidence.js';
import { DENIAL_CATEGORIES, ToolRecoveryStatus, evidenceFactsOf, evidenceRuleFor } from './retry-policy.js';

const refusedInDoubt = (record: AttemptRecord): boolean =>
  record.result?.outcome.status === 'failed' && record.result.outcome.category === 'in_doubt';

/** The evidence table's status of one attempt (a contradiction was refused by the evidence pass already). */
const statusOf = (a: AttemptRecord) => evidenceRuleFor(evidenceFactsOf(a)).status;

/** An operation born refused: its first attempt was refused `in_doubt`. */
const bornRepeat = (operation: OperationRecord): boolean => refusedInDoubt(operation.attempts[0]!);

/**
 * `record` is a repeat the in-doubt guard refused, not made since: its operation was born refused, and no attempt of
 * it up to `record` ran its body, whatever refused the later ones (a guard, a grant withdrawn).
 */
export function isRefusedRepeat(record: AttemptRecord): boolean {
  const operation = record.operation;
  if (operation === null || !bornRepeat(operation)) return false;
  const upTo = operation.attempts.indexOf(record);
  return upTo >= 0 && record.result !== null && operation.attempts.slice(0, upTo + 1).every((a) => statusOf(a) === ToolRecoveryStatus.NotExecuted);
}

/** What the in-doubt guard compares: task, tool and canonical arguments; null for arguments that are not JSON. */
function repeatIdentity(call: ToolCall): string | null {
  try {
    return JSON.stringify([call.operation!.taskId, call.name, canonicalJson(call.arguments)]);
  } catch {
    return null;
  }
}

const originOf = (operation: OperationRecord): number => operation.attempts[0]!.event.seq;

/** The seq of the first event that settled an operation as made (a success, or a `completed` review), and its attempt. */
function completionOf(operation: OperationRecord): { readonly seq: number; readonly attempt: AttemptRecord } | null {
  let first: { seq: number; attempt: AttemptRecord } | null = null;
  for (const attempt of operation.attempts) {
    for (const { review, event } of attempt.reviews) {
      if (review.outcome === 'completed' && (first === null || event.seq < first.seq)) first = { seq: event.seq, attempt };
    }
    const done = attempt.result?.outcome.status === 'succeeded' ? attempt.resultEvent!.seq : null;
    if (done !== null && (first === null || done < first.seq)) first = { seq: done, attempt };
  }
  return first;
}

/**
 * An operation a repeat may repeat: not read-only by its record, and a write that may exist (an attempt whose body
 * ran or may have). One whose every attempt provably never ran, a repeat refused in its turn say, writes nothing.
 */
function mayBeRepeated(operation: OperationRecord): boolean {
  if (operation.attempts[0]!.call.operation!.contract.effect === ToolEffect.ReadOnly) return false;
  return operation.attempts.some((a) => statusOf(a) !== ToolRecoveryStatus.NotExecuted);
}

interface Candidate {
  readonly operation: OperationRecord;
  readonly origin: number;
  /** The seq of its completion; Infinity while it is not settled as made. */
  readonly settled: number;
  readonly completion: { readonly seq: number; readonly attempt: AttemptRecord } | null;
}

/**
 * The identical writes of one identity by origin, with, for each prefix, the one completed last and the latest
 * one not completed: each repeat is decided by a binary search, however many identical operations the history holds.
 */
class IdenticalWrites {
  readonly all: Candidate[] = [];
  #lastCompleted: (Candidate | undefined)[] = [];
  #lastOpen: (Candidate | undefined)[] = [];
  #latestSettled: number[] = [];
  /** Those settled as made, by the seq of their completion. */
  #byCompletion: Candidate[] = [];

  seal(): void {
    this.all.sort((a, b) => a.origin - b.origin);
    this.#byCompletion = this.all.filter((c) => c.completion !== null).sort((a, b) => a.settled - b.settled);
    let last: Candidate | undefined;
    let open: Candidate | undefined;
    let latest = -1;
    this.#lastCompleted = [undefined];
    this.#lastOpen = [undefined];
    this.#latestSettled = [-1];
    for (const c of this.all) {
      if (c.completion !== null && (last === undefined || c.settled > last.settled)) last = c;
      if (c.completion === null) open = c;
      latest = Math.max(latest, c.settled);
      this.#lastCompleted.push(last);
      this.#lastOpen.push(open);
      this.#latestSettled.push(latest);
    }
  }

  /**
   * A write not made (its latest attempt never ran its body, and nothing settled it as made) that an identical repeat
   * has made since, its retry run after all (the first write's retry denied, say): that write is made, and a retry of
   * it would make it twice. Only a repeat refused while the write was still one the guard reads, begun and not yet
   * decided against (its latest attempt denied): an older write a denial had settled is not what it repeated. The
   * write's latest attempt is linked to the repeat's completing attempt.
   */
  linkMadeByRepeats(): void {
    const repeats = this.all.filter((c) => c.completion !== null && bornRepeat(c.operation))
      .map((c) => ({ refusedAt: c.operation.attempts[0]!.resultEvent!.seq, made: c.completion!.attempt }))
      .sort((a, b) => a.refusedAt - b.refusedAt);
    if (repeats.length === 0) return;
    for (const c of this.all) {
      const latest = c.operation.attempts[c.operation.attempts.length - 1]!;
      if (c.completion !== null || statusOf(latest) !== ToolRecoveryStatus.NotExecuted) continue;
      const outcome = latest.result?.outcome;
      const settledAt = outcome?.status === 'failed' && DENIAL_CATEGORIES.has(outcome.category) ? latest.resultEvent!.seq : Number.POSITIVE_INFINITY;
      // The first repeat refused after this write began; it counts when it was refused before the denial.
      let low = 0;
      let high = repeats.length;
      while (low < high) {
        const mid = (low + high) >>> 1;
        if (repeats[mid]!.refusedAt > c.origin) high = mid;
        else low = mid + 1;
      }
      const repeat = repeats[low];
      if (repeat !== undefined && repeat.refusedAt < settledAt) latest.madeByRepeat = repeat.made;
    }
  }

  /**
   * Whether `record`, a refused repeat, has been made, or which write it waits on:
   * - `made` is the identical write settled as made first after the refusal, whenever it began: the write it
   *   repeated, another repeat of it retried after all, or the same call asked for again once the first was decided
   *   against. Each is the write the repeat asked for, and a retry of the repeat would make it twice;
   * - else, among the identical writes begun before it: while one of them was not settled as made when the refusal
   *   was recorded, `open` is the one begun last among those still open (the likeliest to be what the guard read in
   *   doubt); when every one of them was settled as made before the refusal, the settlement landed between the
   *   guard's read and the refusal's commit (the guard refused it for a write in doubt): `made` is the one completed last.
   */
  decide(record: AttemptRecord): { made?: AttemptRecord; open?: OperationRecord } {
    const own = record.operation!;
    const origin = originOf(own);
    // The refusal it was born with: what the guard read then is what it repeated, whatever refused its later retries.
    const refusedAt = own.attempts[0]!.resultEvent!.seq;
    const since = this.#completedAfter(refusedAt, own);
    if (since !== undefined) return { made: since.completion!.attempt };
    let low = 0;
    let high = this.all.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (this.all[mid]!.origin < origin) low = mid + 1;
      else high = mid;
    }
    const last = this.#lastCompleted[low];
    // Nothing was made after the refusal: a write begun before it and settled later is one still open.
    if (this.#latestSettled[low]! > refusedAt) {
      const open = this.#lastOpen[low];
      return open === undefined ? {} : { open: open.operation };
    }
    return last === undefined ? {} : { made: last.completion!.attempt };
  }

  /** The first write settled as made after `seq`, other than `own`. */
  #completedAfter(seq: number, own: OperationRecord): Candidate | undefined {
    let low = 0;
    let high = this.#byCompletion.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (this.#byCompletion[mid]!.settled > seq) high = mid;
      else low = mid + 1;
    }
    for (let i = low; i < this.#byCompletion.length; i++) if (this.#byCompletion[i]!.operation !== own) return this.#byCompletion[i];
    return undefined;
  }
}

/**
 * Links each refused repeat to the write it repeated (IdenticalWrites.decide): `repeatedCompleted` when that write
 * has been made, so no retry of the repeat makes it twice; `repeatedOpen` while it is not, for the guidance its
 * assessment gives. Same task, tool and canonical arguments. And the other way
 * (IdenticalWrites.linkMadeByRepeats): a write not made whose repeat, retried, made it since is `madeByRepeat`.
 */
export function linkSettledRepeats(attempts: readonly AttemptRecord[], operations: Iterable<OperationRecord>): void {
  const all = [...operations];
  const repeats = all.filter(bornRepeat);
  if (repeats.length === 0) return;
  // Canonical arguments only for operations of a repeat's task and tool: a long history with one refusal pays for
  // its few candidates, not for every operation.
  const asked = new Set(repeats.map((r) => JSON.stringify([r.taskId, r.attempts[0]!.call.name])));
  const identical = new Map<string, IdenticalWrites>();
  for (const operation of all) {
    const first = operation.attempts[0]!.call;
    if (!asked.has(JSON.stringify([operation.taskId, first.name])) || !mayBeRepeated(operation)) continue;
    const id = repeatIdentity(first);
    if (id === null) continue;
    const writes = identical.get(id) ?? new IdenticalWrites();
    identical.set(id, writes);
    const completion = completionOf(operation);
    writes.all.push({ operation, origin: originOf(operation), settled: completion?.seq ?? Number.POSITIVE_INFINITY, completion });
  }
  for (const writes of identical.values()) {
    writes.seal();
    writes.linkMadeByRepeats();
  }
  for (const record of attempts) {
    if (!isRefusedRepeat(record)) continue;
    const id = repeatIdentity(record.call);
    const decided = id === null ? undefined : identical.get(id)?.decide(record);
    if (decided?.made !== undefined) record.repeatedCompleted = decided.made;
    else if (decided?.open !== undefined) record.repeatedOpen = decided.open.attempts[decided.open.attempts.length - 1]!;
  }
}

/**
 * The identical operations a retry of `record` must not pass unseen, by their latest attempts, none of them settled
 * as made: for a refused repeat, the writes begun before it that may exist (the write it repeated may be made by
 * them) and the other repeats (one retried after all makes the same write); for any other call, the repeats of it
 * begun after it (a repeat, retried after all, makes its write). A plan keeps their rows for its commit and its start
 * marker to check they did not move on, and its retry is not passed beside one of them running in this process.
 */
export function repeatedOpenAttempts(evidence: SessionEvidence, record: AttemptRecord): AttemptRecord[] {
  const own = record.operation;
  if (own === null) return [];
  const repeat = isRefusedRepeat(record);
  const id = repeatIdentity(record.call);
  const origin = originOf(own);
  const open = new Set<OperationRecord>();
  for (const other of evidence.attempts) {
    const operation = other.operation;
    if (operation === null || operation === own || other.call.name !== record.call.name || open.has(operation)) continue;
    if (completionOf(operation) !== null) continue;
    const related = repeat
      ? (originOf(operation) < origin && mayBeRepeated(operation)) || bornRepeat(operation)
      : originOf(operation) > origin && bornRepeat(operation);
    if (related && repeatIdentity(operation.attempts[0]!.call) === id) open.add(operation);
  }
  return [...open].map((operation) => operation.attempts[operation.attempts.length - 1]!);
}
