import type { SessionOwner, SessionStore } from '../../src/store/types.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import type { Tool, ToolBodyRequest, ToolGateway, ToolRuntimeConfig } from '../../src/tool/types.js';
import type { JsonValue } from '../../src/json/types.js';
import type { StoreTarget } from './stores.js';

export function tool(
  name: string,
  execute: (request: ToolBodyRequest, signal: AbortSignal) => Promise<string | JsonValue>,
  metadata: ToolMetadata = new ToolMetadata(`the ${name} tool`, { type: 'object' }),
): Tool {
  return { name, metadata, execute };
}

export interface Rig {
  store: SessionStore;
  owner: SessionOwner;
  gateway: ToolGateway;
  sessionId: string;
  taskId: string;
  /** A second, independent handle on the same journal (another host). */
  reopen(): Promise<SessionStore>;
}

let n = 0;
/** A fresh journal on `target`, a session owned by `host`, a running task, and a gateway for caller `agent`. */
export async function rig(
  target: StoreTarget,
  config: Omit<ToolRuntimeConfig, 'grants'> & { grants?: ToolRuntimeConfig['grants'] },
  limits?: { toolCalls?: number; toolOutputBytes?: number },
): Promise<Rig> {
  n += 1;
  const location = target.fresh();
  const store = await location.open();
  const sessionId = `session-${n}`;
  const taskId = `task-${n}`;
  const owner = await store.acquire(sessionId, { owner: 'host' });
  await owner.startTask(taskId, limits ? { limits } : undefined);
  const runtime = createToolRuntime({ grants: { agent: '*' }, ...config });
  const gateway = runtime.bind({ owner, taskId, caller: 'agent', turnId: `turn-${n}` });
  return { store, owner, gateway, sessionId, taskId, reopen: () => location.open() };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const hung = new Set<(reason: Error) => void>();
/**
 * A body (or an approver) that never settles by itself, until endHungBodies(): a test ends it before its store
 * closes, since a close waits, the session held, for the bodies still running (docs/design.md#letting-a-session-go-stops-its-calls).
 */
export const never = () => new Promise<never>((_, reject) => { hung.add(reject); });
/** Ends every never() still pending: each throws now. */
export function endHungBodies(): void {
  for (const end of hung) end(new Error('ended by the test'));
  hung.clear();
}
