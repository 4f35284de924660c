/**
 * A retry made after its tool changed (docs/design.md#a-redeploy-while-a-call-waits): a call recorded under one
 * contract is retried only under that contract, so a retry whose tool was redeployed under another effect or
 * revision, or removed, never runs. When the journal shows the retried attempt never ran, that refusal is recorded
 * with the retry, for the model and the operator to read; otherwise it is thrown (`binding_changed`).
 */
import type { ToolEffectContract } from '../event/types.js';
import { failure, type Failure } from './admission-checks.js';
import { sameContract } from './evidence.js';
import { planSourceNotRun, planSourceRow, type ToolRetryPlan } from './retry-plan.js';
import { sourceMayHaveRun } from './retry-source.js';

const named = (c: ToolEffectContract) => `${c.effect} revision ${c.revision}`;

/**
 * The failure to record for a retry by `plan` whose tool now runs under `current` (null: not registered), or null
 * when the tool still runs under the recorded contract or the retried attempt may have run.
 */
export function contractChangedRefusal(plan: ToolRetryPlan, current: ToolEffectContract | null): Failure | null {
  const notRun = planSourceNotRun(plan);
  if (notRun === null) return null;
  const was = plan.contract;
  if (current !== null && sameContract(current, was)) return null;
  const now = current === null ? 'is no longer registered with this runtime' : `now runs as ${named(current)}`;
  const before = notRun === 'awaited_approval' ? `waited for an operator's approval as ${named(was)}`
    : notRun === 'reviewed_not_executed' ? `was reviewed as not executed when it ran as ${named(was)}`
      : `stopped before its body when it ran as ${named(was)}`;
  const why = notRun === 'awaited_approval' ? 'no approval can answer for this call any more' : 'a retry runs only under the contract its call recorded';
  // An earlier attempt of the operation may have run (nothing settled it): the model is not invited to call again,
  // and reads that it should check first. A tool no longer registered cannot be called again at all.
  const source = planSourceRow(plan);
  const earlierMayHaveRun = source !== null && sourceMayHaveRun(source);
  const next = earlierMayHaveRun || current === null ? '' : `; call it again to ${notRun === 'awaited_approval' ? 'ask' : 'run it'} under the current contract`;
  // A write a `not_executed` review left due, which no retry can make under its recorded contract any more: the
  // redeploy decides against that retry, recorded as a denial, so the same call asked again under the current contract
  // is the write, and the in-doubt guard (which keeps a due write's repeats out) lets it through. Recorded as
  // unavailable, the write stayed due for ever and the call the model was invited to make was refused as its repeat.
  const category = source?.status === 'reviewed_not_executed' ? 'denied' : 'unavailable';
  return failure(category, 'tool_contract_changed', `${plan.toolName} ${before}, and the tool ${now}: ${why}. It did not run${next}`);
}
