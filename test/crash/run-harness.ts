/**
 * The run-level crash matrix's parent side: its points, the case runner (crash child, fresh resuming children with
 * the operator's review between them where a person is needed, then the parent's own reading and the "run it
 * again" check), and the checker, a pure function over what the parent read.
 */
import { fileURLToPath } from 'node:url';
import { runAgent, scriptedModel } from '../../src/agent.js';
import { decisionInbox } from '../../src/decisions.js';
import type { SessionEvent } from '../../src/event/types.js';
import { SessionBusyError } from '../../src/errors.js';
import type { RecoveryPolicy } from '../../src/tool/recover.js';
import type { SessionOwner } from '../../src/store/types.js';
import type { RunScript, StartupLine } from './children/run-child.js';
import { expectClean, expectKilled, lineOf, runChild, type CaseEnv } from './harness.js';
import { checkInvariants, type InvariantReport } from './invariants.js';
import { TOOL_POINTS } from './killer.js';
import { chargesOf } from './recover.js';
import { EMAIL_TOOL, openRunBusiness, ORDER_TOOL, readRunWorld, RUN_INPUT, runRuntime, runTools, type RunWorld } from './run-tools.js';
import { openStore, type StoreKind, type StoreSpec } from './stores.js';
import { CALLER, RESERVATION, type Effect } from './tools.js';

const RUN_CHILD = fileURLToPath(new URL('./children/run-child.js', import.meta.url));

export interface RunPoint {
  /** `<phase>/<point>#<hit>`: the phase of the run, the fault point, and which hit of it in that phase. */
  readonly id: string;
  readonly phase: string;
  readonly point: string;
  readonly hit: number;
  readonly description: string;
  /** The killed call's start marker is durable and its result is not: its outcome is unknown. */
  readonly uncertain: boolean;
}

const p = (phase: string, point: string, hit: number, description: string, uncertain = false): RunPoint =>
  ({ id: `${phase}/${point}${hit > 1 ? `#${hit}` : ''}`, phase, point, hit, description, uncertain });

/** The named points of one call; the order asks an approver (call, then marker), the e-mail does not (one commit). */
function callPoints(phase: 'order' | 'email'): RunPoint[] {
  const approval = phase === 'order';
  const resultCommit = approval ? 3 : 2;
  return [
    p(phase, 'call:before', 1, 'admitted and checked, before the call is journaled'),
    p(phase, 'commit:before', 1, approval ? 'inside the transaction journaling the call and its charge, before COMMIT' : 'inside the transaction journaling the call, its charge and its start marker, before COMMIT'),
    ...(approval
      ? [p(phase, 'call:after', 1, 'the call is journaled, the approver has not answered'), p(phase, 'approval:after', 1, 'approved, the start marker is not journaled')]
      : []),
    p(phase, 'started:after', 1, 'the start marker is journaled, the body has not run', true),
    p(phase, TOOL_POINTS.beforeWrite, 1, 'in the body, before the side effect', true),
    p(phase, TOOL_POINTS.afterWrite, 1, 'in the body, after the side effect committed', true),
    p(phase, 'body:after', 1, 'the body returned, its result is not journaled', true),
    p(phase, 'commit:before', resultCommit, 'inside the transaction journaling the result, before COMMIT', true),
    p(phase, 'result:after', 1, 'the result is journaled'),
  ];
}

export const RUN_POINTS: readonly RunPoint[] = [
  p('start', 'commit:before', 1, "inside the transaction journaling the run's start and the user's message, before COMMIT"),
  ...callPoints('order'),
  p('step2', 'commit:before', 1, 'the model answered the step between the calls; its response is not journaled'),
  p('step2', 'step:after', 1, 'the model response between the calls is journaled, the e-mail is not called'),
  ...callPoints('email'),
  p('step3', 'step:after', 1, 'the final answer is journaled, the run is not marked finished'),
];

export interface RunCaseSpec {
  readonly kind: StoreKind;
  readonly point: RunPoint;
  readonly effect: Effect;
  /** The startup routine's policy; the resumed run always uses retry_safe. */
  readonly startupPolicy: RecoveryPolicy;
  /** Negative control: the host runs the agent again as a new run (no run id) instead of resuming. */
  readonly naive?: boolean;
}

export interface ResumedLine {
  readonly epoch: number;
  readonly startup: StartupLine;
  readonly stopReason: string;
  readonly runId: string;
  readonly pendingCallIds: string[];
  readonly steps: number;
  /** The conversation's roles and the tool calls, as the resumed run returned them. */
  readonly roles: string[];
  readonly toolCalls: string[];
}

/** What the run-level checker counts. */
export interface RunCheck {
  /** Outside records beyond one, per tool (an order, an e-mail), whatever their operation key. */
  readonly duplicates: number;
  /** 1 when the run did not finish `completed` in the journal, or a writing tool left no record. */
  readonly unfinished: number;
  /**
   * Body executions of an operation after the journal had it completed (a succeeded result, or a `completed`
   * review), retries written after a success, and any body run by the "run it again" after the run finished.
   */
  readonly completedReruns: number;
  /** Model requests for a step whose response an earlier process had already journaled. */
  readonly reasked: number;
  readonly problems: string[];
}

export interface RunCaseResult {
  readonly spec: RunCaseSpec;
  readonly sessionId: string;
  readonly runId: string;
  readonly resumes: ResumedLine[];
  /** Reviews the operator recorded in the decision inbox between resumes. */
  readonly operatorReviews: Array<{ callId: string; outcome: string }>;
  readonly history: SessionEvent[];
  readonly world: RunWorld;
  readonly again: RunAgain;
  readonly invariants: InvariantReport;
  readonly check: RunCheck;
}

/** The parent's "run it again" with the same run id, after the run finished. */
export interface RunAgain {
  readonly stopReason: string | null;
  readonly error: string | null;
  /** Bodies run, events written and model requests made by it. */
  readonly bodies: number;
  readonly events: number;
  readonly asks: number;
  readonly roles: string[];
  readonly toolCalls: string[];
}

/** Ledger and journal facts the checker reads; everything is re-derived from raw events. */
export interface RunCheckInput {
  readonly effect: Effect;
  readonly runId: string;
  readonly history: readonly SessionEvent[];
  readonly world: RunWorld;
  /** What the last resuming host reported (null for the negative control's naive host, whose run is another). */
  readonly final: ResumedLine | null;
  readonly again: RunAgain;
  readonly invariants: InvariantReport;
}

export function checkRun(input: RunCheckInput): RunCheck {
  const problems: string[] = [];
  const { history, world, runId } = input;
  let duplicates = 0;
  let unfinished = 0;
  let completedReruns = input.invariants.retriedCompletions;
  let reasked = 0;
  const writes = input.effect !== 'read_only';

  for (const tool of [ORDER_TOOL, EMAIL_TOOL]) {
    const rows = world.ledger.filter((r) => r.tool === tool).length;
    if (rows > 1) {
      duplicates += rows - 1;
      problems.push(`${tool}: ${rows} records in the outside system`);
    }
    if (writes && rows === 0) {
      unfinished = 1;
      problems.push(`${tool}: no record in the outside system`);
    }
    if (!writes && rows > 0) problems.push(`${tool} is read-only but wrote ${rows} record(s)`);
    if (world.bodies.every((b) => b.tool !== tool)) problems.push(`${tool}: its body never ran`);
  }

  const custom = history.flatMap((e) => (e.kind.type === 'custom' && e.kind.plugin === 'jingwei.run' ? [{ event: e, kind: e.kind.kind, payload: e.kind.payload as Record<string, unknown> }] : []));
  const finished = custom.filter((c) => c.kind === 'run_finished' && c.payload.runId === runId);
  const finalStop = input.final?.stopReason ?? null;
  if (finished.length !== 1 || finished[0]!.payload.stopReason !== 'completed' || finalStop !== 'completed') {
    unfinished = 1;
    problems.push(`run ${runId}: ${finished.length} run_finished event(s) (${finished.map((f) => String(f.payload.stopReason)).join(', ')}); the last host reported ${finalStop}`);
  }

  // When the journal first held each operation completed, and where each attempt was journaled.
  const callSeq = new Map<string, { key: string; seq: number }>();
  const completedAt = new Map<string, number>();
  const complete = (key: string, seq: number) => { if (!completedAt.has(key)) completedAt.set(key, seq); };
  for (const event of history) {
    const kind = event.kind;
    if (kind.type === 'tool_call' && kind.call.operation) callSeq.set(kind.call.id, { key: kind.call.operation.key, seq: event.seq });
    if (kind.type === 'tool_result' && kind.result.outcome.status === 'succeeded') {
      const call = callSeq.get(kind.result.callId);
      if (call) complete(call.key, event.seq);
    }
    if (kind.type === 'tool_review' && kind.review.outcome === 'completed') {
      const call = callSeq.get(kind.review.callId);
      if (call) complete(call.key, event.seq);
    }
  }
  for (const body of world.bodies) {
    const call = callSeq.get(body.callId);
    if (call === undefined) {
      problems.push(`a body of ${body.tool} ran for call ${body.callId}, which the journal does not hold`);
      continue;
    }
    const done = completedAt.get(call.key);
    if (done !== undefined && done < call.seq) {
      completedReruns += 1;
      problems.push(`${body.tool} (${call.key}) ran again as call ${body.callId} after the journal had it completed`);
    }
  }
  if (input.again.bodies > 0) {
    completedReruns += input.again.bodies;
    problems.push(`running the finished run again ran ${input.again.bodies} tool bod(ies)`);
  }
  if (input.again.events > 0) problems.push(`running the finished run again wrote ${input.again.events} event(s)`);
  if (input.again.asks > 0 || input.again.error !== null) problems.push(`running the finished run again: ${input.again.asks} model request(s), error ${input.again.error}`);
  if (input.final !== null && (input.again.stopReason !== 'completed' || JSON.stringify([input.again.roles, input.again.toolCalls]) !== JSON.stringify([input.final.roles, input.final.toolCalls]))) {
    problems.push(`running the finished run again returned ${input.again.stopReason} with ${JSON.stringify([input.again.roles, input.again.toolCalls])}, not the run as it finished ${JSON.stringify([input.final.roles, input.final.toolCalls])}`);
  }

  // A journaled step is never asked again: the process that journaled step s asked it; later processes must not.
  for (const response of custom.filter((c) => c.kind === 'model_response' && c.payload.runId === runId)) {
    const step = response.payload.step as number;
    const journaledBy = world.asks.find((a) => a.step === step && a.turn === response.event.turnId);
    if (journaledBy === undefined) {
      problems.push(`step ${step}'s response was journaled by no process that asked for it`);
      continue;
    }
    const later = world.asks.filter((a) => a.step === step && a.epoch > journaledBy.epoch).length;
    if (later > 0) {
      reasked += later;
      problems.push(`step ${step} was asked ${later} more time(s) after it was journaled`);
    }
  }

  const inv = input.invariants;
  if (inv.unreviewedReexecutions + inv.budgetMismatches + inv.orphanWrites + inv.unclassified > 0 || inv.duplicates > 0) problems.push(...inv.problems);
  return { duplicates, unfinished, completedReruns, reasked, problems };
}

/** The operator: looks each pending call up in the outside system and records a review in the decision inbox. */
async function operatorReview(spec: StoreSpec, sessionId: string, callIds: readonly string[], business: string): Promise<Array<{ callId: string; outcome: string }>> {
  const store = await openStore(spec);
  try {
    const history = await store.loadHistory(sessionId);
    const ledger = readRunWorld(business).ledger;
    const reviews: Array<{ callId: string; outcome: string }> = [];
    for (const callId of callIds) {
      const kind = history.find((e) => e.kind.type === 'tool_call' && e.kind.call.id === callId)?.kind;
      if (kind?.type !== 'tool_call' || !kind.call.operation) throw new Error(`pending call ${callId} is not in the journal`);
      const key = kind.call.operation.key;
      const rows = ledger.filter((r) => r.key === key && r.tool === kind.call.name).length;
      const outcome = rows > 0 ? 'completed' : 'not_executed';
      // A call takes one waiting review: an answer an earlier round gave and no host has journaled yet is replaced.
      const waiting = (await decisionInbox(store).list({ sessionId, kind: 'review', states: ['decided'] })).items.filter((d) => d.callId === callId).pop();
      await decisionInbox(store).recordReview({
        sessionId, callId, outcome, actor: 'operator (run crash matrix)',
        evidence: `looked in the outside system: ${rows} record(s) of ${kind.call.name} for key ${key}`,
        ...(waiting ? { replaces: waiting.id } : {}),
      });
      reviews.push({ callId, outcome });
    }
    return reviews;
  } finally {
    await store.close();
  }
}

async function acquireForReading(store: Awaited<ReturnType<typeof openStore>>, sessionId: string): Promise<SessionOwner> {
  try {
    return await store.acquire(sessionId, { owner: 'run-checker' });
  } catch (error) {
    // A host that failed may have left it held; the checker reads it anyway (the case fails on the host's failure).
    if (error instanceof SessionBusyError) return store.acquire(sessionId, { owner: 'run-checker', takeover: true });
    throw error;
  }
}

/** One case: a crash child, resuming children (an operator's inbox review between them where one is needed), then the parent's reading. */
export async function runRunCase(spec: RunCaseSpec, env: CaseEnv): Promise<RunCaseResult> {
  const business = `${env.dir}/business.db`;
  const sessionId = `s-${env.caseId}`;
  const taskId = `t-${env.caseId}`;
  const runId = `run-${env.caseId}`;
  const base = { store: env.store, business, sessionId, taskId, runId, effect: spec.effect, startupPolicy: spec.startupPolicy };

  const crash = await runChild(RUN_CHILD, { ...base, mode: 'crash', kill: { point: `${spec.point.phase}/${spec.point.point}`, hit: spec.point.hit } } satisfies RunScript);
  expectKilled(`run crash child (${spec.point.id})`, crash, `${spec.point.phase}/${spec.point.point}`);

  const resumes: ResumedLine[] = [];
  const operatorReviews: Array<{ callId: string; outcome: string }> = [];
  for (let round = 0; round < 3; round += 1) {
    const run = await runChild(RUN_CHILD, { ...base, mode: spec.naive ? 'naive' : 'resume', kill: null } satisfies RunScript);
    expectClean(`resuming child ${round + 1} (${spec.point.id})`, run);
    const line = lineOf<ResumedLine>(run, 'resumed')!;
    resumes.push(line);
    if (line.stopReason !== 'needs_review') break;
    operatorReviews.push(...(await operatorReview(env.store, sessionId, line.pendingCallIds, business)));
  }

  // The parent's own reading, every child gone; then the agent is run "again" with the same run id.
  const store = await openStore(env.store);
  let history: SessionEvent[];
  let world: RunWorld;
  let invariants: InvariantReport;
  let again: RunCaseResult['again'];
  try {
    history = await store.loadHistory(sessionId);
    const owner = await acquireForReading(store, sessionId);
    const charged = await chargesOf(owner, history, [taskId]);
    world = readRunWorld(business);
    invariants = checkInvariants(history, world.ledger, charged, RESERVATION);
    const handle = openRunBusiness(business);
    let ran: { stopReason: string; messages: ReadonlyArray<{ role: string }>; toolCalls: ReadonlyArray<{ name: string }> } | null = null;
    let error: string | null = null;
    try {
      const tools = runTools(handle, () => {}, spec.effect);
      const gateway = runRuntime(tools, { count: 0 }).bind({ owner, taskId, caller: CALLER });
      const model = scriptedModel([]);
      try {
        ran = await runAgent({ model, owner, gateway, input: RUN_INPUT, runId, store, maxSteps: 5, recovery: 'retry_safe', reconcilers: tools });
      } catch (e) {
        error = e instanceof Error ? e.message : String(e);
      }
      const afterWorld = readRunWorld(business);
      const afterHistory = await store.loadHistory(sessionId);
      again = {
        stopReason: ran?.stopReason ?? null, error,
        bodies: afterWorld.bodies.length - world.bodies.length, events: afterHistory.length - history.length, asks: model.requests.length,
        roles: ran?.messages.map((m) => m.role) ?? [], toolCalls: ran?.toolCalls.map((c) => c.name) ?? [],
      };
    } finally {
      handle.close();
      await owner.release();
    }
  } finally {
    await store.close();
  }
  const final = spec.naive ? null : resumes[resumes.length - 1] ?? null;
  const check = checkRun({ effect: spec.effect, runId, history, world, final, again, invariants });
  return { spec, sessionId, runId, resumes, operatorReviews, history, world, again, invariants, check };
}
