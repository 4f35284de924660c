/**
 * One agent worker of the demo, run as its own process: it takes the session over, runs one step of the order
 * through the canonical runtime, and SIGKILLs itself at the step's fault point on the real production path.
 * It speaks JSON lines on stdout (written synchronously, so every line is out before the kill).
 */
import { writeSync } from 'node:fs';
import { setFaultHook, type FaultPoint } from '../../fault.js';
import { newTurnId } from '../../ids.js';
import { openSqliteStore } from '../../store/sqlite/backend.js';
import { createToolRuntime } from '../../tool/runtime.js';
import { CALLER, CUSTOMER, ORDER, openShop, shopTools, STEPS } from './shop.js';

export interface WorkerSpec {
  readonly journal: string;
  readonly business: string;
  readonly sessionId: string;
  readonly taskId: string;
  /** Index into STEPS. */
  readonly step: number;
}

export type WorkerLine =
  | { readonly acquired: number }
  | { readonly body: string; readonly did: string }
  | { readonly crash: FaultPoint }
  | { readonly error: string };

const say = (line: WorkerLine) => writeSync(1, JSON.stringify(line) + '\n');

const spec = JSON.parse(process.argv[2] ?? '{}') as WorkerSpec;
const step = STEPS[spec.step];
if (!step) {
  say({ error: `no step ${String(spec.step)}` });
  process.exit(2);
}

setFaultHook((point) => {
  if (point !== step.crashAt) return;
  say({ crash: point });
  process.kill(process.pid, 'SIGKILL');
  // Never run another instruction while the kernel delivers the signal.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60_000);
});

const store = openSqliteStore(spec.journal);
const shop = await openShop(spec.business);
// The previous worker died holding the session; this one takes it over, which fences every earlier owner.
const owner = await store.acquire(spec.sessionId, { owner: `worker-${spec.step + 1}`, takeover: true });
say({ acquired: owner.epoch });
await owner.startTask(spec.taskId, { limits: { toolCalls: 20 } });
const turnId = newTurnId();
if (spec.step === 0) {
  await owner.append([{ turnId, kind: { type: 'user_message', text: `Please fulfil order ${ORDER}: one oak lamp for ${CUSTOMER}, card payment, ship to Lyon, and confirm by e-mail.` } }]);
}
const runtime = createToolRuntime({
  tools: shopTools(shop, (tool, did) => say({ body: tool, did })),
  grants: { [CALLER]: '*' },
  approvers: { warehouse: async () => ({ decision: 'approved' }) },
});
const gateway = runtime.bind({ owner, taskId: spec.taskId, caller: CALLER, turnId });
await gateway.call(step.tool, step.args);
say({ error: `the step finished without reaching ${step.crashAt}` });
process.exit(1);
