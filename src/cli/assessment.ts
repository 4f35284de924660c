/**
 * How the CLI and the demo show a session assessment: which calls need attention, the table of calls, and for one
 * call the rows of the retry policy that apply. The decisions are the library's (assessSession); this
 * module only names them for people.
 */
import { externalIdempotencyKey, operationOriginIn } from '../tool/idempotency.js';
import { finishedRunOf } from '../agent/run-journal.js';
import { bodyCouldOutlive, bodyEndOf, lateEndText } from '../tool/late-bodies.js';
import { overtakingEvent } from '../tool/inbox-review.js';
import type { SessionEvent, ToolCall, ToolResult, ToolReviewRecord } from '../event/types.js';
import type { SessionAssessment, ToolCallAssessment } from '../tool/assess.js';
import { evidenceRuleById, retryRuleById, stoppedBeforeBody, type EvidenceRuleId, type RetryRuleId } from '../tool/retry-policy.js';
import { clip, durationText, safe, shortId, table, timeText, type Column } from './format.js';
import type { Style } from './io.js';
import type { DecisionRow as InboxDecisionRow } from '../store/inbox-rows.js';
import { decisionInbox } from '../store/inbox.js';
import { JournalStore, type CallInFlight } from '../store/journal-store.js';
import type { AttentionItem, SessionStore } from '../store/types.js';
import { STORE_DEFAULTS } from '../limits.js';
import { JournalCorruptError } from '../errors.js';

/** Why a call may still be running, for a person: what the inbox would refuse a review of. */
export function runningText(running: CallInFlight): string {
  const why = running === 'no_result' ? 'no result is journaled' : 'its result records that it was interrupted while its body ran, and no end of that body is journaled';
  return `the call may still be running: the host that made it holds the session with a live lease and ${why}. ` +
    'What the outside system shows now can change before it ends; review it once its host has recorded a result or the end of its body, or has stopped (its lease runs out)';
}

/**
 * What an operator who approves is told besides "the host uses it on the next attempt": an approval, unlike a denial,
 * is superseded when the host's approver answers that attempt before the approval is read (docs/design.md#durable-approvals).
 */
export const APPROVER_FIRST = ', unless the host\'s approver answers that attempt first';

/**
 * A call needs attention when its outcome is in doubt or it was interrupted before anyone saw an answer
 * (docs/design.md#attention-means-attention); a failure recorded before the body and delivered to its caller does
 * not, even when a retry would be allowed: the caller has seen it and decided (`handled` counts those).
 */
export interface Attention {
  readonly total: number;
  readonly needsReview: number;
  readonly retryAllowed: number;
  /** Failures recorded before the body and delivered to the caller: shown, not pending work. */
  readonly handled: number;
}

export function attentionOf(assessment: SessionAssessment): Attention {
  let needsReview = 0;
  let retryAllowed = 0;
  let handled = 0;
  for (const c of assessment.calls) {
    if (c.attention === 'none') {
      if (c.nextStep === 'retry_allowed') handled += 1;
      continue;
    }
    if (c.nextStep === 'needs_review') needsReview += 1;
    else retryAllowed += 1;
  }
  return { total: needsReview + retryAllowed, needsReview, retryAllowed, handled };
}

/** "2 (1 needs_review, 1 retry_allowed)", or "0". */
export function attentionText(a: Attention): string {
  const parts: string[] = [];
  if (a.needsReview > 0) parts.push(`${a.needsReview} needs_review`);
  if (a.retryAllowed > 0) parts.push(`${a.retryAllowed} retry_allowed`);
  return parts.length === 0 ? '0' : `${a.total} (${parts.join(', ')})`;
}

export function colourStep(step: string, style: Style): string {
  switch (step) {
    case 'needs_review':
      return style.yellow(step);
    case 'retry_allowed':
      return style.cyan(step);
    case 'completed':
      return style.green(step);
    default:
      return style.dim(step);
  }
}

export function colourStatus(status: string, style: Style): string {
  switch (status) {
    case 'outcome_unknown':
      return style.yellow(status);
    case 'not_executed':
      return style.cyan(status);
    default:
      return style.green(status);
  }
}

export const CALL_COLUMNS: readonly Column[] = [
  { header: 'CALL' },
  { header: 'TOOL' },
  { header: 'EFFECT' },
  { header: 'STATUS' },
  { header: 'NEXT STEP' },
  { header: 'WHY' },
];

export function callRow(c: ToolCallAssessment, style: Style): string[] {
  return [shortId(c.callId), safe(c.name), c.effect ?? 'legacy', colourStatus(c.status, style), colourStep(c.nextStep, style), safe(c.reason)];
}

export function callTable(calls: readonly ToolCallAssessment[], style: Style, options: { width?: number; indent?: string } = {}): string {
  return table(CALL_COLUMNS, calls.map((c) => callRow(c, style)), style, options);
}

// ---------------------------------------------------------------------------------------------------------------
// The rows of the retry policy that decided a call (src/tool/retry-policy.ts): shown, never restated here

export interface DecisionRow {
  /** `evidence/<id>` or `retry/<id>`: the table and its row. */
  readonly rule: string;
  readonly condition: string;
  readonly explanation: string;
}

const evidenceRow = (id: EvidenceRuleId): DecisionRow => {
  const r = evidenceRuleById(id);
  return { rule: `evidence/${r.id}`, condition: r.condition, explanation: r.explanation };
};
const retryRow = (id: RetryRuleId): DecisionRow => {
  const r = retryRuleById(id);
  return { rule: `retry/${r.id}`, condition: r.condition, explanation: r.explanation };
};

/**
 * The rows that decide a call, given what assessSession said about it (null: the call's own result is a success):
 * what the journal proves (the evidence row; not shown when the call's place in its operation decides) and what may
 * be done (the retry row).
 */
export function decisionRows(assessed: ToolCallAssessment | null): DecisionRow[] {
  if (assessed === null) return [evidenceRow('succeeded'), retryRow('succeeded')];
  if (retryRuleById(assessed.rule).position) return [retryRow(assessed.rule)];
  return [evidenceRow(assessed.evidenceRule), retryRow(assessed.rule)];
}

/** What the host may do next about `call` of the session `history`, in one paragraph. */
export function nextStepAdvice(sessionId: string, history: readonly SessionEvent[], call: ToolCall, assessed: ToolCallAssessment | null): string {
  if (assessed === null) return 'Nothing to do: the call succeeded. Never retry it.';
  const op = call.operation;
  // The operation's origin, which its external key is derived from.
  const operationOrigin = op ? operationOriginIn(history, op) : undefined;
  const reference = op && operationOrigin !== undefined ? externalIdempotencyKey({ sessionId, operationOrigin, operation: op }) : undefined;
  switch (assessed.nextStep) {
    case 'completed':
      if (assessed.rule === 'reviewed_completed' && assessed.review !== null) {
        return `Nothing to do: a completed review by ${clip(assessed.review.actor, 60)} resolved this call for good. Never retry it.`;
      }
      if (assessed.rule === 'repeat_of_completed') {
        return 'Nothing to do: the in-doubt guard refused this call as a repeat, and the identical write it repeated has been made (the reason names the call). Never retry it.';
      }
      return 'Nothing to do: another attempt of this operation succeeded. Never retry it.';
    case 'superseded':
      if (assessed.rule === 'identical_in_doubt') {
        return 'Decide on the identical call the reason names first: while it is in doubt, running, or its retry is due, the in-doubt guard refuses a retry of this one.';
      }
      return 'Decide on the newest attempt of this operation instead (it is listed below).';
    case 'legacy':
      return 'This call cannot be retried (it has no stable operation key). Reconcile it with the external system by hand.';
    case 'retry_allowed': {
      // A finished run's model read this call's result and answered: no resume and no startup routine retries it.
      const run = op ? finishedRunOf(history, op.taskId, op.key) : null;
      return (
        `A host may prepare one retry: prepareToolRetry(history, '${call.id}') and pass the plan to ` +
        `gateway.callWithOptions('${call.name}', <the recorded arguments>, { retry: plan }). The retry reuses the key ` +
        `and passes every current check again (grant, schema, guards, approval, budget).` +
        (assessed.status === 'outcome_unknown' && reference !== undefined
          ? ` Its write may have been made: the retry sends the same reference (externalIdempotencyKey, '${reference}'), which a provider ` +
            'that deduplicates on it answers from its record. Review it as not_executed only once the provider shows nothing under that reference; ' +
            'a tool redeployed since (another revision or effect) refuses the retry, and then a review decides it.'
          : '') +
        (run === null ? '' : ` Its agent run ${run} has finished: no resume of the run and no startup routine makes this retry, only a host doing it by hand.`)
      );
    }
    case 'needs_review':
      return (
        `Check the external system for the effect of this operation` +
        (reference !== undefined ? ` (tools that follow the guide pass externalIdempotencyKey, '${reference}', as their reference)` : '') +
        `. A tool that declares a reconciler is asked first by reconcileUncertainCalls (jingwei/review). Otherwise a ` +
        `trusted person checks: if it did not happen, the host journals recordToolReview(owner, history, '${call.id}', ` +
        `{ actor, evidence, outcome: 'not_executed' }) and prepareToolRetry uses it; if it did, a 'completed' review ` +
        `resolves the call for good. Never take a review from model output.`
      );
  }
}

// ---------------------------------------------------------------------------------------------------------------
// A light index of the journal's tool events, for showing one call (the history was validated by assessSession)

export interface CallRecord {
  readonly call: ToolCall;
  readonly event: SessionEvent;
  started: SessionEvent | null;
  resultEvent: SessionEvent | null;
  result: ToolResult | null;
  /** Journaled reviews of the call, in journal order. */
  reviews: { review: ToolReviewRecord; event: SessionEvent }[];
  /** The first journaled end of a body that went on after its result (a `body_ended` event), if any. */
  bodyEnd: { readonly ended: string; readonly event: SessionEvent } | null;
}

export function indexCalls(history: readonly SessionEvent[]): Map<string, CallRecord> {
  const calls = new Map<string, CallRecord>();
  for (const event of history) {
    const k = event.kind;
    if (k.type === 'tool_call') calls.set(k.call.id, { call: k.call, event, started: null, resultEvent: null, result: null, reviews: [], bodyEnd: null });
    else if (k.type === 'tool_review') calls.get(k.review.callId)?.reviews.push({ review: k.review, event });
    else if (k.type === 'tool_started') {
      const record = calls.get(k.callId);
      if (record) record.started = event;
    } else if (k.type === 'tool_result') {
      const record = calls.get(k.result.callId);
      if (record) {
        record.resultEvent = event;
        record.result = k.result;
      }
    } else {
      const end = bodyEndOf(k);
      const record = end ? calls.get(end.callId) : undefined;
      if (end && record && record.bodyEnd === null && bodyCouldOutlive(record.result)) record.bodyEnd = { ended: end.ended, event };
    }
  }
  return calls;
}

/** Every attempt of the call's operation, in journal order (just the call itself for a legacy call). */
export function attemptsOf(calls: ReadonlyMap<string, CallRecord>, call: ToolCall): CallRecord[] {
  const op = call.operation;
  if (!op) return [calls.get(call.id)!];
  return [...calls.values()].filter((r) => r.call.operation?.taskId === op.taskId && r.call.operation.key === op.key);
}

export function resultWord(record: CallRecord): string {
  if (record.result === null) return 'no result';
  const o = record.result.outcome;
  return o.status === 'succeeded' ? 'succeeded' : `failed ${o.category}`;
}

/** One journaled review, for people. */
export function journaledReviewText(review: ToolReviewRecord): string {
  return `${review.outcome} by ${clip(review.actor, 60)} (${review.source}): ${clip(review.evidence, 120)}`;
}

export function reviewText(call: ToolCall): string | null {
  const review = call.operation?.retry?.review;
  if (!review) return null;
  return `${review.outcome} by ${clip(review.actor, 60)}: ${clip(review.evidence, 120)}`;
}

// ---------------------------------------------------------------------------------------------------------------
/** Whether the store keeps a decision inbox (every built-in store does; a third-party backend may not). */
export function hasInbox(store: SessionStore): boolean {
  return store instanceof JournalStore && store.backend.inbox !== undefined;
}

/**
 * Whether a request recorded at `createdAt` passes an age filter: at most `createdAtMost`, or recorded more than
 * STORE_DEFAULTS.clockAheadMs ahead of this host's clock, a time that says nothing of its age (as for calls).
 */
function oldEnough(createdAt: string, createdAtMost: number): boolean {
  const at = Date.parse(createdAt);
  return at <= createdAtMost || at > Date.now() + STORE_DEFAULTS.clockAheadMs;
}

/**
 * Up to `limit` approval requests in `state`, oldest first, after `after`, that pass the tool and age filters
 * (`createdAtMost`, ms since the epoch): `open` ones wait for a person, `decided` ones for the session's host to use
 * the decision on its next attempt. The inbox is read page by page and filtered before the cut, so a filter finds
 * its rows however many others come first; `next` is the last row listed when another matching row follows, else
 * null. None when the store keeps no inbox. The queue's CLI and console list approvals through this.
 */
export async function approvalRequests(
  store: SessionStore,
  state: 'open' | 'decided',
  query: InboxListing,
): Promise<{ items: InboxDecisionRow[]; next: string | null }> {
  return inboxRows(store, 'approval', state, query);
}

/** The filters and page of an inbox listing (approvalRequests, waitingReviewDecisions). */
export interface InboxListing {
  readonly sessionId?: string;
  readonly tool?: string;
  readonly createdAtMost?: number;
  readonly after?: string;
  readonly limit: number;
}

/**
 * Up to `limit` review decisions recorded and not yet journaled by their session's owner, oldest first, with the same
 * filters and paging as approvalRequests: the queue lists them, since until a host journals one nothing acts on it
 * (a retry of its operation is refused meanwhile).
 */
export async function waitingReviewDecisions(store: SessionStore, query: InboxListing): Promise<{ items: InboxDecisionRow[]; next: string | null }> {
  return inboxRows(store, 'review', 'decided', query);
}

async function inboxRows(
  store: SessionStore,
  kind: 'approval' | 'review',
  state: 'open' | 'decided',
  query: InboxListing,
): Promise<{ items: InboxDecisionRow[]; next: string | null }> {
  if (!hasInbox(store)) return { items: [], next: null };
  const inbox = decisionInbox(store);
  const items: InboxDecisionRow[] = [];
  let after = query.after;
  for (;;) {
    const page = await inbox.list({
      kind,
      states: [state],
      ...(query.sessionId !== undefined ? { sessionId: query.sessionId } : {}),
      ...(after !== undefined ? { after } : {}),
      limit: 1000,
    });
    for (const row of page.items) {
      if (query.tool !== undefined && row.tool !== query.tool) continue;
      if (query.createdAtMost !== undefined && !oldEnough(row.createdAt, query.createdAtMost)) continue;
      if (items.length === query.limit) return { items, next: items[items.length - 1]!.id };
      items.push(row);
    }
    if (page.next === null) return { items, next: null };
    after = page.next;
  }
}

// Review decisions waiting in the decision inbox (docs/design.md#the-decision-inbox): part of the operator's picture
// until the session's owner journals them (journalInboxReviews in jingwei/review)

/**
 * The decided, not yet journaled review decision of each call that its owner's journaling will make count, by session
 * then call (empty without an inbox). The owner journals them oldest first, and a `completed` one stands whatever
 * came before it (a later `not_executed` one is refused as stale): so a waiting `completed` review, else the oldest.
 */
export async function pendingInboxReviews(store: SessionStore, sessionId?: string): Promise<Map<string, Map<string, InboxDecisionRow>>> {
  const bySession = new Map<string, Map<string, InboxDecisionRow>>();
  if (!hasInbox(store)) return bySession;
  const inbox = decisionInbox(store);
  let after: string | undefined;
  do {
    const page = await inbox.list({ kind: 'review', states: ['decided'], ...(sessionId !== undefined ? { sessionId } : {}), ...(after !== undefined ? { after } : {}), limit: 1000 });
    for (const row of page.items) {
      const calls = bySession.get(row.sessionId) ?? new Map<string, InboxDecisionRow>();
      const shown = calls.get(row.callId);
      if (shown === undefined || (shown.decision !== 'completed' && row.decision === 'completed')) calls.set(row.callId, row);
      bySession.set(row.sessionId, calls);
    }
    after = page.next ?? undefined;
  } while (after !== undefined);
  return bySession;
}

/**
 * Whether a review decision waiting about this call's operation decides what happens next: the call is its operation's
 * latest attempt, and its outcome is in doubt, or it never ran (a retry of it is refused while the decision waits, and
 * a `completed` one is journaled on it).
 */
function reviewable(c: ToolCallAssessment): boolean {
  if (c.nextStep !== 'needs_review' && c.nextStep !== 'retry_allowed') return false;
  return c.status === 'outcome_unknown' || (c.status === 'not_executed' && c.attempt === c.attempts);
}

/** The waiting review decision about any attempt of `c`'s operation (a `completed` one first), or undefined. */
function operationDecision(c: ToolCallAssessment, calls: readonly ToolCallAssessment[], pending: ReadonlyMap<string, InboxDecisionRow>): InboxDecisionRow | undefined {
  const attempts = c.key === null ? [c] : calls.filter((other) => other.taskId === c.taskId && other.key === c.key);
  const rows = attempts.flatMap((a) => { const row = pending.get(a.callId); return row ? [row] : []; });
  return rows.find((r) => r.decision === 'completed') ?? rows[0];
}

/**
 * The assessment as the operator should see it with the inbox's review decisions: a decided `completed` review of a
 * call in doubt, or of an attempt of its operation, resolves it (next step `completed`, no attention), waiting to be
 * journaled by the owner; any other decided review is named in the reason (a `not_executed` one is what the retry
 * will use, unless the call's own events in `history` overtook it: the owner will mark it stale).
 */
export function withInboxReviews(assessment: SessionAssessment, pending: ReadonlyMap<string, InboxDecisionRow> | undefined, history: readonly SessionEvent[]): SessionAssessment {
  if (!pending || pending.size === 0) return assessment;
  const calls = assessment.calls.map((c): ToolCallAssessment => {
    const row = reviewable(c) ? operationDecision(c, assessment.calls, pending) : undefined;
    if (!row) return c;
    const by = `${/^[aeiou]/.test(row.decision ?? '') ? 'an' : 'a'} ${row.decision} review by ${clip(row.actor ?? '?', 60)} (${row.id}${row.callId !== c.callId ? `, of call ${row.callId}, an earlier attempt` : ''})`;
    if (row.decision === 'completed') {
      return { ...c, nextStep: 'completed', attention: 'none', reason: `${by} in the decision inbox resolves it; it waits to be journaled by the session's owner` };
    }
    const overtaken = row.decision === 'not_executed' ? overtakingEvent(history, row) : null;
    const use = overtaken !== null
      ? `but the journal has recorded ${overtaken} of the call since it was made, so the owner will mark it stale and no retry will use it: review the call again with what it shows now`
      : row.callId !== c.callId ? 'no retry is made while it waits, and the owner judges it when it journals the inbox'
      : row.decision === 'not_executed' ? 'the retry will use it once the owner journals it' : 'it unblocks nothing';
    return { ...c, reason: `${c.reason}; ${by} waits in the decision inbox: ${use}` };
  });
  const byNextStep = { retry_allowed: 0, needs_review: 0, completed: 0, superseded: 0, legacy: 0 };
  const byAttention = { in_doubt: 0, interrupted: 0, none: 0 };
  for (const c of calls) {
    byNextStep[c.nextStep] += 1;
    byAttention[c.attention] += 1;
  }
  return { ...assessment, calls, totals: { ...assessment.totals, byNextStep, byAttention } };
}

/**
 * How many of a session's waiting review decisions the call's own events overtook since they were made (a
 * `not_executed` review the journal has moved past): the owner marks those stale rather than journal them.
 */
export function overtakenReviews(pending: ReadonlyMap<string, InboxDecisionRow> | undefined, history: readonly SessionEvent[]): number {
  let overtaken = 0;
  for (const row of pending?.values() ?? []) if (row.decision === 'not_executed' && overtakingEvent(history, row) !== null) overtaken += 1;
  return overtaken;
}

/** The inbox decision of one call, as JSON. */
export function inboxReviewJson(row: InboxDecisionRow | undefined): Record<string, string | null> | null {
  if (!row) return null;
  return { decision_id: row.id, outcome: row.decision, actor: row.actor, evidence: row.reason, decided_at: row.decidedAt, state: row.state };
}

/** What an operator does about a `reviewed_not_executed` item of the queue. */
export const REVIEWED_NOT_EXECUTED_HINT = 'reviewed_not_executed: a review says the write did not happen, so it is still to be made; ' +
  'nothing makes it until a host retries it: a resumed run, or prepareToolRetry where no run will (a finished run, a call outside a run). ' +
  'Look in the outside system first (a later call, of a tool renamed since, say, may have made it): a write made there is ' +
  'recorded with a completed review, never made again';

/** Results that interrupt a running body: the body may have gone on after them (docs/design.md#a-body-that-outlives-its-attempt). */
const INTERRUPTS: ReadonlySet<string> = new Set(['timeout', 'cancelled', 'budget']);

/**
 * What an attention item's times say, for people (the queue, on the command line and in the console): how long its
 * body ran, or has been running, or waited to start. A body an interrupt was recorded against did not stop with it:
 * the index does not say how it ended, so the text says where to look instead of how long it ran.
 */
export function attentionTimes(item: AttentionItem, now: string, bodyEnd?: string | null): string {
  // An outcome open, or a write due, since an earlier attempt: the latest one's times are a retry's that made nothing.
  const since = item.pendingSince === null ? ''
    : `; ${item.status === 'reviewed_not_executed' ? 'due' : 'open'} since ${timeText(item.pendingSince)}, no later attempt ran its body`;
  // A retry's marker with a standing carried past it: stopped before its body was called (a body that ran resets it).
  const stopped = item.pendingSince !== null && item.startedAt !== null
    ? `a retry stopped before its body was called, ${durationText(item.startedAt, item.endedAt ?? now) ?? '-'} after its start marker` : null;
  if (item.status !== 'reviewed_not_executed') return `${stopped ?? attemptTimes(item, now, bodyEnd)}${since}`;
  // Not "started … ago" nor "may have gone on": nothing runs, and a review says the body did not write.
  if (item.startedAt === null || stopped !== null) return `reviewed: not executed (${stopped ?? attemptTimes(item, now, bodyEnd)})${since}`;
  const ended = item.endedAt === null ? 'no result' : `ended ${item.category ?? 'with a result'} after ${durationText(item.startedAt, item.endedAt) ?? '-'}`;
  return `reviewed: not executed (body started ${timeText(item.startedAt)}, ${ended})${since}`;
}

function attemptTimes(item: AttentionItem, now: string, bodyEnd: string | null | undefined): string {
  const ran = item.startedAt ? durationText(item.startedAt, item.endedAt ?? now) : null;
  // A start marker, then an interrupt before the body was called (not executed): no body ran, none goes on.
  if (ran !== null && item.status === 'not_executed' && item.endedAt) return `stopped before its body was called, ${ran} after its start marker`;
  if (ran !== null) {
    if (!item.endedAt) return `body started ${ran} ago, no result`;
    if (!interruptedBody(item)) return `body ran ${ran}`;
    if (bodyEnd === undefined) return `${interruptedText(ran)} (the call's journal says how it ended)`;
    if (bodyEnd === null) return `${interruptedText(ran)} (no end of it is journaled: it runs still, or its host stopped first)`;
    return bodyEnd === 'not_called' ? `interrupted after ${ran}; its body was never called`
      : `interrupted after ${ran}; its body went on, and ${bodyEndWords(bodyEnd)}`;
  }
  const waited = durationText(item.calledAt, item.endedAt ?? now);
  if (waited === null) return '-';
  return item.endedAt ? `ended after ${waited}` : `no result for ${waited}`;
}

const interruptedText = (ran: string) => `interrupted after ${ran}; its body may have gone on`;

/** Whether an interrupt was recorded against the item's running body, which may have gone on after it. */
function interruptedBody(item: AttentionItem): boolean {
  return item.startedAt !== null && item.endedAt !== null && item.status !== 'not_executed' && item.category !== null && INTERRUPTS.has(item.category);
}

/**
 * How the bodies of listed items an interrupt was recorded against ended since, by call id, as their sessions'
 * journals say (a `body_ended` event; the index keeps no such thing): a body that returned most likely made its
 * write; null when none is journaled yet. Only those sessions are read. One whose journal does not verify leaves its
 * items out (`jingwei verify` says why).
 */
export async function lateBodyEnds(store: SessionStore, items: readonly AttentionItem[]): Promise<Map<string, string | null>> {
  const bySession = new Map<string, string[]>();
  for (const item of items) if (interruptedBody(item)) bySession.set(item.sessionId, [...(bySession.get(item.sessionId) ?? []), item.callId]);
  const ends = new Map<string, string | null>();
  for (const [sessionId, callIds] of bySession) {
    let calls: Map<string, CallRecord>;
    try {
      calls = indexCalls(await store.loadHistory(sessionId));
    } catch (error) {
      if (error instanceof JournalCorruptError) continue;
      throw error;
    }
    for (const callId of callIds) ends.set(callId, calls.get(callId)?.bodyEnd?.ended ?? null);
  }
  return ends;
}

/** What the start marker's time is, in words: when the body started, unless the result says it was never called. */
export function markerWord(record: CallRecord): string {
  return stoppedBeforeBody(record.result?.outcome) ? 'start marker' : 'body started';
}

/** How long a call's body ran until its result, for the call's page: an interrupt recorded against it did not stop it. */
export function bodyRanText(record: CallRecord, ran: string): string {
  const o = record.result?.outcome;
  if (stoppedBeforeBody(o)) return `stopped before its body was called, ${ran} after its start marker`;
  return o?.status === 'failed' && INTERRUPTS.has(o.category) ? interruptedText(ran) : `body ran ${ran}`;
}

/** How a journaled `body_ended` event says a late body ended, in words (`ended` as the event records it). */
export function bodyEndWords(ended: string): string {
  return ended === 'returned' || ended === 'threw' || ended === 'not_called' ? lateEndText(ended) : `ended (${safe(ended)})`;
}
