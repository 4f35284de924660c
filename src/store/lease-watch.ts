/**
 * What an owner knows, in its own process, about losing its session (docs/design.md#a-lost-session-stops-its-calls):
 * a write or heartbeat refused as fenced proves another owner took it over, and a lease not renewed for a whole
 * lease may have run out, so another host may take it over at any moment. Either way the calls this owner is running
 * are told to stop, through their abort signal, before another host's retry can run beside them.
 */
import { performance } from 'node:perf_hooks';

/**
 * Told that the session is, or may be, lost (`every` false: only running bodies need stopping, since a call that has
 * not started writes its marker next, which a fenced owner cannot do), or that the owner is letting the session go
 * (`every` true: its release, or the store's close), when no call of it may start or go on.
 */
export type LostListener = (why: string, every: boolean) => void;

/**
 * When a renewing transaction was sent, on both clocks: the monotonic one does not step, but on Linux it stands still
 * while the machine or VM is suspended; the wall clock counts a suspend, but steps. A lease may have run out once
 * either says a whole lease has passed.
 */
export interface SentAt {
  readonly monotonic: number;
  readonly wall: number;
}

export class LeaseWatch {
  private readonly listeners = new Set<LostListener>();
  /** Who waits (stopAll) for the last call to unsubscribe. */
  private readonly idle: Array<() => void> = [];
  /**
   * When the last transaction that renewed the lease was sent. The store renewed it no earlier than that, but maybe
   * not much later: once a whole lease has passed since, the lease may have run out. Not when it was answered: a
   * process that stalled with a renewal's answer waiting would count the lease from after the stall.
   */
  private renewalSentAt: SentAt;
  /** Why a write was refused as fenced: the session is lost for good. */
  private fencedWhy: string | null = null;
  /** Settles when the session is found fenced (made on first ask: most owners are never asked). */
  private fencedSignal: { readonly promise: Promise<void>; readonly resolve: () => void } | null = null;

  constructor(private readonly leaseMs: number, sentAt: SentAt) {
    this.renewalSentAt = sentAt;
  }

  /** Now, for a renewing transaction's send time. */
  static now(): SentAt {
    return { monotonic: performance.now(), wall: Date.now() };
  }

  /** Whether `at` has been reached, by either clock. */
  static reached(at: SentAt): boolean {
    return performance.now() >= at.monotonic || Date.now() >= at.wall;
  }

  /** A transaction sent at `sentAt` renewed the lease. */
  renewed(sentAt: SentAt): void {
    if (sentAt.monotonic > this.renewalSentAt.monotonic) this.renewalSentAt = sentAt;
  }

  /** Why the lease may have run out (no renewal that succeeded was sent within the last lease, by either clock), or null. */
  lapse(): string | null {
    const since = Math.max(performance.now() - this.renewalSentAt.monotonic, Date.now() - this.renewalSentAt.wall);
    return since >= this.leaseMs ? `its lease of ${this.leaseMs} ms may have run out: last renewed ${Math.round(since)} ms ago` : null;
  }

  /**
   * Why the session is lost (a write was refused as fenced) or may be (lapse), or null: checked as a body is about to
   * be called, since a stalled event loop (a synchronous body beside it, a paused process) may resume with a start
   * marker's answer before the heartbeat or a timer has run to tell it (docs/design.md#a-lost-session-stops-its-calls).
   */
  mayBeLost(): string | null {
    return this.fencedWhy ?? this.lapse();
  }

  /** Whether a write was refused because another owner holds the session. */
  get isFenced(): boolean {
    return this.fencedWhy !== null;
  }

  /** A write was refused because another owner holds the session: lost for good, and every running call is told. */
  fenced(why: string): void {
    this.fencedWhy ??= why;
    this.fencedSignal?.resolve();
    this.lost(why);
  }

  /** Settles once a write or heartbeat is refused as fenced (at once if one was): what a wait for bodies listens for. */
  whenFenced(): Promise<void> {
    if (this.fencedWhy !== null) return Promise.resolve();
    if (this.fencedSignal === null) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => { resolve = r; });
      this.fencedSignal = { promise, resolve };
    }
    return this.fencedSignal.promise;
  }

  /** Each listener is one call of this owner, subscribed until it has recorded its outcome. */
  subscribe(listener: LostListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) for (const wake of this.idle.splice(0)) wake();
    };
  }

  /** How many calls are subscribed: in flight. */
  get calls(): number {
    return this.listeners.size;
  }

  /** Tells every running call of this owner that the session is, or may be, lost. */
  lost(why: string): void {
    for (const listener of [...this.listeners]) listener(why, false);
  }

  /**
   * Tells every call of this owner, started or not, to stop (`why`: the owner is letting the session go), and resolves
   * once each has recorded its outcome and unsubscribed.
   */
  stopAll(why: string): Promise<void> {
    for (const listener of [...this.listeners]) listener(why, true);
    if (this.listeners.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }
}
