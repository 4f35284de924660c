/**
 * Durable approvals on the runtime's side (docs/design.md#durable-approvals): the binding an approval decision is
 * held to, and what an attempt records when an operator's decision answers for it or when its approver says pending.
 */
import type { ToolApprovalRecord, ToolCall, ToolOperation } from '../event/types.js';
import { jsonDigest } from '../json/canonical.js';
import { decisionAnswers } from '../store/approvals.js';
import type { ApprovalBinding, DecisionRow } from '../store/inbox-rows.js';
import { newApprovalRequestId } from '../store/inbox.js';
import type { ApprovalChange, SessionOwner } from '../store/types.js';
import { failure, type Failure, type PendingApproval } from './admission-checks.js';

/** The binding of an attempt whose tool requires `approver` (null: none). */
export function approvalBinding(call: ToolCall, op: ToolOperation, approver: string | null): ApprovalBinding {
  const binding = { taskId: op.taskId, key: op.key, tool: call.name, revision: op.contract.revision, argumentsDigest: jsonDigest(call.arguments) };
  return approver === null ? binding : { ...binding, approver };
}

/** An operator's decision that answers for this attempt. */
export interface OperatorDecision {
  readonly change: ApprovalChange;
  readonly record: ToolApprovalRecord;
  /** Null when approved; the recorded denial otherwise. */
  readonly denial: Failure | null;
}

/**
 * The inbox's decided, unused decision for this operation, when its binding equals this attempt's. A decision bound
 * to anything else never answers for it: the approver is asked, as for any attempt.
 */
export async function operatorDecision(owner: SessionOwner, call: ToolCall, binding: ApprovalBinding): Promise<OperatorDecision | null> {
  if (!owner.decidedApproval) return null;
  const row: DecisionRow | undefined = await owner.decidedApproval(binding.taskId, binding.key);
  if (row === undefined || !decisionAnswers(row, binding) || row.actor === null) return null;
  const approved = row.decision === 'approved';
  const record: ToolApprovalRecord = {
    requestId: row.id,
    decision: approved ? 'approved' : 'denied',
    actor: row.actor,
    ...(row.reason !== null ? { reason: row.reason } : {}),
  };
  const change: ApprovalChange = { use: { id: row.id, callId: call.id, binding, at: new Date().toISOString() } };
  const denial = approved
    ? null
    : failure('approval_denied', 'tool_approval_denied_by_operator',
      `denied by ${row.actor} (approval request ${row.id})${row.reason !== null ? `: ${row.reason}` : ''}`);
  return { change, record, denial };
}

/** What an attempt whose approver answered pending records: its failure, the request it leaves, and the record. */
export function pendingApproval(call: ToolCall, binding: ApprovalBinding, answer: PendingApproval) {
  const id = newApprovalRequestId();
  const change: ApprovalChange = { request: { id, callId: call.id, binding, note: answer.note, at: new Date().toISOString() } };
  const record: ToolApprovalRecord = { requestId: id, decision: 'pending', ...(answer.note !== null ? { reason: answer.note } : {}) };
  const outcome = failure('approval_pending', 'tool_approval_pending',
    `waiting for an operator's decision on approval request ${id}${answer.note !== null ? `: ${answer.note}` : ''}; the call did not run`, true);
  return { change, record, outcome };
}
