/**
 * The inbox rows an approval change of a commit writes, decided inside the commit's transaction
 * (docs/design.md#durable-approvals).
 */
import { DecisionError } from '../errors.js';
import type { SessionId } from '../ids.js';
import type { ApprovalBinding, DecisionRow } from './inbox-rows.js';
import type { ApprovalChange } from './types.js';

export function sameBinding(a: ApprovalBinding, b: ApprovalBinding): boolean {
  return a.taskId === b.taskId && a.key === b.key && a.tool === b.tool && a.revision === b.revision && a.argumentsDigest === b.argumentsDigest;
}

function describeBinding(b: ApprovalBinding): string {
  return `tool ${b.tool} revision ${b.revision}, operation ${b.key} of task ${b.taskId}, arguments ${b.argumentsDigest.slice(0, 12)}`;
}

/**
 * The inbox rows a commit writes for its approval change, from the operation's open and decided rows read in the
 * same transaction. Throws DecisionError (nothing written) for a `use` of a row that is missing, no longer
 * decided, or bound to something else.
 */
export function decideApprovalChange(sessionId: SessionId, change: ApprovalChange, rows: readonly DecisionRow[]): DecisionRow[] {
  if ('use' in change) {
    const { id, callId, binding, at } = change.use;
    const row = rows.find((r) => r.id === id);
    if (row?.kind !== 'approval' || row.sessionId !== sessionId) {
      throw new DecisionError('decision_stale', id, `approval request ${id} is not a decided request of this operation in session ${sessionId}`);
    }
    if (row.state !== 'decided') throw new DecisionError('decision_stale', id, `approval request ${id} is ${row.state}, not decided`);
    if (!row.binding || !sameBinding(row.binding, binding)) {
      throw new DecisionError('decision_binding_changed', id,
        `approval request ${id} was decided for ${row.binding ? describeBinding(row.binding) : 'nothing'}, not for ${describeBinding(binding)}`);
    }
    return [{ ...row, state: 'consumed', consumedAt: at, consumedBy: callId }];
  }
  if ('settle' in change) {
    return rows.filter((r) => r.kind === 'approval' && r.callId !== change.settle.callId && (r.state === 'open' || r.state === 'decided'))
      .map((r): DecisionRow => ({ ...r, state: 'superseded' }));
  }
  const { id, callId, binding, note, at } = change.request;
  const superseded = rows.filter((r) => r.kind === 'approval' && (r.state === 'open' || r.state === 'decided'))
    .map((r): DecisionRow => ({ ...r, state: 'superseded' }));
  return [...superseded, {
    id, kind: 'approval', sessionId, callId, state: 'open', binding, tool: binding.tool, note,
    decision: null, actor: null, reason: null, createdAt: at, decidedAt: null, consumedAt: null, consumedBy: null,
  }];
}
