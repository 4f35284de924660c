import { StaleOwnerError, StoreClosedError } from '../errors.js';
import type { SessionId } from '../ids.js';
import { compareAttention, matchesScan } from './attention.js';
import { JournalStore, type JournalStoreOptions } from './journal-store.js';
import type { AttentionRow, AttentionScan, EventRow, JournalBackend, OperationBinding, OperationRow, SessionRow, TaskRow, TxReads, TxState, TxWrites } from './rows.js';
import type { SessionStore } from './types.js';
import { operationApprovals, queryRows, waitingReviews, type DecisionRow, type InboxBackend } from './inbox-rows.js';

// Ids never contain U+0000 (checkId refuses it), so it separates the parts of a key unambiguously.
const taskKey = (sessionId: string, taskId: string) => `${sessionId}\u0000${taskId}`;
const opKey = (sessionId: string, taskId: string, key: string) => `${sessionId}\u0000${taskId}\u0000${key}`;

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
  /** The attention index: session id → (taskId, key) → row. */
  private readonly attention = new Map<string, Map<string, AttentionRow>>();
  private readonly decisions = new Map<string, DecisionRow>();
  private closed = false;
  readonly inbox: InboxBackend = {
    transactDecision: async (id, decide, options) => {
      this.open();
      const row = this.decisions.get(id);
      const binding = options?.taskApprovals === true && row?.kind === 'approval' ? row.binding : null;
      const related = binding === null ? undefined
        : [...this.decisions.values()].filter((r) => r.kind === 'approval' && r.sessionId === row!.sessionId && r.binding?.taskId === binding.taskId);
      const { write, result } = decide(row, related);
      if (write) this.decisions.set(write.id, write);
      return result;
    },
    transactReview: async (sessionId, callId, decide) => {
      this.open();
      const row = [...(this.attention.get(sessionId)?.values() ?? [])].find((r) => r.callId === callId);
      const { writes, result } = decide(waitingReviews(this.decisions.values(), sessionId, [callId]), row ? { started: row.started, status: row.status } : null);
      for (const row of writes) this.decisions.set(row.id, row);
      return result;
    },
    listDecisions: async (query) => {
      this.open();
      return queryRows(this.decisions.values(), query);
    },
  };

  private open(): void {
    if (this.closed) throw new StoreClosedError(this.kind);
  }

  async transact<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>): Promise<R> {
    this.open();
    // Synchronous from read to write: nothing else in this process can interleave, which makes it atomic.
    const state: TxState = {
      session: this.sessions.get(sessionId),
      task: reads.taskId !== undefined ? this.tasks.get(taskKey(sessionId, reads.taskId)) : undefined,
      operation: reads.operation ? this.operations.get(opKey(sessionId, reads.operation.taskId, reads.operation.key)) : undefined,
      existingEventIds: existingIds(this.events.get(sessionId), reads.eventIds),
      attention: reads.attentionCalls?.length
        ? [...(this.attention.get(sessionId)?.values() ?? [])].filter((r) => reads.attentionCalls!.includes(r.callId))
        : [],
      ...(reads.approvals
        ? { approvals: operationApprovals(this.decisions.values(), sessionId, reads.approvals) }
        : {}),
      ...(reads.reviews
        ? { reviews: waitingReviews(this.decisions.values(), sessionId, reads.reviews) }
        : {}),
      ...(reads.writtenSince
        ? { writtenSince: (this.events.get(sessionId) ?? []).find((e) => e.seq > reads.writtenSince!.seq && e.epoch < reads.writtenSince!.epoch)?.seq ?? null }
        : {}),
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
    if (writes.task) this.tasks.set(taskKey(writes.task.row.sessionId, writes.task.row.taskId), writes.task.row);
    for (const op of writes.operations ?? []) this.operations.set(opKey(op.sessionId, op.taskId, op.key), op);
    for (const row of writes.attention ?? []) {
      const rows = this.attention.get(row.sessionId) ?? new Map<string, AttentionRow>();
      rows.set(opKey(row.sessionId, row.taskId, row.key), row);
      this.attention.set(row.sessionId, rows);
    }
    for (const d of writes.decisions ?? []) this.decisions.set(d.id, d);
    return writes.result;
  }

  async scanAttention(scan: AttentionScan): Promise<AttentionRow[]> {
    this.open();
    const sessions = scan.sessionId !== undefined ? [this.attention.get(scan.sessionId)] : [...this.attention.values()];
    const rows: AttentionRow[] = [];
    for (const map of sessions) for (const row of map?.values() ?? []) if (matchesScan(row, scan)) rows.push(row);
    return rows.sort(compareAttention).slice(0, scan.limit);
  }

  async findAttention(sessionId: SessionId, binding: OperationBinding): Promise<AttentionRow[]> {
    this.open();
    return [...(this.attention.get(sessionId)?.values() ?? [])].filter((r) =>
      r.taskId === binding.taskId && r.tool === binding.tool && r.argsDigest === binding.argsDigest);
  }

  async snapshot(sessionId: SessionId) {
    this.open();
    return { session: this.sessions.get(sessionId), events: [...(this.events.get(sessionId) ?? [])] };
  }

  async readTask(sessionId: SessionId, taskId: string) {
    this.open();
    return this.tasks.get(taskKey(sessionId, taskId));
  }

  async listSessions() {
    this.open();
    return [...this.sessions.values()].map((session) => ({ session, events: this.events.get(session.sessionId)?.length ?? 0 }));
  }

  async readOperation(sessionId: SessionId, taskId: string, key: string) {
    this.open();
    const op = this.operations.get(opKey(sessionId, taskId, key));
    return op?.sessionId === sessionId ? op : undefined;
  }

  async scanOperations(sessionId: SessionId) {
    this.open();
    return [...this.operations.values()].filter((op) => op.sessionId === sessionId);
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}

/** `options.clock`: the clock event times are recorded with (default `Date.now`). */
export function createMemoryStore(options?: JournalStoreOptions): SessionStore {
  return new JournalStore(new MemoryBackend(), options);
}
