/**
 * Repeats the in-doubt guard refused (docs/design.md#the-in-doubt-guard), as the evidence pass reads them: which
 * identical writes each stood for, and whether they have been made since, each write made credited to one write
 * owed, so a retry of a repeat is never a second write and no write owed is read as made.
 *
 * A repeat is an operation born refused: its first attempt, and the attempt asked about, refused as `in_doubt`. An
 * operation whose first attempt ran is an intent of its own (a model's parallel identical calls both are), even when a
 * retry of it is refused beside an identical call in doubt.
 */
import { ToolEffect, type SessionEvent, type ToolCall } from '../event/types.js';
import { canonicalJson } from '../json/canonical.js';
import { blocksRepeat, latestRowsIn, refusesIdentical } from '../store/attention.js';
import type { AttemptRecord, OperationRecord, SessionEvidence } from './evidence.js';
import { DENIAL_CATEGORIES, ToolRecoveryStatus, evidenceFactsOf, evidenceRuleFor } from './retry-policy.js';

const refusedInDoubt = (record: AttemptRecord): boolean =>
  record.result?.outcome.status === 'failed' && record.result.outcome.category === 'in_doubt';

/** The evidence table's status of one attempt (a contradiction was refused by the evidence pass already). */
const statusOf = (a: AttemptRecord) => evidenceRuleFor(evidenceFactsOf(a)).status;

/** An operation born refused: its first attempt was refused `in_doubt`. */
const bornRepeat = (operation: OperationRecord): boolean => refusedInDoubt(operation.attempts[0]!);

/** An operation's latest attempt. */
const latestOf = (operation: OperationRecord): AttemptRecord => operation.attempts[operation.attempts.length - 1]!;

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
  return isWrite(operation) && mayExistFrom(operation) !== null;
}

/** A write a host retried from a plan: a repeat refused beside that retry under way stands for its write. */
function retriedFromPlan(operation: OperationRecord): boolean {
  return isWrite(operation) && operation.attempts.some((a, i) => i > 0 && isPlanRetry(a));
}

/** Whether the operation's tool may write, by the effect its first attempt recorded (a read-only one makes no write). */
const isWrite = (operation: OperationRecord): boolean => operation.attempts[0]!.call.operation!.contract.effect !== ToolEffect.ReadOnly;

/** Whether an attempt was denied before its body (a guard, an approver, an operator): its write decided against. */
const denied = (attempt: AttemptRecord): boolean => {
  const outcome = attempt.result?.outcome;
  return outcome?.status === 'failed' && DENIAL_CATEGORIES.has(outcome.category);
};

/** One identical operation in the sweep (IdenticalWrites). */
interface Identical {
  readonly operation: OperationRecord;
  readonly origin: number;
  readonly repeat: boolean;
  /** The seq of the call of its first attempt whose body ran or may have: from then its write may exist. */
  readonly mayExistFrom: number | null;
  /** Its retries made from a plan that never ran their body, each from its call to its result: then under way. */
  readonly retriesUnderWay: readonly (readonly [number, number])[];
  readonly completion: { readonly seq: number; readonly attempt: AttemptRecord } | null;
  /** For a repeat: the writes it stood for when it was refused, fixed then. */
  standsFor?: Identical[];
  /** For a repeat that stood for none: the write settled as made last before its refusal (the guard read it in doubt). */
  race?: AttemptRecord;
  /** The attempt that made the write this operation stands for, and when. */
  madeBy?: AttemptRecord;
  madeAt?: number;
  /** Made by an identical repeat's attempt, not by one of its own. */
  byRepeat?: boolean;
}

type Step = { readonly seq: number; readonly kind: 'begins' | 'refused' | 'made'; readonly op: Identical };

/**
 * Whether `op`'s write was decided against before `seq`: its latest attempt before then denied, once a `not_executed`
 * review had settled that the write was not made (the guard no longer reads it). A retry denied while the write is
 * still in doubt decides nothing: the write may exist, and the guard still reads it in doubt.
 */
function deniedBefore(op: Identical, seq: number): boolean {
  const attempts = op.operation.attempts;
  let latest = -1;
  for (let i = 0; i < attempts.length; i++) if (attempts[i]!.event.seq < seq) latest = i;
  const denial = latest < 0 ? undefined : attempts[latest]!;
  const deniedAt = denial?.resultEvent?.seq;
  if (denial === undefined || deniedAt === undefined || deniedAt >= seq || !denied(denial)) return false;
  // The review the guard's row read at the denial: the latest one since the last attempt whose body ran or may have.
  let ran = latest;
  while (ran >= 0 && statusOf(attempts[ran]!) === ToolRecoveryStatus.NotExecuted) ran -= 1;
  let review: { readonly seq: number; readonly outcome: string } | undefined;
  for (const a of attempts.slice(Math.max(ran, 0), latest + 1)) {
    for (const { review: r, event } of a.reviews) if (event.seq < deniedAt && (review === undefined || event.seq > review.seq)) review = { seq: event.seq, outcome: r.outcome };
  }
  return ran < 0 || review?.outcome === 'not_executed';
}

/**
 * The identical operations of one identity (task, tool, canonical arguments), swept in journal order so each write
 * made is credited to one write owed (docs/design.md#the-in-doubt-guard):
 * - an operation whose write may exist (an attempt ran or may have) is open from then until it is made;
 * - a repeat, when refused, stands for the writes then open, begun before it and not decided against (a denial);
 * - a write made by an operation's own attempt makes that operation's write; made by a repeat (its retry run after
 *   all), it makes the write of the one begun last among those the repeat stood for and not yet made, and so on
 *   through a repeat of a repeat. Two intents (a model's parallel calls) and one repeat's retry made: one of them is
 *   made, the other still owed.
 */
class IdenticalWrites {
  readonly all: Identical[] = [];

  sweep(): void {
    const steps: Step[] = [];
    for (const op of this.all) {
      if (op.mayExistFrom !== null) steps.push({ seq: op.mayExistFrom, kind: 'begins', op });
      if (op.repeat) steps.push({ seq: op.operation.attempts[0]!.resultEvent!.seq, kind: 'refused', op });
      if (op.completion !== null) steps.push({ seq: op.completion.seq, kind: 'made', op });
    }
    steps.sort((a, b) => a.seq - b.seq);
    const open = new Set<Identical>();
    const made: Identical[] = [];
    // The repeats that stand for each write: made once all they stood for are, and so on up a chain of repeats.
    const standers = new Map<Identical, Identical[]>();
    const make = (op: Identical, by: AttemptRecord, seq: number, byRepeat: boolean): void => {
      if (op.madeBy !== undefined) return;
      op.madeBy = by;
      op.madeAt = seq;
      op.byRepeat = byRepeat;
      open.delete(op);
      made.push(op);
      const owed = op.standsFor?.filter((o) => o.madeBy === undefined) ?? [];
      const latest = owed.reduce<Identical | undefined>((last, o) => (last === undefined || o.origin > last.origin ? o : last), undefined);
      if (latest !== undefined) make(latest, by, seq, true);
      for (const repeat of standers.get(op) ?? []) {
        if (repeat.madeBy === undefined && repeat.standsFor!.every((o) => o.madeBy !== undefined)) make(repeat, by, seq, true);
      }
    };
    for (const step of steps) {
      const op = step.op;
      if (step.kind === 'begins') {
        if (op.madeBy === undefined) open.add(op);
      } else if (step.kind === 'refused') {
        // The guard also refuses an identical new operation beside a retry under way that has not run its body yet:
        // the write that retry is making is one the repeat stands for.
        const underWay = this.all.filter((o) => o.madeBy === undefined && !open.has(o) && o.retriesUnderWay.some(([from, to]) => from < op.origin && op.origin < to));
        op.standsFor = [...open, ...underWay].filter((o) => o !== op && o.origin < op.origin && !deniedBefore(o, step.seq));
        for (const o of op.standsFor) standers.set(o, [...(standers.get(o) ?? []), op]);
        if (op.standsFor.length === 0) {
          for (let i = made.length - 1; i >= 0; i--) {
            if (made[i]!.origin < op.origin) {
              op.race = made[i]!.madeBy!;
              break;
            }
          }
        }
      } else {
        make(op, op.completion!.attempt, step.seq, false);
      }
    }
  }

  /**
   * A write not made by its own attempts (its latest one never ran its body) that an identical repeat, retried after
   * all, has made since: a retry of it would make it twice. Its latest attempt is linked to the repeat's attempt.
   */
  linkMadeByRepeats(): void {
    for (const op of this.all) {
      if (op.repeat || op.byRepeat !== true || op.completion !== null) continue;
      const latest = latestOf(op.operation);
      if (statusOf(latest) === ToolRecoveryStatus.NotExecuted) latest.madeByRepeat = op.madeBy!;
    }
    // A repeat whose retry ran or may have, not settled: the writes it stood for may be made by it.
    for (const repeat of this.all) {
      if (!repeat.repeat || repeat.mayExistFrom === null || repeat.madeBy !== undefined) continue;
      // The attempt that ran, or may have: the one to decide on.
      const running = [...repeat.operation.attempts].reverse().find((a) => statusOf(a) !== ToolRecoveryStatus.NotExecuted)!;
      for (const owed of repeat.standsFor ?? []) {
        const latest = latestOf(owed.operation);
        if (owed.madeBy === undefined && statusOf(latest) === ToolRecoveryStatus.NotExecuted) latest.openRepeat = running;
      }
    }
  }

  /**
   * A write decided against (its latest attempt denied) and not made, when the model asked for the same call anew
   * after the denial and that call made its write: a retry of the first is a second write. Linked for the guidance
   * its assessment gives; the retry stays the host's to make.
   */
  linkAskedAnew(): void {
    const anew = this.all.filter((o) => !o.repeat && o.completion !== null && o.madeBy === o.completion.attempt).sort((a, b) => a.origin - b.origin);
    if (anew.length === 0) return;
    for (const op of this.all) {
      if (op.repeat || op.madeBy !== undefined) continue;
      const latest = latestOf(op.operation);
      if (!denied(latest)) continue;
      const deniedAt = latest.resultEvent!.seq;
      let low = 0;
      let high = anew.length;
      while (low < high) {
        const mid = (low + high) >>> 1;
        if (anew[mid]!.origin > deniedAt) high = mid;
        else low = mid + 1;
      }
      if (low < anew.length) latest.askedAnew = anew[low]!.madeBy!;
    }
  }

  /**
   * Whether the write `op`, a refused repeat, stood for has been made (`made`: the attempt that made the last of
   * them, or, for a repeat made through a repeat of it, that one's), or which write it waits on (`open`: the one
   * begun last among those still owed, the likeliest to be what the guard read in doubt). A repeat that stood for
   * none was refused for a write settled between the guard's read and the refusal's commit: made by that one.
   */
  decide(op: Identical): { made?: AttemptRecord; open?: OperationRecord } {
    if (op.byRepeat === true) return { made: op.madeBy! };
    const standsFor = op.standsFor ?? [];
    if (standsFor.length === 0) return op.race === undefined ? {} : { made: op.race };
    let open: Identical | undefined;
    let last: Identical | undefined;
    for (const o of standsFor) {
      if (o.madeBy === undefined) {
        if (open === undefined || o.origin > open.origin) open = o;
      } else if (last === undefined || o.madeAt! > last.madeAt!) last = o;
    }
    return open !== undefined ? { open: open.operation } : { made: last!.madeBy! };
  }
}

/**
 * The latest attempt of a repeat whose retry ran since, or may have, and that is now refused or denied before its
 * body: still a repeat, decided by the writes it stood for (a retry of it, once those are made, is a second write).
 */
function repeatNotMadeSince(record: AttemptRecord): boolean {
  const operation = record.operation;
  return operation !== null && bornRepeat(operation) && latestOf(operation) === record
    && record.result !== null && statusOf(record) === ToolRecoveryStatus.NotExecuted;
}

/** The retries of `operation` made from a plan (the call records its retry) that never ran their body: [call, result). */
function retriesUnderWay(operation: OperationRecord): [number, number][] {
  return operation.attempts.filter((a, i) => i > 0 && isPlanRetry(a) && statusOf(a) === ToolRecoveryStatus.NotExecuted)
    .map((a) => [a.event.seq, a.resultEvent?.seq ?? Number.POSITIVE_INFINITY]);
}

const isPlanRetry = (attempt: AttemptRecord): boolean => (attempt.call.operation?.retry ?? null) !== null;

/** From when the write of `operation` may exist: the call of its first attempt whose body ran or may have. */
function mayExistFrom(operation: OperationRecord): number | null {
  for (const a of operation.attempts) if (statusOf(a) !== ToolRecoveryStatus.NotExecuted) return a.event.seq;
  return null;
}

/**
 * Links each refused repeat to the writes it stood for (IdenticalWrites): `repeatedCompleted` when they have been
 * made, so no retry of the repeat makes one twice; `repeatedOpen` while one is not, for the guidance its assessment
 * gives. Same task, tool and canonical arguments. And the other way (IdenticalWrites.linkMadeByRepeats): a write not
 * made whose repeat, retried, made it since is `madeByRepeat`.
 */
export function linkSettledRepeats(history: readonly SessionEvent[], attempts: readonly AttemptRecord[], operations: Iterable<OperationRecord>): void {
  const all = [...operations];
  // Canonical arguments only for operations of the task and tool of a repeat, or of a write decided against (whose
  // same call asked anew is noted): a long history with one refusal pays for its few candidates, not for every one.
  const candidates = all.filter((o) => bornRepeat(o) || denied(latestOf(o)));
  if (candidates.length === 0) return;
  const asked = new Set(candidates.map((r) => JSON.stringify([r.taskId, r.attempts[0]!.call.name])));
  const identical = new Map<string, IdenticalWrites>();
  const entries = new Map<OperationRecord, { readonly entry: Identical; readonly writes: IdenticalWrites }>();
  for (const operation of all) {
    const first = operation.attempts[0]!.call;
    if (!asked.has(JSON.stringify([operation.taskId, first.name]))) continue;
    const id = repeatIdentity(first);
    if (id === null) continue;
    const writes = identical.get(id) ?? new IdenticalWrites();
    identical.set(id, writes);
    // A read-only operation makes no write: a repeat of one is still decided, by the writes it stood for.
    const writing = isWrite(operation);
    const entry: Identical = {
      operation, origin: originOf(operation), repeat: bornRepeat(operation),
      mayExistFrom: writing ? mayExistFrom(operation) : null, completion: writing ? completionOf(operation) : null,
      retriesUnderWay: writing ? retriesUnderWay(operation) : [],
    };
    writes.all.push(entry);
    entries.set(operation, { entry, writes });
  }
  for (const writes of identical.values()) {
    writes.sweep();
    writes.linkMadeByRepeats();
    writes.linkAskedAnew();
  }
  for (const record of attempts) {
    if (!isRefusedRepeat(record) && !repeatNotMadeSince(record)) continue;
    const found = entries.get(record.operation!);
    const decided = found?.writes.decide(found.entry);
    if (decided?.made !== undefined) record.repeatedCompleted = decided.made;
    else if (decided?.open !== undefined) record.repeatedOpen = latestOf(decided.open);
  }
  linkWaiting(history, attempts, entries);
}

/**
 * A write not made, waiting on an identical one (a repeat waiting on the write it repeats, or a write on its repeat's
 * retry): `waitsOn` is the latest attempt of an identical operation whose row, as the journal makes it, refuses a retry
 * of it at the in-doubt guard (refusesIdentical: in doubt, or may still be running, or its retry due). A retry of it
 * now would only be refused, so the retry table says to decide on that one first.
 */
function linkWaiting(history: readonly SessionEvent[], attempts: readonly AttemptRecord[], entries: ReadonlyMap<OperationRecord, { readonly writes: IdenticalWrites }>): void {
  const waiting = attempts.filter((r) => (r.repeatedOpen !== undefined || r.openRepeat !== undefined) && latestOf(r.operation!) === r);
  if (waiting.length === 0) return;
  const groups = new Set(waiting.map((r) => entries.get(r.operation!)!.writes));
  const rows = latestRowsIn(history, [...groups].flatMap((g) => g.all.map((o) => latestOf(o.operation).call.id)));
  // Per identity, the operations whose row blocks a repeat at all: a handful, however many identical calls there are.
  const blocking = new Map<IdenticalWrites, OperationRecord[]>();
  for (const g of groups) blocking.set(g, g.all.map((o) => o.operation).filter((o) => { const row = rows.get(latestOf(o).call.id); return row !== undefined && blocksRepeat(row); }));
  for (const record of waiting) {
    const own = rows.get(record.call.id);
    const refuses = (o: OperationRecord) => o !== record.operation && refusesIdentical(rows.get(latestOf(o).call.id)!, own);
    const candidates = blocking.get(entries.get(record.operation!)!.writes)!;
    // The write it names first (the one it repeats, or its repeat's retry), then any other the guard would read.
    const named = [record.repeatedOpen?.operation, record.openRepeat?.operation].find((o) => o != null && candidates.includes(o) && refuses(o));
    const found = named ?? candidates.find(refuses);
    if (found !== undefined) record.waitsOn = latestOf(found);
  }
}

/**
 * The identical operations a retry of `record` must not pass unseen, by their latest attempts, none of them settled
 * as made: for a refused repeat, the writes begun before it that may exist (the write it repeated may be made by
 * them) or that a host retried from a plan (it may have been refused beside that retry), and the other repeats (one
 * retried after all makes the same write); for any other call, the repeats of it begun after it (a repeat, retried
 * after all, makes its write). A plan keeps their rows for its commit and its start
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
      ? (originOf(operation) < origin && (mayBeRepeated(operation) || retriedFromPlan(operation))) || bornRepeat(operation)
      : originOf(operation) > origin && bornRepeat(operation);
    if (related && repeatIdentity(operation.attempts[0]!.call) === id) open.add(operation);
  }
  return [...open].map(latestOf);
}
