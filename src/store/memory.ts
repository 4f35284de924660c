import { StaleOwnerError, StoreClosedError } from '../errors.js';
import type { SessionId } from '../ids.js';
import { JournalStore } from './journal-store.js';
import type { EventRow, JournalBackend, OperationRow, SessionRow, TaskRow, TxReads, TxState, TxWrites } from './rows.js';
import type { SessionStore } from './types.js';

const opKey = (taskId: string, key: string) => `${taskId}\u0000${key}`;

function existingIds(rows: readonly EventRow[] | undefined, asked: readonly string[] | undefined): string[] {
  if (!rows || !asked?.length) return [];
  const wanted = new Set(asked);
  return rows.filter((r) => wanted.has(r.eventId)).map((r) => r.eventId);
}

/** Everything in this process's memory: for tests and examples. Same rules as the durable stores. */
class MemoryBackend implements JournalBackend {
  readonly kind = 'memory';
  private readonly sessions = new Map<string, SessionRow>();
  private readonly events = new Map<string, EventRow[]>();
  private readonly tasks = new Map<string, TaskRow>();
  private readonly operations = new Map<string, OperationRow>();
  private closed = false;

  private open(): void {
    if (this.closed) throw new StoreClosedError(this.kind);
  }

  async transact<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>): Promise<R> {
    this.open();
    // Synchronous from read to write: nothing else in this process can interleave, which makes it atomic.
    const state: TxState = {
      session: this.sessions.get(sessionId),
      task: reads.taskId !== undefined ? this.tasks.get(reads.taskId) : undefined,
      operation: reads.operation ? this.operations.get(opKey(reads.operation.taskId, reads.operation.key)) : undefined,
      existingEventIds: existingIds(this.events.get(sessionId), reads.eventIds),
    };
    const writes = decide(state);
    if (writes.session) {
      const { row, expect } = writes.session;
      const current = this.sessions.get(sessionId);
      const matches = expect === null ? current === undefined : current?.epoch === expect.epoch && current.lastSeq === expect.lastSeq;
      if (!matches) throw new StaleOwnerError(sessionId, expect?.epoch ?? 0, 'the owner row changed');
      this.sessions.set(sessionId, row);
    }
    if (writes.events?.length) {
      const list = this.events.get(sessionId) ?? [];
      list.push(...writes.events);
      this.events.set(sessionId, list);
    }
    if (writes.task) this.tasks.set(writes.task.row.taskId, writes.task.row);
    for (const op of writes.operations ?? []) this.operations.set(opKey(op.taskId, op.key), op);
    return writes.result;
  }

  async snapshot(sessionId: SessionId) {
    this.open();
    return { session: this.sessions.get(sessionId), events: [...(this.events.get(sessionId) ?? [])] };
  }

  async readTask(taskId: string) {
    this.open();
    return this.tasks.get(taskId);
  }

  async listSessions() {
    this.open();
    return [...this.sessions.values()].map((session) => ({ session, events: this.events.get(session.sessionId)?.length ?? 0 }));
  }

  async readOperation(sessionId: SessionId, taskId: string, key: string) {
    this.open();
    const op = this.operations.get(opKey(taskId, key));
    return op?.sessionId === sessionId ? op : undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

export function createMemoryStore(): SessionStore {
  return new JournalStore(new MemoryBackend());
}
