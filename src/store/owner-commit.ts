/**
 * The runtime's write path: events, a budget change and a latest-attempt condition in one transaction. It is how
 * tool evidence (calls, start markers, results) reaches a journal, so it is not on the published SessionOwner type
 * (docs/design.md#only-the-runtime-writes-tool-evidence): only the runtime, recovery tooling and the conformance
 * suite inside this package reach it, through `commitAs`. Beside it, recovery's one other need of an owner that the
 * published type leaves out: stopping its heartbeat while keeping the session held (`stopRenewing`), and the
 * runtime's: hearing that the owner lost its session (`onOwnerLost`).
 */
import { unlessAborted } from '../abort.js';
import { InvalidInputError } from '../errors.js';
import { STORE_DEFAULTS } from '../limits.js';
import type { CommitReceipt, CommitRequest, SessionOwner } from './types.js';
import type { LostListener } from './lease-watch.js';

type Committer = (request: CommitRequest) => Promise<CommitReceipt>;

/** What a store's owner hands this module as it is made: its write path, how to stop its heartbeat, who hears of a loss. */
interface OwnerInternals {
  readonly commit: Committer;
  readonly stopHeartbeat: () => void;
  /** Starts the heartbeat when it is not running (an owner acquired with `heartbeat: false`): a wait for bodies renews. */
  readonly keepRenewing: () => void;
  readonly onLost: (listener: LostListener) => () => void;
  /** Why the owner's session is or may be lost, in this process's knowledge now; null while it is held. */
  readonly mayBeLost: () => string | null;
  /** The store instance the owner belongs to (its backend): what "this process's view of a session" is scoped to. */
  readonly store: object;
  /** Whether the owner may still hold its session: not fenced (a write refused because another owner holds it). */
  readonly holds: () => boolean;
  /** Settles once the owner is found fenced: a wait for bodies ends then, since its lease can no longer be renewed. */
  readonly whenFenced: () => Promise<void>;
  /** What made the owner (its store's guard): a store's close() waits only for the sessions its own owners hold. */
  readonly madeBy: object;
}

const owners = new WeakMap<object, OwnerInternals>();

/**
 * What this process keeps per store scope (storeOf) and session: what one owner of a session leaves there, a later
 * owner of it that the same store (or another handle on the same SQLite file) made finds; another store's session of
 * the same id is another.
 */
export class SessionTable<V> {
  readonly #byStore = new WeakMap<object, Map<string, V>>();

  get(owner: SessionOwner): V | undefined {
    return this.#byStore.get(storeOf(owner))?.get(owner.sessionId);
  }

  /** The value of session `sessionId` in the view `scope` (storeScope). */
  getIn(scope: object, sessionId: string): V | undefined {
    return this.#byStore.get(scope)?.get(sessionId);
  }

  /** The value of `owner`'s session, made by `make` when it has none yet. */
  take(owner: SessionOwner, make: () => V): V {
    const found = this.get(owner);
    if (found !== undefined) return found;
    const value = make();
    this.set(owner, value);
    return value;
  }

  set(owner: SessionOwner, value: V): void {
    const store = storeOf(owner);
    let sessions = this.#byStore.get(store);
    if (sessions === undefined) {
      sessions = new Map();
      this.#byStore.set(store, sessions);
    }
    sessions.set(owner.sessionId, value);
  }

  delete(owner: SessionOwner): void {
    this.#byStore.get(storeOf(owner))?.delete(owner.sessionId);
  }

  /** Forgets the value of session `sessionId` in the view `scope` if it is still `value`. */
  deleteIn(scope: object, sessionId: string, value: V): void {
    const sessions = this.#byStore.get(scope);
    if (sessions?.get(sessionId) === value) sessions.delete(sessionId);
  }

  /** The session ids that have a value in the view `scope` (storeScope). */
  sessionsIn(scope: object): string[] {
    return [...(this.#byStore.get(scope)?.keys() ?? [])];
  }
}

/**
 * The newest owner each view made of each session in this process, until it lets the session go. Held weakly: an
 * owner the host dropped without releasing it (its store closed, or it was taken over and left) is not kept alive by
 * this table, with everything it holds; its entry goes with it.
 */
const newestOwners = new SessionTable<WeakRef<SessionOwner>>();
const droppedOwners = new FinalizationRegistry<{ readonly scope: object; readonly sessionId: string; readonly ref: WeakRef<SessionOwner> }>(
  ({ scope, sessionId, ref }) => newestOwners.deleteIn(scope, sessionId, ref),
);

const scopes = new Map<string, object>();

/**
 * What a store's view of its sessions in this process is scoped to: the journal its backend names by `scopeKey` (the
 * built-in stores: the journal's own id, drawn once with its tables), so two handles on one journal in one process,
 * as two hosts would open it, see the same calls running; the backend instance itself when it names none.
 */
export function storeScope(backend: { readonly kind: string; readonly scopeKey?: string | undefined }): object {
  if (typeof backend.scopeKey !== 'string' || backend.scopeKey === '') return backend;
  const key = `${backend.kind}\n${backend.scopeKey}`;
  let scope = scopes.get(key);
  if (scope === undefined) {
    scope = { scope: key };
    scopes.set(key, scope);
  }
  return scope;
}

/** The newest owner of session `sessionId` in the view `scope` (storeScope) that has not let it go, if any. */
export function newestOwnerIn(scope: object, sessionId: string): SessionOwner | undefined {
  return newestOwners.getIn(scope, sessionId)?.deref();
}

/** Called by a store's owner once, as it is made (an acquire): it becomes its session's newest owner here. */
export function registerOwner(owner: SessionOwner, internals: OwnerInternals): void {
  owners.set(owner, internals);
  const ref = new WeakRef(owner);
  newestOwners.set(owner, ref);
  droppedOwners.register(owner, { scope: internals.store, sessionId: owner.sessionId, ref });
  runningBodies.get(owner)?.holders.add(owner);
}

/** Called by an owner that let its session go (released it): it is no longer the newest owner of anything. */
export function forgetOwner(owner: SessionOwner): void {
  if (newestOwners.get(owner)?.deref() === owner) newestOwners.delete(owner);
  runningBodies.get(owner)?.holders.delete(owner);
}

/**
 * The store instance `owner` belongs to; the owner itself for one no store of this package made. Calls in flight and
 * bodies running late are tracked per store and session: whichever owner of the session this store made asks (one
 * acquired after another let the session go included), and another store's session of the same id is another.
 */
export function storeOf(owner: SessionOwner): object {
  return owners.get(owner)?.store ?? owner;
}

/**
 * The owner that holds `owner`'s session in this process now, as far as this process knows: the newest one its store
 * made that has not let it go, or `owner` itself. What the runtime journals after a call's own owner let the session
 * go (the end of a body that outlived its result) goes through it.
 */
export function currentOwner(owner: SessionOwner): SessionOwner {
  return newestOwners.get(owner)?.deref() ?? owner;
}

/** Whether `owner` is an owner a store of this package made (the only kind the runtime can write through). */
export function canCommit(owner: unknown): boolean {
  return typeof owner === 'object' && owner !== null && owners.has(owner);
}

/** Commits `request` as `owner`: the runtime's primitive (internal; never exported from an entry point). */
export function commitAs(owner: SessionOwner, request: CommitRequest): Promise<CommitReceipt> {
  const commit = owners.get(owner)?.commit;
  if (commit === undefined) return Promise.reject(new InvalidInputError('owner', 'is not a session owner a jingwei store returned'));
  return commit(request);
}

/**
 * Stops `owner`'s heartbeat and keeps the session held: its lease runs out and the session is abandoned again, for
 * the next startup routine to find (internal: recovery uses it for a session it could not recover).
 */
export function stopRenewing(owner: SessionOwner): void {
  owners.get(owner)?.stopHeartbeat();
}

/** How many bodies of one session run in this process, who waits for none to, and who held the session meanwhile. */
interface RunningBodies {
  running: number;
  readonly idle: Array<() => void>;
  /**
   * The owners here that started one of the bodies or acquired the session while one ran, until they let it go: a
   * store's close() waits for the bodies when one of them is its own. Held strongly while the bodies run: an owner
   * the host dropped (one acquired with `heartbeat: false` has nothing else keeping it) is still waited through.
   */
  readonly holders: Set<SessionOwner>;
}

/**
 * The bodies running in this process, by view and session, from the moment each is called until its end is journaled
 * (its result, or `body_ended` for one that outlived it): whichever owner here holds the session waits for them before
 * it lets the session go, the one that started them or one that took the session over since.
 */
const runningBodies = new SessionTable<RunningBodies>();

/**
 * A body of `owner`'s session runs in this process: until the returned function is called (once is enough; more do
 * nothing), whichever owner here holds the session keeps it held, its lease renewed, when it would let it go (a
 * release, its store's close, the startup routine), so no other host takes it over and retries while the body can
 * still make its write (docs/design.md#letting-a-session-go-stops-its-calls). Counted, not kept as a promise: it is
 * taken for every call.
 */
export function holdSessionForBody(owner: SessionOwner): () => void {
  const bodies = runningBodies.take(owner, () => {
    const newest = newestOwners.get(owner)?.deref();
    return { running: 0, idle: [], holders: new Set(newest === undefined ? [] : [newest]) };
  });
  bodies.holders.add(owner);
  bodies.running += 1;
  let held = true;
  return () => {
    if (!held) return;
    held = false;
    bodies.running -= 1;
    if (bodies.running > 0) return;
    runningBodies.deleteIn(storeOf(owner), owner.sessionId, bodies);
    if (bodies.idle.length > 0) for (const wake of bodies.idle.splice(0)) wake();
  };
}

/**
 * The owners here that started a body of `owner`'s session still running, or acquired the session while one ran, and
 * have not let it go nor learned they were fenced: where a body's end can still be journaled when neither its own
 * owner nor the newest of the view (maybe of a copy of the journal) can take it.
 */
export function bodyHolders(owner: SessionOwner): SessionOwner[] {
  return [...(runningBodies.get(owner)?.holders ?? [])].filter(holds);
}

/** The same, until `ended` settles: a body that outlived its attempt's result, until its end is journaled. */
export function holdWhileBodyRuns(owner: SessionOwner, ended: Promise<unknown>): void {
  const done = holdSessionForBody(owner);
  void ended.then(done, done);
}

/** Settles once no body of the session `bodies` counts runs (at once if none does). */
function noneRunning(bodies: RunningBodies | undefined): Promise<void> {
  if (bodies === undefined || bodies.running === 0) return Promise.resolve();
  return new Promise((resolve) => bodies.idle.push(resolve));
}

const holds = (owner: SessionOwner): boolean => owners.get(owner)?.holds() === true;
const fenced = (owner: SessionOwner): Promise<void> => owners.get(owner)?.whenFenced() ?? Promise.resolve();

/**
 * Settles once the bodies of `owner`'s session still running in this process have ended (holdWhileBodyRuns), whoever
 * started them: `ended`. Meanwhile the owner's lease is renewed, its heartbeat started if it was acquired without one
 * (`heartbeat: false`: nothing else would renew it while it waits). `lost` at once when `owner` no longer holds the
 * session with bodies still running, and as soon as it learns it was fenced while it waits (its lease cannot be
 * renewed: waiting protects nothing). `aborted` when `signal` aborted first: the bodies may still run, and the session
 * must not be let go yet.
 */
export async function bodiesEnded(owner: SessionOwner, waiter: string, signal?: AbortSignal): Promise<'ended' | 'lost' | 'aborted'> {
  const warning = warnWhileWaiting(waiter, () => {
    const running = runningBodies.get(owner)?.running ?? 0;
    return running === 0 ? [] : [{ sessionId: owner.sessionId, running }];
  });
  try {
    for (;;) {
      const bodies = runningBodies.get(owner);
      if (bodies === undefined || bodies.running === 0) return 'ended';
      if (!holds(owner)) return 'lost';
      if (signal?.aborted === true) return 'aborted';
      owners.get(owner)?.keepRenewing();
      try {
        await unlessAborted(Promise.race([noneRunning(bodies), fenced(owner)]), signal);
      } catch {
        // Neither wait rejects: only the signal's abort does.
        return 'aborted';
      }
    }
  } finally {
    clearTimeout(warning);
  }
}

/**
 * Once the wait `waiter` has lasted STORE_DEFAULTS.bodyWaitWarningMs, a process warning (code
 * JINGWEI_WAITING_FOR_BODIES) naming the sessions whose bodies it still waits for, so that a shutdown held by a body
 * that ignores its abort signal says why. Returns the timer, unref'd, for the waiter to clear when it ends.
 */
function warnWhileWaiting(waiter: string, waitingFor: () => Array<{ sessionId: string; running: number }>): NodeJS.Timeout {
  const timer = setTimeout(() => {
    const sessions = waitingFor();
    if (sessions.length === 0) return;
    const bodies = sessions.reduce((n, s) => n + s.running, 0);
    const named = sessions.slice(0, 5).map((s) => JSON.stringify(s.sessionId)).join(', ') + (sessions.length > 5 ? `, and ${sessions.length - 5} more` : '');
    process.emitWarning(
      `${waiter} has waited ${STORE_DEFAULTS.bodyWaitWarningMs / 1000} s for ${bodies} tool ${bodies === 1 ? 'body' : 'bodies'} still running in this ` +
        `process (session ${named}): a body that ignores its abort signal keeps its session held, the lease renewed, until it ends, ` +
        'and so does an MCP request of a tool that is not read-only until its server answers (close the MCP connections first) ' +
        '(docs/design.md#letting-a-session-go-stops-its-calls)',
      { code: 'JINGWEI_WAITING_FOR_BODIES' },
    );
  }, STORE_DEFAULTS.bodyWaitWarningMs);
  timer.unref();
  return timer;
}

/**
 * Settles once the bodies still running in view `scope` of the sessions that owners `madeBy` made hold here have
 * ended (an owner of it that started one, or acquired the session while one ran, and has neither let it go nor learned
 * it was fenced): a store's close() waits for them, those owners' heartbeats renewing the sessions' leases. Not the
 * newest owner of the session in the view alone: a journal copied from the same template shares the view, and its
 * owner of a session with the same id would stand in for this store's.
 */
export async function heldBodiesEnded(scope: object, madeBy: object, waiter: string): Promise<void> {
  const warning = warnWhileWaiting(waiter, () => heldBodies(scope, madeBy).map(({ sessionId, bodies }) => ({ sessionId, running: bodies.running })));
  try {
    for (;;) {
      const held = heldBodies(scope, madeBy);
      if (held.length === 0) return;
      for (const { mine } of held) for (const holder of mine) owners.get(holder)?.keepRenewing();
      // A holder found fenced meanwhile stops holding: the sessions are counted again without it.
      await Promise.race([Promise.all(held.map(({ bodies }) => noneRunning(bodies))), ...held.flatMap(({ mine }) => mine.map(fenced))]);
    }
  } finally {
    clearTimeout(warning);
  }
}

/** The sessions of view `scope` with bodies running that owners `madeBy` made hold here, and those owners. */
function heldBodies(scope: object, madeBy: object): Array<{ sessionId: string; bodies: RunningBodies; mine: SessionOwner[] }> {
  const held: Array<{ sessionId: string; bodies: RunningBodies; mine: SessionOwner[] }> = [];
  for (const sessionId of runningBodies.sessionsIn(scope)) {
    const bodies = runningBodies.getIn(scope, sessionId);
    if (bodies === undefined || bodies.running === 0) continue;
    const mine = [...bodies.holders].filter((holder) => owners.get(holder)?.madeBy === madeBy && holds(holder));
    if (mine.length > 0) held.push({ sessionId, bodies, mine });
  }
  return held;
}

/**
 * Calls `listener` each time `owner` learns, in this process, that its session is or may be lost: fenced by another
 * owner, or its lease not renewed for a whole lease (docs/design.md#a-lost-session-stops-its-calls); and when the
 * owner lets the session go (its release, the store's close), which waits for every subscriber to unsubscribe.
 * Returns the unsubscribe; for an owner no store of this package made, nothing is ever heard.
 */
export function onOwnerLost(owner: SessionOwner, listener: LostListener): () => void {
  return owners.get(owner)?.onLost(listener) ?? (() => undefined);
}

/**
 * Why `owner`'s session is lost (fenced) or may be (its lease not renewed for a whole lease), as this process knows
 * now, without waiting for the heartbeat; null while it is held, and for an owner no store of this package made.
 */
export function ownerMayBeLost(owner: SessionOwner): string | null {
  return owners.get(owner)?.mayBeLost() ?? null;
}
