/**
 * The runtime's write path: events, a budget change and a latest-attempt condition in one transaction. It is how
 * tool evidence (calls, start markers, results) reaches a journal, so it is not on the published SessionOwner type
 * (docs/design.md#only-the-runtime-writes-tool-evidence): only the runtime, recovery tooling and the conformance
 * suite inside this package reach it, through `commitAs`.
 */
import { InvalidInputError } from '../errors.js';
import type { CommitReceipt, CommitRequest, SessionOwner } from './types.js';

type Committer = (request: CommitRequest) => Promise<CommitReceipt>;

const committers = new WeakMap<object, Committer>();

/** Called by a store's owner once, as it is made. */
export function registerCommitter(owner: SessionOwner, commit: Committer): void {
  committers.set(owner, commit);
}

/** Whether `owner` is an owner a store of this package made (the only kind the runtime can write through). */
export function canCommit(owner: unknown): boolean {
  return typeof owner === 'object' && owner !== null && committers.has(owner);
}

/** Commits `request` as `owner`: the runtime's primitive (internal; never exported from an entry point). */
export function commitAs(owner: SessionOwner, request: CommitRequest): Promise<CommitReceipt> {
  const commit = committers.get(owner);
  if (commit === undefined) return Promise.reject(new InvalidInputError('owner', 'is not a session owner a jingwei store returned'));
  return commit(request);
}

const heartbeatStoppers = new WeakMap<object, () => void>();

/** Called by a store's owner once, as it is made: how to stop its heartbeat without giving the session up. */
export function registerHeartbeatStopper(owner: SessionOwner, stop: () => void): void {
  heartbeatStoppers.set(owner, stop);
}

/**
 * Stops `owner`'s heartbeat and keeps the session held: its lease runs out and the session is abandoned again, for
 * the next startup routine to find (internal: recovery uses it for a session it could not recover).
 */
export function stopRenewing(owner: SessionOwner): void {
  heartbeatStoppers.get(owner)?.();
}
