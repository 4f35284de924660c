/**
 * The attention index (docs/design.md#the-attention-index): one row per operation, its latest attempt's standing,
 * kept by the commit transaction from the events it writes. The queue and the in-doubt guard read it instead of
 * loading journals. Pure functions only; the backends store the rows.
 */
import { InvalidInputError, JournalCorruptError, JsonParseError, WireDecodeError } from '../errors.js';
import { decodeEventText, recordedAtText } from '../event/codec.js';
import { TOOL_EFFECTS, ToolEffect, type SessionEvent, type ToolReviewOutcome } from '../event/types.js';
import type { SessionId, TaskId } from '../ids.js';
import { jsonDigest } from '../json/canonical.js';
import { STORE_DEFAULTS } from '../limits.js';
import { DENIAL_CATEGORIES, evidenceRuleFor } from '../tool/retry-policy.js';
import { ATTENTION_STATUSES, type AttentionRow, type AttentionScan, type AttentionStatus, type EventRow, type JournalBackend, type SessionRow } from './rows.js';
import { verifyJournal } from './verify.js';
import type { CallProgress } from './inbox-rows.js';
import type { AttentionItem, AttentionQuery } from './types.js';
import { describeSetting } from '../text.js';

/** The statuses of an outcome nobody has settled: none seen yet, or one that stays uncertain. */
export const OPEN_ATTENTION_STATUSES: readonly AttentionStatus[] = ['no_result', 'outcome_unknown'];

/** The statuses an earlier attempt leaves for its retries to carry, with their age (AttentionRow.pendingSince). */
const PENDING: readonly AttentionStatus[] = ['outcome_unknown', 'reviewed_not_executed'];

/**
 * The statuses the queue lists unless told otherwise: the open ones, and an operation a review says did not happen,
 * whose write is still to be made and which nothing retries until a host does (a resumed run, or prepareToolRetry)
 * (docs/design.md#the-attention-index).
 */
export const QUEUE_ATTENTION_STATUSES: readonly AttentionStatus[] = [...OPEN_ATTENTION_STATUSES, 'reviewed_not_executed'];

export const ATTENTION_PAGE = { defaultLimit: 100, maxLimit: 1000 } as const;

/** SHA-256 of the canonical JSON of a call's arguments: what the in-doubt guard compares. */
export function argumentsDigest(args: unknown): string {
  return jsonDigest(args);
}

const ms = (text: string | undefined): number | null => (text === undefined ? null : Date.parse(text));

/** The status a recorded result gives, by the same evidence table recovery uses (a contradiction counts as unknown). */
function statusOfResult(row: AttentionRow, outcome: Parameters<typeof evidenceRuleFor>[0]['result']): AttentionStatus {
  const rule = evidenceRuleFor({ flagged: row.startMarker, marker: row.started, result: outcome });
  if (rule.status === 'completed') return 'completed';
  if (rule.status === 'not_executed') return 'not_executed';
  return 'outcome_unknown';
}

/**
 * The call ids whose stored rows a commit of these events needs: those its markers, results and reviews name, except
 * a call recorded (with an operation) earlier in the same batch, whose row the batch itself writes: attentionWrites
 * replaces whatever row that id had before reaching the marker, so the transaction need not read it.
 */
export function attentionCallIds(events: readonly { readonly kind: SessionEvent['kind'] }[]): string[] {
  const ids: unknown[] = [];
  const recorded = new Set<unknown>();
  for (const e of events) {
    // Drafts are not checked yet: tolerate anything here, the commit refuses it with a typed error afterwards.
    const k = (e as { kind?: SessionEvent['kind'] } | null)?.kind;
    if (k?.type === 'tool_call') {
      const call = k.call as { id?: unknown; operation?: unknown } | undefined;
      if (call?.operation) recorded.add(call.id);
    } else if (k?.type === 'tool_started') ids.push(k.callId);
    else if (k?.type === 'tool_result') ids.push((k.result as { callId?: unknown } | undefined)?.callId);
    else if (k?.type === 'tool_review') ids.push((k.review as { callId?: unknown } | undefined)?.callId);
  }
  return ids.filter((id): id is string => typeof id === 'string' && !recorded.has(id));
}

/**
 * The rows a batch of chained events changes: a call with an operation starts (or replaces) its operation's row, a
 * marker and a result update the row whose latest attempt they name, and a review settles it (resolveAttention).
 * `existing` are the stored rows of the calls the batch names; a marker, result or review of a call that is no
 * longer its operation's latest attempt changes nothing.
 */
export function attentionWrites(sessionId: SessionId, events: readonly SessionEvent[], existing: readonly AttentionRow[] = []): AttentionRow[] {
  const byCall = new Map<string, AttentionRow>();
  for (const row of existing) byCall.set(row.callId, row);
  const changed = new Map<string, AttentionRow>();
  const put = (next: AttentionRow) => {
    // Only an unsettled standing has an age of its own (pendingSince), and the retry of a due write whose body is
    // starting keeps it until its result says whether the body ran; anything else is aged by its activity.
    const keeps = PENDING.includes(next.status) || (next.status === 'no_result' && next.started);
    const row = next.pendingSince == null || keeps ? next : { ...next, pendingSince: null };
    byCall.set(row.callId, row);
    changed.set(JSON.stringify([row.taskId, row.key]), row);
  };
  for (const e of events) {
    const at = ms(e.recordedAt);
    const k = e.kind;
    if (k.type === 'tool_call') {
      const op = k.call.operation;
      if (!op) continue;
      const before = changed.get(JSON.stringify([op.taskId, op.key])) ?? existing.find((r) => r.taskId === op.taskId && r.key === op.key);
      if (before) byCall.delete(before.callId);
      // The `not_executed` review a retry plan carried settles the attempt it retries, as one journaled before it would
      // (docs/design.md#a-plans-review-is-journaled-with-its-retry): only an open outcome, as the evidence pass admits it.
      const carried = op.retry?.review?.outcome === 'not_executed' && before?.callId === op.retry.callId && outcomeOpen(before);
      const previous = carried ? resolveAttention(before, { outcome: 'not_executed', at }) : before;
      // A retry of an operation whose outcome is open (a free retry of an idempotent or read-only call, no review)
      // keeps it open until an attempt succeeds or a review settles it: a retry refused before its body says
      // nothing about what the earlier attempt did.
      const stillOpen = previous !== undefined && outcomeOpen(previous);
      // So does the write a `not_executed` review left due, until an attempt starts its body, or is denied.
      const stillDue = previous?.status === 'reviewed_not_executed';
      put({
        sessionId,
        taskId: op.taskId,
        key: op.key,
        callId: k.call.id,
        tool: k.call.name,
        effect: op.contract.effect,
        revision: op.contract.revision,
        argsDigest: argumentsDigest(k.call.arguments),
        startMarker: op.startMarker === true,
        started: false,
        status: stillOpen ? 'outcome_unknown' : stillDue ? 'reviewed_not_executed' : 'no_result',
        category: null,
        calledAt: at,
        startedAt: null,
        endedAt: null,
        updatedAt: at,
        // The standing the earlier attempt left goes on, and so does its age: a retry refused before its body every few
        // minutes must not keep a write that is still due, or an outcome still open, younger than the age filter.
        // Never null for a carried standing whose events have a time (a journal from before times, or from Jingwei
        // for Rust, has none for its attempts; then the review's time, or this retry's): it also marks the row carried.
        pendingSince: stillOpen || stillDue ? attentionAge(previous) ?? previous.updatedAt ?? at : null,
      });
    } else if (k.type === 'tool_started') {
      const row = byCall.get(k.callId);
      // A retry of a reviewed operation that starts its body is that body's outcome from here on, aged from its start
      // (attentionAge); it keeps the time its operation's standing began (pendingSince), for a result that says the
      // body was never called.
      if (row) put({ ...row, started: true, startedAt: at, updatedAt: at, ...(row.status === 'reviewed_not_executed' ? { status: 'no_result' as const } : {}) });
    } else if (k.type === 'tool_result') {
      const row = byCall.get(k.result.callId);
      if (!row) continue;
      const outcome = k.result.outcome;
      const status = statusOfResult(row, outcome);
      // Open before its result (an earlier attempt's outcome is unknown): only a success settles it. Due before it (a
      // review said the earlier attempt did not happen; or its retry's start marker is written, and the time it became
      // due kept): a retry whose body never ran leaves it due, unless a person or a policy denied it. Either keeps its age.
      const wasDue = row.status === 'reviewed_not_executed' || (row.status === 'no_result' && row.started && row.pendingSince != null);
      const next = row.status === 'outcome_unknown' && status !== 'completed' ? 'outcome_unknown'
        : wasDue && status === 'not_executed' && !(outcome.status === 'failed' && DENIAL_CATEGORIES.has(outcome.category)) ? 'reviewed_not_executed'
        : status;
      put({
        ...row,
        status: next,
        // Aged from this result once a body ran; kept while no attempt did (put drops it once the operation is settled).
        pendingSince: status === 'not_executed' ? row.pendingSince ?? null : null,
        category: outcome.status === 'failed' ? outcome.category : null,
        endedAt: at,
        updatedAt: at,
      });
    } else if (k.type === 'tool_review') {
      const row = byCall.get(k.review.callId);
      if (!row) continue;
      const resolved = resolveAttention(row, { outcome: k.review.outcome, at });
      if (resolved !== row) put(resolved);
    }
  }
  return [...changed.values()];
}

/**
 * How far `callId` has got as the attention row the events of `history` make says, as a store holding that history
 * keeps it: from the events of every attempt of its operation, since an earlier attempt's open outcome stays open
 * across a retry. Null when the call is not its operation's latest attempt in `history` (or has no operation).
 */
export function callProgressIn(history: readonly SessionEvent[], callId: string): CallProgress | null {
  return callsProgressIn(history, [callId]).get(callId) ?? null;
}

/**
 * callProgressIn for several calls, in one pass over `history` however many they are (a retry plan keeps the rows of
 * every related identical operation): only the calls that are their operation's latest attempt are in the map.
 */
export function callsProgressIn(history: readonly SessionEvent[], callIds: readonly string[]): Map<string, CallProgress> {
  const progress = new Map<string, CallProgress>();
  for (const [callId, row] of latestRowsIn(history, callIds)) progress.set(callId, { started: row.started, status: row.status });
  return progress;
}

/** The attention rows `history` makes for the calls of `callIds` that are their operation's latest attempt. */
export function latestRowsIn(history: readonly SessionEvent[], callIds: readonly string[]): Map<string, AttentionRow> {
  const wanted = new Set(callIds);
  const opOf = (taskId: string, key: string) => JSON.stringify([taskId, key]);
  const ops = new Set<string>();
  for (const e of history) {
    const k = e.kind;
    if (k.type === 'tool_call' && wanted.has(k.call.id) && k.call.operation) ops.add(opOf(k.call.operation.taskId, k.call.operation.key));
  }
  const attempts = new Set<string>(wanted);
  for (const e of history) {
    const k = e.kind;
    if (k.type === 'tool_call' && k.call.operation && ops.has(opOf(k.call.operation.taskId, k.call.operation.key))) attempts.add(k.call.id);
  }
  const own = history.filter((e) => {
    const k = e.kind;
    return (k.type === 'tool_call' && attempts.has(k.call.id)) || (k.type === 'tool_started' && attempts.has(k.callId))
      || (k.type === 'tool_result' && attempts.has(k.result.callId)) || (k.type === 'tool_review' && attempts.has(k.review.callId));
  });
  const rows = new Map<string, AttentionRow>();
  for (const row of attentionWrites(own[0]?.sessionId ?? ('' as SessionId), own)) if (wanted.has(row.callId)) rows.set(row.callId, row);
  return rows;
}

/**
 * The rows a session's stored journal makes, for an upgrade (docs/design.md#an-upgrade-computes-the-attention-index):
 * from its verified events, or null when it does not verify (a corrupt journal, which `jingwei verify` reports): an
 * event edited or damaged since its commit would make rows that hide or misstate a call in doubt, so the upgrade keeps
 * the rows the commits kept, and only a session with none (a store from before the index) gets attentionOfJournal's.
 * `session` and `rows` turn the stored values into rows here: one no row can hold (past 2^53) is corruption too.
 */
export function attentionOfStoredJournal(sessionId: SessionId, session: () => SessionRow | undefined, rows: () => Iterable<EventRow>): AttentionRow[] | null {
  try {
    return attentionWrites(sessionId, verifyJournal(sessionId, session(), rows()));
  } catch (error) {
    if (error instanceof JournalCorruptError) return null;
    throw error;
  }
}

/**
 * The rows a corrupt journal makes, for a session whose commits kept none (a store upgraded from a version that kept
 * no index; attentionOfStoredJournal), from the events that still decode. An event left out may have been the one that
 * settled a call, or its start marker: every call without a success is listed as in doubt, started, so the queue
 * shows it and the guard refuses to repeat it until a person has looked.
 */
export function attentionOfJournal(sessionId: SessionId, bodies: Iterable<string>): AttentionRow[] {
  const events: SessionEvent[] = [];
  for (const body of bodies) {
    try {
      events.push(decodeEventText(body));
    } catch (error) {
      if (!(error instanceof JsonParseError || error instanceof WireDecodeError)) throw error;
    }
  }
  return attentionWrites(sessionId, events).map((row) => (row.status === 'completed' ? row : { ...row, started: true, status: 'outcome_unknown' }));
}

/** The statuses a review gave: what a later review of the same call may change again. */
const REVIEWED: readonly AttentionStatus[] = ['resolved', 'reviewed_not_executed'];

/**
 * The row after a review of its call (docs/design.md#the-attention-index). The latest review is the one recovery reads:
 * `completed` settles an open or reviewed outcome for good (`resolved`), and one whose latest attempt never ran its
 * body (the evidence admits that review only where an earlier attempt may have made the write); `not_executed` settles
 * an open one as not happened, with its write still to be made (`reviewed_not_executed`, which the queue lists until a
 * retry replaces the row); `uncertain` over a reviewed one opens it again (`outcome_unknown`: a reconciler that could not check a person's
 * `not_executed`, say). Any other row stays as it is under a `not_executed` or `uncertain` review, and so does
 * `resolved` under a `not_executed` review (the evidence pass refuses a review after a `completed` one).
 */
export function resolveAttention(row: AttentionRow, review: { readonly outcome: ToolReviewOutcome; readonly at: number | null }): AttentionRow {
  const to = (status: AttentionStatus): AttentionRow => (status === row.status ? row : { ...row, status, updatedAt: review.at ?? row.updatedAt });
  if (review.outcome === 'uncertain') return REVIEWED.includes(row.status) ? to('outcome_unknown') : row;
  const open = OPEN_ATTENTION_STATUSES.includes(row.status);
  // Also over a retry denied or refused before its body: the review is about the write, which was made after all.
  if (review.outcome === 'completed') return open || row.status === 'reviewed_not_executed' || row.status === 'not_executed' ? to('resolved') : row;
  return open ? to('reviewed_not_executed') : row;
}

/**
 * Whether the row's operation has an outcome that is unknown and unresolved: its latest attempt's body started, or
 * may have, and no result says what happened; or an earlier attempt's did, and no attempt since succeeded.
 */
export function outcomeOpen(row: AttentionRow): boolean {
  if (row.status === 'outcome_unknown') return true;
  if (row.status !== 'no_result') return false;
  return evidenceRuleFor({ flagged: row.startMarker, marker: row.started, result: null }).status === 'outcome_unknown';
}

/**
 * Whether the row's operation keeps journal room for a review (docs/design.md#a-result-always-has-room): its outcome
 * is open, or a review says its write was not made and its retry is due, which a later review (a person correcting
 * it, the reconciler's `completed` answer) may still settle the other way.
 */
export function keepsReviewRoom(row: AttentionRow): boolean {
  return outcomeOpen(row) || row.status === 'reviewed_not_executed';
}

/** Whether the row's operation is in doubt for a person: an unknown or non-idempotent tool whose outcome is open. */
export function isInDoubt(row: AttentionRow): boolean {
  return (row.effect === ToolEffect.Unknown || row.effect === ToolEffect.NonIdempotent) && outcomeOpen(row);
}

/**
 * Whether the row's operation keeps the in-doubt guard shut for an identical new one (docs/design.md#the-in-doubt-guard):
 * its recorded effect may write, and its outcome is open, or a review says it did not happen and its retry is still due
 * (`reviewed_not_executed`): a new operation beside that retry would make the write twice. An idempotent tool counts:
 * its deduplication is keyed by operation, so a new operation, with a new key, writes again.
 */
export function blocksRepeat(row: AttentionRow): boolean {
  return row.effect !== ToolEffect.ReadOnly && (outcomeOpen(row) || row.status === 'reviewed_not_executed');
}

/**
 * Whether `row`, of an operation identical to the asking one (same task, tool and arguments, another key), refuses it
 * at the in-doubt guard: it blocks a repeat, unless it is only running in this process (`running`), or both it and
 * the asking operation's own row (`own`) are writes a review left due: two identical writes meant, one not a repeat
 * of the other. A running call that carries an earlier attempt's standing (a retry under way of a write in doubt or
 * due, `pendingSince`) is that write, not only running: an identical new operation beside it would make it twice. So
 * is a retry made from a plan that this host has under way (`retrying`), while no result is journaled for it, even
 * one whose earlier attempt provably never ran and that waits for its approver: it is about to make the write.
 */
export function refusesIdentical(row: AttentionRow, own: AttentionRow | undefined, running?: ReadonlySet<string>, retrying?: ReadonlySet<string>): boolean {
  if (retrying?.has(row.callId) === true && row.effect !== ToolEffect.ReadOnly && row.status === 'no_result') return true;
  const onlyRunning = running?.has(row.callId) === true && row.status !== 'reviewed_not_executed' && row.pendingSince == null && retrying?.has(row.callId) !== true;
  return blocksRepeat(row) && !onlyRunning && !(own?.status === 'reviewed_not_executed' && row.status === 'reviewed_not_executed');
}

/** The row as the public queue shows it: times as recorded-time text. */
export function attentionItem(row: AttentionRow): AttentionItem {
  const text = (t: number | null) => (t === null ? null : recordedAtText(t));
  return {
    sessionId: row.sessionId,
    taskId: row.taskId as TaskId,
    key: row.key,
    callId: row.callId,
    tool: row.tool,
    effect: row.effect,
    revision: row.revision,
    status: row.status,
    started: row.started,
    category: row.category,
    inDoubt: isInDoubt(row),
    calledAt: text(row.calledAt),
    startedAt: text(row.startedAt),
    endedAt: text(row.endedAt),
    pendingSince: text(carriedAge(row)),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Queries

const encodeCursor = (row: AttentionRow): string => Buffer.from(JSON.stringify([row.sessionId, row.taskId, row.key]), 'utf8').toString('base64url');

function decodeCursor(cursor: string): [string, string, string] {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (Array.isArray(value) && value.length === 3 && value.every((v) => typeof v === 'string')) return value as [string, string, string];
  } catch {
    // reported below
  }
  throw new InvalidInputError('cursor', 'is not a cursor this store handed out');
}

/** Checks a public query and turns it into the backend's scan (`now`: the store's clock, for the age filter). */
export function attentionScan(query: AttentionQuery, now: number): AttentionScan {
  const q = query ?? {};
  const statuses = q.status === undefined ? QUEUE_ATTENTION_STATUSES : Array.isArray(q.status) ? q.status : [q.status];
  for (const s of statuses) {
    if (!ATTENTION_STATUSES.includes(s as AttentionStatus)) {
      throw new InvalidInputError('status', `unknown status ${JSON.stringify(s)}, expected one of ${ATTENTION_STATUSES.join(', ')}`);
    }
  }
  if (statuses.length === 0) throw new InvalidInputError('status', 'names no status');
  if (q.effect !== undefined && !TOOL_EFFECTS.includes(q.effect)) {
    throw new InvalidInputError('effect', `unknown effect ${JSON.stringify(q.effect)}, expected one of ${TOOL_EFFECTS.join(', ')}`);
  }
  const limit = q.limit ?? ATTENTION_PAGE.defaultLimit;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > ATTENTION_PAGE.maxLimit) {
    throw new InvalidInputError('limit', `must be an integer from 1 to ${ATTENTION_PAGE.maxLimit}, got ${describeSetting(limit)}`);
  }
  if (q.olderThanMs !== undefined && (!Number.isSafeInteger(q.olderThanMs) || q.olderThanMs < 0)) {
    throw new InvalidInputError('olderThanMs', `must be a non-negative integer, got ${describeSetting(q.olderThanMs)}`);
  }
  for (const field of ['sessionId', 'tool'] as const) {
    const v = q[field];
    if (v !== undefined && (typeof v !== 'string' || v.length === 0)) throw new InvalidInputError(field, 'must be non-empty text');
  }
  return {
    ...(q.sessionId !== undefined ? { sessionId: q.sessionId } : {}),
    ...(q.tool !== undefined ? { tool: q.tool } : {}),
    ...(q.effect !== undefined ? { effect: q.effect } : {}),
    statuses: [...new Set(statuses)],
    ...(q.olderThanMs !== undefined ? { activeAtMost: now - q.olderThanMs, orActiveAfter: now + STORE_DEFAULTS.clockAheadMs } : {}),
    ...(q.cursor !== undefined && q.cursor !== null ? { after: decodeCursor(q.cursor) } : {}),
    limit: limit + 1,
  };
}

/** The page a backend's scan (asked for one row more than the page) gives. */
export function attentionPage(rows: readonly AttentionRow[], scan: AttentionScan): { rows: AttentionRow[]; next: string | null } {
  const size = scan.limit - 1;
  const page = rows.slice(0, size);
  return { rows: page, next: rows.length > size && page.length > 0 ? encodeCursor(page[page.length - 1]!) : null };
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** (sessionId, taskId, key) order, by UTF-16 code units as the SQL backends' binary collation orders ASCII ids. */
export function compareAttention(a: AttentionRow, b: AttentionRow): number {
  return compare(a.sessionId, b.sessionId) || compare(a.taskId, b.taskId) || compare(a.key, b.key);
}

/**
 * When the row's operation was last active, for the queue's age filter: its latest attempt's result, or its start
 * marker before the result, or its call before the marker (times never decrease, so that is the latest of the three).
 * Aged from the call alone, a body that started a moment ago after a long wait for an approver passed `--older-than`
 * as an item to check in the outside system while its owner was at work on it; so did a deadline its owner recorded a
 * moment ago against a body that may still be running.
 */
export function attentionActiveAt(row: Pick<AttentionRow, 'calledAt' | 'startedAt' | 'endedAt'>): number | null {
  return row.endedAt ?? row.startedAt ?? row.calledAt;
}

/**
 * How old the row's item is, for the age filter: since its unsettled standing began, where attempts that never
 * started their body carried it over from an earlier one (`pendingSince`), else since its latest attempt's last activity.
 */
export function attentionAge(row: Pick<AttentionRow, 'calledAt' | 'startedAt' | 'endedAt' | 'pendingSince' | 'started'>): number | null {
  return carriedAge(row) ?? attentionActiveAt(row);
}

/** The row's `pendingSince` as its age and its item read it: none while a body has started and has no result. */
function carriedAge(row: Pick<AttentionRow, 'endedAt' | 'pendingSince' | 'started'>): number | null {
  // A body at work is aged from its start marker, whatever it is a retry of: it may be making the write.
  return row.started && row.endedAt === null ? null : row.pendingSince ?? null;
}

/** Whether a row passes a scan's filters: the reference for a backend that filters in memory. */
export function matchesScan(row: AttentionRow, scan: AttentionScan): boolean {
  if (scan.sessionId !== undefined && row.sessionId !== scan.sessionId) return false;
  if (scan.tool !== undefined && row.tool !== scan.tool) return false;
  if (scan.effect !== undefined && row.effect !== scan.effect) return false;
  if (!scan.statuses.includes(row.status)) return false;
  if (scan.activeAtMost !== undefined) {
    const at = attentionAge(row);
    if (at === null) return false;
    if (at > scan.activeAtMost && (scan.orActiveAfter === undefined || at <= scan.orActiveAfter)) return false;
  }
  if (scan.after) {
    const [s, t, k] = scan.after;
    const c = compare(row.sessionId, s) || compare(row.taskId, t) || compare(row.key, k);
    if (c <= 0) return false;
  }
  return true;
}

/** The attention rows of one session with one of `statuses` (every status by default), read a page at a time. */
export async function allAttentionRows(backend: JournalBackend, sessionId: SessionId, statuses: readonly AttentionStatus[] = ATTENTION_STATUSES): Promise<AttentionRow[]> {
  const rows: AttentionRow[] = [];
  const limit = ATTENTION_PAGE.maxLimit;
  for (let after: readonly [string, string, string] | undefined; ;) {
    const page = await backend.scanAttention!({ sessionId, statuses, limit, ...(after ? { after } : {}) });
    rows.push(...page);
    if (page.length < limit) return rows;
    const last = page[page.length - 1]!;
    after = [last.sessionId, last.taskId, last.key];
  }
}
