/**
 * The child side of a crash: SIGKILL at the Nth hit of a named point. Production points come from src/fault.ts
 * through setFaultHook; the test tool's own points (around its external write) and the recovery's own point (after
 * the takeover, before the load) call `at` directly. Nothing is counted until `arm()`, so opening the store and
 * setting up the session never consume a hit.
 */
import { setFaultHook } from '../../src/fault.js';

/** Kill at the `hit`-th hit of `point` (1-based); point '*' counts every point together. */
export interface KillSpec {
  readonly point: string;
  readonly hit: number;
}

/** Points the harness adds to the production ones. */
export const TOOL_POINTS = {
  /** Inside the tool body, before its external write (a read for the read-only tool). */
  beforeWrite: 'body:before-write',
  /** Inside the tool body, after its external write committed, before the body returns. */
  afterWrite: 'body:after-write',
  /** Negative control only: the business row committed, its dedup record not yet. */
  splitWrite: 'body:between-business-and-dedup',
} as const;
/** The recovery's own point: the takeover committed, the history not loaded yet (C9). */
export const TAKEOVER_POINT = 'recovery:after-takeover';

export class Killer {
  private armed = false;
  private total = 0;
  private readonly byPoint = new Map<string, number>();

  constructor(private readonly spec: KillSpec | null) {}

  /** Routes the production fault points (src/fault.ts, on SQLite and PostgreSQL alike) here. */
  install(): this {
    setFaultHook((point) => this.at(point));
    return this;
  }

  arm(): void {
    this.armed = true;
  }

  /** How many armed hits each point had (for coverage reports of runs that were not killed). */
  hits(): Record<string, number> {
    return Object.fromEntries(this.byPoint);
  }

  at(point: string): void {
    if (!this.armed) return;
    this.total += 1;
    const n = (this.byPoint.get(point) ?? 0) + 1;
    this.byPoint.set(point, n);
    const spec = this.spec;
    if (spec === null) return;
    if (spec.point === '*' ? this.total === spec.hit : spec.point === point && n === spec.hit) die(point, n);
  }
}

/** Says where it dies (stdout to a pipe is synchronous on Linux), then SIGKILLs its own process. */
export function die(point: string, hit: number): never {
  process.stdout.write(JSON.stringify({ dying: point, hit }) + '\n');
  process.kill(process.pid, 'SIGKILL');
  // SIGKILL to ourselves is delivered before kill(2) returns; if it ever were not, do not run on silently.
  process.exit(99);
}
