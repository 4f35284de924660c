/**
 * A run's reviews before it decides about an open call (docs/design.md#reconcilers): the operators' decisions waiting
 * in the inbox are journaled, then the reconcilers are asked. Several runs of one session driven through one owner
 * (a host resuming all its runs at startup) write beside each other: the inbox's journaling and the reconcile pass
 * read the journal again where another run moved it between their read and their write (a step or a call of its
 * own), instead of failing with `history_changed`.
 */
import type { SessionEvent } from '../event/types.js';
import { readOwnJournal } from '../store/owner-journal.js';
import { journalReviewsBeforeRun, journalWaitingReviews } from '../tool/inbox-review.js';
import { reconcileCalls } from '../tool/reconcile.js';
import { hasPendingBodyEnds, journalPendingBodyEnds } from '../tool/late-bodies.js';
import { gatewayPanicDescriber } from '../tool/runtime.js';
import type { CallContext } from './run-calls.js';

/**
 * Asks the reconcilers (once per invocation) about the run's calls in doubt and every call whose latest review is a
 * person's not_executed, and journals their answers; returns the journal with them.
 */
async function reconcileForRun(ctx: CallContext, current: readonly SessionEvent[]): Promise<readonly SessionEvent[]> {
  if (ctx.reconcilers.length === 0) return current;
  const forRun = { runId: ctx.runId, taskId: ctx.gateway.taskId };
  const store = ctx.store;
  const reload = store === undefined ? {} : { reload: () => store.loadHistory(ctx.owner.sessionId) };
  const describePanic = gatewayPanicDescriber(ctx.gateway);
  ctx.reconciled = await reconcileCalls(ctx.owner, ctx.reconcilers, current, {
    ...(ctx.signal ? { signal: ctx.signal } : {}), forRun, ...reload, ...(describePanic === undefined ? {} : { describePanic }),
  });
  return ctx.reconciled.history;
}

/**
 * What a run does as it starts or resumes: journals the operators' review decisions waiting in the inbox for its
 * session, whatever calls they review, and then, when it journaled any, asks the reconcilers at once: a person's
 * not_executed review is never left usable in the journal unchecked, whether or not the run reaches an open call.
 */
export async function journalReviewsAtStart(ctx: CallContext): Promise<void> {
  // A body end this process knows of and no journal has taken yet goes in first, as before any call or review.
  if (hasPendingBodyEnds(ctx.owner)) await journalPendingBodyEnds(ctx.owner);
  const store = ctx.store;
  if (store === undefined) return;
  if (!(await journalReviewsBeforeRun(ctx.owner, store, () => readOwnJournal(ctx.owner, store)))) return;
  ctx.inboxJournaled = true;
  await reconcileForRun(ctx, await readOwnJournal(ctx.owner, store));
}

/**
 * The journal a run decides about an open call on: the inbox's waiting reviews journaled and the reconcilers asked,
 * each once per invocation.
 */
export async function reviewsBeforeDeciding(ctx: CallContext): Promise<readonly SessionEvent[]> {
  const store = ctx.store!;
  let current: readonly SessionEvent[] = await store.loadHistory(ctx.owner.sessionId);
  if (!ctx.inboxJournaled) {
    current = (await journalWaitingReviews(ctx.owner, store, current)).history;
    ctx.inboxJournaled = true;
  }
  return ctx.reconciled === null ? reconcileForRun(ctx, current) : current;
}
