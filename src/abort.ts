/** Waiting on work that a caller's AbortSignal may stop: one place for the listener each such wait adds and removes. */

/** Waits for `promise`, or throws the signal's reason once it aborts (at once if it has). */
export async function unlessAborted(promise: Promise<unknown>, signal: AbortSignal | undefined): Promise<void> {
  if (signal === undefined) {
    await promise;
    return;
  }
  signal.throwIfAborted();
  let onAbort!: () => void;
  const aborted = new Promise<never>((_resolve, reject) => {
    onAbort = () => reject(signal.reason);
  });
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    await Promise.race([promise, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * A signal that aborts, with the reason, when either of two does, for one piece of work: `done` takes its listeners
 * off, so a signal that outlives many such pieces (a run's, a host's) gathers none. Either may be undefined.
 */
export function eitherSignal(a: AbortSignal | undefined, b: AbortSignal | undefined): { readonly signal: AbortSignal | undefined; done(): void } {
  if (a === undefined || b === undefined) return { signal: a ?? b, done: () => undefined };
  const joined = new AbortController();
  joinedFrom.set(joined.signal, [a, b]);
  const follows = [a, b].map((source) => {
    const follow = () => joined.abort(source.reason);
    return { source, follow };
  });
  for (const { source, follow } of follows) {
    if (joined.signal.aborted) break;
    if (source.aborted) follow();
    else source.addEventListener('abort', follow, { once: true });
  }
  return {
    signal: joined.signal,
    done: () => {
      for (const { source, follow } of follows) source.removeEventListener('abort', follow);
    },
  };
}

/** The signals each signal of eitherSignal joins. */
const joinedFrom = new WeakMap<AbortSignal, readonly AbortSignal[]>();

/**
 * The signals `signal` stands for: those eitherSignal joined into it (each in turn), or itself. A call's control
 * listens to each: a joined signal fires once, for the first of them, and a call whose body runs on through a reason
 * that stops it only before its body (a framework's sibling cancellation) must still hear the host's abort after it.
 */
export function signalSources(signal: AbortSignal): AbortSignal[] {
  const sources = joinedFrom.get(signal);
  return sources === undefined ? [signal] : sources.flatMap(signalSources);
}
