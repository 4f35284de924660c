/**
 * Runs one scripted call in a new session and task through the canonical runtime, and dies by SIGKILL at the
 * scripted point. Lines: {phase:'ready', epoch} before the call; {phase:'dying', ...} from the killer; and, only if
 * no kill happened, {phase:'done', call, result}.
 */
import { newTurnId } from '../../../src/ids.js';
import type { JsonValue } from '../../../src/json/types.js';
import { CALLER, crashRuntime, type CrashArgs } from '../tools.js';
import { childMain, emit, openAll, type ChildBase } from './common.js';

export interface CrashScript extends ChildBase {
  readonly taskId: string;
  readonly tool: string;
  readonly args: CrashArgs;
}

await childMain<CrashScript>(async (script) => {
  const { killer, store, business } = await openAll(script);
  const approvals = { count: 0 };
  const runtime = crashRuntime(business, (point) => killer.at(point), approvals);
  const owner = await store.acquire(script.sessionId, { owner: 'crash-host' });
  await owner.startTask(script.taskId);
  await owner.append([{ turnId: newTurnId(), kind: { type: 'user_message', text: `please run ${script.tool}` } }]);
  emit({ phase: 'ready', epoch: owner.epoch });
  const gateway = runtime.bind({ owner, taskId: script.taskId, caller: CALLER });
  killer.arm();
  const execution = await gateway.call(script.tool, script.args as unknown as JsonValue);
  emit({ phase: 'done', call: execution.call, result: execution.result, hits: killer.hits() });
  business.close();
  await store.close();
});
