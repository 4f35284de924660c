/**
 * The attempts of a verified history, indexed by operation (task, key) and call id in one pass, so that an owner
 * answering `readOperation` for every replayed call of a resumed run reads the journal once, not once per call
 * (docs/design.md#a-resume-reads-the-journal-once).
 */
import type { CallId, OperationKey, TaskId } from '../ids.js';
import type { SessionEvent, ToolReviewRecord } from '../event/types.js';
import type { RecordedAttempt } from './types.js';

export class AttemptIndex {
  /** Per task, per operation key: its call events in journal order (the last is the latest attempt). */
  private readonly calls = new Map<string, Map<string, SessionEvent[]>>();
  /** Per call id: its last start marker. */
  private readonly started = new Map<string, SessionEvent>();
  /** Per call id: its first result. */
  private readonly results = new Map<string, SessionEvent>();
  /** Per call id: its latest review. */
  private readonly reviews = new Map<string, ToolReviewRecord>();

  constructor(readonly history: SessionEvent[]) {
    for (const e of history) {
      const kind = e.kind;
      if (kind.type === 'tool_call') {
        const op = kind.call.operation;
        if (op === undefined || op === null) continue;
        let keys = this.calls.get(op.taskId);
        if (keys === undefined) {
          keys = new Map();
          this.calls.set(op.taskId, keys);
        }
        const list = keys.get(op.key);
        if (list) list.push(e);
        else keys.set(op.key, [e]);
      } else if (kind.type === 'tool_started') {
        this.started.set(kind.callId, e);
      } else if (kind.type === 'tool_result' && !this.results.has(kind.result.callId)) {
        this.results.set(kind.result.callId, e);
      } else if (kind.type === 'tool_review') {
        this.reviews.set(kind.review.callId, kind.review);
      }
    }
  }

  /**
   * The attempt `callId` of operation (taskId, key), or (without a call id, for backends that keep no operation
   * rows) its latest attempt; undefined when the history holds no such attempt.
   */
  attempt(taskId: TaskId, key: OperationKey, callId: string | undefined): RecordedAttempt | undefined {
    const list = this.calls.get(taskId)?.get(key);
    if (list === undefined) return undefined;
    let callEvent: SessionEvent | undefined;
    if (callId === undefined) callEvent = list[list.length - 1];
    else for (let i = list.length - 1; i >= 0 && callEvent === undefined; i--) {
      const kind = list[i]!.kind;
      if (kind.type === 'tool_call' && kind.call.id === callId) callEvent = list[i];
    }
    if (callEvent?.kind.type !== 'tool_call') return undefined;
    const id = callEvent.kind.call.id;
    const review = this.reviews.get(id);
    return {
      taskId,
      key,
      callId: id as CallId,
      callEvent,
      startedEvent: this.started.get(id) ?? null,
      resultEvent: this.results.get(id) ?? null,
      ...(review !== undefined ? { review } : {}),
    };
  }
}
