/**
 * `jingwei demo`: the promise, shown with real processes. An agent fulfils one order with five tools, one worker
 * process per step, and every worker is SIGKILLed at a real crash point. Then, as the recovering host, the demo
 * takes the session over, assesses the journal, retries what the rules allow, refuses what they do not, records an
 * operator's review for one call and retries it, and checks that nothing happened twice and nothing was lost.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, extname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { SessionBusyError, ToolRetryError } from '../../errors.js';
import type { SessionEvent, ToolCall, ToolRetryReview } from '../../event/types.js';
import type { SessionOwner, SessionStore } from '../../store/types.js';
import { assessSession, type SessionAssessment, type ToolCallAssessment } from '../../tool/assess.js';
import { inspectToolRecovery, prepareToolRetry } from '../../tool/recovery.js';
import { createToolRuntime } from '../../tool/runtime.js';
import { externalIdempotencyKey, operationOriginIn } from '../../tool/idempotency.js';
import type { ToolExecution } from '../../tool/types.js';
import { callTable } from '../assessment.js';
import type { CommandContext } from '../command.js';
import { EXIT, UsageError, type ExitCode } from '../exit.js';
import { clip, plural, shortId } from '../format.js';
import { visibleLength, type Printer } from '../io.js';
import { isPostgresTarget, openStoreFromTarget } from '../target.js';
import { CALLER, ORDER, openShop, paymentsWithReference, shopCounts, shopTools, STEPS, type Shop } from './shop.js';
import type { WorkerLine, WorkerSpec } from './worker.js';

const WORKER = fileURLToPath(new URL('./worker.js', import.meta.url));
const WORKER_TIMEOUT_MS = 20_000;
const OPERATOR = 'ops:maria (payments desk)';
const UNCERTAIN: Record<string, string> = {
  charge_card: 'the card may or may not have been charged',
  notify_customer: 'the e-mail may or may not have been sent',
};

interface Death {
  readonly pid: number;
  readonly signal: NodeJS.Signals | null;
  readonly code: number | null;
  readonly lines: WorkerLine[];
  readonly stderr: string;
}

function runWorker(spec: WorkerSpec): Promise<Death> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [WORKER, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), WORKER_TIMEOUT_MS);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const lines = stdout.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as WorkerLine);
      resolvePromise({ pid: child.pid ?? -1, signal, code, lines, stderr });
    });
  });
}

/** How to run this program again, as the reader invoked it. */
function selfCommand(): string {
  const script = process.argv[1] ?? 'jingwei';
  if (basename(script) === 'jingwei') return 'jingwei';
  const rel = relative(process.cwd(), script);
  return rel.startsWith('..') || isAbsolute(rel) ? 'jingwei' : `node ${rel}`;
}

function businessPathFor(journal: string): string {
  const ext = extname(journal);
  const stem = ext ? journal.slice(0, -ext.length) : journal;
  return `${stem}.business${ext || '.db'}`;
}

class Story {
  private failures: string[] = [];
  constructor(readonly out: Printer) {}

  get s() {
    return this.out.style;
  }
  line(text = ''): void {
    this.out.line(text);
  }
  part(title: string): void {
    this.line();
    this.line(this.s.bold(title));
    this.line();
  }
  /** Prose, wrapped to the terminal (or 100 columns in a file), indented. */
  say(text: string, indent = '  '): void {
    const width = Math.min(this.out.width ?? 100, 110) - indent.length;
    let line = '';
    for (const word of text.split(' ')) {
      if (line && visibleLength(line) + 1 + visibleLength(word) > width) {
        this.line(indent + line);
        line = word;
      } else line = line ? `${line} ${word}` : word;
    }
    if (line) this.line(indent + line);
  }
  check(ok: boolean, text: string): void {
    this.line(`  ${ok ? this.s.green('✓') : this.s.red('✗')} ${text}`);
    if (!ok) this.failures.push(text);
  }
  fail(text: string): void {
    this.check(false, text);
  }
  get failed(): readonly string[] {
    return this.failures;
  }
}

function callOf(history: readonly SessionEvent[], callId: string): ToolCall {
  for (const e of history) if (e.kind.type === 'tool_call' && e.kind.call.id === callId) return e.kind.call;
  throw new Error(`call ${callId} is not in the journal`);
}

function outputOf(execution: ToolExecution): string {
  const o = execution.result.outcome;
  return o.status === 'succeeded' ? `succeeded ${o.output}` : `failed ${o.category} (${o.code}: ${o.message})`;
}

/** `jingwei demo` itself; the command's description is in ./command.ts. */
export async function runDemo({ out, args }: CommandContext): Promise<ExitCode> {
  const given = args.journal;
  if (given !== undefined && isPostgresTarget(given)) throw new UsageError('the demo runs on a SQLite file; give a file path (or nothing)');
  const journal = given !== undefined ? resolve(given) : join(mkdtempSync(join(tmpdir(), 'jingwei-demo-')), 'journal.db');
  if (!existsSync(dirname(journal))) throw new UsageError(`the directory of ${given} does not exist`);
  const business = businessPathFor(journal);
  const store = await openStoreFromTarget(journal, { create: true });
  const shop = await openShop(business);
  try {
    // Paths are shown as given (relative stays relative); the workers get absolute ones.
    const shown = given !== undefined ? { journal: given, business: businessPathFor(given) } : { journal, business };
    return await tell(new Story(out), store, shop, { journal, business, shown });
  } finally {
    shop.close();
    await store.close();
  }
}

interface Paths {
  readonly journal: string;
  readonly business: string;
  readonly shown: { readonly journal: string; readonly business: string };
}

async function tell(story: Story, store: SessionStore, shop: Shop, paths: Paths): Promise<0 | 1> {
  const { journal, business, shown } = paths;
  const s = story.s;
  const suffix = randomBytes(4).toString('hex');
  const sessionId = `demo-${suffix}`;
  const taskId = `order-${ORDER}-${suffix}`;
  const self = selfCommand();

  story.line(s.bold('jingwei demo: a tool with real side effects is never silently run twice after a crash,'));
  story.line(s.bold('and whether a write happened is never lost.'));
  story.line();
  story.line(`  journal   ${shown.journal}`);
  story.line(`  shop db   ${shown.business}`);
  story.line(`  session   ${sessionId}, task ${taskId}`);
  story.line();
  story.say(
    `An agent fulfils order ${ORDER} with five tools. Every tool declares its side effect, and jingwei journals each call ` +
      `before its body runs (tool_call), marks the moment the body starts (tool_started), and journals the result after (tool_result).`,
  );
  story.line();
  story.line(`  ${s.bold('check_stock'.padEnd(16))}read_only       reads the inventory`);
  story.line(`  ${s.bold('create_order'.padEnd(16))}idempotent      writes the order through SqliteIdempotencyStore: one record per operation key`);
  story.line(`  ${s.bold('charge_card'.padEnd(16))}non_idempotent  adds a charge to the payments ledger; charging twice charges twice`);
  story.line(`  ${s.bold('ship_order'.padEnd(16))}non_idempotent  books a courier; the warehouse manager approves every attempt`);
  story.line(`  ${s.bold('notify_customer'.padEnd(16))}unknown         a third-party e-mail plug-in that declares nothing`);

  // ------------------------------------------------------------------------------------------------------------
  story.part('1. Five crashes');
  story.say(
    `Each step runs in its own worker process, as a job runner would run it. Each worker takes the session over from the ` +
      `dead one before it, runs its tool, and is killed with SIGKILL at a fault point on the real code path.`,
  );
  let seen = 0;
  for (const [i, step] of STEPS.entries()) {
    const death = await runWorker({ journal, business, sessionId, taskId, step: i });
    const crashed = death.lines.some((l) => 'crash' in l && l.crash === step.crashAt);
    story.line();
    const fate = death.signal === 'SIGKILL' && crashed
      ? s.red(`killed (SIGKILL) at ${step.crashAt}`)
      : s.red(`did not die as planned (exit code ${death.code}, signal ${death.signal})`);
    story.line(`  ${i + 1}. ${s.bold(step.tool.padEnd(16))}worker ${death.pid} ${fate}`);
    story.line(`     ${'when'.padEnd(16)}${step.when}`);
    if (death.signal !== 'SIGKILL' || !crashed) {
      story.fail(`worker ${i + 1} should have been killed at ${step.crashAt}; stderr: ${clip(death.stderr, 300)}`);
      return 1;
    }
    const history = await store.loadHistory(sessionId);
    const added = history.slice(seen).filter((e) => e.kind.type.startsWith('tool_')).map((e) => `${e.kind.type} (seq ${e.seq})`);
    seen = history.length;
    story.line(`     ${'journal gained'.padEnd(16)}${added.join(', ')}`);
    const bodies = death.lines.filter((l): l is { body: string; did: string } => 'body' in l);
    story.line(`     ${'tool body'.padEnd(16)}${bodies.length === 0 ? s.dim('never ran') : bodies.map((b) => b.did).join('; ')}`);
  }
  const crashed = shopCounts(shop, taskId);
  story.line();
  story.say(
    `The shop's database now holds ${plural(crashed.orders, 'order')}, ${plural(crashed.payments, 'charge')}, ` +
      `${plural(crashed.shipments, 'shipment')} and ${plural(crashed.emails, 'e-mail')} for this order, and the journal has no result for any of the five calls.`,
  );

  // ------------------------------------------------------------------------------------------------------------
  story.part('2. The recovering host takes over and assesses');
  let owner: SessionOwner;
  try {
    owner = await store.acquire(sessionId, { owner: 'recovery-host' });
    story.fail('acquire without takeover should have been refused while the dead worker holds the session');
    return 1;
  } catch (error) {
    if (!(error instanceof SessionBusyError)) throw error;
    owner = await store.acquire(sessionId, { owner: 'recovery-host', takeover: true });
    story.say(
      `acquire() is refused with ${s.yellow(error.code)}: ${error.holder} still holds the session at epoch ${error.epoch}. A dead process ` +
        `cannot release anything, and the store cannot know it is dead. We saw it die, so the host takes the session ` +
        `over (acquire with takeover: true) and gets epoch ${owner.epoch}.`,
    );
  }
  let history = await store.loadHistory(sessionId);
  story.say(
    `Every earlier owner is now fenced: a late write from any of them would fail with stale_owner. ` +
      `The host loads the confirmed journal (${plural(history.length, 'event')}, sequence and hash chain verified) and assesses it. ` +
      `Every call without a success, with what may be done about it:`,
  );
  story.line();
  const before = assessSession(history);
  story.line(callTable(before.calls, s, story.out.width !== undefined ? { width: story.out.width, indent: '  ' } : { indent: '  ' }));

  // ------------------------------------------------------------------------------------------------------------
  story.part('3. What the rules allow');
  const approvals = { asked: 0 };
  const bodies: string[] = [];
  const runtime = createToolRuntime({
    tools: shopTools(shop, (_tool, did) => bodies.push(did)),
    grants: { [CALLER]: '*' },
    approvers: {
      warehouse: async () => {
        approvals.asked += 1;
        return { decision: 'approved' };
      },
    },
  });
  const gateway = runtime.bind({ owner, taskId, caller: CALLER });
  const retried = new Map<string, ToolExecution>();

  const retry = async (callId: string, review: ToolRetryReview | null): Promise<ToolExecution> => {
    history = await store.loadHistory(sessionId);
    const assessment = inspectToolRecovery(history, callId);
    const plan = prepareToolRetry(history, callId, review);
    bodies.length = 0;
    return gateway.callWithOptions(assessment.call.name, assessment.call.arguments, { retry: plan });
  };

  for (const [n, c] of before.calls.entries()) {
    if (n > 0) story.line();
    const head = `  ${s.bold(c.name)} (${shortId(c.callId)}), ${c.effect}: ${c.nextStep === 'retry_allowed' ? s.cyan(c.nextStep) : s.yellow(c.nextStep)}`;
    story.line(head);
    if (c.nextStep === 'retry_allowed') {
      const asked = approvals.asked;
      const execution = await retry(c.callId, null);
      retried.set(c.callId, execution);
      const why =
        c.status === 'not_executed'
          ? `The call was journaled but has no start marker, so its body provably never ran: even a non_idempotent tool may be retried. ` +
            `An approval never carries over: the warehouse manager was asked again${approvals.asked - asked === 1 ? '' : ` (${approvals.asked - asked} times)`}, and approved.`
          : c.effect === 'idempotent'
            ? `The outcome is unknown, and the tool deduplicates by the operation key, so one retry with the same key is safe.`
            : `The outcome is unknown, but the tool only reads, so one retry is harmless.`;
      story.say(why, '    ');
      story.say(
        `prepareToolRetry gave a single-use plan; callWithOptions ran the retry with key ${shortId(execution.call.operation!.key)} ` +
          `(the same as the crashed attempt): ${s.green(outputOf(execution))}.`,
        '    ',
      );
      if (bodies.length > 0) story.say(`The tool body ${bodies.join('; ')}.`, '    ');
    } else {
      try {
        prepareToolRetry(history, c.callId, null);
        story.fail(`prepareToolRetry should have refused ${c.name}`);
      } catch (error) {
        if (!(error instanceof ToolRetryError)) throw error;
        const kind = c.effect === 'unknown' ? 'a tool that declares nothing (effect unknown)' : `a ${c.effect} tool`;
        story.say(
          `The body started and no result was journaled, so ${UNCERTAIN[c.name] ?? 'the write may or may not have happened'}; ${kind} ` +
            `must not be re-sent on a guess. prepareToolRetry refuses: ${s.yellow(error.code)}.`,
          '    ',
        );
      }
    }
  }

  // ------------------------------------------------------------------------------------------------------------
  story.part('4. An operator reviews the charge');
  const charge = before.calls.find((c) => c.name === 'charge_card')!;
  const chargeCall = callOf(history, charge.callId);
  const reference = externalIdempotencyKey({ sessionId, operationOrigin: operationOriginIn(history, chargeCall.operation!)!, operation: chargeCall.operation! });
  const found = paymentsWithReference(shop, reference);
  story.say(
    `charge_card sends every charge with the reference externalIdempotencyKey gives its operation (here "${reference}"). An operator, ${OPERATOR}, looks the reference up ` +
      `in the payment provider's ledger: ${found === 0 ? s.bold('no charge') : s.red(`${found} charge(s)`)}. That matches the journal: the worker died right after ` +
      `the start marker, before the card was charged. Only a trusted host may say so; the model never can.`,
  );
  const review: ToolRetryReview = {
    actor: OPERATOR,
    evidence: `payments ledger checked ${new Date().toISOString()}: no charge with reference ${reference}`,
    outcome: 'not_executed',
  };
  story.line();
  story.say(`The host records the review: ToolRetryReview { actor: '${review.actor}', outcome: '${review.outcome}', evidence: '${review.evidence}' }`, '    ');
  story.line();
  const chargeRetry = await retry(charge.callId, review);
  retried.set(charge.callId, chargeRetry);
  story.say(
    `prepareToolRetry(history, call, review) now gives a plan; the retry ${s.green(outputOf(chargeRetry))}, and the review is journaled ` +
      `with it for the audit trail. The ledger holds ${plural(paymentsWithReference(shop, reference), 'charge')} for the reference.`,
    '    ',
  );
  story.line();
  const notify = before.calls.find((c) => c.name === 'notify_customer')!;
  const emails = shopCounts(shop, taskId).emails;
  story.say(
    `notify_customer is left alone. The outbox holds ${plural(emails, 'e-mail')} for this order: the plug-in did send it before ` +
      `the crash. A retry would e-mail the customer twice, so nobody plans one; the call stays ${s.yellow('needs_review')}. ` +
      `(A review saying 'completed' would only block retries for good.)`,
  );

  // ------------------------------------------------------------------------------------------------------------
  story.part('5. The journal after recovery');
  history = await store.loadHistory(sessionId);
  const after: SessionAssessment = assessSession(history);
  story.say('The crashed attempts stay in the journal for good; a later success settles them:');
  story.line();
  story.line(callTable(after.calls, s, story.out.width !== undefined ? { width: story.out.width, indent: '  ' } : { indent: '  ' }));

  // ------------------------------------------------------------------------------------------------------------
  story.part('6. Invariants');
  await checkInvariants(story, store, owner, shop, { sessionId, taskId, history, after, notify, charge, retried });
  await owner.release();

  story.line();
  if (story.failed.length > 0) {
    story.line(s.red(`${plural(story.failed.length, 'invariant')} did not hold.`));
    return EXIT.findings;
  }
  story.line(s.green(s.bold('All invariants hold.')) + ' Look around yourself:');
  story.line();
  const where = shown.journal.includes(' ') ? JSON.stringify(shown.journal) : shown.journal;
  story.line(`  ${self} sessions ${where}`);
  story.line(`  ${self} inspect  ${where} ${sessionId}`);
  story.line(`  ${self} inspect  ${where} ${sessionId} ${notify.callId.slice(-8)}`);
  story.line(`  ${self} events   ${where} ${sessionId}`);
  story.line(`  ${self} verify   ${where} ${sessionId}`);
  return EXIT.ok;
}

interface Facts {
  readonly sessionId: string;
  readonly taskId: string;
  readonly history: SessionEvent[];
  readonly after: SessionAssessment;
  readonly notify: ToolCallAssessment;
  readonly charge: ToolCallAssessment;
  readonly retried: ReadonlyMap<string, ToolExecution>;
}

async function checkInvariants(story: Story, store: SessionStore, owner: SessionOwner, shop: Shop, f: Facts): Promise<void> {
  // The journal, reloaded from storage and verified again.
  const reloaded = await store.loadHistory(f.sessionId);
  const listed = (await store.listSessions()).find((x) => x.sessionId === f.sessionId);
  story.check(
    reloaded.length === f.history.length && listed?.events === reloaded.length,
    `journal verified again from storage: ${plural(reloaded.length, 'event')}, seq 0..${reloaded.length - 1} contiguous, hash chain and head intact`,
  );

  const counts = shopCounts(shop, f.taskId);
  story.check(
    counts.orders === 1 && counts.dedupRecords === 1 && counts.payments === 1 && counts.shipments === 1 && counts.emails === 1,
    `business records: ${counts.orders} order (${counts.dedupRecords} dedup record), ${counts.payments} charge, ${counts.shipments} shipment, ` +
      `${counts.emails} e-mail for order ${ORDER}: no side effect happened twice`,
  );

  const calls = reloaded.filter((e) => e.kind.type === 'tool_call').length;
  const task = await owner.task(f.taskId);
  story.check(
    task.charged.toolCalls === calls,
    `budget charged: ${task.charged.toolCalls} tool calls for ${calls} journaled attempts (the crashed ones too; nothing refunded)`,
  );

  const retries = [...f.retried.entries()].map(([source, execution]) => {
    const sourceCall = callOf(reloaded, source);
    const op = execution.call.operation!;
    return op.key === sourceCall.operation!.key && op.retry?.callId === source;
  });
  story.check(
    retries.length === 4 && retries.every(Boolean),
    `${retries.length} retries, each with its operation's key and an audit pointing at the crashed attempt`,
  );

  const chargeRetry = f.retried.get(f.charge.callId);
  story.check(
    chargeRetry?.call.operation?.retry?.review?.outcome === 'not_executed' && chargeRetry.result.outcome.status === 'succeeded',
    `the charge was retried only with the operator's not_executed review, which the journal keeps`,
  );

  const attention = f.after.calls.filter((c) => c.nextStep === 'needs_review' || c.nextStep === 'retry_allowed');
  story.check(
    attention.length === 1 && attention[0]!.callId === f.notify.callId && attention[0]!.nextStep === 'needs_review',
    `one call still needs attention, notify_customer (needs_review), and it was never retried`,
  );
}
