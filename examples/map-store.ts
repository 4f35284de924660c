/**
 * A store of your own, written only against the public `jingwei/backend` seam: rows in plain Maps. A real backend
 * would put them in its database; the rules (fencing, the hash chain, budgets) stay in `createJournalStore`.
 * test/store/example-backend.test.ts proves it with `runStoreConformance` from `jingwei/testing`.
 */
import {
  createJournalStore,
  StaleOwnerError,
  StoreClosedError,
  type EventRow,
  type JournalBackend,
  type OperationRow,
  type SessionId,
  type SessionRow,
  type SessionStore,
  type TaskRow,
  type TxReads,
  type TxState,
  type TxWrites,
} from 'jingwei/backend';

class MapBackend implements JournalBackend {
  readonly kind = 'map';
  private readonly sessions = new Map<string, SessionRow>();
  private readonly events = new Map<string, EventRow[]>();
  private readonly tasks = new Map<string, TaskRow>();
  private readonly operations = new Map<string, OperationRow>();
  private closed = false;

  private ensureOpen(): void {
    if (this.closed) throw new StoreClosedError(this.kind);
  }

  async transact<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>): Promise<R> {
    this.ensureOpen();
    // Nothing awaits between the reads and the writes, so no other transaction of this process can interleave.
    const writes = decide({
      session: this.sessions.get(sessionId),
      task: reads.taskId === undefined ? undefined : this.tasks.get(reads.taskId),
      operation: reads.operation && this.operations.get(`${reads.operation.taskId}\u0000${reads.operation.key}`),
      existingEventIds: (this.events.get(sessionId) ?? []).filter((e) => reads.eventIds?.includes(e.eventId)).map((e) => e.eventId),
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
    if (writes.task) this.tasks.set(writes.task.row.taskId, writes.task.row);
    for (const op of writes.operations ?? []) this.operations.set(`${op.taskId}\u0000${op.key}`, op);
    return writes.result;
  }

  async snapshot(sessionId: SessionId) {
    this.ensureOpen();
    return { session: this.sessions.get(sessionId), events: [...(this.events.get(sessionId) ?? [])] };
  }

  async readTask(taskId: string) {
    this.ensureOpen();
    return this.tasks.get(taskId);
  }

  async readOperation(sessionId: SessionId, taskId: string, key: string) {
    this.ensureOpen();
    const op = this.operations.get(`${taskId}\u0000${key}`);
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
