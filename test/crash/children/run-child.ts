/**
 * One process of the run-level crash matrix. Mode `crash`: a host starts the agent run (runAgent with a run id and
 * a durable store) and dies by SIGKILL at the case's point. Points are `<phase>/<point>`: the phase is `start`,
 * `step<n>` (from the model's request for step n until its first call) or the call's (`order`, `email`); the point
 * is a production fault point (src/fault.ts) or the tool's own. Mode `resume`: a fresh host does what a host does
 * at startup (recoverAbandoned over the expired lease, keeping the session; or, for a session an operator's review
 * released, acquire and journal the inbox's reviews) and runs the agent again with the same run id. Mode `naive`
 * (negative control): the same startup, then the agent is run again as a new run, without its run id.
 * Lines: {phase:'ready', epoch}, {dying}, {phase:'resumed', ...}.
 */
import { runAgent } from '../../../src/agent.js';
import { setFaultHook } from '../../../src/fault.js';
import { journalInboxReviews, recoverAbandoned } from '../../../src/review.js';
import type { RecoveryPolicy } from '../../../src/tool/recover.js';
import type { SessionOwner, SessionStore } from '../../../src/store/types.js';
import { Killer } from '../killer.js';
import { CALL_PHASE, openRunBusiness, RUN_INPUT, runRuntime, runTools, shopModel } from '../run-tools.js';
import { openStore } from '../stores.js';
import { CALLER, type Effect } from '../tools.js';
import { childMain, emit, type ChildBase } from './common.js';

export interface RunScript extends ChildBase {
  readonly mode: 'crash' | 'resume' | 'naive';
  readonly taskId: string;
  readonly runId: string;
  readonly effect: Effect;
  /** The policy of the startup routine (resume and naive modes); the resumed run itself always uses retry_safe. */
  readonly startupPolicy: RecoveryPolicy;
}

/** The crashed host's lease: short, and never renewed by a heartbeat, so the hit counts of `commit:before` are exact. */
const CRASH_LEASE_MS = 100;
const MAX_STEPS = 5;

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface StartupLine {
  readonly how: 'recover_abandoned' | 'released';
  readonly reconciled: Array<{ name: string; action: string; answer: string | null }>;
  readonly retried: Array<{ name: string; outcome: string }>;
  readonly left: string[];
  readonly inboxReviews: number;
}

/**
 * The host's startup: wait until the session's lease has run out and take it over through recoverAbandoned
 * (keeping it), or, when the session is released (a run stopped for a person, who has reviewed since), acquire it
 * and journal the operators' reviews from the inbox.
 */
async function startup(store: SessionStore, script: RunScript, host: Parameters<typeof recoverAbandoned>[1]): Promise<{ owner: SessionOwner; line: StartupLine }> {
  for (;;) {
    const listed = (await store.listSessions()).find((s) => s.sessionId === script.sessionId);
    if (listed === undefined) throw new Error(`session ${script.sessionId} is not in the store`);
    if (!listed.held) {
      const owner = await store.acquire(script.sessionId, { owner: 'resume-host' });
      const inbox = await journalInboxReviews(owner, store, await store.loadHistory(script.sessionId));
      return { owner, line: { how: 'released', reconciled: [], retried: [], left: [], inboxReviews: inbox.journaled.length } };
    }
    const report = await recoverAbandoned(store, host, { policy: script.startupPolicy, keep: true, owner: 'resume-host' });
    const mine = report.sessions.find((s) => s.sessionId === script.sessionId);
    if (mine?.action === 'failed') throw new Error(`recoverAbandoned failed on the session: ${JSON.stringify(mine.error)}`);
    if (mine?.action === 'taken_over') {
      return {
        owner: mine.owner!,
        line: {
          how: 'recover_abandoned',
          reconciled: mine.reconciled.map((c) => ({ name: c.name, action: c.action, answer: c.answer })),
          retried: mine.retried.map((r) => ({ name: r.name, outcome: r.outcome })),
          left: mine.left.map((l) => l.name),
          inboxReviews: mine.reviewed.length,
        },
      };
    }
    // Still within the crashed owner's lease: a session is listed only once its lease ran out.
    await pause(CRASH_LEASE_MS / 2);
  }
}

await childMain<RunScript>(async (script) => {
  const killer = new Killer(script.kill);
  let phase = 'start';
  let step = 0;
  const at = (point: string) => killer.at(`${phase}/${point}`);
  setFaultHook((point) => {
    if (point === 'call:before') phase = CALL_PHASE[step] ?? `call${step}`;
    at(point);
  });
  const store = await openStore(script.store);
  const business = openRunBusiness(script.business);
  const approvals = { count: 0 };
  const tools = runTools(business, at, script.effect);
  const runtime = runRuntime(tools, approvals);

  if (script.mode === 'crash') {
    const owner = await store.acquire(script.sessionId, { owner: 'shop-host', leaseMs: CRASH_LEASE_MS, heartbeat: false });
    await owner.startTask(script.taskId);
    emit({ phase: 'ready', epoch: owner.epoch });
    const gateway = runtime.bind({ owner, taskId: script.taskId, caller: CALLER });
    const model = shopModel(business, { epoch: owner.epoch, turnId: gateway.turnId }, (n) => { step = n; phase = `step${n}`; });
    killer.arm();
    const result = await runAgent({ model, owner, gateway, input: RUN_INPUT, runId: script.runId, store, maxSteps: MAX_STEPS });
    emit({ phase: 'done', stopReason: result.stopReason, hits: killer.hits() });
  } else {
    const { owner, line } = await startup(store, script, { runtime, tools, caller: CALLER });
    const gateway = runtime.bind({ owner, taskId: script.taskId, caller: CALLER });
    const model = shopModel(business, { epoch: owner.epoch, turnId: gateway.turnId });
    const result = await runAgent({
      model, owner, gateway, input: RUN_INPUT, store, maxSteps: MAX_STEPS, recovery: 'retry_safe', reconcilers: tools,
      ...(script.mode === 'resume' ? { runId: script.runId } : {}),
    });
    emit({
      phase: 'resumed',
      epoch: owner.epoch,
      startup: line,
      stopReason: result.stopReason,
      runId: result.runId,
      pendingCallIds: result.pendingCallIds,
      steps: result.steps,
      roles: result.messages.map((m) => m.role),
      toolCalls: result.toolCalls.map((c) => c.name),
      approvals: approvals.count,
    });
    await owner.release();
  }
  business.close();
  await store.close();
});
