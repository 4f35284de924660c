/**
 * The owner and task rows this connection last wrote (or read) in a write transaction, so that the next write
 * transaction of the session need not read them again (docs/design.md#rows-a-sqlite-write-already-knows).
 *
 * Knowing is exact, not speculative: every write of these rows goes through this connection's write transactions,
 * which record what they committed; `PRAGMA data_version` changes when any other connection (another store, another
 * process, a sqlite3 shell) commits to the file, and it is read under the write lock before anything is trusted, so
 * a row another writer changed is always read again. Any failed write transaction forgets everything.
 */
import { setNewest } from '../../bounded-map.js';
import type { SessionId } from '../../ids.js';
import type { SessionRow, TaskRow } from '../rows.js';
import type { Statement } from './driver.js';

/** Sessions remembered, and tasks per session: the least recently written is forgotten first. */
const MAX_SESSIONS = 1024;
const MAX_TASKS = 64;

interface KnownSession {
  session: SessionRow;
  readonly tasks: Map<string, TaskRow>;
}

export class KnownRows {
  private version: number | null = null;
  private readonly sessions = new Map<string, KnownSession>();

  constructor(private readonly dataVersion: Statement<[], number>) {}

  /** Inside a write transaction, once its lock is held: forgets every row if another connection committed since. */
  begin(): void {
    const version = this.dataVersion.get();
    if (version !== this.version) {
      this.sessions.clear();
      this.version = version ?? null;
    }
  }

  session(sessionId: SessionId): SessionRow | undefined {
    return this.sessions.get(sessionId)?.session;
  }

  task(sessionId: SessionId, taskId: string): TaskRow | undefined {
    return this.sessions.get(sessionId)?.tasks.get(taskId);
  }

  /** After the transaction's writes: the session's owner row and task rows as they now stand in it. */
  note(sessionId: SessionId, session: SessionRow | undefined, tasks: readonly (TaskRow | undefined)[]): void {
    if (!session) return;
    const known = this.sessions.get(sessionId) ?? { session, tasks: new Map<string, TaskRow>() };
    known.session = session;
    for (const task of tasks) if (task) setNewest(known.tasks, task.taskId, task, MAX_TASKS);
    setNewest(this.sessions, sessionId, known, MAX_SESSIONS);
  }

  forgetAll(): void {
    this.sessions.clear();
  }
}
