/** What the two processes of the stdio MCP server's orphan guard share (bridges/mcp-guard.ts, bridges/mcp-group.ts). */
import { constants } from 'node:os';

/** How often each checks that the process above it is still its parent. */
export const GUARD_WATCH_MS = 100;
/** Between SIGTERM and SIGKILL. */
export const GUARD_GRACE_MS = 500;

/** Exits as the child did: its code, or 128 + its signal's number. */
export function exitLike(code: number | null, signal: NodeJS.Signals | null): never {
  process.exit(code ?? (signal === null ? 1 : 128 + (constants.signals[signal] ?? 0)));
}

/** The child could not be started at all: say so on stderr and exit 127, as a shell does. */
export function startFailed(who: string, command: string, error: Error): never {
  process.stderr.write(`${who}: cannot start ${command}: ${error.message}\n`);
  process.exit(127);
}

/** Ends the process group `pgid()` names: SIGTERM, then SIGKILL after the grace. `stop` does it once, whoever asks. */
export function groupStopper(pgid: () => number | undefined): { signalGroup(signal: NodeJS.Signals): void; stop(): void } {
  let stopping = false;
  const signalGroup = (signal: NodeJS.Signals) => {
    const id = pgid();
    if (id === undefined) return;
    try {
      process.kill(-id, signal);
    } catch {
      // the group is already gone
    }
  };
  const stop = () => {
    if (stopping) return;
    stopping = true;
    signalGroup('SIGTERM');
    setTimeout(() => signalGroup('SIGKILL'), GUARD_GRACE_MS);
  };
  return { signalGroup, stop };
}

/** Calls `stop` once this process's parent is gone (it was re-parented) or it is asked to stop; returns the watch. */
export function stopWhenOrphaned(stop: () => void): NodeJS.Timeout {
  const parent = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid !== parent) stop();
  }, GUARD_WATCH_MS);
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, stop);
  return watch;
}
