import { signalSources } from '../abort.js';
import { LeaseWatch, type SentAt } from '../store/lease-watch.js';
import type { RecordedFailureCode } from '../errors.js';
import type { ToolRecordedOutcome } from '../event/types.js';

/**
 * Abort reasons that stop a call only until its body starts. The OpenAI Agents SDK aborts the other calls of a step
 * when one fails the run: a call not yet at its body is best cancelled then, but a body cut off mid-write is left in
 * doubt for nothing (the SDK waits for it before it fails the run). Its bridges mark the SDK's reason with this.
 */
const beforeBodyReasons = new WeakSet<object>();

/** Marks `reason` as one that stops a call only until its body starts (see beforeBodyReasons). */
export function stopsOnlyBeforeBody(reason: unknown): void {
  if (typeof reason === 'object' && reason !== null) beforeBodyReasons.add(reason);
}

const nativeAborted = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted')!.get!;
const nativeThrowIfAborted = AbortSignal.prototype.throwIfAborted;

/** Whether `signal` has aborted, read without the check a control's signal makes on read. */
function isAborted(signal: AbortSignal): boolean {
  return nativeAborted.call(signal) as boolean;
}

/** The check a control's signal makes as it is read (checkedOnRead), kept on the signal itself. */
const CHECK = Symbol('jingwei.checkOnRead');
type CheckedSignal = AbortSignal & { [CHECK]?: () => void };

/**
 * AbortSignal's prototype with `aborted` and `throwIfAborted()` calling the signal's check first: one prototype for
 * every control's signal, so that each gets it by a prototype swap and a property, not accessors of its own.
 */
const checkedSignalPrototype: object = Object.create(AbortSignal.prototype, {
  aborted: {
    get(this: CheckedSignal): boolean {
      this[CHECK]?.();
      return isAborted(this);
    },
  },
  throwIfAborted: {
    value(this: CheckedSignal): void {
      this[CHECK]?.();
      nativeThrowIfAborted.call(this);
    },
  },
});

/** Makes the reads of `signal` that a body polls (`aborted`, `throwIfAborted()`) call `check` first. */
function checkedOnRead(signal: AbortSignal, check: () => void): void {
  (signal as CheckedSignal)[CHECK] = check;
  Object.setPrototypeOf(signal, checkedSignalPrototype);
}

export type Interrupt = Extract<ToolRecordedOutcome, { status: 'failed' }> & { category: 'budget' | 'cancelled' | 'timeout' };

/**
 * The deadline, cancellation, task stop and session loss of one attempt. `signal` fires on the first of them;
 * `interrupt()` names the one that applies, in this priority: task stop, then the session lost, then its owner
 * letting the session go, then cancellation, then the call deadline (docs/design.md#deadlines-cancellation-and-task-stops,
 * docs/design.md#a-lost-session-stops-its-calls).
 */
export class CallControl {
  private readonly controller = new AbortController();
  private readonly cleanups: Array<() => void> = [];
  private stopped: string | null = null;
  private lost: string | null = null;
  /** Why its owner stopped every call: it is letting the session go (a release, the store's close). */
  private letGo: string | null = null;
  /** Whether the body runs: only then does a lost session stop the attempt (its marker is what a fenced owner cannot write). */
  private bodyRunning = false;
  private cancelled = false;
  private expired = false;
  /**
   * When the deadline passes, on both clocks (SentAt: the monotonic one stands still through a suspend, the wall one
   * steps): its timer may not have run yet when the loop stalled or the machine slept.
   */
  private readonly deadline: SentAt;
  private readonly timeoutMs: number;
  /** The races waiting: each is woken after the signal fired, once the signal's own listeners have run. */
  private readonly waiting = new Set<() => void>();
  /**
   * What the body (or approver, or reconciler) is handed. Its `aborted` and `throwIfAborted()` check the deadline and,
   * once the body runs, the session's lease as they are read: a process woken from a pause can resume the body through
   * a timer of its own before the heartbeat's and the deadline's timers have run, and a body that checks its signal
   * before its write must see the lapse then (docs/design.md#a-lost-session-stops-its-calls). Read inside this class
   * through isAborted, which checks nothing.
   */
  readonly signal: AbortSignal = this.controller.signal;
  /** Whether the attempt is over (dispose): a signal read after that checks nothing. */
  private disposed = false;

  constructor(
    timeoutMs: number,
    signals: readonly (AbortSignal | undefined)[],
    subscribeStop: (onStop: (reason: string) => void) => () => void,
    subscribeLost: (onLost: (why: string, every: boolean) => void) => () => void = () => () => undefined,
    /** Why the session is or may be lost now (ownerMayBeLost), asked as the body is about to be called. */
    private readonly mayBeLost: () => string | null = () => null,
  ) {
    this.timeoutMs = timeoutMs;
    const now = LeaseWatch.now();
    this.deadline = { monotonic: now.monotonic + timeoutMs, wall: now.wall + timeoutMs };
    checkedOnRead(this.signal, () => {
      if (!this.disposed) this.checkStillHeld();
    });
    try {
      this.subscribe(timeoutMs, signals, subscribeStop, subscribeLost);
    } catch (error) {
      // Nothing of a control that could not be set up outlives it: no timer, no listener.
      this.dispose();
      throw error;
    }
  }

  private subscribe(
    timeoutMs: number,
    signals: readonly (AbortSignal | undefined)[],
    subscribeStop: (onStop: (reason: string) => void) => () => void,
    subscribeLost: (onLost: (why: string, every: boolean) => void) => () => void,
  ): void {
    const timer = setTimeout(() => this.expire(timeoutMs), timeoutMs);
    this.cleanups.push(() => clearTimeout(timer));
    for (const s of signals.flatMap((given) => (given ? signalSources(given) : []))) {
      const onAbort = () => {
        // A body that has started runs to its end under a reason that stops only before it.
        if (this.bodyRunning && typeof s.reason === 'object' && s.reason !== null && beforeBodyReasons.has(s.reason)) return;
        this.cancelled = true;
        this.abort(new Error('cancelled'));
      };
      if (s.aborted) onAbort();
      else {
        s.addEventListener('abort', onAbort, { once: true });
        this.cleanups.push(() => s.removeEventListener('abort', onAbort));
      }
    }
    this.cleanups.push(
      subscribeStop((reason) => {
        this.stopped = reason;
        this.abort(new Error(`task stopped: ${reason}`));
      }),
      subscribeLost((why, every) => {
        // A lost session stops a running body; an owner letting the session go stops a call wherever it is.
        if (every) {
          this.letGo ??= why;
          this.abort(new Error(`the call was stopped: ${why}`));
          return;
        }
        if (!this.bodyRunning) return;
        this.lost ??= why;
        this.abort(new Error(`the session may be lost: ${why}`));
      }),
    );
  }

  interrupt(): Interrupt | null {
    if (this.stopped !== null) {
      return { status: 'failed', category: 'budget', code: 'tool_budget_stopped' satisfies RecordedFailureCode, message: `the task was stopped: ${this.stopped}`, retryable: false };
    }
    if (this.lost !== null) {
      return { status: 'failed', category: 'cancelled', code: 'tool_cancelled' satisfies RecordedFailureCode, message: `this host lost its hold on the session, or may have, while the call ran (${this.lost})`, retryable: false };
    }
    if (this.letGo !== null) {
      return { status: 'failed', category: 'cancelled', code: 'tool_cancelled' satisfies RecordedFailureCode, message: `the call was stopped: ${this.letGo}`, retryable: false };
    }
    if (this.cancelled) return { status: 'failed', category: 'cancelled', code: 'tool_cancelled' satisfies RecordedFailureCode, message: 'the call was cancelled', retryable: false };
    if (this.expired) return { status: 'failed', category: 'timeout', code: 'tool_timeout' satisfies RecordedFailureCode, message: 'the call deadline passed', retryable: true };
    return null;
  }

  private expire(timeoutMs: number): void {
    if (this.expired) return;
    this.expired = true;
    this.abort(new Error(`deadline of ${timeoutMs} ms passed`));
  }

  private abort(reason: Error): void {
    this.controller.abort(reason);
    for (const wake of this.waiting) wake();
    this.waiting.clear();
  }

  /**
   * The body starts now, its marker journaled: from here a lost session stops it. Before, nothing needs stopping: the
   * marker's own commit fails for a fenced owner, and it renews the lease of an owner that was not.
   */
  bodyStarts(): void {
    this.bodyRunning = true;
  }

  /**
   * Whether the work may still be called: its deadline passed (its timer may not have run: the event loop may have
   * stalled, under a synchronous body of another call or a paused process) or, once the body is to run, the session
   * may have been lost meanwhile (another host may have taken it over and retried this very call), and the control
   * is interrupted instead. A marker's commit that answered after such a stall is where it matters.
   */
  private checkStillHeld(): void {
    if (LeaseWatch.reached(this.deadline)) this.expire(this.timeoutMs);
    if (!this.bodyRunning || this.lost !== null) return;
    const why = this.mayBeLost();
    if (why === null) return;
    this.lost = why;
    this.abort(new Error(`the session may be lost: ${why}`));
  }

  /**
   * A body that held the event loop past its deadline (CPU-bound, its signal ignored) settles before the deadline's
   * timer can run: the deadline is checked as it settles, so it wins as the timer would have made it win, and the race
   * is woken with the timeout and the body's end (docs/design.md#deadlines-cancellation-and-task-stops).
   */
  private checkSettledInTime(): void {
    if (this.bodyRunning && !isAborted(this.signal) && LeaseWatch.reached(this.deadline)) this.expire(this.timeoutMs);
  }

  /**
   * Awaits `work` unless an interrupt comes first; a late result of `work` is then discarded. An interrupt that wins
   * says when `work` ends (`ended`), or that it was never called (no `ended`): the control is checked again just
   * before `work` is called, and an interrupt by then leaves it uncalled.
   */
  race<T>(work: () => Promise<T>): Promise<{ value: T } | { interrupt: Interrupt; ended?: Promise<'returned' | 'threw'> }> {
    const early = this.interrupt();
    if (early) return Promise.resolve({ interrupt: early });
    return new Promise((resolve, reject) => {
      let called = false;
      // How the work ends, made only when an interrupt wins after the work was called (a rare path).
      let settle: ((how: 'returned' | 'threw') => void) | null = null;
      // Whichever settles first decides; the other's later resolve or reject is ignored (a late rejection included).
      const wake = () => {
        const interrupt = this.interrupt()!;
        resolve(called ? { interrupt, ended: new Promise<'returned' | 'threw'>((done) => { settle = done; }) } : { interrupt });
      };
      this.waiting.add(wake);
      void Promise.resolve().then(() => {
        this.checkStillHeld();
        if (isAborted(this.signal)) return; // woken already: never called
        called = true;
        let running: Promise<T>;
        try {
          // At once: a microtask in between could be another call's stalling body. A plain function's value or throw
          // (a body written without `async`) settles it as an async one's would.
          running = Promise.resolve(work());
        } catch (error) {
          running = Promise.reject(error);
        }
        running.then(
          (value) => {
            this.checkSettledInTime();
            settle?.('returned');
            this.waiting.delete(wake);
            resolve({ value });
          },
          (error: unknown) => {
            this.checkSettledInTime();
            settle?.('threw');
            this.waiting.delete(wake);
            reject(error);
          },
        );
      });
    });
  }

  dispose(): void {
    this.disposed = true;
    for (const c of this.cleanups.splice(0)) c();
  }
}
