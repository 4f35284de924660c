import { InvalidInputError, StaleOwnerError, StoreClosedError, TaskNotFoundError } from '../errors.js';
import { checkId, type CallId, type OperationKey, type SessionId, type TaskId } from '../ids.js';
import { DECODED_WIRE_TYPES } from '../event/codec.js';
import type { EventDraft, SessionEvent } from '../event/types.js';
import { decideAcquire, decideCommit, draftEventIds, decideRelease, decideRenew, decideStartTask, decideTaskState, leaseExpired, taskSnapshot, type OwnerRef } from './decisions.js';
import { LEASE_LIMITS } from '../limits.js';
import { exportJournal, importJournal } from './jsonl.js';
import { HeadAnchor } from './anchors.js';
import type { EventRow, JournalBackend, SessionRow, TxReads, TxState, TxWrites } from './rows.js';
import { verifyJournal } from './verify.js';
import type {
  AcquireOptions,
  RecordedAttempt,
  CommitReceipt,
  CommitRequest,
  ImportReport,
  SessionOwner,
  SessionStore,
  SessionSummary,
  TaskLimits,
  TaskSnapshot,
} from './types.js';

/** Wire types only the runtime and recovery write: the evidence a retry decision rests on. */
const EVIDENCE_TYPES: ReadonlySet<string> = new Set(['tool_call', 'tool_started', 'tool_result']);

/** The public append carries host events only (docs/design.md#only-the-runtime-writes-tool-evidence). */
function refuseEvidence(draft: EventDraft, i: number): void {
  const kind = (draft as { kind?: unknown } | null)?.kind as { type?: unknown; wireType?: unknown } | undefined;
  if (typeof kind !== 'object' || kind === null) return;
  if (typeof kind.type === 'string' && EVIDENCE_TYPES.has(kind.type)) {
    throw new InvalidInputError(`events[${i}].kind`, `${kind.type} is tool evidence, which only the tool runtime records; append takes host events only`);
  }
  // An opaque draft must not impersonate a wire type the codec gives a meaning to (nor be opaque twice).
  if (kind.type === 'opaque' && typeof kind.wireType === 'string' && (DECODED_WIRE_TYPES.has(kind.wireType) || kind.wireType === 'opaque')) {
    throw new InvalidInputError(`events[${i}].kind.wireType`, `an opaque event cannot carry the known kind ${kind.wireType}`);
  }
}

/** Fails every call once the store is closed, whatever the backend would do with a closed handle. */
class OpenGuard {
  closed = false;
  /** Stops the heartbeats of this store's live owners at close. */
  readonly heartbeats = new Set<() => void>();
  constructor(private readonly backend: JournalBackend) {}
  check(): void {
    if (this.closed) throw new StoreClosedError(this.backend.kind, this.backend.location);
  }
}

function checkLeaseMs(value: number | undefined): number {
  const v = value ?? LEASE_LIMITS.defaultMs;
  if (!Number.isSafeInteger(v) || v < LEASE_LIMITS.minMs || v > LEASE_LIMITS.maxMs) {
    throw new InvalidInputError('leaseMs', `must be an integer from ${LEASE_LIMITS.minMs} to ${LEASE_LIMITS.maxMs} ms, got ${String(v)}`);
  }
  return v;
}

function checkTakeover(value: unknown): boolean | 'expired' {
  if (value === undefined) return false;
  if (value === true || value === false || value === 'expired') return value;
  throw new InvalidInputError('takeover', `must be true, false or 'expired', got ${JSON.stringify(value) ?? String(value)}`);
}

/**
 * The attempt `callId` of operation (taskId, key) in a verified history, or (without a call id, for backends that
 * keep no operation rows) its latest attempt.
 */
function latestAttempt(history: readonly SessionEvent[], taskId: TaskId, key: OperationKey, callId: string | undefined): RecordedAttempt | undefined {
  let callEvent: SessionEvent | undefined;
  for (const e of history) {
    if (e.kind.type !== 'tool_call') continue;
    const op = e.kind.call.operation;
    if (op?.taskId !== taskId || op.key !== key) continue;
    if (callId === undefined || e.kind.call.id === callId) callEvent = e;
  }
  if (callEvent?.kind.type !== 'tool_call') return undefined;
  const id = callEvent.kind.call.id;
  let startedEvent: SessionEvent | null = null;
  let resultEvent: SessionEvent | null = null;
  for (const e of history) {
    if (e.kind.type === 'tool_started' && e.kind.callId === id) startedEvent = e;
    else if (e.kind.type === 'tool_result' && e.kind.result.callId === id && resultEvent === null) resultEvent = e;
  }
  return { taskId, key, callId: id as CallId, callEvent, startedEvent, resultEvent };
}

/** The store's clock: the backend's when it has one (docs/design.md#leases). */
async function storeClock(backend: JournalBackend): Promise<number> {
  return backend.now ? backend.now() : Date.now();
}

/** The one SessionStore implementation; engines differ only in their JournalBackend. */
export class JournalStore implements SessionStore {
  readonly kind: string;
  private readonly guard: OpenGuard;
  constructor(readonly backend: JournalBackend) {
    this.kind = backend.kind;
    this.guard = new OpenGuard(backend);
  }

  async acquire(sessionId: string, options: AcquireOptions): Promise<SessionOwner> {
    this.guard.check();
    const id = checkId<SessionId>('sessionId', sessionId);
    const ownerName = checkId<string>('owner', options?.owner);
    const takeover = checkTakeover(options.takeover);
    const leaseMs = checkLeaseMs(options.leaseMs);
    if (options.heartbeat !== undefined && typeof options.heartbeat !== 'boolean') {
      throw new InvalidInputError('heartbeat', `must be a boolean, got ${typeof options.heartbeat}`);
    }
    const anchor = options.anchor !== undefined ? new HeadAnchor(options.anchor) : null;
    const row = await this.backend.transact(id, {}, decideAcquire(id, ownerName, takeover, leaseMs));
    const owner = new FencedOwner(this.backend, this.guard, { sessionId: id, epoch: row.epoch, leaseMs }, ownerName, anchor);
    if (options.heartbeat !== false) owner.startHeartbeat();
    if (anchor) await anchor.observe(row, true);
    return owner;
  }

  async loadHistory(sessionId: string): Promise<SessionEvent[]> {
    this.guard.check();
    const id = checkId<SessionId>('sessionId', sessionId);
    const { session, events } = await this.backend.snapshot(id);
    return verifyJournal(id, session, events);
  }

  async listSessions(): Promise<SessionSummary[]> {
    this.guard.check();
    const rows = await this.backend.listSessions();
    const now = await storeClock(this.backend);
    return rows.map(({ session, events }) => ({
      sessionId: session.sessionId,
      events,
      epoch: session.epoch,
      owner: session.owner,
      held: session.held,
      leaseExpiresAt: session.held ? (session.leaseExpiresAt ?? null) : null,
      leaseExpired: leaseExpired(session, now),
    }));
  }

  async listExpiredSessions(): Promise<SessionSummary[]> {
    return (await this.listSessions()).filter((s) => s.leaseExpired);
  }

  /** The verified rows of a session with its owner epoch (for chained exports and anchor checks). */
  async readChain(sessionId: string): Promise<{ epoch: number; rows: EventRow[]; events: SessionEvent[] }> {
    this.guard.check();
    const id = checkId<SessionId>('sessionId', sessionId);
    const { session, events } = await this.backend.snapshot(id);
    return { epoch: session?.epoch ?? 0, rows: events, events: verifyJournal(id, session, events) };
  }

  async exportJsonl(sessionId: string): Promise<string> {
    return exportJournal(await this.loadHistory(sessionId));
  }

  async importJsonl(text: string, options: { owner: string; sessionId?: string }): Promise<ImportReport> {
    this.guard.check();
    return importJournal(this.backend, text, options);
  }

  async close(): Promise<void> {
    if (this.guard.closed) return;
    this.guard.closed = true;
    for (const stop of [...this.guard.heartbeats]) stop();
    await this.backend.close();
  }
}

class FencedOwner implements SessionOwner {
  readonly sessionId: SessionId;
  readonly epoch: number;
  readonly leaseMs: number;
  private readonly listeners = new Set<(taskId: TaskId, reason: string) => void>();
  private timer: NodeJS.Timeout | null = null;
  private beating = false;
  private readonly stopHeartbeat = () => {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.guard.heartbeats.delete(this.stopHeartbeat);
  };

  constructor(
    private readonly backend: JournalBackend,
    private readonly guard: OpenGuard,
    private readonly ref: OwnerRef,
    readonly owner: string,
    private readonly anchor: HeadAnchor | null = null,
  ) {
    this.sessionId = ref.sessionId;
    this.epoch = ref.epoch;
    this.leaseMs = ref.leaseMs ?? LEASE_LIMITS.defaultMs;
  }

  /** The heartbeat renews the lease every third of it; unref'd, so it never keeps a process alive by itself. */
  startHeartbeat(): void {
    this.timer = setInterval(() => void this.beat(), Math.max(1, Math.floor(this.leaseMs / 3)));
    this.timer.unref();
    this.guard.heartbeats.add(this.stopHeartbeat);
  }

  get heartbeating(): boolean {
    return this.timer !== null;
  }

  /** One heartbeat. Fenced, released or closed: stop for good. Any other failure (busy, unreachable): try at the next beat. */
  private async beat(): Promise<void> {
    if (this.beating || this.timer === null) return;
    this.beating = true;
    try {
      await this.renewLease();
    } catch (error) {
      if (error instanceof StaleOwnerError || error instanceof StoreClosedError) this.stopHeartbeat();
    } finally {
      this.beating = false;
    }
  }

  async renewLease(): Promise<number> {
    this.guard.check();
    return this.backend.transact(this.sessionId, {}, decideRenew({ ...this.ref, leaseMs: this.leaseMs }));
  }

  /** One transaction; with an anchor, the owner row it wrote is handed to the anchor once it has committed. */
  private async tx<R>(reads: TxReads, decide: (state: TxState) => TxWrites<R>, force = false): Promise<R> {
    if (!this.anchor) return this.backend.transact(this.sessionId, reads, decide);
    let head: SessionRow | undefined;
    const result = await this.backend.transact(this.sessionId, reads, (state) => {
      const writes = decide(state);
      head = writes.session?.row;
      return writes;
    });
    if (head) await this.anchor.observe(head, force);
    return result;
  }

  async startTask(taskId: string, options?: { limits?: Partial<TaskLimits> }): Promise<TaskSnapshot> {
    this.guard.check();
    const id = checkId<TaskId>('taskId', taskId);
    const row = await this.tx({ taskId: id }, decideStartTask(this.ref, id, options?.limits));
    return taskSnapshot(row, this.epoch);
  }

  async stopTask(taskId: string, reason: string): Promise<TaskSnapshot> {
    this.guard.check();
    const id = checkId<TaskId>('taskId', taskId);
    const why = checkId<string>('reason', reason);
    const row = await this.tx({ taskId: id }, decideTaskState(this.ref, id, 'stopped', why));
    if (row.state === 'stopped') for (const listener of this.listeners) listener(id, row.stopReason ?? why);
    return taskSnapshot(row, this.epoch);
  }

  async completeTask(taskId: string): Promise<TaskSnapshot> {
    this.guard.check();
    const id = checkId<TaskId>('taskId', taskId);
    return taskSnapshot(await this.tx({ taskId: id }, decideTaskState(this.ref, id, 'completed', null)), this.epoch);
  }

  async task(taskId: string): Promise<TaskSnapshot> {
    this.guard.check();
    const id = checkId<TaskId>('taskId', taskId);
    const row = await this.backend.readTask(id);
    if (!row || row.sessionId !== this.sessionId) {
      throw new TaskNotFoundError(id, this.sessionId);
    }
    return taskSnapshot(row, this.epoch);
  }

  async append(events: readonly EventDraft[]): Promise<SessionEvent[]> {
    if (Array.isArray(events)) {
      for (const [i, draft] of events.entries()) refuseEvidence(draft, i);
    }
    return (await this.commit({ events })).events;
  }

  async commit(request: CommitRequest): Promise<CommitReceipt> {
    this.guard.check();
    if (!Array.isArray(request.events)) throw new InvalidInputError('events', 'must be an array');
    // Checked before any read: an id a store cannot even look up (U+0000) must fail as bad input, on every store.
    request.events.forEach((draft, i) => {
      if (draft?.eventId !== undefined) checkId<string>(`events[${i}].eventId`, draft.eventId);
    });
    if (request.expectLatestAttempt && request.expectNewOperation) {
      throw new InvalidInputError('expectNewOperation', 'cannot be combined with expectLatestAttempt');
    }
    const condition = request.expectLatestAttempt ?? request.expectNewOperation;
    const reads = {
      ...(request.budget ? { taskId: request.budget.taskId } : {}),
      ...(condition ? { operation: { taskId: condition.taskId, key: condition.key } } : {}),
      eventIds: draftEventIds(request.events),
    };
    return this.tx(reads, decideCommit(this.ref, request));
  }

  async readOperation(taskId: string, key: string): Promise<RecordedAttempt | undefined> {
    this.guard.check();
    const task = checkId<TaskId>('taskId', taskId);
    const opKey = checkId<OperationKey>('key', key);
    let callId: string | undefined;
    if (this.backend.readOperation) {
      // Operations are keyed by (task, key) and a task lives in one session: the row must be this session's.
      const row = await this.backend.readOperation(this.sessionId, task, opKey);
      if (!row || row.sessionId !== this.sessionId) return undefined;
      callId = row.callId;
    }
    const { session, events } = await this.backend.snapshot(this.sessionId);
    return latestAttempt(verifyJournal(this.sessionId, session, events), task, opKey, callId);
  }

  onTaskStopped(listener: (taskId: TaskId, reason: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async release(): Promise<void> {
    this.stopHeartbeat();
    this.guard.check();
    await this.tx({}, decideRelease(this.ref), this.anchor?.unanchored === true);
    this.listeners.clear();
  }
}
