/**
 * Bodies that outlive their attempt (docs/design.md#a-body-that-outlives-its-attempt). A deadline, a cancellation or
 * a task stop records the attempt's result while the body may go on running: a tool that ignores its AbortSignal
 * still makes its write later. Until the body ends, the call is still running, whatever its result says: a review
 * could be overtaken by it, and a retry would make the write a second time.
 *
 * In this process each owner keeps the calls whose bodies still run; when one ends, the owner journals that it did
 * (a `custom` event of plugin `jingwei.runtime`, kind `body_ended`), which is how another process (the decision
 * inbox, `jingwei review`) learns it.
 */
import { DecisionError, ToolRetryError } from '../errors.js';
import type { SessionEvent, ToolCall, ToolOperation, ToolResult } from '../event/types.js';
import type { CallId, TurnId } from '../ids.js';
import type { ApprovalChange, SessionOwner } from '../store/types.js';
import { setNewest } from '../bounded-map.js';
import { bodyHolders, commitAs, currentOwner, holdWhileBodyRuns, newestOwnerIn, ownerMayBeLost, SessionTable, storeOf } from '../store/owner-commit.js';

export const BODY_ENDED = { plugin: 'jingwei.runtime', kind: 'body_ended' } as const;

/**
 * How a late body ended: it returned (its output was not recorded) or threw; or an interrupt came between its marker
 * and its start, and it was never called.
 */
export type LateBodyEnd = 'returned' | 'threw' | 'not_called';

/**
 * The failures recorded while the body may still run: the interrupts that win the race against a running body, by
 * code and the category the runtime gives each. A body's own error may carry any code, but always the category
 * `body_failure`, so a body that throws `tool_timeout` has ended and is not taken for one.
 */
const INTERRUPTS: ReadonlyMap<string, string> = new Map([['tool_timeout', 'timeout'], ['tool_cancelled', 'cancelled'], ['tool_budget_stopped', 'budget']]);

interface LateBody {
  readonly taskId: string;
  readonly key: string;
}

/**
 * The late bodies still running in this process, by store (storeOf), session id and call id: whichever owner of the
 * session its store made asks, including one that acquired it after an earlier owner here let it go.
 */
const lateBodies = new SessionTable<Map<string, LateBody>>();
/** How late bodies ended in this process, by store, then session id and call id (the newest ENDINGS_KEPT a store). */
const endingsByStore = new WeakMap<object, Map<string, LateBodyEnd>>();
const ENDINGS_KEPT = 100_000;
const endingKey = (sessionId: string, callId: string) => `${sessionId}\n${callId}`;

/**
 * Keeps `call` as running in this process until `ended` settles, then journals how it ended, once its result
 * (`recorded`) has been written or has failed, through the owner that holds the session here by then (the call's own,
 * or one acquired after it let the session go). A journal that cannot take the event (no owner here holds the
 * session, or the store is closed) is left as it is: the inbox then waits for the lease, as for a call with no result.
 * The call's id and operation are read here, once: the caller's ToolExecution holds the same call object.
 */
export function trackLateBody(owner: SessionOwner, call: ToolCall, turnId: TurnId, ended: Promise<LateBodyEnd>, recorded: Promise<unknown>): void {
  const op = call.operation;
  if (op === undefined) return;
  const callId = call.id;
  lateBodies.take(owner, () => new Map()).set(callId, { taskId: op.taskId, key: op.key });
  const settledRecord = recorded.then(() => undefined, () => undefined);
  const journaled = Promise.all([ended, settledRecord]).then(async ([how]) => {
    const still = lateBodies.get(owner);
    still?.delete(callId);
    if (still?.size === 0) lateBodies.delete(owner);
    await journalBodyEnd(owner, callId, turnId, how, op);
  }).catch(() => undefined);
  holdWhileBodyRuns(owner, journaled);
}

/**
 * The end of a body whose result could not be written. A plan reviewed while it ran finds it (lateBodyEnd); another
 * owner here that took the session over journals it now. When this owner is still the newest here (its own write
 * failed: the store busy or full, or a host in another process fenced it), the end waits as a pending one, for this
 * owner's next call or review, or the next owner of the session here, to journal.
 */
export function unrecordedBodyEnd(owner: SessionOwner, call: ToolCall, turnId: TurnId, how: LateBodyEnd, spentApproval?: string): Promise<void> {
  const op = call.operation;
  const restore = how === 'not_called' ? spentApproval : undefined;
  if (currentOwner(owner) !== owner) return journalBodyEnd(owner, call.id, turnId, how, op, restore);
  noteBodyEnd(owner, call.id, how);
  keepPending(owner, call.id, { turnId, how, op, keptBy: owner, refusedBy: new WeakSet(), ...(restore !== undefined ? { restore } : {}) });
  return Promise.resolve();
}

/** Notes how the body of `callId` of `owner`'s session ended in this process (lateBodyEnd answers it from then on). */
function noteBodyEnd(owner: SessionOwner, callId: string, how: LateBodyEnd): void {
  const store = storeOf(owner);
  let endings = endingsByStore.get(store);
  if (endings === undefined) {
    endings = new Map();
    endingsByStore.set(store, endings);
  }
  setNewest(endings, endingKey(owner.sessionId, callId), how, ENDINGS_KEPT);
}

interface PendingEnd {
  readonly turnId: TurnId;
  readonly how: LateBodyEnd;
  /**
   * The owner that kept it: held here so that the store's close() can still write it through that owner when the host
   * dropped it (the registry of owners holds them weakly) while it still holds the session.
   */
  readonly keptBy: SessionOwner;
  /** The call's operation: the end is journaled only where it is that operation's latest attempt (commitBodyEnd). */
  readonly op: ToolOperation | undefined;
  /** The operator's approval the call's start marker spent, put back with a `not_called` end (ApprovalChange restore). */
  readonly restore?: string;
  /** Owners whose journal refused it as not holding the call as its latest attempt: they do not try again. */
  readonly refusedBy: WeakSet<SessionOwner>;
  /** The commit of this end under way, which a second flush waits for instead of journaling the end again. */
  flushing?: Promise<unknown> | undefined;
}

/**
 * Body ends this process knows of that no journal has taken yet (no owner here held the session when the body
 * ended), by store and session: the next owner of the session here journals them before anything is decided on the
 * journal without them (journalPendingBodyEnds).
 */
const pendingEnds = new SessionTable<Map<string, PendingEnd>>();

/**
 * Journals that the body of `callId` ended, through the owner that holds the session in this process by then: a late
 * body's end, or the end of a body whose result could not be written (its owner fenced by a takeover here). A
 * journal that cannot take it now keeps it pending, for the next owner of the session here to journal.
 */
export async function journalBodyEnd(owner: SessionOwner, callId: string, turnId: TurnId, how: LateBodyEnd, op: ToolOperation | undefined, restore?: string): Promise<void> {
  noteBodyEnd(owner, callId, how);
  // The call's own owner first, while it still holds its session: the newest owner of the view may hold a session of
  // the same id in another copy of the database (two servers cloned from one backup are one view).
  const newest = currentOwner(owner);
  if (newest !== owner && (await commitBodyEnd(owner, callId, turnId, how, op, restore)) === null) return;
  const error = await commitBodyEnd(newest, callId, turnId, how, op, restore);
  if (error === null) return;
  // The call's own journal does not hold it as its operation's latest attempt (a start marker whose commit did not
  // land, or an attempt made since): no journal this end is for would take it.
  if (newest === owner && movedOn(error)) return;
  // An owner of the call's own journal that took the session over here while the body ran, when the newest owner of
  // the view holds a copy's session of the same id: it holds the session, and its store's close waits for this end.
  const refusedBy = new WeakSet<SessionOwner>();
  if (movedOn(error)) refusedBy.add(newest);
  for (const holder of bodyHolders(owner)) {
    if (holder === owner || holder === newest) continue;
    const refused = await commitBodyEnd(holder, callId, turnId, how, op, restore);
    if (refused === null) return;
    if (movedOn(refused)) refusedBy.add(holder);
  }
  // Kept for the next owner of the call's own journal here; one whose journal does not hold the call does not retry.
  keepPending(owner, callId, { turnId, how, op, keptBy: owner, refusedBy, ...(restore !== undefined ? { restore } : {}) });
}

function keepPending(owner: SessionOwner, callId: string, end: PendingEnd): void {
  setNewest(pendingEnds.take(owner, () => new Map()), callId, end, ENDINGS_KEPT);
  // A host whose session another took over keeps the end where only a later owner in this process could journal it,
  // which such a host seldom makes: its log is then the only place that says how the body ended.
  const lost = ownerMayBeLost(owner);
  if (lost === null) return;
  const ended = end.how === 'not_called' ? 'was never called' : end.how === 'returned' ? 'returned (it most likely made its write)' : 'threw';
  process.emitWarning(
    `jingwei: the body of call ${callId} in session ${JSON.stringify(owner.sessionId)} ${ended} after this process's hold on the session ended ` +
      `(${lost}); no journal here can take that end now, and it is lost when this process exits: tell whoever reviews the call ` +
      '(docs/design.md#a-lost-session-stops-its-calls)',
    { code: 'JINGWEI_BODY_END_UNJOURNALED' },
  );
}

/**
 * Commits the end of `callId`'s body as `owner`; the commit's error, or null once it is journaled. With the call's
 * operation, only into a journal where the call is still that operation's latest attempt: a copy of the journal (a
 * file copied from a template, a database restored from a dump) that another store of this process holds shares
 * its id, and so its view, but not the call.
 */
/** The change that puts back the approval `id` a start marker of `callId` spent, its body never called. */
export function approvalRestore(id: string, callId: string, op: Pick<ToolOperation, 'taskId' | 'key'>): ApprovalChange {
  return { restore: { id, callId, taskId: op.taskId, key: op.key, at: new Date().toISOString() } };
}

async function commitBodyEnd(owner: SessionOwner, callId: string, turnId: TurnId, how: LateBodyEnd, op: ToolOperation | undefined, restore?: string): Promise<unknown> {
  try {
    await commitAs(owner, {
      events: [{ turnId, kind: { type: 'custom', ...BODY_ENDED, payload: { callId, ended: how } } }],
      ...(op ? { expectLatestAttempt: { taskId: op.taskId, key: op.key, callId: callId as CallId } } : {}),
      // A body never called leaves the approval its marker spent unspent (docs/design.md#durable-approvals).
      ...(op && restore !== undefined && how === 'not_called' ? { approval: approvalRestore(restore, callId, op) } : {}),
    });
    return null;
  } catch (error) {
    return error ?? new Error('the commit failed');
  }
}

const NOTHING_LEFT: ReadonlyMap<string, unknown> = new Map();

/** A refusal that no later try can get past: the call is not (or no longer) its operation's latest attempt there. */
const movedOn = (error: unknown): boolean => error instanceof ToolRetryError && error.code === 'not_latest_attempt';

/** Whether this process keeps body ends of `owner`'s session that no journal has taken yet (a lookup, no I/O). */
export const hasPendingBodyEnds = (owner: SessionOwner): boolean => pendingEnds.get(owner) !== undefined;

/**
 * Journals, through `owner`, the body ends of its session this process knows of and no journal has taken yet: a
 * history loaded before then lacks them, and a review decided on it would be blind to them. Returns the ends it could
 * not journal, by call id, with the commit's error.
 */
export async function journalPendingBodyEnds(owner: SessionOwner): Promise<ReadonlyMap<string, unknown>> {
  const pending = pendingEnds.get(owner);
  if (pending === undefined) return NOTHING_LEFT;
  const left = new Map<string, unknown>();
  for (const [callId, end] of [...pending]) {
    if (end.refusedBy.has(owner)) continue;
    // Another flush of this end under way (another call or review, another owner here): its outcome first, then, if
    // it failed, this owner's own try.
    let error = end.flushing === undefined ? undefined : await end.flushing;
    if (error !== null && pending.get(callId) === end) {
      const commit = commitBodyEnd(owner, callId, end.turnId, end.how, end.op, end.restore);
      end.flushing = commit;
      error = await commit;
      if (end.flushing === commit) end.flushing = undefined;
    }
    if (pending.get(callId) !== end) continue; // journaled by another flush meanwhile
    // Journaled, or refused by the call's own journal (it does not hold the call as its operation's latest attempt):
    // nothing more to do with it.
    if (error === null || (movedOn(error) && owner === end.keptBy)) pending.delete(callId);
    // This owner's journal does not hold the call as its operation's latest attempt: a copy of the call's journal,
    // or one that moved past it (a later attempt made elsewhere). Not this journal's end, nor a reason to refuse here.
    else if (movedOn(error)) end.refusedBy.add(owner);
    else left.set(callId, error);
  }
  if (pending.size === 0 && pendingEnds.get(owner) === pending) pendingEnds.delete(owner);
  return left;
}

/**
 * Journals the pending body ends of every session of the view `scope` (storeScope) through the newest owner here
 * that holds it, then those it could not take through the owners that kept them: what a store does as it closes,
 * while its owners can still write. The newest owner may hold a session of the same id in a copy of the journal
 * (tenant files copied from one template share its id), which refuses an end its call's own journal would take.
 */
export async function journalPendingBodyEndsIn(scope: object): Promise<void> {
  for (const sessionId of pendingEnds.sessionsIn(scope)) {
    const newest = newestOwnerIn(scope, sessionId);
    if (newest !== undefined) await journalPendingBodyEnds(newest);
    const left = pendingEnds.getIn(scope, sessionId);
    for (const kept of new Set([...(left?.values() ?? [])].map((end) => end.keptBy))) {
      if (kept !== newest) await journalPendingBodyEnds(kept);
    }
  }
}

/** The call of operation (taskId, key) of `owner`'s session whose body still runs in this process, if any. */
export function lateBodyOf(owner: SessionOwner, taskId: string, key: string): string | undefined {
  for (const [callId, body] of lateBodies.get(owner) ?? []) if (body.taskId === taskId && body.key === key) return callId;
  return undefined;
}

/** How the late body of `callId` of `owner`'s session ended in this process; undefined when none ended here. */
export function lateBodyEnd(owner: SessionOwner, callId: string): LateBodyEnd | undefined {
  return endingsByStore.get(storeOf(owner))?.get(endingKey(owner.sessionId, callId));
}

/** Whether the body of `callId` of `owner`'s session still runs in this process. */
export function bodyStillRuns(owner: SessionOwner, callId: string): boolean {
  return lateBodies.get(owner)?.has(callId) === true;
}

/**
 * The journaled end of the body of `callId` that says it went on (bodyCouldOutlive), or null; `afterResult`: the
 * call's result was journaled before it (an interrupt), else none was (a result that could not be written).
 */
export function bodyEnded(history: readonly SessionEvent[], callId: string): { readonly ended: string; readonly event: SessionEvent; readonly afterResult: boolean } | null {
  let result: ToolResult | null = null;
  for (const event of history) {
    const kind = event.kind;
    if (kind.type === 'tool_result') {
      if (kind.result.callId === callId) result ??= kind.result;
      continue;
    }
    const end = bodyEndOf(kind);
    if (end?.callId === callId && bodyCouldOutlive(result)) return { ended: end.ended, event, afterResult: result !== null };
  }
  return null;
}

/**
 * Whether a call's body could still be running once `result` was journaled (null: none yet): nothing recorded, or an
 * interrupt recorded while it ran. After any other result, the body's own, a `body_ended` event says nothing more:
 * the runtime journals one when it could not tell that the result's commit landed (its answer lost on the way back),
 * and it is not a body that went on.
 */
export function bodyCouldOutlive(result: ToolResult | null): boolean {
  if (result === null) return true;
  const outcome = result.outcome;
  return outcome.status === 'failed' && INTERRUPTS.get(outcome.code) === outcome.category;
}

/** `text` (a call's fact or reason), followed by how its body went on after its result, when the journal says. */
export function withLateEnd(text: string, record: { readonly bodyRanOn?: { readonly ended: 'returned' | 'threw' } }): string {
  return record.bodyRanOn === undefined ? text : `${text}; then its body went on and ${lateEndText(record.bodyRanOn.ended)}`;
}

/** How a body that went on after its result ended, for people: `returned`, `threw` or `not_called`. */
export function lateEndText(ended: 'returned' | 'threw' | 'not_called'): string {
  return ended === 'returned' ? 'returned (its output was not recorded: it most likely made its write)' : ended === 'threw' ? 'threw' : 'was never called';
}

/** The call and the end a `body_ended` event names (`unknown` for an end it does not say); null for any other event. */
export function bodyEndOf(kind: SessionEvent['kind']): { readonly callId: string; readonly ended: string } | null {
  if (kind.type !== 'custom' || kind.plugin !== BODY_ENDED.plugin || kind.kind !== BODY_ENDED.kind) return null;
  const payload = kind.payload;
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload) || typeof payload.callId !== 'string') return null;
  return { callId: payload.callId, ended: typeof payload.ended === 'string' ? payload.ended : 'unknown' };
}

/**
 * Whether the journal leaves the body of `callId` possibly running: its body started, its result is an interrupt
 * that won against the running body, and no `body_ended` event followed. Whether its host still holds the session
 * is the caller's question.
 */
export function bodyMayStillRun(history: readonly SessionEvent[], callId: string): boolean {
  let started = false;
  let interrupted = false;
  for (const event of history) {
    const kind = event.kind;
    if (kind.type === 'tool_started' && kind.callId === callId) started = true;
    else if (kind.type === 'tool_result' && kind.result.callId === callId) {
      const outcome = kind.result.outcome;
      interrupted = outcome.status === 'failed' && INTERRUPTS.get(outcome.code) === outcome.category;
    }
  }
  return started && interrupted && bodyEnded(history, callId) === null;
}

/**
 * Refuses a person's `not_executed` review of a call whose journal records that its body went on after its result
 * and returned (it most likely made its write), unless they said they checked the outside system: the decision
 * inbox's and recordToolReview's rule (docs/design.md#a-body-that-outlives-its-attempt).
 */
export function refuseAfterLateReturn(history: readonly SessionEvent[], callId: string): void {
  const end = bodyEnded(history, callId);
  if (end?.ended !== 'returned') return;
  throw new DecisionError(
    'decision_stale',
    callId,
    `nothing was recorded: the journal records that the body of call ${callId} ${end.afterResult ? 'went on after its result and returned' : 'returned, its result not written'} ` +
      `(seq ${end.event.seq}${end.event.recordedAt ? `, ${end.event.recordedAt}` : ''}), so it most likely made its write. ` +
      'Check the outside system; if it shows the write was not made, record the review again saying so ' +
      '(despiteLateReturn; jingwei review --despite-late-return; the console\'s box under the review form)',
  );
}
