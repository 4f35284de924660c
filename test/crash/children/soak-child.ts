/**
 * One soak step, in a fresh process: recover whatever the previous (killed) process left, checking the invariants
 * on the journal as it was found and again after the recovery, then run a burst of mixed calls in a new task. The
 * killer is armed from the start and counts every point of both phases, so the scripted hit lands in the burst or,
 * sometimes, in the recovery itself (a crash while recovering from a crash).
 * Lines: {phase:'found', ...}, {phase:'recovered', ...}, {phase:'dying', ...} or {phase:'burst-done', ...}.
 */
import { assessSession } from '../../../src/index.js';
import type { JsonValue } from '../../../src/json/types.js';
import { checkInvariants, countsOf, type InvariantReport } from '../invariants.js';
import { chargesOf, isDeterministicRejection, recover } from '../recover.js';
import { CALLER, crashRuntime, ledgerRows, RESERVATION, type CrashArgs } from '../tools.js';
import { childMain, emit, openAll, type ChildBase } from './common.js';

export interface BurstCall {
  readonly tool: string;
  readonly args: CrashArgs;
}

export interface SoakScript extends ChildBase {
  /** Null: recover and check only (the final step). */
  readonly burst: { readonly taskId: string; readonly groups: readonly (readonly BurstCall[])[] } | null;
}

const brief = (report: InvariantReport) => ({ counts: countsOf(report), problems: report.problems.slice(0, 5) });

await childMain<SoakScript>(async (script) => {
  // SQLite: PRAGMA quick_check on every open, i.e. after every kill.
  const { killer, store, business } = await openAll(script, { verifyOnOpen: true });
  const approvals = { count: 0 };
  const runtime = crashRuntime(business, (point) => killer.at(point), approvals);
  killer.arm();
  const recovery = await recover({
    store,
    sessionId: script.sessionId,
    business,
    runtime,
    killer,
    approvals,
    detail: false,
    emit: () => undefined,
    onLoaded: async (owner, history) => {
      const found = checkInvariants(history, ledgerRows(business.db), await chargesOf(owner, history), RESERVATION);
      emit({ phase: 'found', epoch: owner.epoch, events: history.length, ...brief(found) });
    },
  });
  const { owner } = recovery;
  const history = await store.loadHistory(script.sessionId);
  const after = checkInvariants(history, ledgerRows(business.db), await chargesOf(owner, history), RESERVATION);
  // After a complete recovery nothing may be left that a plan could retry, and every call still waiting for a
  // review must be one the host reviewed as completed (its operation has a business row).
  const leftovers: string[] = [...recovery.problems];
  if (history.length > 0) {
    for (const c of assessSession(history).calls) {
      if (c.nextStep === 'retry_allowed' && !isDeterministicRejection(c.result)) leftovers.push(`call ${c.callId} still retry_allowed after recovery`);
      if (c.nextStep === 'needs_review') {
        const rows = ledgerRows(business.db).filter((r) => r.taskId === c.taskId && r.key === c.key).length;
        if (rows === 0) leftovers.push(`call ${c.callId} needs review but its operation wrote nothing`);
      }
    }
  }
  for (const action of recovery.actions) {
    if (action.retryError !== undefined) leftovers.push(`retry of ${action.callId} threw ${action.retryError}`);
    if (action.retry && action.retry.outcome !== 'succeeded') leftovers.push(`retry of ${action.callId} ended ${action.retry.outcome}`);
    if (action.cloneRefused !== undefined && action.cloneRefused !== 'consumed') leftovers.push(`plan clone for ${action.callId}: ${action.cloneRefused}`);
  }
  emit({
    phase: 'recovered',
    epoch: owner.epoch,
    events: history.length,
    retries: recovery.actions.filter((a) => a.retry).length,
    reviews: recovery.actions.filter((a) => a.review !== null).map((a) => a.review),
    leftovers: leftovers.slice(0, 5),
    ...brief(after),
  });

  if (script.burst) {
    const { taskId, groups } = script.burst;
    await owner.startTask(taskId);
    const gateway = runtime.bind({ owner, taskId, caller: CALLER });
    for (const group of groups) {
      await Promise.all(group.map((c) => gateway.call(c.tool, c.args as unknown as JsonValue)));
    }
  }
  emit({ phase: 'burst-done', hits: killer.hits() });
  business.close();
  await store.close();
});
