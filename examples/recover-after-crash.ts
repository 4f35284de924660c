import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
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

const isHostA = process.argv[2] === 'host-a';
const refund = {
  name: 'refund_payment',
  metadata: new ToolMetadata('Refunds a payment', { type: 'object' }).withEffect('non_idempotent', 'refunds-v1'),
  async execute() {
    if (isHostA) {
      process.stdout.write('inside the body\n');
      await new Promise(() => {}); // host A dies here, before the provider answers
    }
    return 'refunded';
  },
};
const runtime = createToolRuntime({ tools: [refund], grants: { agent: '*' } });

if (isHostA) {
  // Host A, a process of its own: starts the call; the parent kills it (SIGKILL) inside the body.
  const store = openSqliteStore(process.argv[3]!);
  const hostA = await store.acquire('session-9', { owner: 'host-a' });
  await hostA.startTask('task-9');
  await runtime.bind({ owner: hostA, taskId: 'task-9', caller: 'agent' }).call('refund_payment', { paymentId: 'pay_123' });
} else {
  const path = join(mkdtempSync(join(tmpdir(), 'jingwei-recover-')), 'journal.db');
  const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), 'host-a', path], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => { if (chunk.includes('inside the body')) resolve(); });
    child.on('exit', (code) => reject(new Error(`host A exited (${code}) before its body started`)));
  });
  child.kill('SIGKILL');
  await new Promise((resolve) => child.on('exit', resolve));
  console.log('host A was killed inside the body');

  // Host B: fence host A, load the confirmed journal, assess.
  const store = openSqliteStore(path);
  const hostB = await store.acquire('session-9', { owner: 'host-b', takeover: true });
  const history = await store.loadHistory('session-9');
  const [pending] = assessSession(history).calls;
  console.log(pending!.name, pending!.status, pending!.nextStep, '-', pending!.reason);

  // An operator checks the payment provider, finds no refund, and records that as trusted evidence.
  const review: ToolRetryReview = { actor: 'ops@example.com', evidence: 'provider dashboard: no refund for pay_123', outcome: 'not_executed' };
  const gateway = runtime.bind({ owner: hostB, taskId: 'task-9', caller: 'agent' });
  const retried = await retryOnce(gateway, history, pending!.callId, review);
  console.log('retry:', retried.result.outcome.status, 'same key:', retried.call.operation?.key === pending!.key);
  await store.close();
}
