/**
 * What the console shows, read through the library's API only: the attention queue (`store.attention`), the open
 * approval requests (the decision inbox), a session's journal assessed the way a recovering host does
 * (`assessSession`, with the inbox's review decisions), its tasks' budgets and its lease. Nothing here writes.
 */
import type { SessionEvent } from '../../event/types.js';
import type { SessionId } from '../../ids.js';
import { TOOL_EFFECTS, type ToolEffect } from '../../event/types.js';
import type { DecisionRow } from '../../store/inbox-rows.js';
import { decisionInbox } from '../../store/inbox.js';
import { JournalStore } from '../../store/journal-store.js';
import { ATTENTION_STATUSES, type AttentionStatus, type TaskRow } from '../../store/rows.js';
import type { AttentionItem, SessionStore, SessionSummary } from '../../store/types.js';
import { assessSession, type SessionAssessment, type ToolCallAssessment } from '../../tool/assess.js';
import { indexCalls, pendingInboxReviews, withInboxReviews, type CallRecord } from '../assessment.js';
import { parseAge } from '../format.js';

/** The queue's filters as the page's form sends them; every field is checked before the store sees it. */
export interface QueueFilters {
  readonly tool?: string;
  readonly effect?: ToolEffect;
  readonly status?: AttentionStatus;
  /** The age text as typed (`30m`), and its value. */
  readonly olderThan?: { readonly text: string; readonly ms: number };
}

/** Reads the filters from a query string; a bad one is an error message, and the filter is left out. */
export function queueFilters(params: URLSearchParams): { filters: QueueFilters; errors: string[] } {
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
  return { filters, errors };
}

export interface QueueView {
  /** Newest call first. */
  readonly items: readonly AttentionItem[];
  /** More matched than the console lists. */
  readonly truncated: boolean;
  /** Open approval requests, oldest first (none when filtering by status or effect, which select operations). */
  readonly approvals: readonly DecisionRow[];
}

/** The most items one page lists. */
export const QUEUE_MAX = 500;

export async function readQueue(store: SessionStore, filters: QueueFilters): Promise<QueueView> {
  const items: AttentionItem[] = [];
  let cursor: string | null = null;
  let truncated = false;
  do {
    const page = await store.attention({
      ...(filters.tool !== undefined ? { tool: filters.tool } : {}),
      ...(filters.effect !== undefined ? { effect: filters.effect } : {}),
      ...(filters.status !== undefined ? { status: filters.status } : {}),
      ...(filters.olderThan !== undefined ? { olderThanMs: filters.olderThan.ms } : {}),
      ...(cursor !== null ? { cursor } : {}),
      limit: 1000,
    });
    items.push(...page.items);
    cursor = page.next;
    if (items.length >= QUEUE_MAX && cursor !== null) truncated = true;
  } while (cursor !== null && !truncated);
  items.sort((a, b) => (b.calledAt ?? '').localeCompare(a.calledAt ?? '') || a.callId.localeCompare(b.callId));
  let approvals: DecisionRow[] = [];
  if (filters.status === undefined && filters.effect === undefined && hasInbox(store)) {
    const page = await decisionInbox(store).list({ kind: 'approval', states: ['open'], limit: QUEUE_MAX });
    const cutoff = filters.olderThan !== undefined ? Date.now() - filters.olderThan.ms : undefined;
    approvals = page.items.filter((r) => (filters.tool === undefined || r.tool === filters.tool) && (cutoff === undefined || Date.parse(r.createdAt) <= cutoff));
  }
  return { items: items.slice(0, QUEUE_MAX), truncated, approvals };
}

export function hasInbox(store: SessionStore): boolean {
  return store instanceof JournalStore && store.backend.inbox !== undefined;
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
  readonly calls: ReadonlyMap<string, CallRecord>;
  readonly tasks: readonly TaskRow[];
  /** When this view was read (ISO), the end of the timeline for what is still open. */
  readonly readAt: string;
}

/** A session as the console shows it, or null when the store has no such session. */
export async function readSession(store: SessionStore, sessionId: string): Promise<SessionView | null> {
  const summary = (await store.listSessions()).find((s) => s.sessionId === sessionId) ?? null;
  const history = await store.loadHistory(sessionId);
  if (summary === null && history.length === 0) return null;
  let assessment = history.length > 0 ? assessSession(history) : null;
  const inboxReviews = (await pendingInboxReviews(store, sessionId)).get(sessionId) ?? new Map<string, DecisionRow>();
  if (assessment !== null) assessment = withInboxReviews(assessment, inboxReviews);
  const openApprovals = new Map<string, DecisionRow>();
  if (hasInbox(store)) {
    let after: string | undefined;
    do {
      const page = await decisionInbox(store).list({ kind: 'approval', states: ['open'], sessionId, ...(after !== undefined ? { after } : {}), limit: 1000 });
      for (const row of page.items) openApprovals.set(row.callId, row);
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
  return { sessionId, summary, history, assessment, inboxReviews, openApprovals, calls, tasks, readAt: new Date().toISOString() };
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
  if (!record) return `session ${view.sessionId} has no call ${callId}`;
  const assessed = assessedCall(view, callId);
  if (assessed === null) return 'the call succeeded: there is nothing to review';
  if (assessed.nextStep === 'superseded') return 'a newer attempt of this operation exists: decide on that one';
  if (assessed.nextStep === 'completed') return `the call is resolved: ${assessed.reason}`;
  if (assessed.status !== 'outcome_unknown') return `the call's outcome is not in doubt (${assessed.status}: ${assessed.reason})`;
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
