/**
 * What an owner knows, in its own process, about losing its session (docs/design.md#a-lost-session-stops-its-calls):
 * a write or heartbeat refused as fenced proves another owner took it over, and a lease not renewed for a whole
 * lease may have run out, so another host may take it over at any moment. Either way the calls this owner is running
 * are told to stop, through their abort signal, before another host's retry can run beside them.
 */
import { performance } from 'node:perf_hooks';

export type LostListener = (why: string) => void;

export class LeaseWatch {
  private readonly listeners = new Set<LostListener>();
  /**
   * When the last transaction that renewed the lease was answered. The store renewed it no later than that, so once
   * a whole lease has passed since, the lease has run out by the store's clock too (the clocks agreeing in rate).
   */
  private renewedAt: number;

  constructor(private readonly leaseMs: number) {
    this.renewedAt = LeaseWatch.now();
  }

  static now(): number {
    return performance.now();
  }

  /** A transaction that renewed the lease was just answered. */
  renewed(): void {
    this.renewedAt = LeaseWatch.now();
  }

  /** Why the lease has run out (not renewed for a whole lease), or null while it may still be live. */
  lapse(): string | null {
    const since = LeaseWatch.now() - this.renewedAt;
    return since >= this.leaseMs ? `its lease of ${this.leaseMs} ms ran out: last renewed ${Math.round(since)} ms ago` : null;
  }

  subscribe(listener: LostListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Tells every running call of this owner that the session is, or may be, lost. */
  lost(why: string): void {
    for (const listener of [...this.listeners]) listener(why);
  }
}
