/**
 * The inbox rows an approval change of a commit writes, decided inside the commit's transaction
 * (docs/design.md#durable-approvals).
 */
import { DecisionError, InvalidInputError } from '../errors.js';
import type { EventDraft } from '../event/types.js';
import type { SessionId } from '../ids.js';
import type { ApprovalBinding, DecisionRow } from './inbox-rows.js';
import { bodyEndOf } from '../tool/late-bodies.js';
import { STOPPED_BEFORE_BODY, stoppedBeforeBody } from '../tool/retry-policy.js';
import type { ApprovalChange } from './types.js';

function sameAction(a: ApprovalBinding, b: ApprovalBinding): boolean {
  return a.taskId === b.taskId && a.key === b.key && a.tool === b.tool && a.revision === b.revision && a.argumentsDigest === b.argumentsDigest;
}

/**
 * Whether a decided row answers for an attempt bound to `attempt`: the same action, and for an approval, one made for
 * the approver the attempt's tool requires (or a tool that requires none). An approval given on a request of one
 * approver never stands in for another's: a redeploy that moved the tool to a stricter approver asks that approver.
 * A denial of the same action answers whatever approver the tool now requires: a person said no to this very action.
 * A request left before requests recorded their approver answers as before (its approver unknown).
 */
export function decisionAnswers(row: DecisionRow, attempt: ApprovalBinding): boolean {
  if (row.binding === null || !sameAction(row.binding, attempt)) return false;
  // A request left before requests recorded their approver says nothing about it: its approval answers as it always did.
  const approver = row.binding.approver;
  return row.decision !== 'approved' || attempt.approver === undefined || approver === undefined || approver === attempt.approver;
}

/** The rows superseded, each noting why: an operator who decided one reads what became of it. */
const supersede = (rows: readonly DecisionRow[], why: string): DecisionRow[] => rows.map((r) => ({ ...r, state: 'superseded', note: why }));

function describeBinding(b: ApprovalBinding): string {
  const approver = b.approver !== undefined ? `, approver ${b.approver}` : '';
  return `tool ${b.tool} revision ${b.revision}, operation ${b.key} of task ${b.taskId}, arguments ${b.argumentsDigest.slice(0, 12)}${approver}`;
}

/** Why an attempt's commit supersedes its operation's requests, as its result says: an operator reads it. */
function settledWhy(callId: string, events: readonly EventDraft[]): string {
  for (const e of events) {
    const k = e.kind;
    if (k.type !== 'tool_result' || k.result.callId !== callId) continue;
    const outcome = k.result.outcome;
    if (outcome.status === 'failed' && outcome.code === 'tool_contract_changed') {
      return `attempt ${callId} of the operation was refused before its body: its tool was redeployed under another contract, or removed (tool_contract_changed), and no approval can let the call run any more`;
    }
  }
  return `attempt ${callId} of the operation was answered without it (by the host's approver, or refused before it was asked)`;
}

/**
 * The inbox rows a commit writes for its approval change, from the operation's open and decided rows read in the
 * same transaction. Throws DecisionError (nothing written) for a `use` of a row that is missing, no longer
 * decided, or bound to something else.
 */
export function decideApprovalChange(sessionId: SessionId, change: ApprovalChange, rows: readonly DecisionRow[], events: readonly EventDraft[]): DecisionRow[] {
  if ('restore' in change) return restoreSpent(sessionId, change.restore, rows, events);
  if ('use' in change) {
    const { id, callId, binding, at } = change.use;
    const row = rows.find((r) => r.id === id);
    if (row?.kind !== 'approval' || row.sessionId !== sessionId) {
      throw new DecisionError('decision_stale', id, `approval request ${id} is not a decided request of this operation in session ${sessionId}`);
    }
    if (row.state !== 'decided') throw new DecisionError('decision_stale', id, `approval request ${id} is ${row.state}, not decided`);
    if (!decisionAnswers(row, binding)) {
      throw new DecisionError('decision_binding_changed', id,
        `approval request ${id} was decided for ${row.binding ? describeBinding(row.binding) : 'nothing'}, not for ${describeBinding(binding)}`);
    }
    return [{ ...row, state: 'consumed', consumedAt: at, consumedBy: callId }];
  }
  if ('resolve' in change) {
    return supersede(rows.filter((r) => r.kind === 'approval' && (r.state === 'open' || r.state === 'decided')), 'a completed review settled the operation');
  }
  if ('settle' in change) {
    // An operator's denial of this very action, decided while the approver was asked: it stands, not superseded.
    refuseDecidedMeanwhile(rows, change.settle.callId, change.settle.binding, (r) => r.decision === 'denied');
    return supersede(rows.filter((r) => r.kind === 'approval' && r.callId !== change.settle.callId && (r.state === 'open' || r.state === 'decided')),
      settledWhy(change.settle.callId, events));
  }
  const { id, callId, binding, note, at } = change.request;
  // Any operator's decision of this very action, made while the approver was asked: it answers, not a new request.
  refuseDecidedMeanwhile(rows, callId, binding, () => true);
  const superseded = supersede(rows.filter((r) => r.kind === 'approval' && (r.state === 'open' || r.state === 'decided')),
    `attempt ${callId} of the operation asked again`);
  return [...superseded, {
    id, kind: 'approval', sessionId, callId, state: 'open', binding, tool: binding.tool, note,
    decision: null, actor: null, reason: null, createdAt: at, decidedAt: null, consumedAt: null, consumedBy: null,
  }];
}

/**
 * The approval an attempt's start marker spent, put back to decided and unused: only in the commit that records that
 * attempt's body was never called. A row not spent by that call (a backend that reads no spent row) stays as it is.
 */
function restoreSpent(sessionId: SessionId, restore: { id: string; callId: string; at: string }, rows: readonly DecisionRow[], events: readonly EventDraft[]): DecisionRow[] {
  // The journal's own reading of "never called": its result (an interrupt's category and that code, never a code
  // alone, which a body's own failure may carry), or, when that result could not be written, the runtime's own
  // `body_ended` event saying so (hosts cannot append one).
  const neverCalled = events.some(({ kind }) => {
    if (kind.type === 'tool_result') return kind.result.callId === restore.callId && stoppedBeforeBody(kind.result.outcome);
    const end = bodyEndOf(kind);
    return end?.callId === restore.callId && end.ended === 'not_called';
  });
  if (!neverCalled) {
    throw new InvalidInputError('approval',
      `an approval is restored only with the result that says the body of ${restore.callId} was never called (${STOPPED_BEFORE_BODY}), or the runtime's journaled end of that body saying not_called`);
  }
  const row = rows.find((r) => r.id === restore.id);
  if (row?.kind !== 'approval' || row.sessionId !== sessionId || row.state !== 'consumed' || row.consumedBy !== restore.callId) return [];
  return [{ ...row, state: 'decided', consumedAt: null, consumedBy: null }];
}

/** The errors refuseDecidedMeanwhile threw: the runtime reads the operator's decision and uses it instead. */
const decidedMeanwhile = new WeakSet<Error>();

/**
 * Whether `error` (or the recording error wrapping it) says an operator decided an earlier attempt's request of the
 * same action while this attempt asked its approver (docs/design.md#durable-approvals).
 */
export function isDecidedMeanwhile(error: unknown): boolean {
  const cause = error instanceof Error && !decidedMeanwhile.has(error) ? error.cause : error;
  return cause instanceof Error && decidedMeanwhile.has(cause);
}

/**
 * Refuses the commit (nothing written) when a request of the operation, left by another attempt with the same
 * binding, was decided by an operator, unused, in a way `counts`: superseding it would drop the operator's answer
 * after they were told the host would use it.
 */
function refuseDecidedMeanwhile(rows: readonly DecisionRow[], callId: string, binding: ApprovalBinding, counts: (row: DecisionRow) => boolean): void {
  const decided = rows.find((r) => r.kind === 'approval' && r.callId !== callId && r.state === 'decided' && decisionAnswers(r, binding) && counts(r));
  if (decided === undefined) return;
  const error = new DecisionError('decision_stale', decided.id,
    `approval request ${decided.id} was decided (${decided.decision ?? 'unknown'}) by an operator while this attempt asked its approver: the attempt takes that decision`);
  decidedMeanwhile.add(error);
  throw error;
}
