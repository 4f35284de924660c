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
