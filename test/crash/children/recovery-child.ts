/**
 * The matrix's recovery, in a fresh process: take over, load, assess, prepare (with the host's review where the
 * decision table asks for one), retry, report. With a kill spec it dies at that point instead (a crash during
 * recovery: after the takeover before the load, or after a plan was consumed before its retry was written).
 * Lines: {phase:'before', ...} (see recover.ts), then {phase:'after', ...}.
 */
import { assessSession } from '../../../src/index.js';
import { chargesOf, recover } from '../recover.js';
import { crashRuntime } from '../tools.js';
import { childMain, emit, openAll, type ChildBase } from './common.js';

export interface RecoveryScript extends ChildBase {
  readonly taskId: string;
}

await childMain<RecoveryScript>(async (script) => {
  const { killer, store, business } = await openAll(script);
  const approvals = { count: 0 };
  const runtime = crashRuntime(business, (point) => killer.at(point), approvals);
  killer.arm();
  const result = await recover({ store, sessionId: script.sessionId, business, runtime, killer, approvals, detail: true, emit });
  const history = await store.loadHistory(script.sessionId);
  const charged = await chargesOf(result.owner, history, [script.taskId]);
  const task = await result.owner.task(script.taskId);
  const after = history.length > 0 ? assessSession(history) : null;
  emit({
    phase: 'after',
    epoch: result.owner.epoch,
    actions: result.actions,
    problems: result.problems,
    approvals: approvals.count,
    events: history.length,
    remaining: after?.calls.map((c) => ({ callId: c.callId, nextStep: c.nextStep, status: c.status })) ?? [],
    charged,
    reservedOutputBytes: task.reservedOutputBytes,
  });
  await result.owner.release();
  business.close();
  await store.close();
});
