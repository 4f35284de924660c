/**
 * The runs `runAgent` and `resumeAgent` are driving in this process, per owner. The journal's fencing keeps two hosts
 * apart, but two loops through one owner would both be its writer: each would journal the run's start or the same
 * step, and the run could never be read back. A bridge's open of a run one of them drives is refused as well.
 */
import { AgentRunBusyError } from '../errors.js';
import type { SessionOwner } from '../store/types.js';

const DRIVING = new WeakMap<SessionOwner, Set<string>>();

/** Whether `owner` drives run `runId` in this process now. */
export function isDriving(owner: SessionOwner, runId: string): boolean {
  return DRIVING.get(owner)?.has(runId) === true;
}

/** Marks run `runId` as driven through `owner` (AgentRunBusyError if it already is); returns the unmarking. */
export function beginDrive(owner: SessionOwner, runId: string): () => void {
  const driving = DRIVING.get(owner) ?? new Set<string>();
  if (driving.has(runId)) throw new AgentRunBusyError(owner.sessionId, runId);
  driving.add(runId);
  DRIVING.set(owner, driving);
  return () => driving.delete(runId);
}
