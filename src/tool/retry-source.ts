/**
 * What the runtime knew, when it ran a retry, about the attempt it retried: whether that attempt's outcome was
 * still open (its body started or may have, and nothing settled it). Kept beside the execution, never journaled,
 * so the model-facing text of a retry refused before its body can say "did not run" when the attempt before it
 * provably did not run either (one that waited for an approval), and warn only when it may have.
 */
import type { AttentionStatus } from '../store/rows.js';
import type { ToolExecution } from './types.js';

const sourceOpen = new WeakMap<ToolExecution, boolean>();

/** Whether a source attempt's row, as a plan read it, leaves its operation's outcome open: it may have taken effect. */
export function sourceMayHaveRun(source: { readonly status: AttentionStatus }): boolean {
  return source.status === 'outcome_unknown' || source.status === 'no_result';
}

/** Notes, for a retry's execution, the standing of its source attempt as its plan read it (null: not known). */
export function noteRetrySource(execution: ToolExecution, source: { readonly started: boolean; readonly status: AttentionStatus } | null): void {
  if (source !== null) sourceOpen.set(execution, sourceMayHaveRun(source));
}

/** Whether the attempt this execution retried may have taken effect: true when not known (a replay, another process). */
export function retriedAttemptMayHaveRun(execution: ToolExecution): boolean {
  return sourceOpen.get(execution) ?? true;
}
