/**
 * Who may journal and call for a run in this process, per owner: one registry for `runAgent`/`resumeAgent` drives
 * and bridges' opens. The journal's fencing keeps two hosts apart, but two loops through one owner are both its
 * writer: each would journal the run's start or the same step, or read a call the other has under way (its attempt
 * not yet journaled) as never run, and make it again.
 *
 * Entries (a drive or an open) take turns. In its turn an entry first waits until the work under way of every loop
 * that held the run before (calls, step writes) has settled, so it reads the journal with their attempts in it; while
 * an open decides, the loop holding the run starts nothing new. An entry that passes its checks becomes the run's
 * loop and the older loop's next call or step fails with AgentRunBusyError; one refused before it journaled anything
 * (a prompt that differs, another task, a completed call whose replay is refused) gives the run back, and the older
 * loop goes on. A drive is exclusive: a second drive while one waits or runs, or an open while one runs, is refused
 * with AgentRunBusyError.
 */
import { unlessAborted } from '../abort.js';
import { AgentRunBusyError } from '../errors.js';
import { readOwnJournal } from '../store/owner-journal.js';
import { runFootprint } from './run-journal.js';
import type { SessionOwner, SessionStore } from '../store/types.js';

class RunSlot {
  /** Drives that have entered (waiting for their turn or running): at most one. */
  drives = 0;
  /** A drive has its turn (it runs). */
  driving = false;
  /** The loop whose work is admitted: a bridge's open, a drive, or none. */
  holder: object | null = null;
  /** The end of the latest entry's turn: the next entry waits for it. */
  turn: Promise<void> = Promise.resolve();
  /** Set while an entry decides: the holder's new work waits for it. */
  deciding: Promise<void> | null = null;
  /** Work under way of the loops that held the run (a dethroned loop's included). */
  readonly work = new Set<Promise<unknown>>();
  /** Entries that have not ended their turn. */
  entries = 0;
}

const SLOTS = new WeakMap<SessionOwner, Map<string, RunSlot>>();

function slotOf(owner: SessionOwner, runId: string): RunSlot {
  let runs = SLOTS.get(owner);
  if (runs === undefined) {
    runs = new Map();
    SLOTS.set(owner, runs);
  }
  let slot = runs.get(runId);
  if (slot === undefined) {
    slot = new RunSlot();
    runs.set(runId, slot);
  }
  return slot;
}

/** An entry's turn at a run: it reads the journal now, with no other loop's work under way. */
export interface RunTurn {
  /**
   * Makes `holder` the run's loop, once the entry's checks passed. The loop that held it before starts nothing more:
   * after an open's turn (its new work waits until then, so an open refused later can give the run back), at once
   * for a drive (which runs long).
   */
  hold(holder: object): void;
  /**
   * For an entry refused after `hold`: gives the run back to the loop that held it before, if `journaledNothing`
   * says the entry journaled nothing (asked only when there is such a loop).
   */
  giveBack(journaledNothing: () => Promise<boolean>): Promise<void>;
  /** Ends the turn: the next entry goes on. */
  end(): void;
}

/**
 * Waits for the turn at run `runId` through `owner` (see the module comment); `signal` stops the wait (a loop's call
 * that never ends would otherwise hold every later entry). AgentRunBusyError for a drive while another drive waits
 * or runs, and for an open while a drive runs; an open that arrives while a drive waits for its turn waits for it.
 */
export async function takeTurn(owner: SessionOwner, runId: string, kind: 'drive' | 'open', signal?: AbortSignal): Promise<RunTurn> {
  const slot = slotOf(owner, runId);
  if (kind === 'drive' ? slot.drives > 0 : slot.driving) throw new AgentRunBusyError(owner.sessionId, runId);
  signal?.throwIfAborted();
  if (kind === 'drive') slot.drives += 1;
  slot.entries += 1;
  let endTurn!: () => void;
  const mine = new Promise<void>((resolve) => {
    endTurn = resolve;
  });
  const before = slot.turn;
  slot.turn = before.then(() => mine);
  let decided: (() => void) | null = null;
  let held: object | null = null;
  let previous: object | null = null;
  const stopDeciding = () => {
    if (decided === null) return;
    slot.deciding = null;
    decided();
    decided = null;
  };
  const end = () => {
    stopDeciding();
    if (kind === 'drive') {
      slot.drives -= 1;
      slot.driving = false;
      if (held !== null && slot.holder === held) slot.holder = null;
    }
    slot.entries -= 1;
    // A run nobody holds or waits for leaves no trace: an owner that drives many runs does not keep one per run.
    if (slot.entries === 0 && slot.holder === null && slot.work.size === 0) SLOTS.get(owner)?.delete(runId);
    endTurn();
  };
  try {
    await unlessAborted(before, signal);
    slot.deciding = new Promise<void>((resolve) => {
      decided = resolve;
    });
    while (slot.work.size > 0) await unlessAborted(Promise.allSettled([...slot.work]), signal);
  } catch (error) {
    end();
    throw error;
  }
  if (kind === 'drive') slot.driving = true;
  return {
    hold(holder: object) {
      previous = slot.holder;
      held = holder;
      slot.holder = holder;
      if (kind === 'drive') stopDeciding();
    },
    async giveBack(journaledNothing: () => Promise<boolean>) {
      if (held === null || previous === null || slot.holder !== held) return;
      if (!(await journaledNothing())) return;
      if (slot.holder === held) slot.holder = previous;
      held = null;
    },
    end,
  };
}

/**
 * Whether the run's part of the session's journal, read through `owner`, is still `footprint` events (runFootprint):
 * an entry refused after it took the run journaled nothing for it, and may give it back. Another run's writes in the
 * session meanwhile do not count. A journal that cannot be read counts as changed.
 */
export async function runUnchanged(owner: SessionOwner, store: Pick<SessionStore, 'loadHistory'> | undefined, runId: string, footprint: number | null): Promise<boolean> {
  if (store === undefined || footprint === null) return false;
  try {
    return runFootprint(await readOwnJournal(owner, store), runId) === footprint;
  } catch {
    return false;
  }
}

/**
 * Runs `work` for `holder` (a bridge's call or step write) if it still holds run `runId`, once no entry decides;
 * AgentRunBusyError if a newer entry took the run. The check and the start are one step, so an entry that decides
 * next waits for this work.
 */
export async function asHolder<T>(owner: SessionOwner, runId: string, holder: object, work: () => Promise<T>): Promise<T> {
  const slot = slotOf(owner, runId);
  while (slot.deciding !== null) await slot.deciding;
  if (slot.holder !== holder) throw new AgentRunBusyError(owner.sessionId, runId, true);
  const running = work();
  slot.work.add(running);
  try {
    return await running;
  } finally {
    slot.work.delete(running);
  }
}
