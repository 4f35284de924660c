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
   * When the last transaction that renewed the lease was sent. The store renewed it no earlier than that, but maybe
   * not much later: once a whole lease has passed since, the lease may have run out. Not when it was answered: a
   * process that stalled with a renewal's answer waiting would count the lease from after the stall.
   */
  private renewalSentAt: number;

  constructor(private readonly leaseMs: number, sentAt: number) {
    this.renewalSentAt = sentAt;
  }

  /** The monotonic now, for a renewing transaction's send time. */
  static now(): number {
    return performance.now();
  }

  /** A transaction sent at `sentAt` renewed the lease. */
  renewed(sentAt: number): void {
    if (sentAt > this.renewalSentAt) this.renewalSentAt = sentAt;
  }

  /** Why the lease may have run out (no renewal that succeeded was sent within the last lease), or null. */
  lapse(): string | null {
    const since = LeaseWatch.now() - this.renewalSentAt;
    return since >= this.leaseMs ? `its lease of ${this.leaseMs} ms may have run out: last renewed ${Math.round(since)} ms ago` : null;
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
