import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  assessSession, createToolRuntime, inspectToolRecovery, prepareToolRetry, ToolMetadata,
  type SessionEvent, type ToolExecution, type ToolGateway, type ToolRetryReview,
} from 'jingwei';
import { openSqliteStore } from 'jingwei/sqlite';

/** One explicit retry: inspect, prepare one plan, call through every normal check. */
async function retryOnce(
  gateway: ToolGateway,
  confirmedHistory: readonly SessionEvent[],
  latestCallId: string,
  hostReview: ToolRetryReview | null,
): Promise<ToolExecution> {
  const assessment = inspectToolRecovery(confirmedHistory, latestCallId);
  const plan = prepareToolRetry(confirmedHistory, latestCallId, hostReview);
  return gateway.callWithOptions(assessment.call.name, assessment.call.arguments, { retry: plan });
}

const path = join(mkdtempSync(join(tmpdir(), 'jingwei-recover-')), 'journal.db');
let attempts = 0;
let entered!: () => void;
const bodyStarted = new Promise<void>((resolve) => { entered = resolve; });
const refund = {
  name: 'refund_payment',
  metadata: new ToolMetadata('Refunds a payment', { type: 'object' }).withEffect('non_idempotent', 'refunds-v1'),
  async execute(_request: unknown, signal: AbortSignal) {
    attempts += 1;
    if (attempts === 1) { entered(); await new Promise((resolve) => signal.addEventListener('abort', resolve)); } // hangs
    return 'refunded';
  },
};
const runtime = createToolRuntime({ tools: [refund], grants: { agent: '*' } });

// Host A starts the call and dies while the body runs (here: a takeover fences it, then its call is cut off).
const storeA = openSqliteStore(path);
const hostA = await storeA.acquire('session-9', { owner: 'host-a' });
await hostA.startTask('task-9');
const hostAGoesDown = new AbortController();
const inFlight = runtime.bind({ owner: hostA, taskId: 'task-9', caller: 'agent' })
  .callWithOptions('refund_payment', { paymentId: 'pay_123' }, { signal: hostAGoesDown.signal }).catch((e: Error) => e);

// Host B: once host A is inside the body, fence it, load the confirmed journal, assess.
await bodyStarted;
const storeB = openSqliteStore(path);
const hostB = await storeB.acquire('session-9', { owner: 'host-b', takeover: true });
hostAGoesDown.abort();
console.log('host A could not record:', ((await inFlight) as Error & { code: string }).code);
const history = await storeB.loadHistory('session-9');
const [pending] = assessSession(history).calls;
console.log(pending!.name, pending!.status, pending!.nextStep, '-', pending!.reason);

// An operator checks the payment provider, finds no refund, and records that as trusted evidence.
const review: ToolRetryReview = { actor: 'ops@example.com', evidence: 'provider dashboard: no refund for pay_123', outcome: 'not_executed' };
const gateway = runtime.bind({ owner: hostB, taskId: 'task-9', caller: 'agent' });
const retried = await retryOnce(gateway, history, pending!.callId, review);
console.log('retry:', retried.result.outcome.status, 'same key:', retried.call.operation?.key === pending!.key);
await storeA.close();
await storeB.close();
