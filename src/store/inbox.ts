/**
 * The decision inbox (docs/design.md#the-decision-inbox): where an operator records an approval or review decision
 * without owning the session. The inbox is transport; the journal is the evidence: the session's owner journals a
 * decision when it uses it. Pure decisions first, then the API on a store.
 */
import { performance } from 'node:perf_hooks';
import { DecisionError, InvalidInputError, ToolRetryError } from '../errors.js';
import { checkId, uuidv7, type SessionId } from '../ids.js';
import { TOOL_REVIEW_OUTCOMES, type ToolReviewOutcome } from '../event/types.js';
import { LIMITS } from '../limits.js';
import { describeValue, hasVisibleText, truncateUtf8, utf8Length } from '../text.js';
import { reviewableAttempt } from '../tool/evidence.js';
import { refuseAfterLateReturn } from '../tool/late-bodies.js';
import { checkSignal } from '../tool/runtime-config.js';
import { JournalStore } from './journal-store.js';
import { callProgressIn } from './attention.js';
import type { CallProgress, DecisionKind, DecisionQuery, DecisionRow, DecisionState, InboxBackend } from './inbox-rows.js';
import { DECISION_STATES } from './inbox-rows.js';
import type { SessionStore } from './types.js';

export const newApprovalRequestId = (): string => `approval_${uuidv7()}`;
const newReviewDecisionId = (): string => `review_${uuidv7()}`;

/** The inbox's rule for an actor, a reason or evidence: non-empty text of at most LIMITS.maxDiagnosticBytes, a valid id. */
export function inboxText(field: string, value: unknown, optional: boolean): string | null {
  if (value === undefined && optional) return null;
  if (typeof value !== 'string' || !hasVisibleText(value)) {
    throw new InvalidInputError(field, 'must be non-empty text: a character a reader sees, not white space or invisible characters alone');
  }
  const bytes = utf8Length(value);
  if (bytes > LIMITS.maxDiagnosticBytes) throw new InvalidInputError(field, `is ${bytes} bytes, at most ${LIMITS.maxDiagnosticBytes} allowed`);
  return checkId<string>(field, value);
}

/** Actor names the library gives its own decisions: a reconciler's answers, the `retry_safe` policy's reviews. */
const RESERVED_ACTOR_PREFIXES = ['reconciler:', 'policy:'] as const;

/**
 * The name as a reader sees it: compatibility forms folded (a fullwidth colon reads as a colon), white space and
 * invisible format characters (zero-width spaces, joiners) dropped, case folded.
 */
const asRead = (name: string): string => name.normalize('NFKC').replace(/[\p{White_Space}\p{Cf}]/gu, '').toLowerCase();

/**
 * The actor of an operator's decision: the inbox's text rule, and not a name the library gives its own decisions,
 * which the views and the audit would show as a reconciler's or a policy's, nor one that reads as such a name.
 */
export function inboxActor(value: unknown): string {
  const actor = inboxText('actor', value, false)!;
  const read = asRead(actor);
  const reserved = RESERVED_ACTOR_PREFIXES.find((p) => read.startsWith(p));
  if (reserved !== undefined) {
    throw new InvalidInputError('actor', `names starting with ${reserved} are the library's own (a reconciler's answers, the retry_safe policy); an operator's decision needs the operator's name`);
  }
  return actor;
}

/** An operator's approval decision. */
export interface ApprovalDecisionInput {
  readonly actor: string;
  readonly reason?: string;
  /**
   * Approve although an operator already approved an identical call in the same session (same task, tool and
   * arguments, another operation): a second identical write is meant. Without it such an approval is refused
   * (DecisionError `decision_identical`). Ignored by `deny`.
   */
  readonly allowIdentical?: boolean;
}

/** An operator's review of a call, for the owner to journal. */
export interface ReviewDecisionInput {
  readonly sessionId: string;
  readonly callId: string;
  readonly outcome: ToolReviewOutcome;
  readonly evidence: string;
  readonly actor: string;
  /**
   * The id of the review of this call still waiting to be journaled that this one replaces, as the operator saw it.
   * A call takes one waiting review: without it, a review is refused while another one waits (and with it, when that
   * one is no longer the one waiting).
   */
  readonly replaces?: string;
  /**
   * `not_executed` although the journal records that the call's body went on after its result (a timeout, a cancel)
   * and returned: the person checked the outside system and says the write was not made all the same. Without it
   * such a review is refused (`decision_stale`), since a body that returned most likely made its write.
   */
  readonly despiteLateReturn?: boolean;
}

export interface DecisionListOptions {
  readonly sessionId?: string;
  readonly kind?: DecisionKind;
  /** Default: `open` and `decided` (what is still waiting for someone). */
  readonly states?: readonly DecisionState[];
  /** The `next` of the previous page. */
  readonly after?: string;
  /** Default 100, at most 1,000. */
  readonly limit?: number;
}

export interface DecisionPage {
  readonly items: DecisionRow[];
  /** Pass as `after` for the next page; null on the last page. */
  readonly next: string | null;
}

export interface AwaitDecisionOptions {
  /** Give up after this many milliseconds (DecisionError `decision_wait_timeout`). */
  readonly timeoutMs?: number;
  /** Give up at this time. */
  readonly deadline?: Date;
  /** Give up when aborted (DecisionError `decision_wait_aborted`). */
  readonly signal?: AbortSignal;
  /** How often to look when the store cannot push (SQLite, memory); default 200 ms. */
  readonly pollMs?: number;
}

function inboxOf(store: SessionStore): InboxBackend {
  if (typeof (store as unknown as { then?: unknown } | null)?.then === 'function') {
    throw new InvalidInputError('store', 'is a Promise: await the store (openPostgresStore resolves to one) before asking for its inbox');
  }
  if (typeof store !== 'object' || store === null) throw new InvalidInputError('store', `must be a store, got ${describeValue(store)}`);
  const backend = store instanceof JournalStore ? store.backend : undefined;
  if (!backend?.inbox) throw new DecisionError('inbox_unsupported', null, `the ${store.kind} store has no decision inbox`);
  return backend.inbox;
}

function sameProgress(a: CallProgress | null, b: CallProgress | null): boolean {
  return a === null || b === null ? a === b : a.started === b.started && a.status === b.status;
}

/** What changed in a call's progress between the operator's read and the review's write, in words. */
function movedOn(seen: CallProgress | null, now: CallProgress | null): string {
  if (now === null) return 'a newer attempt of its operation was journaled';
  if (seen !== null && !seen.started && now.started) return 'its start marker was journaled';
  return `its journal went from ${seen === null ? 'no row' : seen.status} to ${now.status}`;
}

function markStale(inbox: InboxBackend, decisionId: string, reason: string, again: boolean): Promise<DecisionRow> {
  const id = checkId<string>('decisionId', decisionId);
  const why = inboxText('reason', typeof reason === 'string' ? truncateUtf8(reason, LIMITS.maxDiagnosticBytes) : reason, false)!;
  const at = new Date().toISOString();
  return inbox.transactDecision(id, (row) => {
    if (row?.kind !== 'review') throw new DecisionError('decision_not_found', id, `no review decision ${id}`);
    if (row.state !== 'decided' && !(again && row.state === 'stale')) throw new DecisionError('decision_stale', id, `review decision ${id} is ${row.state}`);
    const write: DecisionRow = { ...row, state: 'stale', note: why, consumedAt: at };
    return { write, result: write };
  });
}

/**
 * markReviewStale for an owner that judges a decision again on a journal that moved since it refused it (internal):
 * a row it marked stale is marked again, the newer reason replacing the older.
 */
export function markReviewStaleAgain(store: SessionStore, decisionId: string, reason: string): Promise<DecisionRow> {
  return markStale(inboxOf(store), decisionId, reason, true);
}

/**
 * For each of `rows`, by its id, the approval requests in `states` of its session for the same tool and arguments
 * digest under another operation, oldest first: in its task, the same write (an identical call a model asked for
 * again while the first waited for a person, docs/design.md#identical-approvals, which `sameWrite` tells); in another
 * task, most likely a host that started the task again. None for a row without a binding. Each session's requests
 * are read once, however many of `rows` it has.
 */
export async function identicalApprovals(store: SessionStore, rows: readonly DecisionRow[], states: readonly DecisionState[]): Promise<Map<string, DecisionRow[]>> {
  const inbox = inboxOf(store);
  const bySession = new Map<string, DecisionRow[]>();
  for (const sessionId of new Set(rows.filter((r) => r.binding !== null).map((r) => r.sessionId))) {
    bySession.set(sessionId, await approvalsOfSession(inbox, sessionId, states));
  }
  return new Map(rows.map((row) => [row.id, (bySession.get(row.sessionId) ?? []).filter((r) => sameArguments(row, r))]));
}

async function approvalsOfSession(inbox: InboxBackend, sessionId: string, states: readonly DecisionState[]): Promise<DecisionRow[]> {
  const found: DecisionRow[] = [];
  let after: string | undefined;
  for (;;) {
    const rows = await inbox.listDecisions({ sessionId, kind: 'approval', states, ...(after !== undefined ? { after } : {}), limit: 1000 });
    found.push(...rows);
    if (rows.length < 1000) return found;
    after = rows[rows.length - 1]!.id;
  }
}

/** Two approval requests for the same tool and arguments digest under another operation, in any task or session. */
export function sameArguments(a: DecisionRow, b: DecisionRow): boolean {
  const x = a.binding;
  const y = b.binding;
  return x !== null && y !== null && y.tool === x.tool && y.argumentsDigest === x.argumentsDigest &&
    (b.sessionId !== a.sessionId || y.taskId !== x.taskId || y.key !== x.key);
}

/** Two approval requests of one session for the same write: same task, tool and arguments digest, another operation. */
export function sameWrite(a: DecisionRow, b: DecisionRow): boolean {
  return sameArguments(a, b) && b.sessionId === a.sessionId && b.binding!.taskId === a.binding!.taskId;
}

/** The request among `rows` identical to `row` that an operator approved (used or not), if any. */
const approvedTwin = (row: DecisionRow, rows: readonly DecisionRow[]): DecisionRow | undefined =>
  rows.find((r) => (r.state === 'decided' || r.state === 'consumed') && r.decision === 'approved' && sameWrite(row, r));

function identicalRefusal(row: DecisionRow, twin: DecisionRow): DecisionError {
  return new DecisionError('decision_identical', row.id,
    `approval request ${row.id} (call ${row.callId}) asks for a call identical to one already approved in session ${row.sessionId}: ${twin.id} ` +
      `(call ${twin.callId}, approved by ${twin.actor ?? 'an operator'}, ${twin.state === 'consumed' ? 'used' : 'not used yet'}), the same tool and arguments under another operation. ` +
      'Approving this one too makes the write a second time. Deny it if it repeats that call (a model that asked again while the first waited); ' +
      'approve it with allowIdentical (jingwei approve --allow-identical) only if a second identical write is meant. Nothing was recorded');
}

/** The operator's side of the inbox, on any store built by this library whose backend has one. */
export class DecisionInbox {
  private readonly inbox: InboxBackend;
  constructor(private readonly store: SessionStore) {
    this.inbox = inboxOf(store);
  }

  /** Approves an open request; refused (nothing written) when it is unknown, decided, used or superseded. */
  async approve(requestId: string, input: ApprovalDecisionInput): Promise<DecisionRow> {
    return this.decide(requestId, 'approved', input);
  }

  async deny(requestId: string, input: ApprovalDecisionInput): Promise<DecisionRow> {
    return this.decide(requestId, 'denied', input);
  }

  private async decide(requestId: string, decision: 'approved' | 'denied', input: ApprovalDecisionInput): Promise<DecisionRow> {
    const id = checkId<string>('requestId', requestId);
    const actor = inboxActor(input?.actor);
    const reason = inboxText('reason', input?.reason, true);
    const allowIdentical: unknown = input?.allowIdentical;
    if (allowIdentical !== undefined && typeof allowIdentical !== 'boolean') {
      throw new InvalidInputError('allowIdentical', `must be a boolean, got ${describeValue(allowIdentical)}`);
    }
    const checkIdentical = decision === 'approved' && allowIdentical !== true;
    if (checkIdentical) await this.refuseIdenticalApproved(id);
    const at = new Date().toISOString();
    return this.inbox.transactDecision(id, (row, taskApprovals) => {
      if (row?.kind !== 'approval') {
        const why = /^approval_[0-9a-f-]{36}$/.test(id)
          ? 'a journal moved here with export and import leaves its requests in the old store: resume the session\'s run here, and it asks the approver again'
          : 'a decision takes the request\'s whole id, approval_ and 36 characters, as jingwei queue and jingwei events print it';
        throw new DecisionError('decision_not_found', id, `no approval request ${id} in this store (${why})`);
      }
      if (row.state !== 'open') {
        // A superseded row's note says why (a later attempt asked again, was answered without it, its task ended).
        // A consumed one was decided by its actor and then used by an attempt of the host: say both, not "consumed by".
        const decided = row.actor ? `${row.decision ?? 'decided'} by ${row.actor}` : null;
        const why = row.state === 'superseded' && row.note !== null ? ` (${row.note})`
          : row.state === 'consumed' && decided !== null ? ` (${decided}, and used by the attempt ${row.consumedBy ?? 'that asked again'} since)`
          : decided !== null ? ` (${decided})` : '';
        throw new DecisionError('decision_stale', id, `approval request ${id} is ${row.state}${why}; it takes one decision`);
      }
      // Read again under the backend's lock: another operator's approval of the identical request, made since the
      // read above, is seen here (a backend without that read leaves the read above as the only check).
      const twin = checkIdentical && taskApprovals !== undefined ? approvedTwin(row, taskApprovals) : undefined;
      if (twin !== undefined) throw identicalRefusal(row, twin);
      const write: DecisionRow = { ...row, state: 'decided', decision, actor, reason, decidedAt: at };
      return { write, result: write };
    }, checkIdentical ? { taskApprovals: true } : undefined);
  }

  /**
   * Refuses to approve an open request when an operator already approved an identical call in its session (same
   * task, tool and arguments, another operation), whether that approval was used or still waits: a model that asked
   * again while its first call waited for a person left two requests for one write (docs/design.md#identical-approvals).
   * Any other state of the request is left to the decision's own transaction to refuse.
   */
  private async refuseIdenticalApproved(id: string): Promise<void> {
    const row = await this.get(id);
    if (row?.kind !== 'approval' || row.state !== 'open') return;
    const twin = approvedTwin(row, await approvalsOfSession(this.inbox, row.sessionId, ['decided', 'consumed']));
    if (twin !== undefined) throw identicalRefusal(row, twin);
  }

  /** Records a review of a call of a session, for its owner to journal; the call must be in that session's journal. */
  async recordReview(input: ReviewDecisionInput): Promise<DecisionRow> {
    const sessionId = checkId<SessionId>('sessionId', input?.sessionId);
    const callId = checkId<string>('callId', input.callId);
    if (!(TOOL_REVIEW_OUTCOMES as readonly unknown[]).includes(input.outcome)) {
      throw new InvalidInputError('outcome', `must be one of ${TOOL_REVIEW_OUTCOMES.join(', ')}`);
    }
    const evidence = inboxText('evidence', input.evidence, false)!;
    const actor = inboxActor(input.actor);
    const replaces = input.replaces === undefined ? undefined : checkId<string>('replaces', input.replaces);
    if (input.despiteLateReturn !== undefined && typeof input.despiteLateReturn !== 'boolean') {
      throw new InvalidInputError('despiteLateReturn', `must be a boolean, got ${describeValue(input.despiteLateReturn)}`);
    }
    const { history, inFlight } = await (this.store as JournalStore).callInFlight(sessionId, callId);
    const call = history.find((e) => e.kind.type === 'tool_call' && e.kind.call.id === callId)?.kind;
    if (call?.type !== 'tool_call') {
      // Say which was not found: the session (a typo in its id), or the call in it (a call id must be given whole).
      const why = history.length === 0
        ? `session ${sessionId} has no events: is its id right and whole? (jingwei sessions lists the sessions)`
        : `session ${sessionId} has no call ${callId}${/^toolcall_/.test(callId) ? '' : ' (a review takes the call\'s whole id, toolcall_…, as jingwei inspect prints it)'}`;
      throw new DecisionError('decision_not_found', callId, why);
    }
    // A retry whose start marker is not journaled (its approver is asked) has not run: a review of it is taken, and
    // its start marker is then refused while the review waits (docs/design.md#a-review-decision-stops-a-retry-before-its-body).
    // Only if the store can say, when the review is written, that the marker is still not in.
    const beforeMarker = inFlight === 'no_result' && call.call.operation?.retry != null &&
      !history.some((e) => e.kind.type === 'tool_started' && e.kind.callId === callId);
    if (inFlight === 'no_result' && !beforeMarker) {
      throw new DecisionError(
        'call_in_flight',
        callId,
        `call ${callId} may still be running: the host that made it still holds session ${sessionId} (its lease is live) and no result is journaled. ` +
          'A review now could be overtaken by the call itself; review it once the host has stopped (its lease runs out) or recorded a result',
      );
    }
    if (inFlight === 'body_outlived_result') {
      throw new DecisionError(
        'call_in_flight',
        callId,
        `call ${callId} may still be running: its result records that it was interrupted while its body ran, the body may have gone on, and the host that made it still holds session ${sessionId} (its lease is live). ` +
          'A review now could be overtaken by the body itself; review it once the host has journaled that the body ended (jingwei events shows it) or has stopped (its lease runs out)',
      );
    }
    if (input.outcome === 'not_executed' && input.despiteLateReturn !== true) refuseAfterLateReturn(history, callId);
    try {
      reviewableAttempt(history, callId, input.outcome);
    } catch (error) {
      // What the owner would refuse to journal (and mark stale) is refused now, so the operator is not told "Recorded".
      if (!(error instanceof ToolRetryError)) throw error;
      throw new DecisionError('decision_stale', callId, `nothing was recorded: ${error.detail}`, { cause: error });
    }
    const at = new Date().toISOString();
    const id = newReviewDecisionId();
    const row: DecisionRow = {
      id, kind: 'review', sessionId, callId, state: 'decided', binding: null, tool: call.call.name, note: null,
      decision: input.outcome, actor, reason: evidence, createdAt: at, decidedAt: at, consumedAt: null, consumedBy: null,
      journalSeq: history.length - 1,
    };
    // The call as the journal read above leaves it: the review is written only while the store's row still says so.
    const seen = callProgressIn(history, callId);
    const recording = this.inbox.transactReview(sessionId, callId, (waiting, progress) => {
      if (progress === undefined && beforeMarker) {
        throw new DecisionError(
          'call_in_flight',
          callId,
          `call ${callId} is a retry waiting to start (its approver is asked): the ${this.store.kind} store cannot say when the review is written whether it has started since, so nothing was recorded; deny its approval request, or review it once it has a result`,
        );
      }
      if (progress !== undefined && !sameProgress(progress, seen)) {
        if (beforeMarker && progress?.started === true) {
          throw new DecisionError('call_in_flight', callId, `call ${callId} started while the review was recorded (its start marker is journaled now), so nothing was recorded: review it once it has a result`);
        }
        throw new DecisionError('decision_stale', callId, `call ${callId} moved on while the review was recorded (${movedOn(seen, progress)}), so nothing was recorded: look at it again`);
      }
      refuseUnlessReplacing(callId, waiting, replaces);
      const replaced = waiting.map((w): DecisionRow => ({ ...w, state: 'superseded', note: `replaced by review ${id} (${input.outcome} by ${actor}) before it was journaled`, consumedAt: at }));
      return { writes: [...replaced, row], result: row };
    });
    try {
      return await recording;
    } catch (error) {
      // Refused for the review it names: said truly when that review is of another call, or does not exist.
      if (replaces === undefined || !(error instanceof DecisionError) || error.code !== 'decision_stale' || error.decisionId === callId) throw error;
      const named = await this.get(replaces);
      if (named?.kind !== 'review') throw new DecisionError('decision_not_found', replaces, `no review decision ${replaces}; nothing was recorded`, { cause: error });
      if (named.callId !== callId) throw new InvalidInputError('replaces', `review ${replaces} is of call ${named.callId}, not of call ${callId}; nothing was recorded`, { cause: error });
      throw error;
    }
  }

  /**
   * Marks a review decision as journaled (by the event `eventId`); refused unless it is still decided, or superseded
   * by a newer review after its owner had begun journaling it (the journal holds it, so the inbox says so).
   */
  async markReviewJournaled(decisionId: string, eventId: string): Promise<DecisionRow> {
    const id = checkId<string>('decisionId', decisionId);
    const by = checkId<string>('eventId', eventId);
    const at = new Date().toISOString();
    return this.inbox.transactDecision(id, (row) => {
      if (row?.kind !== 'review') throw new DecisionError('decision_not_found', id, `no review decision ${id}`);
      if (row.state !== 'decided' && row.state !== 'superseded' && row.state !== 'stale') throw new DecisionError('decision_stale', id, `review decision ${id} is ${row.state}`);
      // A replaced review its owner journaled anyway, or one another pass refused meanwhile on an older read of the
      // journal: "replaced before it was journaled" or the refusal no longer holds, since the journal holds it.
      const write: DecisionRow = { ...row, state: 'consumed', consumedAt: at, consumedBy: by, ...(row.state !== 'decided' ? { note: null } : {}) };
      return { write, result: write };
    });
  }

  /**
   * Marks a review decision stale: its session's owner refused to journal it (`reason` says why) and wrote nothing.
   * Refused unless it is still decided.
   */
  async markReviewStale(decisionId: string, reason: string): Promise<DecisionRow> {
    return markStale(this.inbox, decisionId, reason, false);
  }

  async get(id: string): Promise<DecisionRow | undefined> {
    const checked = checkId<string>('id', id);
    return this.inbox.transactDecision(checked, (row) => ({ result: row }));
  }

  async list(options: DecisionListOptions = {}): Promise<DecisionPage> {
    const limit = options.limit ?? 100;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw new InvalidInputError('limit', 'must be an integer from 1 to 1000');
    const states = options.states ?? ['open', 'decided'];
    for (const s of states) if (!DECISION_STATES.includes(s)) throw new InvalidInputError('states', `unknown state ${JSON.stringify(s)}`);
    if (options.kind !== undefined && options.kind !== 'approval' && options.kind !== 'review') {
      throw new InvalidInputError('kind', 'must be approval or review');
    }
    const query: DecisionQuery = {
      ...(options.sessionId !== undefined ? { sessionId: checkId<string>('sessionId', options.sessionId) } : {}),
      ...(options.kind !== undefined ? { kind: options.kind } : {}),
      ...(options.after !== undefined ? { after: checkAfter(options.after, options.kind) } : {}),
      states,
      limit: limit + 1,
    };
    const rows = await this.inbox.listDecisions(query);
    const items = rows.slice(0, limit);
    return { items, next: rows.length > limit ? items[items.length - 1]!.id : null };
  }
}

/**
 * A call takes one review waiting to be journaled (docs/design.md#a-call-takes-one-waiting-review): a second
 * operator's review is refused unless it names the waiting one it replaces, so two answers given at the same moment
 * never both read "Recorded", and an operator who overrides a colleague has seen what they override.
 */
function refuseUnlessReplacing(callId: string, waiting: readonly DecisionRow[], replaces: string | undefined): void {
  const latest = waiting[waiting.length - 1];
  if (latest === undefined) {
    if (replaces === undefined) return;
    throw new DecisionError('decision_stale', replaces, `review ${replaces} of call ${callId} is no longer waiting (it was journaled or replaced meanwhile): check the call again and decide anew`);
  }
  if (replaces === latest.id) return;
  const what = `${latest.decision} by ${latest.actor}, recorded ${latest.decidedAt}`;
  throw new DecisionError(
    'decision_stale',
    latest.id,
    replaces === undefined
      ? `call ${callId} already has a review waiting for its host to journal it: ${latest.id} (${what}). A call takes one waiting review: ` +
          `to replace it, review again naming it (replaces: ${latest.id}; jingwei review --replaces ${latest.id})`
      : `review ${replaces} is not the review of call ${callId} waiting to be journaled; ${latest.id} is (${what}): check the call again and decide anew`,
  );
}

/**
 * A page's `after`: the id of a decision, of the listed kind when one is given. Pages are ordered by id, so any other
 * text would silently skip every decision after it in that order ('garbage' sorts after every `approval_` id).
 */
function checkAfter(after: unknown, kind: 'approval' | 'review' | undefined): string {
  const id = checkId<string>('after', after);
  const prefix = kind === undefined ? '(approval|review)' : kind;
  if (!new RegExp(`^${prefix}_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).test(id)) {
    throw new InvalidInputError('after', `must be the id of ${kind === undefined ? 'a decision' : kind === 'approval' ? 'an approval request' : 'a review decision'} (a page's next), got ${JSON.stringify(id)}`);
  }
  return id;
}

/** The operator's side of the inbox of `store`. Throws DecisionError `inbox_unsupported` when its backend has none. */
export function decisionInbox(store: SessionStore): DecisionInbox {
  return new DecisionInbox(store);
}

/** The inbox of `store`, or null for a store without one (not built on a backend, or a backend with none). */
export function decisionInboxIfAny(store: Pick<SessionStore, 'loadHistory'>): DecisionInbox | null {
  return store instanceof JournalStore && store.backend.inbox ? new DecisionInbox(store) : null;
}

/** How long past the deadline a read already under way may still answer: a deadline of now still reads once. */
const READ_GRACE_MS = 1_000;

const waitAborted = (id: string, signal: AbortSignal | undefined) =>
  new DecisionError('decision_wait_aborted', id, `stopped waiting for ${id}: aborted`, { cause: signal?.reason });

/**
 * The read, unless the deadline (monotonic, and its grace) passes or the signal fires first: a store that cannot answer (a
 * network partition drops packets without a reset) must not hold the wait past its deadline. A read left behind
 * settles unheard.
 */
function readWithin<T>(read: Promise<T>, id: string, deadline: number, signal: AbortSignal | undefined): Promise<T> {
  if (deadline === Infinity && !signal) return read;
  return new Promise<T>((resolve, reject) => {
    const finish = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const onAbort = () => {
      finish();
      reject(waitAborted(id, signal));
    };
    const timer = deadline === Infinity ? undefined : setTimeout(() => {
      finish();
      reject(new DecisionError('decision_wait_timeout', id, `approval request ${id} was still open at the deadline (the store did not answer in time)`));
    }, Math.min(Math.max(0, deadline - performance.now()) + READ_GRACE_MS, LIMITS.maxTimeoutMs));
    signal?.addEventListener('abort', onAbort, { once: true });
    read.then((value) => { finish(); resolve(value); }, (error: unknown) => { finish(); reject(error); });
  });
}

/**
 * Waits until the approval request `requestId` is no longer open (decided, used or superseded) and returns its row.
 * PostgreSQL wakes the waiter with LISTEN/NOTIFY; other stores are polled. Throws DecisionError
 * `decision_not_found` for an unknown request, `decision_wait_timeout` at the deadline, `decision_wait_aborted`
 * when the signal fires.
 */
export async function awaitDecision(store: SessionStore, requestId: string, options: AwaitDecisionOptions = {}): Promise<DecisionRow> {
  const inbox = inboxOf(store);
  const id = checkId<string>('requestId', requestId);
  const pollMs = options.pollMs ?? 200;
  if (!Number.isSafeInteger(pollMs) || pollMs < 1) throw new InvalidInputError('pollMs', 'must be a positive integer');
  const given = options.deadline as unknown;
  if (given !== undefined && !(given instanceof Date && Number.isFinite(given.getTime()))) {
    throw new InvalidInputError('deadline', `must be a valid Date, got ${given instanceof Date ? 'an invalid Date' : describeValue(given)}`);
  }
  checkSignal(options.signal, 'signal');
  // Waited out on the monotonic clock: a wall clock stepped back an hour held a wait of seconds for that hour. A
  // `deadline` is a wall-clock instant, so it becomes the time left until it, once, here.
  const started = performance.now();
  let deadline = options.deadline ? started + (options.deadline.getTime() - Date.now()) : Infinity;
  if (options.timeoutMs !== undefined) {
    if (!Number.isSafeInteger(options.timeoutMs) || options.timeoutMs < 0) throw new InvalidInputError('timeoutMs', 'must be a non-negative integer');
    deadline = Math.min(deadline, started + options.timeoutMs);
  }
  let wake: (() => void) | null = null;
  // '' names no request: the store is closing, and the next read meets it at once.
  const stop = inbox.watchDecisions ? await inbox.watchDecisions((changed) => { if (changed === id || changed === '') wake?.(); }) : null;
  const onAbort = () => wake?.();
  options.signal?.addEventListener('abort', onAbort);
  try {
    for (;;) {
      if (options.signal?.aborted) throw waitAborted(id, options.signal);
      const row = await readWithin(inbox.transactDecision(id, (r) => ({ result: r })), id, deadline, options.signal);
      if (!row) throw new DecisionError('decision_not_found', id, `no approval request ${id}`);
      if (row.state !== 'open') return row;
      const left = deadline - performance.now();
      if (left <= 0) throw new DecisionError('decision_wait_timeout', id, `approval request ${id} was still open at the deadline`);
      // With a push channel, polling is only the safety net for a missed notification.
      const interval = stop ? Math.max(pollMs, 5_000) : pollMs;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.min(left, interval, LIMITS.maxTimeoutMs));
        function done() {
          clearTimeout(timer);
          wake = null;
          resolve();
        }
        wake = done;
      });
    }
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    // Leaving the listening connection is bounded as a late read is: a silent server does not hold the wait.
    if (stop) await readWithin(stop(), id, performance.now(), undefined).catch(() => undefined);
  }
}
