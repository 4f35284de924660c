/**
 * A store of your own, written only against the public `jingwei/backend` seam: rows in plain Maps. A real backend
 * would put them in its database; the rules (fencing, the hash chain, budgets) stay in `createJournalStore`.
 * test/store/example-backend.test.ts proves it with `runStoreConformance` from `jingwei/testing`.
 */
import {
  compareAttention,
  createJournalStore,
  matchesScan,
  queryRows,
  StaleOwnerError,
  StoreClosedError,
  type AttentionRow,
  type AttentionScan,
  type DecisionRow,
  type EventRow,
  type InboxBackend,
  type JournalBackend,
  type OperationBinding,
  type OperationRow,
  type SessionId,
  type SessionRow,
  type SessionStore,
  type TaskRow,
  type TxReads,
  type TxState,
  type TxWrites,
} from 'jingwei/backend';

// Tasks are keyed by (session, task id) and operations by (session, task id, key): identity is per session.
// Ids never contain U+0000, so it separates the parts of a key unambiguously.
const key = (...parts: string[]) => parts.join('\u0000');

class MapBackend implements JournalBackend {
  readonly kind = 'map';
  private readonly sessions = new Map<string, SessionRow>();
  private readonly events = new Map<string, EventRow[]>();
  private readonly tasks = new Map<string, TaskRow>();
  private readonly operations = new Map<string, OperationRow>();
  /** The attention index, keyed by session, task and operation key. */
  private readonly attention = new Map<string, AttentionRow>();
  private readonly decisions = new Map<string, DecisionRow>();
  private closed = false;

  /** The decision inbox: approval requests and review decisions, keyed by id. */
  readonly inbox: InboxBackend = {
    transactDecision: async (id, decide) => {
      this.ensureOpen();
      const { write, result } = decide(this.decisions.get(id));
      if (write) this.decisions.set(write.id, write);
      return result;
    },
    transactReview: async (sessionId, callId, decide) => {
      this.ensureOpen();
      // The call's attention row as it stands: a review of a call not yet started is refused once it has started.
      const progress = [...this.attention.values()].find((r) => r.sessionId === sessionId && r.callId === callId);
      const { writes, result } = decide(
        queryRows(this.decisions.values(), { sessionId, kind: 'review', states: ['decided'], limit: Infinity }).filter((r) => r.callId === callId),
        progress ? { started: progress.started, status: progress.status } : null,
      );
      for (const row of writes) this.decisions.set(row.id, row);
      return result;
    },
    listDecisions: async (query) => {
      this.ensureOpen();
      return queryRows(this.decisions.values(), query);
    },
  };

  private ensureOpen(): void {
    if (this.closed) throw new StoreClosedError(this.kind);
  }

  async transact<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>): Promise<R> {
    this.ensureOpen();
    // Nothing awaits between the reads and the writes, so no other transaction of this process can interleave.
    const writes = decide({
      session: this.sessions.get(sessionId),
      task: reads.taskId === undefined ? undefined : this.tasks.get(key(sessionId, reads.taskId)),
      operation: reads.operation && this.operations.get(key(sessionId, reads.operation.taskId, reads.operation.key)),
      existingEventIds: (this.events.get(sessionId) ?? []).filter((e) => reads.eventIds?.includes(e.eventId)).map((e) => e.eventId),
      attention: [...this.attention.values()].filter((r) => r.sessionId === sessionId && reads.attentionCalls?.includes(r.callId)),
      ...(reads.approvals
        ? {
          approvals: queryRows(this.decisions.values(), { sessionId, kind: 'approval', taskId: reads.approvals.taskId, key: reads.approvals.key, limit: Infinity })
            .filter((r) => r.state === 'open' || r.state === 'decided' || r.id === reads.approvals!.spent),
        }
        : {}),
      ...(reads.reviews
        ? { reviews: queryRows(this.decisions.values(), { sessionId, kind: 'review', states: ['decided'], limit: Infinity }).filter((r) => reads.reviews!.includes(r.callId)) }
        : {}),
      ...(reads.writtenSince
        ? { writtenSince: (this.events.get(sessionId) ?? []).find((e) => e.seq > reads.writtenSince!.seq && e.epoch < reads.writtenSince!.epoch)?.seq ?? null }
        : {}),
      // The clock leases are measured on; a backend shared by several hosts would read its engine's clock here.
      now: Date.now(),
    });
    if (writes.session) {
      // The conditional update: check every condition before changing anything, so a refusal writes nothing.
      const { row, expect } = writes.session;
      const current = this.sessions.get(sessionId);
      const ok = expect === null ? current === undefined : current?.epoch === expect.epoch && current.lastSeq === expect.lastSeq;
      if (!ok) throw new StaleOwnerError(sessionId, expect?.epoch ?? 0, 'the owner row changed');
      this.sessions.set(sessionId, row);
    }
    if (writes.events?.length) this.events.set(sessionId, [...(this.events.get(sessionId) ?? []), ...writes.events]);
    if (writes.task) this.tasks.set(key(sessionId, writes.task.row.taskId), writes.task.row);
    for (const op of writes.operations ?? []) this.operations.set(key(sessionId, op.taskId, op.key), op);
    for (const row of writes.attention ?? []) this.attention.set(JSON.stringify([row.sessionId, row.taskId, row.key]), row);
    for (const d of writes.decisions ?? []) this.decisions.set(d.id, d);
    return writes.result;
  }

  async scanAttention(scan: AttentionScan): Promise<AttentionRow[]> {
    this.ensureOpen();
    return [...this.attention.values()].filter((r) => matchesScan(r, scan)).sort(compareAttention).slice(0, scan.limit);
  }

  async findAttention(sessionId: SessionId, b: OperationBinding): Promise<AttentionRow[]> {
    this.ensureOpen();
    return [...this.attention.values()].filter((r) =>
      r.sessionId === sessionId && r.taskId === b.taskId && r.tool === b.tool && r.argsDigest === b.argsDigest);
  }

  async snapshot(sessionId: SessionId) {
    this.ensureOpen();
    return { session: this.sessions.get(sessionId), events: [...(this.events.get(sessionId) ?? [])] };
  }

  async readTask(sessionId: SessionId, taskId: string) {
    this.ensureOpen();
    return this.tasks.get(key(sessionId, taskId));
  }

  async readOperation(sessionId: SessionId, taskId: string, operationKey: string) {
    this.ensureOpen();
    const op = this.operations.get(key(sessionId, taskId, operationKey));
    return op?.sessionId === sessionId ? op : undefined;
  }

  async listSessions() {
    this.ensureOpen();
    return [...this.sessions.values()]
      .sort((a, b) => (a.sessionId < b.sessionId ? -1 : a.sessionId > b.sessionId ? 1 : 0))
      .map((session) => ({ session, events: this.events.get(session.sessionId)?.length ?? 0 }));
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

/** A SessionStore on the map backend: same behaviour as the built-in stores, proven by the conformance suite. */
export function createMapStore(): SessionStore {
  return createJournalStore(new MapBackend());
}
