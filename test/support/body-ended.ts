/** The journaled end of a body (`jingwei.runtime` / `body_ended`), and waiting for it: a host journals it once the body ends. */
import type { SessionEvent } from '../../src/event/types.js';
import type { SessionStore } from '../../src/store/types.js';
import { sleep } from './runtime.js';

export const bodyEnded = (history: readonly SessionEvent[], callId: string): SessionEvent | undefined =>
  history.find((e) => e.kind.type === 'custom' && e.kind.plugin === 'jingwei.runtime' && e.kind.kind === 'body_ended'
    && (e.kind.payload as { callId?: string }).callId === callId);

/** Polls the session's journal until it records the end of `callId`'s body; returns that event. */
export async function untilBodyEnded(store: SessionStore, sessionId: string, callId: string): Promise<SessionEvent> {
  for (;;) {
    const found = bodyEnded(await store.loadHistory(sessionId), callId);
    if (found) return found;
    await sleep(5);
  }
}
