/**
 * The call ids a bridge run journals for a model response: each names one position of the run, so the framework's
 * call is matched to the call the model made by its id alone (docs/design.md#bridges-resume-from-the-journal).
 */
import type { ChatToolCall } from '../agent/model.js';
import type { ActionContext } from '../event/types.js';
import { hasLoneSurrogate, type TaskId } from '../ids.js';
import type { ToolGateway } from '../tool/types.js';

/**
 * `calls` with every id that cannot name its position replaced: a missing one (some servers send none), one another
 * call of the same response has already (some send one per response, or number each response from zero), and one in
 * `taken`: held by a call of an earlier step not yet run (two loops on one run), or by a call of the response that is
 * not the run's (a handoff, a tool the provider ran). A replacement is `jw-<step>-<index>`, with a suffix when the
 * response or `taken` already has that text. An id that names its position already is kept as the provider gave it:
 * a provider may refer to it later.
 */
export function distinctCallIds(calls: readonly ChatToolCall[], step: number, taken: ReadonlySet<string>): ChatToolCall[] {
  const given = new Set(calls.map((c) => c.id));
  const used = new Set<string>();
  return calls.map((call, index) => {
    if (call.id !== '' && !used.has(call.id) && !taken.has(call.id)) {
      used.add(call.id);
      return call;
    }
    let id = `jw-${step}-${index}`;
    for (let n = 2; given.has(id) || used.has(id) || taken.has(id); n += 1) id = `jw-${step}-${index}-${n}`;
    used.add(id);
    return { ...call, id };
  });
}

/**
 * A framework's `items` with each of the run's calls (`isRunCall`, in order) under the id it was journaled with (`ids`,
 * as BridgeRun.record returns them), in the field the framework reads it from.
 */
export function withJournaledIds<T, K extends string>(items: readonly T[], ids: readonly string[], field: K, isRunCall: (item: T) => boolean): T[] {
  let k = 0;
  return items.map((item) => {
    if (!isRunCall(item)) return item;
    const id = ids[k++]!;
    return (item as Record<K, unknown>)[field] === id ? item : { ...item, [field]: id };
  });
}

/**
 * The origin a plain bridge tool records for a framework's call (docs/design.md#a-step-call-made-outside-the-run): the
 * framework's call id as the provider call id, the call its own decision. A framework run whose loop was given these
 * tools finds by it the call a step's call was made as. None without an id.
 */
export function frameworkAction(gateway: ToolGateway, toolCallId: unknown): { readonly action?: ActionContext } {
  if (typeof toolCallId !== 'string' || toolCallId === '' || hasLoneSurrogate(toolCallId)) return {};
  return { action: { decision: { taskId: gateway.taskId as TaskId, stepId: `framework-call:${toolCallId}` }, actionIndex: 0, providerCallId: toolCallId } };
}
