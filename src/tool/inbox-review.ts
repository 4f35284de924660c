/**
 * The owner's side of review decisions in the decision inbox (docs/design.md#the-decision-inbox): an operator's
 * `jingwei review` is transport until the session's owner journals it as the call's review; the journal is the
 * evidence. Run before reconcilers and before any person is asked (docs/operator-guide.md, the routine).
 */
import { DecisionError, InvalidInputError, JournalFullError, StoreConflictError, ToolRetryError } from '../errors.js';
import { TOOL_REVIEW_OUTCOMES, type SessionEvent, type ToolReviewOutcome, type ToolReviewRecord } from '../event/types.js';
import type { CallId } from '../ids.js';
import type { DecisionRow } from '../store/inbox-rows.js';
import { decisionInbox, decisionInboxIfAny, markReviewStaleAgain } from '../store/inbox.js';
import { JournalStore } from '../store/journal-store.js';
import type { SessionOwner, SessionStore } from '../store/types.js';
import { classifyAttempt, collectEvidence, type AttemptRecord } from './evidence.js';
import { ToolRecoveryStatus } from './retry-policy.js';
import { bodyEnded } from './late-bodies.js';
import { NO_LONGER_REVIEWABLE, recordToolReview } from './review.js';

/** A review decision the owner journaled. */
export interface JournaledInboxReview {
  readonly decisionId: string;
  readonly callId: CallId;
  readonly outcome: ToolReviewOutcome;
  readonly actor: string;
  /** The `tool_review` event that carries it (found in the journal when an earlier pass wrote it but stopped before marking it). */
  readonly event: SessionEvent;
}

/** A review decision the owner refused to journal: marked `stale` in the inbox with `reason`, nothing journaled. */
export interface StaleInboxReview {
  readonly decisionId: string;
  readonly callId: string;
  readonly reason: string;
}

export interface InboxReviewReport {
  readonly journaled: readonly JournaledInboxReview[];
  readonly stale: readonly StaleInboxReview[];
  /** The confirmed history with the reviews written by this pass appended: decide on it next. */
  readonly history: readonly SessionEvent[];
}

/** Times one decision is judged and written again on a journal another writer of the owner moved meanwhile. */
const INBOX_WRITE_ATTEMPTS = 5;

/** The attempts of `callId`'s operation after it, in order. */
function laterAttempts(history: readonly SessionEvent[], callId: string): AttemptRecord[] {
  const attempts = collectEvidence(history, callId).calls.get(callId)?.operation?.attempts ?? [];
  const at = attempts.findIndex((a) => a.call.id === callId);
  return at < 0 ? [] : attempts.slice(at + 1);
}

const neverRan = (attempt: AttemptRecord): boolean => classifyAttempt(attempt).status === ToolRecoveryStatus.NotExecuted;

/**
 * What a `completed` decision about an attempt a later one superseded says (a retry made on an earlier review while
 * this one waited): the write may have been made twice. Null when no later attempt exists, or none ran (they carry
 * the decision instead: laterNeverRan).
 */
function madeAgain(history: readonly SessionEvent[], row: DecisionRow): string | null {
  const later = laterAttempts(history, row.callId);
  if (later.length === 0 || later.every(neverRan)) return null;
  const last = later[later.length - 1]!;
  const who = `${row.actor ?? 'the operator'} says call ${row.callId} completed, but attempt ${last.attempt} of its operation (call ${last.call.id}) was made since`;
  const how = last.result === null ? 'has no result yet' : last.result.outcome.status === 'succeeded' ? 'succeeded' : `failed (${last.result.outcome.category})`;
  return `${who} and ${how}: the operation may have been made twice; check the outside system. Not journaled: a review binds the latest attempt`;
}

/** The latest attempt of `callId`'s operation when it is a later one and no later one ran; else null. */
function laterNeverRan(history: readonly SessionEvent[], callId: string): CallId | null {
  const later = laterAttempts(history, callId);
  return later.length > 0 && later.every(neverRan) ? later[later.length - 1]!.call.id : null;
}

/** The latest `tool_review` event of `callId` after seq `after`, or null. */
function latestReviewAfter(history: readonly SessionEvent[], callId: string, after: number): (SessionEvent & { kind: { type: 'tool_review' } }) | null {
  for (let i = history.length - 1; i >= 0 && history[i]!.seq > after; i -= 1) {
    const e = history[i]!;
    if (e.kind.type === 'tool_review' && e.kind.review.callId === callId) return e as SessionEvent & { kind: { type: 'tool_review' } };
  }
  return null;
}

function journaledEvent(history: readonly SessionEvent[], decisionId: string): SessionEvent | undefined {
  return history.find((e) => e.kind.type === 'tool_review' && e.kind.review.decisionId === decisionId);
}

/**
 * What the call's own events recorded after a `not_executed` review was made, if anything: its start marker, its
 * result, its reconciler's `uncertain` review, or the end of a body that ran on past its result
 * (docs/design.md#a-review-waits-for-the-call-to-stop).
 * A host whose lease ran out while it was only paused can write them once it runs again, and the review was then
 * made on less than the journal now says. A row that does not say which seq it saw (recorded before rows did)
 * counts as overtaken only by a late body that returned or threw, the events that say the body ran.
 */
export function overtakingEvent(history: readonly SessionEvent[], row: Pick<DecisionRow, 'callId' | 'journalSeq'>): string | null {
  const seen = row.journalSeq;
  if (seen !== undefined) {
    for (const e of history.slice(seen + 1)) {
      const k = e.kind;
      if (k.type === 'tool_started' && k.callId === row.callId) return `a start marker (seq ${e.seq})`;
      if (k.type === 'tool_result' && k.result.callId === row.callId) return `a result (seq ${e.seq})`;
    }
  }
  // The call's reconciler journaled that it could not say (it answered unknown, or could not check a review) after
  // the person decided: a later not_executed review is read as a decision taken knowing that
  // (docs/design.md#reconcilers), which this one was not.
  for (const e of seen === undefined ? history : history.slice(seen + 1)) {
    const k = e.kind;
    if (k.type === 'tool_review' && k.review.callId === row.callId && k.review.source === 'reconciler' && k.review.outcome === 'uncertain') {
      return `the reconciler's uncertain review (seq ${e.seq})`;
    }
  }
  const late = bodyEnded(history, row.callId);
  if (late !== null && late.ended !== 'not_called' && (seen === undefined || late.event.seq > seen)) {
    return `that its body ${late.ended} after its result (seq ${late.event.seq})`;
  }
  return null;
}

/**
 * Journals every decided review decision of the owner's session from `store`'s decision inbox, oldest first,
 * through recordToolReview with source `human` and the decision's id, and marks each one consumed by its event.
 * A decision the journal no longer admits (the call succeeded or was resolved meanwhile, its outcome is not in
 * doubt, a newer attempt exists, its text does not fit a review, or it says `not_executed` and the call's own events
 * have overtaken it) is marked `stale` with the reason and nothing is journaled. A decision already journaled by an
 * earlier pass that stopped before marking it is marked, not written again. `history` is the session's confirmed journal. Errors of the journal write propagate (a fenced
 * owner, a changed history, invalid evidence); a store without an inbox throws DecisionError `inbox_unsupported`.
 */
export async function journalInboxReviews(owner: SessionOwner, store: SessionStore, history: readonly SessionEvent[]): Promise<InboxReviewReport> {
  if (!Array.isArray(history)) throw new InvalidInputError('history', 'must be the session\'s confirmed journal (an array of events)');
  const inbox = decisionInbox(store);
  const rows: DecisionRow[] = [];
  let after: string | undefined;
  do {
    const page = await inbox.list({ sessionId: owner.sessionId, kind: 'review', states: ['decided'], ...(after !== undefined ? { after } : {}), limit: 1000 });
    rows.push(...page.items);
    after = page.next ?? undefined;
  } while (after !== undefined);
  let current: SessionEvent[] = [...history];
  const journaled: JournaledInboxReview[] = [];
  const stale: StaleInboxReview[] = [];
  // Each call's latest journaled review: a review repeating it (same outcome, same actor) adds no evidence and is
  // not journaled again, so a person or a job re-asserting it cannot fill the session's journal.
  const latest = new Map<string, ToolReviewRecord>();
  const indexReviews = () => {
    latest.clear();
    for (const e of current) if (e.kind.type === 'tool_review') latest.set(e.kind.review.callId, e.kind.review);
  };
  indexReviews();
  const reload = async () => {
    current = [...(await store.loadHistory(owner.sessionId))];
    indexReviews();
  };
  /** Marks a row; false when another pass of the owner (a run of the session) marked it meanwhile, and reports it. */
  const marked = async (mark: () => Promise<unknown>): Promise<boolean> => {
    try {
      await mark();
      return true;
    } catch (error) {
      if (error instanceof DecisionError && error.code === 'decision_stale') return false;
      throw error;
    }
  };
  /**
   * Judges one decided review on `current` and journals it, or marks it stale. A refusal that rests on the journal
   * is made on a fresh read only (`fresh`): a refusal writes nothing, so no conflict would show that another writer
   * of the owner (a run of the session) moved the journal since it was read; false asks for that read first.
   */
  const journalOne = async (row: DecisionRow, fresh: boolean): Promise<boolean> => {
    const outcome = row.decision as ToolReviewOutcome;
    const done = journaledEvent(current, row.id);
    if (done !== undefined && done.kind.type === 'tool_review') {
      if (!(await marked(() => inbox.markReviewJournaled(row.id, done.eventId)))) return true;
      journaled.push({ decisionId: row.id, callId: done.kind.review.callId, outcome: done.kind.review.outcome, actor: done.kind.review.actor, event: done });
      return true;
    }
    const refuse = async (reason: string): Promise<StaleInboxReview | null> => {
      if (!(await marked(() => inbox.markReviewStale(row.id, reason)))) return null;
      const refused = { decisionId: row.id, callId: row.callId, reason };
      stale.push(refused);
      return refused;
    };
    if (!TOOL_REVIEW_OUTCOMES.includes(outcome) || row.actor === null || row.reason === null) {
      await refuse(`the decision carries no review outcome, actor and evidence`);
      return true;
    }
    if (!current.some((e) => e.kind.type === 'tool_call' && e.kind.call.id === row.callId)) {
      if (!fresh) return false;
      await refuse(`call ${row.callId} is not in the journal of session ${owner.sessionId}`);
      return true;
    }
    const overtaken = outcome === 'not_executed' ? overtakingEvent(current, row) : null;
    if (overtaken !== null) {
      if (!fresh) return false;
      await refuse(
        `the journal has recorded ${overtaken} of call ${row.callId} since this not_executed review was recorded: ` +
          'it was decided without that evidence; review the call again',
      );
      return true;
    }
    const prior = latest.get(row.callId);
    if (prior !== undefined && prior.outcome === outcome && prior.actor === row.actor) {
      if (!fresh) return false;
      const judgedOn = current.at(-1)?.seq ?? -1;
      const refused = await refuse(`it repeats the ${outcome} review ${row.actor} already journaled for call ${row.callId}`);
      // The one refusal a later write can make false (a review of the call journaled between the read and the mark,
      // which this decision then no longer repeats), and a refusal writes nothing for a conflict to show: the journal
      // is read once more, and the reason says what it holds now. The decision is not journaled after it was refused:
      // the operator, who saw it refused and may have decided again since (an order no clock can be trusted to give),
      // decides again, on the review that came between.
      if (refused === null) return true;
      await reload();
      const since = latestReviewAfter(current, row.callId, judgedOn);
      if (since === null) return true;
      const reason = `it repeated the ${outcome} review ${row.actor} had journaled for call ${row.callId} when it was judged, but the journal ` +
        `has since recorded the ${since.kind.review.outcome} review by ${since.kind.review.actor} (seq ${since.seq}): it was not journaled; record it again if it still holds`;
      if (await marked(() => markReviewStaleAgain(store, row.id, reason))) stale[stale.indexOf(refused)] = { ...refused, reason };
      return true;
    }
    let event: SessionEvent;
    // The inbox asked the person about a body that returned late when it took the decision, and one it overtook
    // since is stale (above).
    const review = { actor: row.actor, outcome, evidence: row.reason, source: 'human', decisionId: row.id, despiteLateReturn: true } as const;
    try {
      // A decision about an attempt whose later attempts never ran (refused before their bodies) is about the
      // operation's doubt, which its latest attempt carries: journaled there (docs/design.md#the-decision-inbox).
      // Only a `completed` one: the only review such an attempt takes after its earlier attempt was settled.
      const carrier = outcome === 'completed' ? laterNeverRan(current, row.callId) : null;
      event = await recordToolReview(owner, current, carrier ?? row.callId, review);
    } catch (error) {
      if ((error instanceof ToolRetryError && NO_LONGER_REVIEWABLE.has(error.code)) || error instanceof InvalidInputError) {
        if (!fresh && error instanceof ToolRetryError) return false;
        await refuse((outcome === 'completed' ? madeAgain(current, row) : null) ?? error.message);
        return true;
      }
      // The call still runs in this process: the decision waits (neither journaled nor stale) for a pass after it
      // has a result or its body has ended, which then judges it against that evidence.
      if (error instanceof DecisionError && error.code === 'call_in_flight') return true;
      if (error instanceof JournalFullError) {
        // A review that leaves the question open (`uncertain`; `not_executed`, after which the write is due and may
        // still be found made) may not take the room the journal keeps for the one that closes it
        // (docs/design.md#a-result-always-has-room): refused, so the person's next decision is not held up behind it.
        if (outcome !== 'completed') {
          await refuse(`the journal has no room for ${outcome === 'uncertain' ? 'an' : 'a'} ${outcome} review beside the room it keeps for the completed review that settles call ${row.callId}: ` +
            'it was not journaled; if the write was made (here, or in another session), record it completed');
          return true;
        }
        // A settling review in a journal filled before it kept room for every review it owes: it waits, and the
        // decisions after it are journaled all the same.
        return true;
      }
      throw error;
    }
    current = [...current, event];
    const reviewed = event.kind.type === 'tool_review' ? event.kind.review.callId : (row.callId as CallId);
    if (event.kind.type === 'tool_review') latest.set(reviewed, event.kind.review);
    // A row another pass refused meanwhile on an older read is marked journaled all the same (the journal holds it);
    // one that pass found journaled and marked first is left as it marked it.
    await marked(() => inbox.markReviewJournaled(row.id, event.eventId));
    journaled.push({ decisionId: row.id, callId: reviewed, outcome, actor: row.actor, event });
    return true;
  };
  for (const listed of rows) {
    let fresh = false;
    for (let attempt = 1; ; attempt += 1) {
      // Read again: an operator may have replaced it since the listing (a newer review of the call, which waits), or
      // another pass of the owner journaled it.
      const row = await inbox.get(listed.id);
      if (row === undefined || row.state !== 'decided') break;
      // Recorded on a journal newer than the one read (a review or an answer journaled since): judged on that one.
      if (row.journalSeq !== undefined && row.journalSeq > (current.at(-1)?.seq ?? -1)) {
        await reload();
        fresh = true;
      }
      try {
        if (await journalOne(row, fresh)) break;
        await reload();
        fresh = true;
      } catch (error) {
        // Another writer of the owner (a run of the session) moved the journal since it was read: judged again on the
        // journal read anew.
        if (attempt >= INBOX_WRITE_ATTEMPTS || !(error instanceof StoreConflictError && error.code === 'history_changed')) throw error;
        await reload();
        fresh = true;
      }
    }
  }
  return { journaled, stale, history: current };
}

/**
 * journalInboxReviews where the store keeps a decision inbox; on any other store (or a bare `loadHistory` reader)
 * nothing is waiting, and the history comes back as it was. What the owner runs before it decides about an open call.
 */
export async function journalWaitingReviews(
  owner: SessionOwner,
  store: Pick<SessionStore, 'loadHistory'>,
  history: readonly SessionEvent[],
): Promise<Pick<InboxReviewReport, 'journaled' | 'history'>> {
  const none = { journaled: [], history: [...history] };
  if (!(store instanceof JournalStore)) return none;
  try {
    return await journalInboxReviews(owner, store, history);
  } catch (error) {
    if (error instanceof DecisionError && error.code === 'inbox_unsupported') return none;
    throw error;
  }
}

/**
 * What a run does as it starts or resumes: journals the operators' review decisions waiting for the owner's session,
 * reading the journal only when one waits; true when it journaled any. A review of a call that has a result (one whose deadline passed while its
 * body ran) is journaled here too, where the open calls a resumed run settles are the only other place.
 */
export async function journalReviewsBeforeRun(owner: SessionOwner, store: Pick<SessionStore, 'loadHistory'>, history: () => Promise<readonly SessionEvent[]>): Promise<boolean> {
  if (!(store instanceof JournalStore) || !(await reviewDecisionsWaiting(store, owner.sessionId))) return false;
  return (await journalInboxReviews(owner, store, await history())).journaled.length > 0;
}

/** Whether a review decision of `sessionId` waits in `store`'s decision inbox to be journaled (false without an inbox). */
export async function reviewDecisionsWaiting(store: Pick<SessionStore, 'loadHistory'>, sessionId: string): Promise<boolean> {
  const inbox = decisionInboxIfAny(store);
  return inbox !== null && (await inbox.list({ sessionId, kind: 'review', states: ['decided'], limit: 1 })).items.length > 0;
}

/**
 * The sessions with operators' review decisions waiting to be journaled, across the store (none for a store without
 * an inbox), in the inbox's order, each once.
 */
export function sessionsWithWaitingReviews(store: Pick<SessionStore, 'loadHistory'>): Promise<string[]> {
  return sessionsWithDecided(store, 'review');
}

/** The sessions with approval decisions made and not used by any attempt yet, across the store, each once. */
export function sessionsWithDecidedApprovals(store: Pick<SessionStore, 'loadHistory'>): Promise<string[]> {
  return sessionsWithDecided(store, 'approval');
}

async function sessionsWithDecided(store: Pick<SessionStore, 'loadHistory'>, kind: 'review' | 'approval'): Promise<string[]> {
  const inbox = decisionInboxIfAny(store);
  if (inbox === null) return [];
  const sessions = new Set<string>();
  let after: string | undefined;
  for (;;) {
    const page = await inbox.list({ kind, states: ['decided'], limit: 500, ...(after === undefined ? {} : { after }) });
    for (const row of page.items) sessions.add(row.sessionId);
    if (page.next === null) return [...sessions];
    after = page.next;
  }
}
