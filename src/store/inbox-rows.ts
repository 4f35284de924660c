/**
 * The decision inbox's part of the backend contract (docs/design.md#the-decision-inbox): one row per approval
 * request or review decision, keyed by id. A backend stores the row; the rules live in src/store/inbox.ts.
 */
import type { SessionId } from '../ids.js';
import type { AttentionStatus } from './rows.js';

export type DecisionKind = 'approval' | 'review';

/**
 * `open`: an approval request waiting for an operator. `decided`: an operator decided (every review decision starts
 * here), not yet used by the session's owner. `consumed`: the owner used it and journaled it. `superseded`: a newer
 * attempt of the same operation left a newer request; a decision for this one is refused (a review: a newer review
 * of the same call replaced it before it was journaled; `note` names it). `stale`: a review the
 * owner could not journal (the call succeeded meanwhile, its outcome is not in doubt, or a newer attempt exists);
 * `note` says why, and nothing was written to the journal.
 */
export type DecisionState = 'open' | 'decided' | 'consumed' | 'superseded' | 'stale';
export const DECISION_STATES: readonly DecisionState[] = ['open', 'decided', 'consumed', 'superseded', 'stale'];

/** What an approval decision is bound to, beyond its session: a decision is used only by an attempt with all of it equal. */
export interface ApprovalBinding {
  readonly taskId: string;
  /** The operation key. */
  readonly key: string;
  readonly tool: string;
  /** The tool's contract revision. */
  readonly revision: string;
  /** SHA-256 (hex) of the canonical JSON of the call's arguments. */
  readonly argumentsDigest: string;
  /**
   * The approver key the tool required when the attempt was made (absent: none, or a row written before this field).
   * An approval answers only an attempt whose tool requires the same approver, or none.
   */
  readonly approver?: string;
}

/** One inbox row. Store and return every field unchanged. */
export interface DecisionRow {
  /** `approval_…` or `review_…` (time-ordered: lists page by id). */
  readonly id: string;
  readonly kind: DecisionKind;
  readonly sessionId: SessionId;
  /** Approval: the attempt that asked. Review: the call reviewed. */
  readonly callId: string;
  readonly state: DecisionState;
  /** Approval only (null for a review). */
  readonly binding: ApprovalBinding | null;
  /** The tool's name (a review names it when the operator gave it, else null). */
  readonly tool: string | null;
  /** The approver's note when it answered pending; for a stale review, why its owner did not journal it. */
  readonly note: string | null;
  /** `approved` / `denied`, or a review's outcome (`completed`, `not_executed`, `uncertain`); null while open. */
  readonly decision: string | null;
  readonly actor: string | null;
  /** An approval decision's reason, or a review's evidence. */
  readonly reason: string | null;
  /** ISO-8601 times from the writer's clock: for people, never for a decision. */
  readonly createdAt: string;
  readonly decidedAt: string | null;
  readonly consumedAt: string | null;
  /** The call id (approval) or event id (review) that used it. */
  readonly consumedBy: string | null;
  /**
   * A review: the seq of the last journal event it was recorded against, i.e. the evidence its operator could have
   * seen. Its owner refuses a `not_executed` review that the call's own events have since overtaken (a start
   * marker, a result, a late body's end journaled after it: docs/design.md#a-review-waits-for-the-call-to-stop).
   * Absent on rows recorded before it existed.
   */
  readonly journalSeq?: number;
}

/** What `listDecisions` filters on; rows come ordered by id, at most `limit` of them, ids greater than `after`. */
export interface DecisionQuery {
  readonly sessionId?: string;
  readonly kind?: DecisionKind;
  /** With `key`: the rows of one operation. */
  readonly taskId?: string;
  readonly key?: string;
  /** Default: every state. */
  readonly states?: readonly DecisionState[];
  readonly after?: string;
  readonly limit: number;
}

/** How far a call has got, as its attention row says (started: its start marker is journaled). */
export interface CallProgress {
  readonly started: boolean;
  readonly status: AttentionStatus;
}

/**
 * A backend's inbox. `transactDecision` reads the row with this id, calls `decide` once, and writes (inserts or
 * replaces) the row it returns, atomically with respect to every other writer of that row (including a
 * `transact` that read it through `TxReads.approvals`). `decide` may throw: write nothing and reject with it.
 * With `options.taskApprovals`, when the row read is an approval request, the backend also reads the approval rows
 * of the same session and task (every state), serialized with every other `transactDecision` that asks for them in
 * that session, and passes them to `decide`: two operators approving two identical requests at the same moment must
 * not both see the other still open (docs/design.md#identical-approvals). A backend without it passes undefined, and
 * the inbox's own read before the transaction is all the check there is.
 */
export interface InboxBackend {
  transactDecision<R>(
    id: string,
    decide: (row: DecisionRow | undefined, taskApprovals?: readonly DecisionRow[]) => { readonly write?: DecisionRow; readonly result: R },
    options?: { readonly taskApprovals?: boolean },
  ): Promise<R>;
  /**
   * Reads the review rows of one call that are `decided` (recorded, not yet journaled), ordered by id, calls `decide`
   * once with them, and writes the rows it returns, atomically with respect to every other `transactReview` of the
   * same call and every `transactDecision` of those rows: two operators reviewing one call at the same moment must
   * not both see none waiting. `decide` may throw: write nothing and reject with it. `progress` is the call's
   * attention row as it stands, read serialized with the session's commits (null when the call has none: it is not
   * its operation's latest attempt); a backend that keeps no attention index leaves it out. A review is written only
   * while the call is where the operator's read of the journal left it.
   */
  transactReview<R>(
    sessionId: SessionId,
    callId: string,
    decide: (waiting: readonly DecisionRow[], progress?: CallProgress | null) => { readonly writes: readonly DecisionRow[]; readonly result: R },
  ): Promise<R>;
  listDecisions(query: DecisionQuery): Promise<DecisionRow[]>;
  /**
   * Optional push: call `onChange(id)` after a transaction that wrote a decision row commits, in any process, and
   * `onChange('')` when the store closes. Resolves once listening; the returned function stops it. Without it,
   * waiters poll.
   */
  watchDecisions?(onChange: (id: string) => void): Promise<() => Promise<void>>;
}

/** The columns the SQL backends index; everything else of a row is kept as JSON text in `detail`. */
export interface DecisionRecord {
  id: string; kind: string; session_id: string; call_id: string; state: string; task_id: string | null; op_key: string | null; detail: string;
}

export const DECISION_COLUMNS = 'id, kind, session_id, call_id, state, task_id, op_key, detail';

export function decisionValues(row: DecisionRow): [string, string, string, string, string, string | null, string | null, string] {
  const { id, kind, sessionId, callId, state, binding, ...rest } = row;
  return [id, kind, sessionId, callId, state, binding?.taskId ?? null, binding?.key ?? null, JSON.stringify({ binding, ...rest })];
}

export function toDecision(r: DecisionRecord): DecisionRow {
  const detail = JSON.parse(r.detail) as Omit<DecisionRow, 'id' | 'kind' | 'sessionId' | 'callId' | 'state'>;
  return {
    id: r.id,
    kind: r.kind as DecisionKind,
    sessionId: r.session_id as SessionId,
    callId: r.call_id,
    state: r.state as DecisionState,
    binding: detail.binding ?? null,
    tool: detail.tool ?? null,
    note: detail.note ?? null,
    decision: detail.decision ?? null,
    actor: detail.actor ?? null,
    reason: detail.reason ?? null,
    createdAt: detail.createdAt,
    decidedAt: detail.decidedAt ?? null,
    consumedAt: detail.consumedAt ?? null,
    consumedBy: detail.consumedBy ?? null,
    ...(typeof detail.journalSeq === 'number' ? { journalSeq: detail.journalSeq } : {}),
  };
}

/** The in-memory filter every backend's query means (the memory and example backends use it as is). */
export function matchesQuery(row: DecisionRow, q: DecisionQuery): boolean {
  if (q.sessionId !== undefined && row.sessionId !== q.sessionId) return false;
  if (q.kind !== undefined && row.kind !== q.kind) return false;
  if (q.taskId !== undefined && row.binding?.taskId !== q.taskId) return false;
  if (q.key !== undefined && row.binding?.key !== q.key) return false;
  if (q.states !== undefined && !q.states.includes(row.state)) return false;
  if (q.after !== undefined && !(row.id > q.after)) return false;
  return true;
}

/** Rows of a map, filtered, ordered by id and cut to the limit: the whole query for an in-memory backend. */
export function queryRows(rows: Iterable<DecisionRow>, q: DecisionQuery): DecisionRow[] {
  return [...rows].filter((r) => matchesQuery(r, q)).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).slice(0, q.limit);
}

/**
 * What `TxReads.approvals` reads from an in-memory backend's rows: the operation's open and decided approval rows, and
 * the row `spent` names whatever its state, ordered by id.
 */
export function operationApprovals(rows: Iterable<DecisionRow>, sessionId: string, op: { taskId: string; key: string; spent?: string }): DecisionRow[] {
  return queryRows(rows, { sessionId, kind: 'approval', taskId: op.taskId, key: op.key, limit: Infinity })
    .filter((r) => r.state === 'open' || r.state === 'decided' || r.id === op.spent);
}

/**
 * The reviews of these calls recorded and not yet journaled, ordered by id: what an in-memory backend's
 * `transactReview` and `TxReads.reviews` read.
 */
export function waitingReviews(rows: Iterable<DecisionRow>, sessionId: string, callIds: readonly string[]): DecisionRow[] {
  return queryRows(rows, { sessionId, kind: 'review', states: ['decided'], limit: Infinity }).filter((r) => callIds.includes(r.callId));
}
