/**
 * What the console shows, read through the library's API only: the attention queue (`store.attention`), the
 * approval requests open or decided but unused (the decision inbox), a session's journal assessed the way a recovering host does
 * (`assessSession`, with the inbox's review decisions), its tasks' budgets and its lease. Nothing here writes.
 */
import type { SessionEvent } from '../../event/types.js';
import type { SessionId } from '../../ids.js';
import { TOOL_EFFECTS, type ToolEffect } from '../../event/types.js';
import type { DecisionRow } from '../../store/inbox-rows.js';
import { decisionInbox } from '../../store/inbox.js';
import { JournalStore, type CallInFlight } from '../../store/journal-store.js';
import { ATTENTION_STATUSES, type AttentionStatus, type TaskRow } from '../../store/rows.js';
import type { AttentionItem, SessionStore, SessionSummary } from '../../store/types.js';
import { assessSession, type SessionAssessment, type ToolCallAssessment } from '../../tool/assess.js';
import { approvalRequests, lateBodyEnds, waitingReviewDecisions, hasInbox, indexCalls, pendingInboxReviews, runningText, withInboxReviews, type CallRecord } from '../assessment.js';
import { parseAge, safeId } from '../format.js';

/** The queue's filters as the page's form sends them; every field is checked before the store sees it. */
export interface QueueFilters {
  readonly tool?: string;
  readonly effect?: ToolEffect;
  readonly status?: AttentionStatus;
  /** The age text as typed (`30m`), and its value. */
  readonly olderThan?: { readonly text: string; readonly ms: number };
}

/** Where each list of the queue page starts: the `next` of the page before (the store's cursor, a request id). */
export interface QueuePaging {
  readonly cursor?: string;
  readonly approvalsAfter?: string;
  readonly decidedAfter?: string;
  readonly reviewsAfter?: string;
}

/** Reads the filters from a query string; a bad one is an error message, and the filter is left out. */
export function queueFilters(params: URLSearchParams): { filters: QueueFilters; paging: QueuePaging; errors: string[] } {
  const errors: string[] = [];
  const filters: { tool?: string; effect?: ToolEffect; status?: AttentionStatus; olderThan?: { text: string; ms: number } } = {};
  const tool = params.get('tool')?.trim();
  if (tool) filters.tool = tool;
  const effect = params.get('effect')?.trim();
  if (effect) {
    if ((TOOL_EFFECTS as readonly string[]).includes(effect)) filters.effect = effect as ToolEffect;
    else errors.push(`effect ${JSON.stringify(effect)} is not one of ${TOOL_EFFECTS.join(', ')}`);
  }
  const status = params.get('status')?.trim();
  if (status) {
    if ((ATTENTION_STATUSES as readonly string[]).includes(status)) filters.status = status as AttentionStatus;
    else errors.push(`status ${JSON.stringify(status)} is not one of ${ATTENTION_STATUSES.join(', ')}`);
  }
  const age = params.get('older_than')?.trim();
  if (age) {
    const ms = parseAge(age);
    if (ms === null) errors.push(`age ${JSON.stringify(age)} is not an age such as 90s, 30m, 4h or 2d`);
    else filters.olderThan = { text: age, ms };
  }
  const paging: { cursor?: string; approvalsAfter?: string; decidedAfter?: string; reviewsAfter?: string } = {};
  const cursor = params.get('cursor');
  if (cursor) paging.cursor = cursor;
  const approvalsAfter = params.get('approvals_after');
  if (approvalsAfter) paging.approvalsAfter = approvalsAfter;
  const decidedAfter = params.get('decided_after');
  if (decidedAfter) paging.decidedAfter = decidedAfter;
  const reviewsAfter = params.get('reviews_after');
  if (reviewsAfter) paging.reviewsAfter = reviewsAfter;
  return { filters, paging, errors };
}

/** The query string of the queue page with these filters and this paging (empty: none). */
export function queueQuery(filters: QueueFilters, paging: QueuePaging = {}): string {
  const q = new URLSearchParams();
  if (filters.tool !== undefined) q.set('tool', filters.tool);
  if (filters.effect !== undefined) q.set('effect', filters.effect);
  if (filters.status !== undefined) q.set('status', filters.status);
  if (filters.olderThan !== undefined) q.set('older_than', filters.olderThan.text);
  if (paging.cursor !== undefined) q.set('cursor', paging.cursor);
  if (paging.approvalsAfter !== undefined) q.set('approvals_after', paging.approvalsAfter);
  if (paging.decidedAfter !== undefined) q.set('decided_after', paging.decidedAfter);
  if (paging.reviewsAfter !== undefined) q.set('reviews_after', paging.reviewsAfter);
  const text = q.toString();
  return text === '' ? '' : `?${text}`;
}

/** One page of a list: its rows, and where the next page starts (null: this is the last). */
export interface Listed<T> {
  readonly items: readonly T[];
  readonly next: string | null;
}

export interface QueueView {
  /** The operations that need attention, newest call first; `next` is the store's cursor after them. */
  readonly items: Listed<AttentionItem>;
  /** Open approval requests, oldest first (none when filtering by status or effect, which select operations). */
  readonly approvals: Listed<DecisionRow>;
  /** Approval requests decided but not yet used by an attempt, oldest first (the same filters). */
  readonly decided: Listed<DecisionRow>;
  /** Review decisions recorded and not yet journaled by their session's host, oldest first (the same filters). */
  readonly reviews: Listed<DecisionRow>;
  /** Why the inbox's lists are not read (an effect or status filter, which select operations; a store without an inbox), or null. */
  readonly decisionsNotListed: string | null;
  /** How the bodies of listed items an interrupt was recorded against ended since (lateBodyEnds), by call id. */
  readonly bodyEnds: ReadonlyMap<string, string | null>;
}

/** The most rows one page lists, in each list. */
export const QUEUE_MAX = 500;

/**
 * Reads one page of the queue: each list is filtered first (by the store, or here row by row), then cut at
 * QUEUE_MAX, so a filter finds its rows however many others come first. An InvalidInputError means a bad cursor.
 */
export async function readQueue(store: SessionStore, filters: QueueFilters, paging: QueuePaging = {}): Promise<QueueView> {
  const items: AttentionItem[] = [];
  let cursor: string | null = paging.cursor ?? null;
  do {
    const page = await store.attention({
      ...(filters.tool !== undefined ? { tool: filters.tool } : {}),
      ...(filters.effect !== undefined ? { effect: filters.effect } : {}),
      ...(filters.status !== undefined ? { status: filters.status } : {}),
      ...(filters.olderThan !== undefined ? { olderThanMs: filters.olderThan.ms } : {}),
      ...(cursor !== null ? { cursor } : {}),
      limit: Math.min(1000, QUEUE_MAX - items.length),
    });
    items.push(...page.items);
    cursor = page.next;
  } while (cursor !== null && items.length < QUEUE_MAX);
  items.sort((a, b) => (b.calledAt ?? '').localeCompare(a.calledAt ?? '') || a.callId.localeCompare(b.callId));
  const none: Listed<DecisionRow> = { items: [], next: null };
  const operationsOnly = filters.status !== undefined || filters.effect !== undefined || !hasInbox(store);
  const approvalFilters = {
    ...(filters.tool !== undefined ? { tool: filters.tool } : {}),
    ...(filters.olderThan !== undefined ? { createdAtMost: Date.now() - filters.olderThan.ms } : {}),
    limit: QUEUE_MAX,
  };
  return {
    items: { items, next: cursor },
    approvals: operationsOnly ? none : await approvalRequests(store, 'open', { ...approvalFilters, ...(paging.approvalsAfter !== undefined ? { after: paging.approvalsAfter } : {}) }),
    decided: operationsOnly ? none : await approvalRequests(store, 'decided', { ...approvalFilters, ...(paging.decidedAfter !== undefined ? { after: paging.decidedAfter } : {}) }),
    reviews: operationsOnly ? none : await waitingReviewDecisions(store, { ...approvalFilters, ...(paging.reviewsAfter !== undefined ? { after: paging.reviewsAfter } : {}) }),
    decisionsNotListed: !hasInbox(store) ? 'this store keeps no decision inbox'
      : operationsOnly ? 'not listed with an effect or status filter, which select operations' : null,
    bodyEnds: await lateBodyEnds(store, items),
  };
}

export interface SessionView {
  readonly sessionId: string;
  readonly summary: SessionSummary | null;
  readonly history: readonly SessionEvent[];
  readonly assessment: SessionAssessment | null;
  /** Review decisions waiting in the inbox, by call. */
  readonly inboxReviews: ReadonlyMap<string, DecisionRow>;
  /** Open approval requests of this session, by call. */
  readonly openApprovals: ReadonlyMap<string, DecisionRow>;
  /** Approval requests of this session decided but not yet used by an attempt, by the call that asked. */
  readonly decidedApprovals: ReadonlyMap<string, DecisionRow>;
  readonly calls: ReadonlyMap<string, CallRecord>;
  readonly tasks: readonly TaskRow[];
  /** When this view was read (ISO), the end of the timeline for what is still open. */
  readonly readAt: string;
  /**
   * The calls read with `runningOf` that may still be running, and why: their host holds the session with a live
   * lease and no result is journaled, or their body outlived an interrupted result (the inbox's own check).
   */
  readonly running: ReadonlyMap<string, CallInFlight>;
}

/** A session as the console shows it, or null when the store has no such session. */
export async function readSession(store: SessionStore, sessionId: string, runningOf: readonly string[] = []): Promise<SessionView | null> {
  const summary = (await store.listSessions()).find((s) => s.sessionId === sessionId) ?? null;
  const history = await store.loadHistory(sessionId);
  if (summary === null && history.length === 0) return null;
  let assessment = history.length > 0 ? assessSession(history) : null;
  const inboxReviews = (await pendingInboxReviews(store, sessionId)).get(sessionId) ?? new Map<string, DecisionRow>();
  if (assessment !== null) assessment = withInboxReviews(assessment, inboxReviews, history);
  const openApprovals = new Map<string, DecisionRow>();
  const decidedApprovals = new Map<string, DecisionRow>();
  if (hasInbox(store)) {
    let after: string | undefined;
    do {
      const page = await decisionInbox(store).list({ kind: 'approval', states: ['open', 'decided'], sessionId, ...(after !== undefined ? { after } : {}), limit: 1000 });
      for (const row of page.items) (row.state === 'open' ? openApprovals : decidedApprovals).set(row.callId, row);
      after = page.next ?? undefined;
    } while (after !== undefined);
  }
  const calls = indexCalls(history);
  const taskIds = new Set<string>();
  for (const record of calls.values()) if (record.call.operation) taskIds.add(record.call.operation.taskId);
  const tasks: TaskRow[] = [];
  if (store instanceof JournalStore) {
    for (const id of taskIds) {
      const row = await store.backend.readTask(sessionId as SessionId, id);
      if (row) tasks.push(row);
    }
  }
  const running = new Map<string, CallInFlight>();
  if (store instanceof JournalStore) {
    for (const callId of runningOf) {
      if (!calls.has(callId)) continue;
      const { inFlight } = await store.callInFlight(sessionId, callId);
      if (inFlight !== null) running.set(callId, inFlight);
    }
  }
  return { sessionId, summary, history, assessment, inboxReviews, openApprovals, decidedApprovals, calls, tasks, readAt: new Date().toISOString(), running };
}

export function assessedCall(view: SessionView, callId: string): ToolCallAssessment | null {
  return view.assessment?.calls.find((c) => c.callId === callId) ?? null;
}

/**
 * A review may be recorded for a call whose latest attempt's outcome is in doubt (the owner journals a review only
 * for such a call); anything else is refused, with the reason.
 */
export function reviewRefusal(view: SessionView, callId: string): string | null {
  const record = view.calls.get(callId);
  if (!record) return `session ${safeId(view.sessionId)} has no call ${safeId(callId)}`;
  const assessed = assessedCall(view, callId);
  if (assessed === null) return 'the call succeeded: there is nothing to review';
  if (assessed.nextStep === 'superseded') return assessed.rule === 'identical_in_doubt' ? `the call waits on an identical one: ${assessed.reason}` : 'a newer attempt of this operation exists: decide on that one';
  // Resolved only by a `completed` review still waiting in the inbox: a person may replace it (a misclick), as
  // `jingwei review --replaces` does; once the owner journals it, it is settled for good.
  const waitingCompleted = view.inboxReviews.get(callId)?.decision === 'completed' && assessed.rule !== 'reviewed_completed';
  if (assessed.nextStep === 'completed' && !waitingCompleted) return `the call is resolved: ${assessed.reason}`;
  if (assessed.status !== 'outcome_unknown') return `the call's outcome is not in doubt (${assessed.status}: ${assessed.reason})`;
  const running = view.running.get(callId);
  if (running !== undefined) return runningText(running);
  return null;
}

/**
 * What the operator saw when the page was drawn, sent back with a decision: if the call changed since (a result, a
 * review journaled or waiting, a newer attempt), the decision is stale and refused.
 */
export function callBasis(view: SessionView, callId: string): string {
  const record = view.calls.get(callId);
  const assessed = assessedCall(view, callId);
  return [
    assessed?.status ?? 'completed',
    assessed?.nextStep ?? 'completed',
    assessed?.attempts ?? 1,
    record?.resultEvent?.seq ?? '-',
    record?.reviews.length ?? 0,
    view.inboxReviews.get(callId)?.id ?? '-',
  ].join('|');
}
