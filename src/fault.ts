/**
 * Named points on the production path where a test harness (or the demo) may kill the process, to prove what the
 * journal says after a crash there. Unused, a fault point costs one null check.
 */
export const FAULT_POINTS = [
  /** Admitted and checked; the call is not written yet. */
  'call:before',
  /** The call (and its charge) is durable; with approval, the approver has not answered yet. */
  'call:after',
  /** The approver approved; the start marker is not written yet. */
  'approval:after',
  /** The start marker is durable; the body has not run. */
  'started:after',
  /** The body returned; its result is not written yet. */
  'body:after',
  /** The result is durable. */
  'result:after',
  /** Inside a store transaction, every row written, before COMMIT (for example, a budget charge). */
  'commit:before',
  /** A retry plan was consumed; the retry call is not written yet. */
  'plan:taken',
  /** An agent run's model response (with the calls it asks for) is durable; none of those calls is made yet. */
  'step:after',
] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

let hook: ((point: FaultPoint) => void) | null = null;

/** Installs (or with null removes) the process-wide fault hook. For crash tests and demos only. */
export function setFaultHook(next: ((point: FaultPoint) => void) | null): void {
  hook = next;
}

export function faultPoint(point: FaultPoint): void {
  if (hook !== null) hook(point);
}
