import type { SessionId, TaskId } from '../ids.js';
import type { TaskState } from './types.js';

/** The owner row of a session: the fencing epoch and the head of the hash chain (docs/design.md#fencing). */
export interface SessionRow {
  readonly sessionId: SessionId;
  readonly owner: string | null;
  readonly held: boolean;
  readonly epoch: number;
  /** seq of the last event, -1 while the journal is empty. */
  readonly lastSeq: number;
  readonly headHash: string;
  /** Sum of the UTF-8 sizes of all event bodies, to keep the history within what recovery can inspect. */
  readonly bodyBytes: number;
}

/** One stored event: its wire JSON text exactly as hashed, and the epoch of the owner that wrote it. */
export interface EventRow {
  readonly sessionId: SessionId;
  readonly seq: number;
  readonly eventId: string;
  readonly epoch: number;
  readonly body: string;
  readonly hash: string;
}

/** Output bytes reserved by one admitted attempt until its result settles them. */
export interface Reservation {
  readonly callId: string;
  readonly bytes: number;
  /** The start marker is durable: the body may have produced output. */
  readonly started: boolean;
  /** The epoch of the owner that admitted it; once that owner is fenced, nobody else will ever settle it. */
  readonly epoch: number;
}

export interface TaskRow {
  readonly taskId: TaskId;
  readonly sessionId: SessionId;
  readonly state: TaskState;
  readonly limitToolCalls: number;
  readonly limitOutputBytes: number;
  readonly chargedToolCalls: number;
  readonly chargedOutputBytes: number;
  /** The sum of `reservations`' bytes. */
  readonly reservedOutputBytes: number;
  readonly reservations: readonly Reservation[];
  readonly stopReason: string | null;
}

/** The latest attempt of one logical operation, kept for the D4 check at the point of use. */
export interface OperationRow {
  readonly taskId: TaskId;
  readonly key: string;
  readonly sessionId: SessionId;
  readonly callId: string;
  readonly eventId: string;
}

/** What a decision reads, inside the transaction, before deciding. */
export interface TxReads {
  readonly taskId?: string;
  readonly operation?: { readonly taskId: string; readonly key: string };
}

export interface TxState {
  readonly session: SessionRow | undefined;
  readonly task: TaskRow | undefined;
  readonly operation: OperationRow | undefined;
}

/**
 * What a decision writes. `session.expect` is the conditional part: the backend updates the owner row only where
 * epoch and lastSeq still equal it (null: insert a new session row).
 */
export interface TxWrites<R = undefined> {
  readonly session?: { readonly row: SessionRow; readonly expect: { readonly epoch: number; readonly lastSeq: number } | null };
  readonly events?: readonly EventRow[];
  readonly task?: { readonly row: TaskRow; readonly insert: boolean };
  readonly operations?: readonly OperationRow[];
  /** Handed back to the caller after the transaction commits. */
  readonly result: R;
}

/**
 * A storage engine. `transact` runs read → decide → write as one atomic transaction; `decide` is synchronous and
 * pure, so the same decisions (store/decisions.ts) serve every engine. A failed conditional update must throw
 * StaleOwnerError and roll everything back.
 */
export interface JournalBackend {
  readonly kind: 'memory' | 'sqlite' | 'postgres';
  transact<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>): Promise<R>;
  /** The owner row and every event row of a session, ordered by seq, read in one consistent snapshot. */
  snapshot(sessionId: SessionId): Promise<{ session: SessionRow | undefined; events: EventRow[] }>;
  readTask(taskId: string): Promise<TaskRow | undefined>;
  listSessions(): Promise<Array<{ session: SessionRow; events: number }>>;
  close(): Promise<void>;
}
