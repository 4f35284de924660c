/** A session's fenced owner: the one writer of a session, its lease, its heartbeat and its commits (docs/design.md#fencing). */
import { DecisionError, InvalidInputError, StaleOwnerError, StoreClosedError, StoreUnavailableError, TaskNotFoundError } from '../errors.js';
import type { DecisionRow } from './inbox-rows.js';
import { checkId, type OperationKey, type SessionId, type TaskId } from '../ids.js';
import { DECODED_WIRE_TYPES } from '../event/codec.js';
import { BODY_ENDED } from '../tool/late-bodies.js';
import { describeValue, thrownMessage } from '../text.js';
import type { EventDraft, SessionEvent } from '../event/types.js';
import { allAttentionRows, attentionCallIds, attentionItem, blocksRepeat, keepsReviewRoom, refusesIdentical } from './attention.js';
import { decideCommit, decideRelease, decideReleaseUnwritten, decideRenew, decideStartTask, decideTaskState, draftEventIds, NO_ROOM_KEPT, operationRoomKey, taskSnapshot, type CommitOutcome, type OwnerRef, type RoomKept, type UnwrittenSettlement } from './decisions.js';
import { LEASE_LIMITS } from '../limits.js';
import type { HeadAnchor } from './anchors.js';
import type { JournalBackend, SessionRow, TaskRow, TxReads, TxState, TxWrites } from './rows.js';
import { bodiesEnded, forgetOwner, registerOwner, storeScope } from './owner-commit.js';
import { hasPendingBodyEnds, journalPendingBodyEnds } from '../tool/late-bodies.js';
import { LeaseWatch, type SentAt } from './lease-watch.js';
import { registerJournalReader } from './owner-journal.js';
import { verifyJournalAgainst, type VerifiedRead } from './verify.js';
import { AttemptIndex } from './attempt-index.js';
import type { AttentionItem, RecordedAttempt, CommitReceipt, CommitRequest, InDoubtQuery, SessionOwner, TaskLimits, TaskSnapshot } from './types.js';

/** Fails every call once the store is closed, whatever the backend would do with a closed handle. */
export class OpenGuard {
  closed = false;
  /** close() has begun: no new call is taken while the calls in flight are stopped. */
  closing = false;
  /** Stops the heartbeats of this store's live owners at close. */
  readonly heartbeats = new Set<() => void>();
  /** Stops the calls of this store's owners with calls in flight, resolving once each has recorded its outcome. */
  readonly callStoppers = new Set<(why: string) => Promise<void>>();
  constructor(private readonly backend: JournalBackend) {}
  check(): void {
    if (this.closed) throw new StoreClosedError(this.backend.kind, this.backend.location);
  }
}

/** The store's clock, checked: a clock that returns no usable time is a configuration error, not a journal entry. */
export function readClock(clock: () => number): number {
  const now = clock();
  if (!Number.isSafeInteger(now) || now < 0 || now > 253_402_300_799_999) {
    throw new InvalidInputError('clock', `returned ${String(now)}, not epoch milliseconds within the years 1970..9999`);
  }
  return now;
}

/** Whether an attempt has a recorded result that succeeded. */
export function succeeded(attempt: RecordedAttempt): boolean {
  const kind = attempt.resultEvent?.kind;
  return kind?.type === 'tool_result' && kind.result.outcome.status === 'succeeded';
}

/**
 * Wire types only the runtime and recovery write: the evidence a retry decision rests on. A review is written only
 * through recordToolReview (docs/design.md#reviews-are-journaled-evidence), which binds it to the latest attempt.
 */
const EVIDENCE_TYPES: ReadonlySet<string> = new Set(['tool_call', 'tool_started', 'tool_result', 'tool_review']);

/** What a commit's decision kept before it was written: the call it admitted, and each outcome's entry before it. */
interface NotedRoom {
  admitted: string | null;
  previous: Map<string, string | undefined> | null;
}

function applyOutcomes(open: Map<string, string>, changes: ReadonlyMap<string, string | null>): void {
  for (const [operation, callId] of changes) {
    if (callId === null) open.delete(operation);
    else open.set(operation, callId);
  }
}

/**
 * Whether the drafts carry evidence of a call they do not admit: a start marker, a result, a `completed` review, or
 * the end of a body that outlived its result. Such a commit uses the room kept for that call. Any other review leaves
 * its call keeping a review's room (`uncertain` settles nothing; after `not_executed` the write is due, and may still
 * be found made), so it leaves the room kept as any other write does, its own call's included: reviews that keep the
 * question open cannot use up the room of the one that closes it.
 */
function carriesEarlierCallsEvidence(drafts: readonly EventDraft[]): boolean {
  const admitted = drafts.find((d) => d?.kind?.type === 'tool_call')?.kind;
  const admittedId = admitted?.type === 'tool_call' ? admitted.call.id : undefined;
  return drafts.some((draft) => {
    const kind = draft?.kind;
    if (kind?.type === 'tool_started') return kind.callId !== admittedId;
    if (kind?.type === 'tool_review') return kind.review.callId !== admittedId && kind.review.outcome === 'completed';
    if (kind?.type === 'tool_result') return kind.result.callId !== admittedId;
    return kind?.type === 'custom' && kind.plugin === BODY_ENDED.plugin;
  });
}

/** The public append carries host events only (docs/design.md#only-the-runtime-writes-tool-evidence). */
function refuseEvidence(draft: EventDraft, i: number): void {
  const kind = (draft as { kind?: unknown } | null)?.kind as { type?: unknown; wireType?: unknown } | undefined;
  if (typeof kind !== 'object' || kind === null) return;
  if (kind.type === 'tool_review') {
    throw new InvalidInputError(`events[${i}].kind`, 'tool_review is tool evidence, written only through recordToolReview (jingwei/review); append takes host events only');
  }
  if (kind.type === 'task_ledger') {
    throw new InvalidInputError(`events[${i}].kind`, 'task_ledger is written only by the store, with the task change it records (startTask, stopTask, completeTask); append takes host events only');
  }
  if (typeof kind.type === 'string' && EVIDENCE_TYPES.has(kind.type)) {
    throw new InvalidInputError(`events[${i}].kind`, `${kind.type} is tool evidence, which only the tool runtime records; append takes host events only`);
  }
  // The runtime's own custom events (the end of a body that outlived its result) are evidence too.
  const custom = kind as { plugin?: unknown };
  if (kind.type === 'custom' && custom.plugin === BODY_ENDED.plugin) {
    throw new InvalidInputError(`events[${i}].kind.plugin`, `${BODY_ENDED.plugin} events are written only by the tool runtime; append takes host events only`);
  }
  // An opaque draft must not impersonate a wire type the codec gives a meaning to (nor be opaque twice).
  if (kind.type === 'opaque' && typeof kind.wireType === 'string' && (DECODED_WIRE_TYPES.has(kind.wireType) || kind.wireType === 'opaque')) {
    throw new InvalidInputError(`events[${i}].kind.wireType`, `an opaque event cannot carry the known kind ${kind.wireType}`);
  }
}

/** A host's draft as plain data, each field read once (structuredClone); what cannot be copied is refused. */
function plainDraft(draft: EventDraft, i: number): EventDraft {
  let copy: unknown;
  try {
    copy = structuredClone(draft);
  } catch (error) {
    throw new InvalidInputError(`events[${i}]`, `must be plain data (no functions or Proxies): ${thrownMessage(error)}`, { cause: error });
  }
  if (typeof copy !== 'object' || copy === null || Array.isArray(copy)) throw new InvalidInputError(`events[${i}]`, `must be an event draft (an object), got ${describeValue(copy)}`);
  return copy as EventDraft;
}

/** The operation whose inbox rows a commit's approval change reads. */
function approvalOperation(request: CommitRequest): { taskId: string; key: string; spent?: string } | undefined {
  const change = request.approval;
  if (change === undefined) return undefined;
  if ('resolve' in change) {
    const { taskId, key } = change.resolve ?? {};
    if (typeof taskId !== 'string' || typeof key !== 'string') throw new InvalidInputError('approval', 'a resolve must name its operation (taskId and key)');
    return { taskId, key };
  }
  if ('restore' in change) {
    const { taskId, key, id } = change.restore ?? {};
    if (typeof taskId !== 'string' || typeof key !== 'string' || typeof id !== 'string') {
      throw new InvalidInputError('approval', 'a restore must name its operation (taskId and key) and the approval (id)');
    }
    return { taskId, key, spent: checkId<string>('approval.restore.id', id) };
  }
  const binding = 'use' in change ? change.use?.binding : 'settle' in change ? change.settle?.binding : change.request?.binding;
  if (!binding) throw new InvalidInputError('approval', 'must carry a request, a use, a settle with its binding, a resolve or a restore');
  return { taskId: binding.taskId, key: binding.key };
}

/** The calls a commit's `expectNoWaitingReview` names, checked as ids (a store cannot look up U+0000). */
function checkCallIds(callIds: readonly string[]): string[] {
  if (!Array.isArray(callIds)) throw new InvalidInputError('expectNoWaitingReview', 'must be an array of call ids');
  return callIds.map((id, i) => checkId<string>(`expectNoWaitingReview[${i}]`, id));
}

function withoutApproval({ approval: _, ...rest }: CommitRequest): CommitRequest {
  return rest;
}

export class FencedOwner implements SessionOwner {
  readonly sessionId: SessionId;
  readonly epoch: number;
  readonly leaseMs: number;
  private readonly listeners = new Set<(taskId: TaskId, reason: string) => void>();
  /** Results whose write failed, by task: their reservations are released at this owner's next write or release. */
  private readonly unwritten = new Map<string, UnwrittenSettlement[]>();
  /** The calls this owner admitted whose results are not written yet, with their output reservations (room kept free). */
  private readonly awaitingResults = new Map<string, number>();
  /**
   * The session's operations whose outcome is open or whose write a review left due, each keeping room for a review: read from the attention index
   * before the first commit that must leave it (null until then), and kept from this owner's commits since.
   */
  private openOutcomes: Map<string, string> | null = null;
  /** While the attention index is read: the changes this owner's commits made meanwhile, applied over what it read. */
  private outcomesWhileReading: Array<ReadonlyMap<string, string | null>> | null = null;
  private readingOutcomes: Promise<Map<string, string>> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private beating = false;
  private readonly lease: LeaseWatch;
  /**
   * The journal as this owner last read and verified it, with its attempts indexed; dropped by each of this owner's
   * own transactions (docs/design.md#a-resume-reads-the-journal-once).
   */
  private verified: AttemptIndex | null = null;
  /**
   * This owner's last verified read, kept whatever overlapped it: the next read is checked against it, so rows stored
   * as they were are not decoded and hashed again (docs/design.md#an-owner-reads-its-journal-again).
   */
  private lastRead: VerifiedRead | null = null;
  /** This owner's transactions begun and ended: a read that overlapped one is not kept. */
  private txBegun = 0;
  private txEnded = 0;
  /** Why this owner is letting its session go (its release, the store's close): it takes no new call. */
  private lettingGo: string | null = null;
  private readonly stopCalls = (why: string): Promise<void> => {
    this.lettingGo ??= why;
    return this.lease.stopAll(why);
  };
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
    private readonly clock: () => number = Date.now,
    acquireSentAt: SentAt = LeaseWatch.now(),
  ) {
    this.sessionId = ref.sessionId;
    this.epoch = ref.epoch;
    this.leaseMs = ref.leaseMs ?? LEASE_LIMITS.defaultMs;
    this.lease = new LeaseWatch(this.leaseMs, acquireSentAt);
    registerOwner(this, {
      store: storeScope(backend),
      commit: (request) => this.#commit(request),
      stopHeartbeat: this.stopHeartbeat,
      keepRenewing: () => {
        if (this.timer === null) this.startHeartbeat();
        // One beat now: a takeover by another process is learned at once, not a third of a lease later.
        void this.beat();
      },
      holds: () => !this.lease.isFenced,
      whenFenced: () => this.lease.whenFenced(),
      madeBy: this.guard,
      mayBeLost: () => this.lease.mayBeLost(),
      onLost: (listener) => {
        const unsubscribe = this.lease.subscribe(listener);
        this.guard.callStoppers.add(this.stopCalls);
        return () => {
          unsubscribe();
          if (this.lease.calls === 0) this.guard.callStoppers.delete(this.stopCalls);
        };
      },
    });
    registerJournalReader(this, { read: async () => (await this.readVerified()).history, kept: () => this.verified?.history ?? null });
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

  /**
   * One heartbeat. A lease not renewed for a whole lease may have run out: the running calls are told to stop first
   * (docs/design.md#a-lost-session-stops-its-calls). Fenced, released or closed: stop for good. Any other failure
   * (busy, unreachable): try at the next beat.
   */
  private async beat(): Promise<void> {
    if (this.timer === null) return;
    // Checked on every beat, a renewal in flight or not: one sent before a stall and answered after it renewed
    // nothing this process can count on.
    const lapse = this.lease.lapse();
    if (lapse !== null) this.lease.lost(lapse);
    if (this.beating) return;
    this.beating = true;
    try {
      await this.renewLease();
      // A body end this owner keeps and no journal has taken yet (a start marker whose commit landed unconfirmed, a
      // result that could not be written) goes in now too: a host that sits idle after such a failure would otherwise
      // leave the inbox waiting for a body it will never run.
      if (hasPendingBodyEnds(this)) await journalPendingBodyEnds(this);
    } catch (error) {
      if (error instanceof StaleOwnerError || error instanceof StoreClosedError) this.stopHeartbeat();
    } finally {
      this.beating = false;
    }
  }

  async renewLease(): Promise<number> {
    this.guard.check();
    const sentAt = LeaseWatch.now();
    try {
      const expiresAt = await this.backend.transact(this.sessionId, {}, decideRenew({ ...this.ref, leaseMs: this.leaseMs }));
      this.lease.renewed(sentAt);
      return expiresAt;
    } catch (error) {
      this.noteFenced(error);
      throw error;
    }
  }

  /** A write refused because another owner holds the session: this owner's running calls are told to stop. */
  private noteFenced(error: unknown): void {
    if (error instanceof StaleOwnerError) this.lease.fenced(`the session was taken over or released: ${error.message}`);
  }

  /** A transaction that renews the lease (decisions.ts: every owner write but a release). */
  private async renewingTx<R>(reads: TxReads, decide: (state: TxState) => TxWrites<R>): Promise<R> {
    const sentAt = LeaseWatch.now();
    const result = await this.tx(reads, decide);
    this.lease.renewed(sentAt);
    return result;
  }

  /** One transaction; with an anchor, the owner row it wrote is handed to the anchor once it has committed. */
  private async tx<R>(reads: TxReads, decide: (state: TxState) => TxWrites<R>, force = false): Promise<R> {
    this.verified = null;
    this.txBegun += 1;
    try {
      return await this.transact(reads, decide, force);
    } catch (error) {
      this.noteFenced(error);
      throw error;
    } finally {
      this.txEnded += 1;
      this.verified = null;
    }
  }

  private async transact<R>(reads: TxReads, decide: (state: TxState) => TxWrites<R>, force: boolean): Promise<R> {
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

  /** Remembers the reservation of a result that could not be written (nothing to release once this owner is fenced). */
  private noteUnwritten(request: CommitRequest, error: unknown): void {
    const code = (error as { code?: unknown } | null)?.code;
    const settle = request.budget?.settle;
    if (!settle || code === 'stale_owner' || code === 'store_closed') return;
    const charge = settle.chargeOutputBytes;
    if (!Number.isSafeInteger(charge) || charge < 0) return;
    for (const draft of request.events) {
      if (draft?.kind?.type !== 'tool_result') continue;
      // Its reservation is released at the next write: the room it kept goes with it.
      this.awaitingResults.delete(draft.kind.result.callId);
      const list = this.unwritten.get(request.budget!.taskId) ?? [];
      list.push({ callId: draft.kind.result.callId, chargeOutputBytes: charge });
      this.unwritten.set(request.budget!.taskId, list);
    }
  }

  /**
   * Releases the reservations of unwritten results before this owner's next write (docs/design.md#budgets-are-exact).
   * A release that fails is kept for the next write; once this owner is fenced, the next owner settles them instead.
   */
  private async releaseUnwritten(): Promise<void> {
    for (const [taskId, list] of [...this.unwritten]) {
      try {
        await this.tx({ taskId }, decideReleaseUnwritten(this.ref, list));
        this.unwritten.delete(taskId);
      } catch (error) {
        if ((error as { code?: unknown } | null)?.code === 'stale_owner') this.unwritten.clear();
        return;
      }
    }
  }

  async startTask(taskId: string, options?: { limits?: Partial<TaskLimits> }): Promise<TaskSnapshot> {
    this.guard.check();
    await this.releaseUnwritten();
    const id = checkId<TaskId>('taskId', taskId);
    const row = await this.renewingTx({ taskId: id }, decideStartTask(this.ref, id, options?.limits, readClock(this.clock), await this.roomToKeep()));
    return taskSnapshot(row, this.epoch);
  }

  async stopTask(taskId: string, reason: string): Promise<TaskSnapshot> {
    this.guard.check();
    const id = checkId<TaskId>('taskId', taskId);
    const why = checkId<string>('reason', reason);
    await this.releaseUnwritten();
    const row = await this.renewingTx({ taskId: id }, decideTaskState(this.ref, id, 'stopped', why, readClock(this.clock), await this.roomToKeep()));
    if (row.state === 'stopped') for (const listener of this.listeners) listener(id, row.stopReason ?? why);
    await this.supersedeApprovalsOf(row);
    return taskSnapshot(row, this.epoch);
  }

  async completeTask(taskId: string): Promise<TaskSnapshot> {
    this.guard.check();
    const id = checkId<TaskId>('taskId', taskId);
    await this.releaseUnwritten();
    const row = await this.renewingTx({ taskId: id }, decideTaskState(this.ref, id, 'completed', null, readClock(this.clock), await this.roomToKeep()));
    await this.supersedeApprovalsOf(row);
    return taskSnapshot(row, this.epoch);
  }

  /**
   * Supersedes the approval requests a task that ended leaves open or decided: no attempt of it can run any more, so
   * none may wait in the queue for an operator, or for a host, who can do nothing with it. After the task's commit, so
   * a failure here leaves the rows as they were, and stopping (or completing) the task again finishes the job.
   */
  private async supersedeApprovalsOf(task: TaskRow): Promise<void> {
    const inbox = this.backend.inbox;
    if (!inbox || task.state === 'running') return;
    const ended = task.state === 'stopped' ? `its task was stopped (${task.stopReason ?? 'no reason given'})` : 'its task was completed';
    const rows = await inbox.listDecisions({ sessionId: this.sessionId, kind: 'approval', taskId: task.taskId, states: ['open', 'decided'], limit: Number.POSITIVE_INFINITY });
    for (const listed of rows) {
      await inbox.transactDecision(listed.id, (row) => (row?.state === 'open' || row?.state === 'decided'
        ? { write: { ...row, state: 'superseded', note: ended }, result: undefined }
        : { result: undefined }));
    }
  }

  async task(taskId: string): Promise<TaskSnapshot> {
    this.guard.check();
    const id = checkId<TaskId>('taskId', taskId);
    const row = await this.backend.readTask(this.sessionId, id);
    if (!row || row.sessionId !== this.sessionId) {
      throw new TaskNotFoundError(id, this.sessionId);
    }
    return taskSnapshot(row, this.epoch);
  }

  async append(events: readonly EventDraft[]): Promise<SessionEvent[]> {
    // Checked and written from one plain copy: a getter or a Proxy in the host's drafts cannot show the check one
    // kind and the journal another.
    const drafts = Array.isArray(events) ? events.map(plainDraft) : events;
    if (Array.isArray(drafts)) {
      for (const [i, draft] of drafts.entries()) refuseEvidence(draft, i);
    }
    return (await this.#commit({ events: drafts })).events;
  }

  /** The runtime's primitive, reached through `commitAs` (owner-commit.ts), never through the published type. */
  async #commit(asked: CommitRequest): Promise<CommitReceipt> {
    this.guard.check();
    if ((this.lettingGo !== null || this.guard.closing) && Array.isArray(asked.events) && asked.events.some((e) => e?.kind?.type === 'tool_call')) {
      if (this.guard.closing) throw new StoreClosedError(this.backend.kind, this.backend.location);
      throw new StaleOwnerError(this.sessionId, this.epoch, `it takes no new call: ${this.lettingGo}`);
    }
    // Without an inbox there are no requests for a settle or a resolve to supersede.
    const request: CommitRequest = asked.approval && ('settle' in asked.approval || 'resolve' in asked.approval) && !this.backend.inbox ? withoutApproval(asked) : asked;
    if (!Array.isArray(request.events)) throw new InvalidInputError('events', 'must be an array');
    const lastSeq = request.expectLastSeq;
    if (lastSeq !== undefined && (!Number.isSafeInteger(lastSeq) || lastSeq < -1)) {
      throw new InvalidInputError('expectLastSeq', `must be an integer of at least -1, got ${String(lastSeq)}`);
    }
    // Checked before any read: an id a store cannot even look up (U+0000) must fail as bad input, on every store.
    request.events.forEach((draft, i) => {
      if (draft?.eventId !== undefined) checkId<string>(`events[${i}].eventId`, draft.eventId);
    });
    await this.releaseUnwritten();
    if (request.expectLatestAttempt && request.expectNewOperation) {
      throw new InvalidInputError('expectNewOperation', 'cannot be combined with expectLatestAttempt');
    }
    const condition = request.expectLatestAttempt ?? request.expectNewOperation;
    const attentionCalls = attentionCallIds(request.events);
    // A retry plan's source row, to check the source did not move on since the plan's history was read.
    const source = request.expectLatestAttempt?.source ? request.expectLatestAttempt.callId : undefined;
    if (source !== undefined && !attentionCalls.includes(source)) attentionCalls.push(source);
    const repeated = request.expectLatestAttempt?.repeated ?? [];
    for (const [i, row] of repeated.entries()) {
      checkId<string>(`expectLatestAttempt.repeated[${i}].callId`, row?.callId);
      if (!attentionCalls.includes(row.callId)) attentionCalls.push(row.callId);
    }
    // The latest attempt's own row says whether the backend keeps the index the related rows are checked in.
    const latestCall = request.expectLatestAttempt?.callId;
    if (repeated.length > 0 && latestCall !== undefined && !attentionCalls.includes(latestCall)) attentionCalls.push(latestCall);
    const approvalOp = approvalOperation(request);
    if (approvalOp && !this.backend.inbox) throw new DecisionError('inbox_unsupported', null, `the ${this.backend.kind} store has no decision inbox`);
    const seenSeq = request.expectLatestAttempt?.source?.seenSeq;
    if (seenSeq !== undefined && (!Number.isSafeInteger(seenSeq) || seenSeq < -1)) {
      throw new InvalidInputError('expectLatestAttempt.source.seenSeq', `must be an integer of at least -1, got ${String(seenSeq)}`);
    }
    const waitingFor = this.backend.inbox && request.expectNoWaitingReview?.length ? checkCallIds(request.expectNoWaitingReview) : undefined;
    const reads = {
      ...(request.budget ? { taskId: request.budget.taskId } : {}),
      ...(condition ? { operation: { taskId: condition.taskId, key: condition.key } } : {}),
      ...(approvalOp ? { approvals: approvalOp } : {}),
      ...(waitingFor !== undefined ? { reviews: waitingFor } : {}),
      ...(seenSeq !== undefined ? { writtenSince: { seq: seenSeq, epoch: this.epoch } } : {}),
      eventIds: draftEventIds(request.events),
      ...(attentionCalls.length > 0 ? { attentionCalls } : {}),
    };
    // A commit of a call's evidence uses room kept for it; any other leaves the room the owner's calls keep. Either
    // notes, as soon as it is decided, the room its own call and outcomes keep from then on.
    const noted: NotedRoom = { admitted: null, previous: null };
    const decided = (admitted: readonly [string, number] | null, outcomes: ReadonlyMap<string, string | null>) => this.noteDecided(noted, admitted, outcomes);
    const evidence = carriesEarlierCallsEvidence(request.events);
    // Read once for the owner's life; after that no wait is added to a commit.
    const openOutcomes = evidence ? NO_ROOM_KEPT.openOutcomes : this.openOutcomes ?? (await this.readOpenOutcomes());
    const room: RoomKept = { awaiting: evidence ? NO_ROOM_KEPT.awaiting : this.awaitingResults, openOutcomes, decided };
    let outcome: CommitOutcome;
    try {
      outcome = await this.renewingTx(reads, decideCommit(this.ref, request, readClock(this.clock), room));
    } catch (error) {
      // Nothing was written, unless the store cannot tell (a connection lost under the commit): then the room stays kept.
      if (!(error instanceof StoreUnavailableError)) this.revertNoted(noted);
      this.noteUnwritten(request, error);
      throw error;
    }
    this.noteAwaiting(request, outcome);
    this.noteOpenOutcomes(outcome.openOutcomes);
    return { events: outcome.events, reservedOutputBytes: outcome.reservedOutputBytes };
  }

  /** The room this owner's calls keep, for a write that is not their evidence. */
  private async roomToKeep(): Promise<RoomKept> {
    return { awaiting: this.awaitingResults, openOutcomes: this.openOutcomes ?? (await this.readOpenOutcomes()) };
  }

  /**
   * Keeps, from the moment a commit is decided, the room of the call it admits and of the outcomes it leaves open: a
   * write decided after it in the same transaction (a group commit), or before its caller resumes, leaves that room.
   * A decision made again (the transaction tried again) first takes back what the one before it noted.
   */
  private noteDecided(noted: NotedRoom, admitted: readonly [string, number] | null, outcomes: ReadonlyMap<string, string | null>): void {
    this.revertNoted(noted);
    if (admitted !== null && !this.awaitingResults.has(admitted[0])) {
      this.awaitingResults.set(admitted[0], admitted[1]);
      noted.admitted = admitted[0];
    }
    const open = this.openOutcomes;
    if (open === null) return;
    for (const [operation, callId] of outcomes) {
      if (callId === null || open.get(operation) === callId) continue;
      noted.previous ??= new Map();
      if (!noted.previous.has(operation)) noted.previous.set(operation, open.get(operation));
      open.set(operation, callId);
    }
  }

  /** Takes back what noteDecided kept for a commit that wrote nothing. */
  private revertNoted(noted: NotedRoom): void {
    if (noted.admitted !== null) this.awaitingResults.delete(noted.admitted);
    noted.admitted = null;
    const open = this.openOutcomes;
    if (noted.previous === null || open === null) return;
    for (const [operation, callId] of noted.previous) {
      if (callId === undefined) open.delete(operation);
      else open.set(operation, callId);
    }
    noted.previous = null;
  }

  /** The session's operations whose outcome is open or whose write is due, from the attention index (none without one). */
  private readOpenOutcomes(): Promise<Map<string, string>> {
    this.readingOutcomes ??= (async () => {
      const changes: Array<ReadonlyMap<string, string | null>> = [];
      this.outcomesWhileReading = changes;
      try {
        const rows = this.backend.scanAttention ? await allAttentionRows(this.backend, this.sessionId, ['no_result', 'outcome_unknown', 'reviewed_not_executed']) : [];
        const open = new Map<string, string>();
        for (const row of rows) if (keepsReviewRoom(row)) open.set(operationRoomKey(row.taskId, row.key), row.callId);
        for (const change of changes) applyOutcomes(open, change);
        this.openOutcomes ??= open;
        return this.openOutcomes;
      } finally {
        this.outcomesWhileReading = null;
        this.readingOutcomes = null;
      }
    })();
    return this.readingOutcomes;
  }

  /** Keeps track of the operations whose outcome is open, as a commit of this owner left them. */
  private noteOpenOutcomes(changes: ReadonlyMap<string, string | null>): void {
    if (changes.size === 0) return;
    if (this.openOutcomes !== null) applyOutcomes(this.openOutcomes, changes);
    else this.outcomesWhileReading?.push(changes);
  }

  /**
   * Keeps track of the calls awaiting their results: given theirs by this commit, or admitted by it, its reservation
   * set again as the commit that landed decided it (noteDecided kept the last decision's, which a lost connection's
   * retry may have made beside the one that landed).
   */
  private noteAwaiting(request: CommitRequest, receipt: CommitReceipt): void {
    const results = new Set<string>();
    for (const event of request.events) if (event.kind.type === 'tool_result') results.add(event.kind.result.callId);
    for (const callId of results) this.awaitingResults.delete(callId);
    if (!request.budget?.admit) return;
    const admitted = request.events.find((e) => e.kind.type === 'tool_call')?.kind;
    if (admitted?.type === 'tool_call' && !results.has(admitted.call.id)) this.awaitingResults.set(admitted.call.id, receipt.reservedOutputBytes);
  }

  async findInDoubt(binding: InDoubtQuery): Promise<AttentionItem | null> {
    this.guard.check();
    if (typeof binding !== 'object' || binding === null) throw new InvalidInputError('binding', `must be an object with taskId, tool and argsDigest, got ${describeValue(binding)}`);
    const { running, exceptKey, ownWrite, related, retrying, ...match } = binding;
    for (const field of ['taskId', 'tool', 'argsDigest'] as const) checkId<string>(`binding.${field}`, match[field]);
    if (exceptKey !== undefined) checkId<string>('binding.exceptKey', exceptKey);
    for (const [field, set] of [['running', running], ['related', related], ['retrying', retrying]] as const) {
      if (set !== undefined && typeof (set as Partial<ReadonlySet<string>> | null)?.has !== 'function') {
        throw new InvalidInputError(`binding.${field}`, `must be a set of call ids, got ${describeValue(set)}`);
      }
    }
    if (!this.backend.findAttention) return null;
    const rows = await this.backend.findAttention(this.sessionId, match);
    // The asking operation's own row (one per operation key): a retry of a write of its own in doubt or due passes the
    // identical writes beside it (ownWrite); and a retry of a write a review left due is one of two identical writes
    // meant (a model's parallel calls, both reviewed), and another such write is not a repeat of it.
    const own = exceptKey === undefined ? undefined : rows.find((r) => r.key === exceptKey);
    const ofItsOwn = ownWrite === true && own !== undefined && blocksRepeat(own);
    const blocking = rows.filter((r) => r.key !== exceptKey && (!ofItsOwn || related?.has(r.callId) === true) && refusesIdentical(r, own, running, retrying));
    // An operation in doubt before one whose reviewed retry is due: the caller may act on the doubt alone.
    const row = blocking.find((r) => r.status !== 'reviewed_not_executed') ?? blocking[0];
    return row ? attentionItem(row) : null;
  }

  async decidedApproval(taskId: string, key: string): Promise<DecisionRow | undefined> {
    this.guard.check();
    const inbox = this.backend.inbox;
    if (!inbox) return undefined;
    const rows = await inbox.listDecisions({ sessionId: this.sessionId, kind: 'approval', taskId, key, states: ['decided'], limit: 1 });
    return rows[0];
  }

  async waitingReview(callIds: readonly string[]): Promise<DecisionRow | undefined> {
    this.guard.check();
    const inbox = this.backend.inbox;
    if (!inbox) return undefined;
    const calls = new Set(callIds);
    let after: string | undefined;
    for (;;) {
      const rows = await inbox.listDecisions({ sessionId: this.sessionId, kind: 'review', states: ['decided'], ...(after !== undefined ? { after } : {}), limit: 1000 });
      const found = rows.find((r) => calls.has(r.callId));
      if (found !== undefined || rows.length < 1000) return found;
      after = rows[rows.length - 1]!.id;
    }
  }

  async readOperation(taskId: string, key: string): Promise<RecordedAttempt | undefined> {
    this.guard.check();
    const task = checkId<TaskId>('taskId', taskId);
    const opKey = checkId<OperationKey>('key', key);
    // A key whose latest attempt in the kept read succeeded is settled for good: no attempt can follow a completed
    // one (a retry plan refuses it, a caller key replays it), so no operation row can name another.
    const settled = this.verified?.attempt(task, opKey, undefined);
    if (settled !== undefined && succeeded(settled)) return settled;
    let callId: string | undefined;
    if (this.backend.readOperation) {
      // Operations are keyed by (task, key) and a task lives in one session: the row must be this session's. A key
      // with no row is new: decided without reading the journal.
      const row = await this.backend.readOperation(this.sessionId, task, opKey);
      if (!row || row.sessionId !== this.sessionId) return undefined;
      callId = row.callId;
      // The row names the latest attempt. The verified journal this owner read since its last own write answers for
      // it when it holds that attempt with its result: a finished attempt never changes. An open one is read again.
      const known = this.verified?.attempt(task, opKey, callId);
      if (known?.resultEvent) return known;
    }
    return (await this.readVerified()).attempt(task, opKey, callId);
  }

  /**
   * One fresh snapshot of the journal, verified and indexed. Kept for `readOperation` only with operation rows to
   * name the latest attempt, and only when no write of this owner overlapped the read.
   */
  private async readVerified(): Promise<AttemptIndex> {
    this.guard.check();
    const begun = this.txBegun;
    const clean = begun === this.txEnded;
    const { session, events } = await this.backend.snapshot(this.sessionId);
    const { events: history, read } = verifyJournalAgainst(this.sessionId, session, events, this.lastRead);
    this.lastRead = read;
    const index = new AttemptIndex(history);
    if (this.backend.readOperation && clean && this.txBegun === begun && this.txEnded === begun) this.verified = index;
    return index;
  }

  onTaskStopped(listener: (taskId: TaskId, reason: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Stops this owner's calls in flight (their abort signal, started or not) and waits until each has recorded its
   * outcome, then releases the session (docs/design.md#letting-a-session-go-stops-its-calls).
   */
  async release(): Promise<void> {
    this.guard.check();
    await this.stopCalls('its owner is releasing the session');
    // A stopped body that ignores its signal can still make its write: the session stays held, its lease renewed,
    // until it ends and its end is journaled. Released before, another host's retry (or an operator's not_executed)
    // could come first and the write be made twice.
    const waited = await bodiesEnded(this, 'release()');
    this.stopHeartbeat();
    if (waited === 'lost') {
      // Taken over (or found fenced) while a body of the session still runs here: nothing is released, and the host
      // hears that the session was lost under a body that may still make its write.
      this.letGo('its session was taken over');
      throw new StaleOwnerError(this.sessionId, this.epoch, 'the session was taken over while a body of it still runs in this process, and that body may still make its write; its end is journaled through the owner here that holds the session, if one does, once it ends');
    }
    this.guard.check();
    // Body ends this process knows of and no journal has taken yet go in while this owner still holds the session:
    // once it is let go, nothing here can write them (docs/design.md#one-view-of-running-calls-per-database).
    await journalPendingBodyEnds(this);
    await this.releaseUnwritten();
    await this.tx({}, decideRelease(this.ref), this.anchor?.unanchored === true);
    this.letGo('its owner released the session');
  }

  /** This owner no longer holds its session here (`why`): it takes no new call, and is nobody's newest owner. */
  private letGo(why: string): void {
    this.lettingGo = why;
    forgetOwner(this);
    this.listeners.clear();
  }
}
