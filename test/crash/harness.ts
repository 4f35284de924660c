/**
 * The parent side of the crash harness: the named points of the matrix and what each must leave behind, a child
 * runner that waits for a SIGKILL, the case runner (crash child, optional killed recovery, recovery child, then the
 * parent's own reading of journal, ledger and budget through the invariant checker), and the seeded soak worker.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import type { SessionEvent } from '../../src/event/types.js';
import type { CrashScript } from './children/crash-child.js';
import type { RecoveryScript } from './children/recovery-child.js';
import type { BurstCall, SoakScript } from './children/soak-child.js';
import { checkInvariants, countsOf, type InvariantReport, type TaskCharge } from './invariants.js';
import { TAKEOVER_POINT, TOOL_POINTS, type KillSpec } from './killer.js';
import { chargesOf, type BeforeLine, type RecoveryAction } from './recover.js';
import { openStore, type StoreKind, type StoreSpec } from './stores.js';
import type { SessionStore } from '../../src/store/types.js';
import { BROKEN_TOOL, EFFECTS, readLedger, RESERVATION, toolName, type CrashArgs, type Effect, type LedgerRow } from './tools.js';

const child = (name: string) => fileURLToPath(new URL(`./children/${name}.js`, import.meta.url));
export const CHILDREN = { crash: child('crash-child'), recovery: child('recovery-child'), soak: child('soak-child') };

// ---------------------------------------------------------------------------------------------------------------
// Children

export interface ChildRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly lines: Array<Record<string, unknown>>;
  readonly stderr: string;
}

/** A safety net against a hung child, not a timing assertion: a child that hangs this long is killed and reported. */
const CHILD_DEADLINE_MS = 120_000;

/** Runs a child script with one JSON argument and collects its JSON lines until its pipes close. */
export function runChild(script: string, arg: unknown): Promise<ChildRun> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [script, JSON.stringify(arg)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    proc.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`child ${script} hung for ${CHILD_DEADLINE_MS} ms; stdout: ${stdout.slice(-2000)} stderr: ${stderr.slice(-2000)}`));
    }, CHILD_DEADLINE_MS);
    proc.on('error', reject);
    proc.on('close', (code, signal) => {
      clearTimeout(timer);
      const lines: Array<Record<string, unknown>> = [];
      for (const text of stdout.split('\n')) {
        if (text.trim() === '') continue;
        try {
          lines.push(JSON.parse(text) as Record<string, unknown>);
        } catch {
          reject(new Error(`child ${script} printed a non-JSON line: ${text}\nstderr: ${stderr}`));
          return;
        }
      }
      resolve({ code, signal, lines, stderr });
    });
  });
}

export const lineOf = <T = Record<string, unknown>>(run: ChildRun, phase: string): T | undefined =>
  run.lines.find((l) => l.phase === phase || (phase === 'dying' && 'dying' in l)) as T | undefined;

function describeRun(what: string, run: ChildRun): string {
  return `${what}: exit ${run.code} signal ${run.signal}\nlines: ${JSON.stringify(run.lines).slice(0, 4000)}\nstderr: ${run.stderr.slice(0, 4000)}`;
}

/** The child must have died by SIGKILL at the named point (and said so first). */
export function expectKilled(what: string, run: ChildRun, point?: string): { dying: string; hit: number } {
  const dying = run.lines.find((l) => 'dying' in l) as { dying: string; hit: number } | undefined;
  if (run.signal !== 'SIGKILL' || dying === undefined || (point !== undefined && dying.dying !== point)) {
    throw new Error(`expected a SIGKILL at ${point ?? 'some point'}; ${describeRun(what, run)}`);
  }
  return dying;
}

export function expectClean(what: string, run: ChildRun): void {
  if (run.code !== 0 || run.signal !== null || run.lines.some((l) => l.phase === 'error' || 'dying' in l)) {
    throw new Error(`expected a clean exit; ${describeRun(what, run)}`);
  }
}

/** Runs `fn` over `items` with at most `limit` at once; results in input order. */
export async function pool<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

// ---------------------------------------------------------------------------------------------------------------
// The matrix

/** What the first crash leaves of the scripted call in the journal. */
type Journaled = 'nothing' | 'call' | 'call+started' | 'call+started+result';

export interface MatrixPoint {
  /** Short name used in test titles and the report. */
  readonly id: string;
  /** The row of the reliability test plan's crash matrix (§2). */
  readonly row: string;
  readonly description: string;
  /** The scripted call goes to the `*_approved` variant (approval asked before the marker). */
  readonly approval: boolean;
  /** Where the crash child dies. */
  readonly crash: KillSpec;
  /** Where a first recovery child dies, before the recovery that completes (C8, C9). */
  readonly recoveryKill?: KillSpec;
  readonly journaled: Journaled;
  /** The external write committed before the crash (meaningless for the read-only tool). */
  readonly wrote: boolean;
  /** Between the marker and the result: the journal cannot tell these apart, so inspection must be identical. */
  readonly betweenMarkerAndResult?: true;
}

export const MATRIX_POINTS: readonly MatrixPoint[] = [
  { id: 'call:before', row: 'C0', description: 'before the call is written', approval: false, crash: { point: 'call:before', hit: 1 }, journaled: 'nothing', wrote: false },
  { id: 'call:after', row: 'C6', description: 'after the call, before approval is answered', approval: true, crash: { point: 'call:after', hit: 1 }, journaled: 'call', wrote: false },
  { id: 'approval:after', row: 'C1', description: 'after approval, before the tool_started marker', approval: true, crash: { point: 'approval:after', hit: 1 }, journaled: 'call', wrote: false },
  { id: 'started:after', row: 'C2', description: 'after the marker, before the body runs', approval: false, crash: { point: 'started:after', hit: 1 }, journaled: 'call+started', wrote: false, betweenMarkerAndResult: true },
  { id: 'body:before-write', row: 'C2', description: 'in the body, before the external write', approval: false, crash: { point: TOOL_POINTS.beforeWrite, hit: 1 }, journaled: 'call+started', wrote: false, betweenMarkerAndResult: true },
  { id: 'body:after-write', row: 'C3', description: 'after the external write, before the body returns', approval: false, crash: { point: TOOL_POINTS.afterWrite, hit: 1 }, journaled: 'call+started', wrote: true, betweenMarkerAndResult: true },
  { id: 'body:after', row: 'C4', description: 'the body returned, before the result is written', approval: false, crash: { point: 'body:after', hit: 1 }, journaled: 'call+started', wrote: true, betweenMarkerAndResult: true },
  { id: 'commit:before#result', row: 'C4', description: 'inside the result transaction (budget settlement written), before COMMIT', approval: false, crash: { point: 'commit:before', hit: 2 }, journaled: 'call+started', wrote: true, betweenMarkerAndResult: true },
  { id: 'result:after', row: 'C5', description: 'after the result', approval: false, crash: { point: 'result:after', hit: 1 }, journaled: 'call+started+result', wrote: true },
  { id: 'commit:before#charge', row: 'C7', description: 'during the budget charge: call, charge and marker written, before COMMIT', approval: false, crash: { point: 'commit:before', hit: 1 }, journaled: 'nothing', wrote: false },
  { id: 'plan:taken', row: 'C8', description: 'after a plan is consumed, before the retry is written', approval: false, crash: { point: TOOL_POINTS.beforeWrite, hit: 1 }, recoveryKill: { point: 'plan:taken', hit: 1 }, journaled: 'call+started', wrote: false },
  { id: 'takeover', row: 'C9', description: 'after a takeover, before the history is loaded', approval: false, crash: { point: TOOL_POINTS.afterWrite, hit: 1 }, recoveryKill: { point: TAKEOVER_POINT, hit: 1 }, journaled: 'call+started', wrote: true },
];

/** What the decision table says must happen for one (point, effect). */
export interface Expectation {
  readonly status: 'not_executed' | 'outcome_unknown' | 'completed' | null;
  readonly nextStep: 'retry_allowed' | 'needs_review' | null;
  readonly review: 'not_executed' | 'completed' | null;
  readonly retried: boolean;
  readonly ledger: number;
  readonly charged: number;
}

export function expectationFor(point: MatrixPoint, effect: Effect): Expectation {
  const status = ({ nothing: null, call: 'not_executed', 'call+started': 'outcome_unknown', 'call+started+result': 'completed' } as const)[point.journaled];
  const safe = effect === 'read_only' || effect === 'idempotent';
  const nextStep = status === 'not_executed' ? 'retry_allowed' : status === 'outcome_unknown' ? (safe ? 'retry_allowed' : 'needs_review') : null;
  const review = nextStep === 'needs_review' ? (point.wrote ? 'completed' : 'not_executed') : null;
  const retried = nextStep === 'retry_allowed' || review === 'not_executed';
  const ledger = effect === 'read_only' || status === null ? 0 : 1;
  const charged = status === null ? 0 : retried ? 2 : 1;
  return { status, nextStep, review, retried, ledger, charged };
}

export interface CaseSpec {
  readonly kind: StoreKind;
  readonly point: MatrixPoint;
  readonly effect: Effect;
  /** The negative control swaps the tool for the broken one. */
  readonly tool?: string;
}

export interface CaseResult {
  readonly spec: CaseSpec;
  readonly sessionId: string;
  readonly taskId: string;
  readonly crashEpoch: number;
  readonly crashPoint: string;
  /** The killed recovery's `before` line and epoch (C8, C9). */
  readonly killedRecovery: { readonly before: BeforeLine | undefined; readonly epoch: number | undefined; readonly died: string } | null;
  readonly before: BeforeLine;
  readonly after: {
    readonly epoch: number;
    readonly actions: RecoveryAction[];
    readonly problems: string[];
    readonly approvals: number;
    readonly remaining: Array<{ callId: string; nextStep: string; status: string }>;
    readonly reservedOutputBytes: number;
  };
  /** What the parent read itself, after every child had exited. */
  readonly history: SessionEvent[];
  readonly ledger: LedgerRow[];
  readonly charged: Record<string, TaskCharge>;
  readonly invariants: InvariantReport;
  /** SQLite only: PRAGMA integrity_check of the journal and of the business database. */
  readonly integrity: string[];
}

export interface CaseEnv {
  /** A fresh directory for this case's files. */
  readonly dir: string;
  /** The journal store: a SQLite path under `dir`, or the run's PostgreSQL URL and schema. */
  readonly store: StoreSpec;
  readonly caseId: string;
}

function integrity(path: string): string {
  const db = new Database(path, { readonly: true });
  try {
    return String(db.pragma('integrity_check', { simple: true }));
  } finally {
    db.close();
  }
}

/** One case: crash child, optional killed recovery, recovery child, then the parent's own reading. */
export async function runCase(spec: CaseSpec, env: CaseEnv): Promise<CaseResult> {
  const business = `${env.dir}/business.db`;
  const sessionId = `s-${env.caseId}`;
  const taskId = `t-${env.caseId}`;
  const base = { store: env.store, business, sessionId };
  const args: CrashArgs = { item: 'one widget' };

  const crashScript: CrashScript = { ...base, kill: spec.point.crash, taskId, tool: spec.tool ?? toolName(spec.effect, spec.point.approval), args };
  const crash = await runChild(CHILDREN.crash, crashScript);
  const died = expectKilled(`crash child (${spec.point.id})`, crash, spec.point.crash.point);
  const crashEpoch = lineOf<{ epoch: number }>(crash, 'ready')!.epoch;

  let killedRecovery: CaseResult['killedRecovery'] = null;
  if (spec.point.recoveryKill) {
    const run = await runChild(CHILDREN.recovery, { ...base, kill: spec.point.recoveryKill, taskId } satisfies RecoveryScript);
    const dying = expectKilled(`first recovery child (${spec.point.id})`, run, spec.point.recoveryKill.point);
    const before = lineOf<BeforeLine>(run, 'before');
    killedRecovery = { before, epoch: before?.epoch, died: dying.dying };
  }

  const recovery = await runChild(CHILDREN.recovery, { ...base, kill: null, taskId } satisfies RecoveryScript);
  expectClean(`recovery child (${spec.point.id})`, recovery);
  const before = lineOf<BeforeLine>(recovery, 'before')!;
  const after = lineOf<CaseResult['after']>(recovery, 'after')!;

  // The parent's own reading: every child has exited.
  const store = await openStore(env.store);
  let history: SessionEvent[];
  let charged: Record<string, TaskCharge>;
  let ledgerProblem: string | null;
  try {
    history = await store.loadHistory(sessionId);
    const owner = await store.acquire(sessionId, { owner: 'checker', takeover: true });
    charged = await chargesOf(owner, history, [taskId]);
    await owner.release();
    ledgerProblem = await taskLedgerProblem(store, sessionId);
  } finally {
    await store.close();
  }
  const ledger = readLedger(business);
  const invariants = withLedger(checkInvariants(history, ledger, charged, RESERVATION), ledgerProblem);
  const checks = env.store.kind === 'sqlite' ? [integrity(env.store.location), integrity(business)] : [integrity(business)];
  return { spec, sessionId, taskId, crashEpoch, crashPoint: died.dying, killedRecovery, before, after, history, ledger, charged, invariants, integrity: checks };
}

/**
 * The stored task rows against the chain (docs/design.md#the-task-ledger-in-the-chain): a row the journaled task
 * changes and tool evidence do not justify is a budget mismatch. Returns the store's message, or null.
 */
async function taskLedgerProblem(store: SessionStore, sessionId: string): Promise<string | null> {
  try {
    await store.checkTaskLedger!(sessionId);
    return null;
  } catch (error) {
    if ((error as { code?: string }).code === 'journal_corrupt') return `task ledger: ${(error as Error).message}`;
    throw error;
  }
}

/** Adds a task-ledger problem to a report as a budget mismatch. */
function withLedger(report: InvariantReport, problem: string | null): InvariantReport {
  if (problem === null) return report;
  return { ...report, budgetMismatches: report.budgetMismatches + 1, problems: [...report.problems, problem] };
}

// ---------------------------------------------------------------------------------------------------------------
// The soak

/** sfc32: small, fast, and the same sequence on every platform for a given seed. */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;
  constructor(seed: number) {
    this.a = 0x9e3779b9;
    this.b = 0x243f6a88;
    this.c = 0xb7e15162;
    this.d = seed >>> 0;
    for (let i = 0; i < 16; i++) this.next();
  }
  next(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return (t >>> 0) / 4294967296;
  }
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }
}

export function burstOf(rng: Rng, label: string): BurstCall[][] {
  const groups: BurstCall[][] = [];
  const calls = rng.int(3, 8);
  let made = 0;
  while (made < calls) {
    const size = Math.min(rng.int(1, 3), calls - made);
    const group: BurstCall[] = [];
    for (let i = 0; i < size; i++, made++) {
      const effect = rng.pick(EFFECTS);
      const approval = rng.chance(0.3);
      const roll = rng.next();
      const args: CrashArgs = {
        // Now and then no item: the schema rejects it, and call and failed result commit together.
        ...(rng.chance(0.05) ? {} : { item: `${label}-c${made}` }),
        ...(roll < 0.15 ? { fail: 'before_write' as const } : roll < 0.3 ? { fail: 'after_write' as const } : {}),
        ...(approval && rng.chance(0.2) ? { deny: true } : {}),
      };
      group.push({ tool: toolName(effect, approval), args });
    }
    groups.push(group);
  }
  return groups;
}

/** Kill-point hits per call, roughly (8 without approval, 11 with): the scale for a random kill hit. */
const HITS_PER_CALL = 9;

export interface SoakTotals {
  kills: number;
  runs: number;
  /** Kills per point name, for the coverage note. */
  readonly killedAt: Record<string, number>;
  /** Kills that landed inside a recovery (a crash while recovering from a crash). */
  killsInRecovery: number;
  /** Invariant counts summed over every check (the `found` and `recovered` lines and the parent's final check). */
  readonly counts: { duplicates: number; unreviewedReexecutions: number; retriedCompletions: number; other: number };
  readonly failures: string[];
}

export function emptySoakTotals(): SoakTotals {
  return { kills: 0, runs: 0, killedAt: {}, killsInRecovery: 0, counts: { duplicates: 0, unreviewedReexecutions: 0, retriedCompletions: 0, other: 0 }, failures: [] };
}

function tally(totals: SoakTotals, where: string, report: { counts: Record<string, number>; problems: string[] }, leftovers: string[] = []): void {
  const c = report.counts;
  totals.counts.duplicates += c.duplicates ?? 0;
  totals.counts.unreviewedReexecutions += c.unreviewedReexecutions ?? 0;
  totals.counts.retriedCompletions += c.retriedCompletions ?? 0;
  const other = (c.budgetMismatches ?? 0) + (c.orphanWrites ?? 0) + (c.unclassified ?? 0) + leftovers.length;
  totals.counts.other += other;
  if (report.problems.length > 0 || leftovers.length > 0) totals.failures.push(`${where}: ${[...report.problems, ...leftovers].join('; ')}`);
}

export interface SoakWorkerEnv {
  readonly store: StoreSpec;
  /** The worker's directory: one business database per session lives here. */
  readonly dir: string;
  /** Prefix of the worker's session ids. */
  readonly sessionPrefix: string;
  readonly seed: number;
  readonly worker: number;
  /** Shared by the workers of one store: how many kills are still wanted. */
  readonly budget: { remaining: number };
}

/**
 * Soak steps per session. The store keeps every session; a worker moves to a fresh session (and a fresh business
 * database) after this many steps, so one journal's growth does not make every later recovery slower.
 */
const STEPS_PER_SESSION = 15;

/** The parent's own check of one session: it reads the journal, the ledger and the charges itself. */
async function parentCheck(spec: StoreSpec, sessionId: string, business: string): Promise<InvariantReport> {
  const store = await openStore(spec);
  try {
    const history = await store.loadHistory(sessionId);
    const owner = await store.acquire(sessionId, { owner: 'soak-checker', takeover: true });
    const charged = await chargesOf(owner, history);
    await owner.release();
    return withLedger(checkInvariants(history, readLedger(business), charged, RESERVATION), await taskLedgerProblem(store, sessionId));
  } finally {
    await store.close();
  }
}

type CheckLine = { counts: Record<string, number>; problems: string[]; leftovers?: string[] };

/**
 * Kills soak children until the shared kill budget is spent. Every child first checks what the last kill left
 * (line `found`), recovers, and checks again (line `recovered`); the parent reads both after every kill. Each
 * session ends with a clean recovery and the parent's own check of the whole session: every violation the
 * invariants count (a duplicate row, an unreviewed retry, a retried completion, a charge without its attempt)
 * stays in the journal or the ledger, so this check also covers every kill of the session.
 */
export async function soakWorker(env: SoakWorkerEnv, totals: SoakTotals): Promise<void> {
  const rng = new Rng((env.seed ^ Math.imul(env.worker + 1, 0x9e3779b1)) >>> 0);
  const replay = `seed ${env.seed} worker ${env.worker}`;
  let step = 0;
  let session = -1;
  let base = { store: env.store, business: '', sessionId: '' };

  const check = async (where: string) => {
    const report = await parentCheck(env.store, base.sessionId, base.business);
    tally(totals, `${where}, parent's check`, { counts: { ...countsOf(report) }, problems: report.problems });
  };
  const finishSession = async () => {
    const last = await runChild(CHILDREN.soak, { ...base, kill: null, burst: null } satisfies SoakScript);
    try {
      expectClean('final soak recovery', last);
    } catch (error) {
      totals.failures.push(`${replay} session ${session} final recovery: ${String(error)}`);
      return;
    }
    const recovered = lineOf<CheckLine>(last, 'recovered')!;
    tally(totals, `${replay} session ${session} final recovery`, recovered, recovered.leftovers ?? []);
    await check(`${replay} session ${session} end`);
  };

  while (env.budget.remaining > 0 && totals.failures.length === 0) {
    if (step % STEPS_PER_SESSION === 0) {
      if (session >= 0) await finishSession();
      session += 1;
      base = { store: env.store, business: `${env.dir}/business-${session}.db`, sessionId: `${env.sessionPrefix}-${session}` };
    }
    step += 1;
    const label = `w${env.worker}-i${step}`;
    const groups = burstOf(rng, label);
    const calls = groups.reduce((n, g) => n + g.length, 0);
    const hit = rng.int(1, HITS_PER_CALL * calls + 4);
    const script: SoakScript = { ...base, kill: { point: '*', hit }, burst: { taskId: `t-${base.sessionId}-${label}`, groups } };
    const run = await runChild(CHILDREN.soak, script);
    totals.runs += 1;
    const where = `${replay} step ${step} (session ${base.sessionId}, kill at hit ${hit})`;
    if (run.lines.some((l) => l.phase === 'error') || (run.signal === null && run.code !== 0) || (run.signal !== null && run.signal !== 'SIGKILL')) {
      totals.failures.push(`${where}: ${describeRun('soak child', run)}`);
      return;
    }
    for (const phase of ['found', 'recovered'] as const) {
      const line = lineOf<CheckLine>(run, phase);
      if (line) tally(totals, `${where} ${phase}`, line, line.leftovers ?? []);
    }
    if (run.signal === 'SIGKILL') {
      const dying = expectKilled('soak child', run);
      env.budget.remaining -= 1;
      totals.kills += 1;
      totals.killedAt[dying.dying] = (totals.killedAt[dying.dying] ?? 0) + 1;
      if (!lineOf(run, 'recovered')) totals.killsInRecovery += 1;
    }
  }
  if (totals.failures.length === 0 && session >= 0) await finishSession();
}

export { BROKEN_TOOL, EFFECTS };
