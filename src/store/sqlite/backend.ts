import { StaleOwnerError, StoreClosedError, StoreReplacedError } from '../../errors.js';
import type { SessionId } from '../../ids.js';
import { STORE_DEFAULTS } from '../../limits.js';
import { faultPoint } from '../../fault.js';
import { JournalStore } from '../journal-store.js';
import type { AttentionRow, AttentionScan, EventRow, JournalBackend, OperationBinding, SessionRow, TaskRow, TxReads, TxState, TxWrites } from '../rows.js';
import { attentionScanSql, attentionStateValues, attentionValues, onlyStateChanges, sessionValues, taskValues, toAttention, toOperation, toSession, toTask, type AttentionRecord } from '../sql-rows.js';
import type { SessionStore } from '../types.js';
import { Database, type Statement, type Transaction } from './driver.js';
import { mapSqliteError } from './errors.js';
import { checkSqlitePath } from './path-check.js';
import { checkBusyTimeout, type SqliteStoreOptions } from './options.js';
import { journalId, prepareDatabase } from './schema.js';
import { eventRowList, eventRows, prepareStatements, type SqliteStatements } from './statements.js';
import { SqliteInbox } from './inbox.js';
import { GROUP_MAX, type QueuedWrite, runGroup } from './group-commit.js';
import { KnownRows } from './known-rows.js';
import { guardFile } from './close-guard.js';
import { FileIdentity } from './file-identity.js';

type WriteTx = (sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<unknown>) => unknown;

class SqliteBackend implements JournalBackend {
  readonly kind = 'sqlite';
  readonly location: string;
  /**
   * The journal's own id (journalId), kept by the file whatever path reaches it (a symlink, a bind mount, another
   * spelling) and by a copy that replaced it (a compaction or a restore while a handle is open); a journal of an older
   * version opened read-only has none, and is a view of its own.
   */
  readonly scopeKey: string | undefined;
  private readonly stmt: SqliteStatements;
  private readonly writeTx: Transaction<WriteTx>;
  private readonly groupTx: Transaction<(group: QueuedWrite[]) => void>;
  /** Writes asked for since the last group commit, run together at the next turn of the event loop. */
  private queued: QueuedWrite[] = [];
  private flushScheduled = false;
  private readonly readTx: Transaction<(sessionId: SessionId) => { session: SessionRow | undefined; events: EventRow[] }>;
  private readonly scanTx: Transaction<(sessionId: SessionId, read: (session: SessionRow | undefined, events: Iterable<EventRow>) => unknown) => unknown>;

  private readonly identity: FileIdentity | null;
  /** The last checkLookupStorage answer, and the commit state it was found at. */
  private lookupStorage: { version: string; found: { table: 'attention' | 'operations'; problem: string } | null } | null = null;
  private readonly dataVersion: Statement<[], number>;
  private readonly totalChanges: Statement<[], number>;
  /** The owner and task rows this connection's writes last left, trusted while no other connection commits. */
  private readonly known: KnownRows;
  readonly inbox: SqliteInbox;

  constructor(private readonly db: Database, path: string) {
    this.location = path;
    this.identity = path === ':memory:' || path === '' ? null : new FileIdentity(path);
    if (this.identity !== null) watchExit();
    const id = this.identity === null ? undefined : journalId(db, path);
    this.scopeKey = id === undefined ? undefined : `journal:${id}`;
    this.stmt = prepareStatements(db);
    this.dataVersion = db.prepare<[], number>('PRAGMA data_version').pluck();
    this.totalChanges = db.prepare<[], number>('SELECT total_changes()').pluck();
    this.known = new KnownRows(this.dataVersion);
    this.inbox = new SqliteInbox(
      db,
      (sessionId, fn) => this.run(sessionId, () => {
        this.identity?.check();
        return fn();
      }),
      (sessionId, callId) => optional(this.stmt.attentionByCall.get(sessionId, callId), toAttention),
    );
    // Built once, like the statements: better-sqlite3 makes four wrapper functions per db.transaction() call.
    this.writeTx = db.transaction((sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<unknown>) =>
      this.readDecideWrite(sessionId, reads, decide));
    // Each write of a group runs as writeTx nested in the group's transaction, that is in a savepoint of its own: a
    // write that fails is rolled back alone, and the group commits (one fsync) whatever the others wrote.
    this.groupTx = db.transaction((group: QueuedWrite[]) =>
      runGroup(db, group, (write) => this.writeTx(write.sessionId, write.reads, write.decide)));
    this.readTx = db.transaction((sessionId: SessionId) => this.readSnapshot(sessionId));
    this.scanTx = db.transaction((sessionId: SessionId, read: (session: SessionRow | undefined, events: Iterable<EventRow>) => unknown) => {
      const session = this.stmt.session.get(sessionId);
      return read(session ? toSession(session) : undefined, eventRows(this.stmt, sessionId));
    });
  }

  private run<T>(sessionId: string, fn: () => T): T {
    if (!this.db.open) throw new StoreClosedError(this.kind, this.location);
    try {
      return fn();
    } catch (error) {
      throw mapSqliteError(error, sessionId);
    }
  }

  /**
   * Queues the write for the next group commit (docs/design.md#group-commit): the writes asked for in one turn of the
   * event loop, by any sessions of this store, share one transaction and one fsync. The promise settles once that
   * transaction has committed (or failed): nothing is acknowledged before it is durable.
   */
  transact<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>): Promise<R> {
    if (!this.db.open) return Promise.reject(new StoreClosedError(this.kind, this.location));
    return new Promise<R>((resolve, reject) => {
      this.queued.push({ sessionId, reads, decide, resolve: resolve as (value: unknown) => void, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(this.flushQueued);
      }
    });
  }

  private readonly flushQueued = (): void => {
    this.flushScheduled = false;
    this.flush();
  };

  /** Runs every queued write, GROUP_MAX to a transaction, and settles each one's promise. */
  private flush(): void {
    while (this.queued.length > 0) {
      const group = this.queued.splice(0, GROUP_MAX);
      if (!this.db.open) {
        for (const write of group) write.reject(new StoreClosedError(this.kind, this.location));
        continue;
      }
      try {
        this.identity?.check();
        // IMMEDIATE: take the write lock before reading, so WAL never fails the upgrade with SQLITE_BUSY_SNAPSHOT.
        // A group of one runs as before, without a savepoint.
        if (group.length === 1) {
          const [write] = group as [QueuedWrite];
          write.outcome = { ok: true, value: this.writeTx.immediate(write.sessionId, write.reads, write.decide) };
        } else {
          this.groupTx.immediate(group);
        }
        this.identity?.noteSideFiles();
      } catch (error) {
        this.known.forgetAll();
        if (error instanceof StoreReplacedError) this.guardNow();
        for (const write of group) write.reject(mapSqliteError(error, write.sessionId));
        continue;
      }
      // Any failed write forgets the known rows, here a write of the group rolled back to its savepoint.
      if (group.some((write) => !write.outcome!.ok)) this.known.forgetAll();
      for (const write of group) {
        const outcome = write.outcome!;
        if (outcome.ok) write.resolve(outcome.value);
        else write.reject(mapSqliteError(outcome.error, write.sessionId));
      }
    }
  }

  /** Read → decide → write, inside the IMMEDIATE transaction `writeTx` opened around it. */
  private readDecideWrite<R>(sessionId: SessionId, reads: TxReads, decide: (state: TxState) => TxWrites<R>): R {
    const s = this.stmt;
    this.known.begin();
    const session = this.known.session(sessionId) ?? optional(s.session.get(sessionId), toSession);
    const task = reads.taskId === undefined ? undefined : this.known.task(sessionId, reads.taskId) ?? optional(s.task.get(sessionId, reads.taskId), toTask);
    const op = reads.operation ? s.operation.get(sessionId, reads.operation.taskId, reads.operation.key) : undefined;
    const attention = (reads.attentionCalls ?? []).flatMap((id) => {
      const r = s.attentionByCall.get(sessionId, id);
      return r ? [toAttention(r)] : [];
    });
    const writes = decide({
      session,
      task,
      operation: op && reads.operation ? toOperation(reads.operation, op) : undefined,
      existingEventIds: (reads.eventIds ?? []).filter((id) => s.eventIdExists.get(sessionId, id) !== undefined),
      attention,
      ...(reads.approvals ? { approvals: this.inbox.approvalsOf(sessionId, reads.approvals) } : {}),
      ...(reads.reviews ? { reviews: this.inbox.reviewsOf(sessionId, reads.reviews) } : {}),
      ...(reads.writtenSince ? { writtenSince: s.earlierEpochSince.get(sessionId, reads.writtenSince.seq, reads.writtenSince.epoch)?.seq ?? null } : {}),
      // The SQLite file is shared by the processes of one host, so this host's clock is the store's clock.
      now: Date.now(),
    });
    if (writes.session) this.writeSession(writes.session.row, writes.session.expect);
    for (const e of writes.events ?? []) s.insertEvent.run(e.sessionId, e.seq, e.eventId, e.epoch, e.body, e.hash);
    if (writes.task) this.writeTask(writes.task.row);
    for (const o of writes.operations ?? []) s.upsertOperation.run(o.taskId, o.key, o.sessionId, o.callId, o.eventId);
    for (const a of writes.attention ?? []) this.writeAttention(a, attention);
    if (writes.decisions?.length) this.inbox.write(writes.decisions);
    faultPoint('commit:before');
    this.known.note(sessionId, writes.session?.row ?? session, [task, writes.task?.row]);
    return writes.result;
  }

  private writeSession(row: SessionRow, expect: { epoch: number; lastSeq: number } | null): void {
    const [sessionId, ...rest] = sessionValues(row, (held) => (held ? 1 : 0));
    if (expect === null) {
      this.stmt.insertSession.run(sessionId, ...rest);
      return;
    }
    const info = this.stmt.updateSession.run(...rest, sessionId, expect.epoch, expect.lastSeq);
    if (info.changes !== 1) throw new StaleOwnerError(row.sessionId, expect.epoch, 'the owner row changed');
  }

  /**
   * One attention row. A row this transaction read, whose key, call and binding stay, gets only its state columns
   * set: the by-call and by-binding index pages stay out of the commit (ATTENTION_STATE_COLUMNS). Anything else, the
   * whole row.
   */
  private writeAttention(row: AttentionRow, read: readonly AttentionRow[]): void {
    const flag = (b: boolean) => (b ? 1 : 0);
    if (read.some((prior) => onlyStateChanges(prior, row)) && this.stmt.updateAttentionState.run(...attentionStateValues(row, flag)).changes === 1) return;
    this.stmt.upsertAttention.run(...attentionValues(row, flag));
  }

  private writeTask(row: TaskRow): void {
    this.stmt.upsertTask.run(...taskValues(row));
  }

  async snapshot(sessionId: SessionId) {
    return this.run(sessionId, () => this.readTx.deferred(sessionId));
  }

  async scanSnapshot<T>(sessionId: SessionId, read: (session: SessionRow | undefined, events: Iterable<EventRow>) => T): Promise<T> {
    return this.run(sessionId, () => this.scanTx.deferred(sessionId, read) as T);
  }

  private readSnapshot(sessionId: SessionId): { session: SessionRow | undefined; events: EventRow[] } {
    const session = this.stmt.session.get(sessionId);
    const events = eventRowList(this.stmt, sessionId);
    return { session: session ? toSession(session) : undefined, events };
  }

  async readTask(sessionId: SessionId, taskId: string) {
    const row = this.run(sessionId, () => this.stmt.task.get(sessionId, taskId));
    return row ? toTask(row) : undefined;
  }

  async readOperation(sessionId: SessionId, taskId: string, key: string) {
    const row = this.run(sessionId, () => this.stmt.operation.get(sessionId, taskId, key));
    return row && row.session_id === sessionId ? toOperation({ taskId, key }, row) : undefined;
  }

  async sessionsWithoutOwnerRow() {
    return this.run('', () => this.stmt.withoutOwnerRow.all());
  }

  async scanOperations(sessionId: SessionId) {
    return this.run(sessionId, () => this.stmt.sessionOperations.all(sessionId)).map((r) => toOperation({ taskId: r.task_id, key: r.key }, r));
  }

  async checkLookupStorage() {
    return this.run('', () => {
      // Once for as long as nothing commits: a store-wide verify asks for every session.
      const version = `${String(this.dataVersion.get())}/${String(this.totalChanges.get())}`;
      if (this.lookupStorage?.version !== version) {
        let found: { table: 'attention' | 'operations'; problem: string } | null = null;
        for (const table of ['attention', 'operations'] as const) {
          const lines = this.db.prepare(`PRAGMA integrity_check(jw_${table})`).pluck().all() as string[];
          if (lines.length !== 1 || lines[0] !== 'ok') {
            found = { table, problem: lines.slice(0, 3).join('; ') };
            break;
          }
        }
        this.lookupStorage = { version, found };
      }
      return this.lookupStorage.found;
    });
  }

  async listSessions() {
    return this.run('', () => this.stmt.list.all()).map((r) => ({ session: toSession(r), events: r.events }));
  }

  async scanAttention(scan: AttentionScan): Promise<AttentionRow[]> {
    return this.run('', () => {
      const { text, values } = attentionScanSql('jw_attention', scan, () => '?');
      return (this.db.prepare(text).all(...values) as AttentionRecord[]).map(toAttention);
    });
  }

  async findAttention(sessionId: SessionId, b: OperationBinding): Promise<AttentionRow[]> {
    return this.run(sessionId, () => this.stmt.attentionByBinding.all(sessionId, b.taskId, b.tool, b.argsDigest).map(toAttention));
  }

  async close(): Promise<void> {
    // Writes asked for before close() still run: they were asked for while the store was open.
    this.flush();
    if (!this.db.open) return;
    // Closing plainly a connection whose -shm was replaced under it would harm the file: it takes itself for the last
    // one, and SQLite checkpoints its stale view of the log into the file and deletes the log another process now
    // writes, losing what that process was told was written (docs/design.md#a-store-notices-its-file-was-replaced).
    const replaced = this.identity?.replacement() ?? null;
    if (replaced === null) {
      this.identity?.forget();
      this.db.close();
      return;
    }
    // The file itself is the one opened: another process holding it open keeps SQLite from writing this connection's
    // stale view of the log over it as it closes.
    const guard = replaced.sideFile ? await guardFile(this.identity!.realPath) : null;
    if (guard !== null) {
      try {
        this.db.close();
      } finally {
        this.identity?.forget();
        await guard.release();
      }
      return;
    }
    keptOpen.set(this.identity!.file, this.db);
    process.emitWarning(
      `jingwei: ${replaced.error.message.replace(/; nothing was written$/, '')}: its connection is left open instead of closed, since closing it would write its stale view of the log over the file; end this process before another opens the file`,
      { code: 'JINGWEI_STORE_REPLACED' },
    );
  }

  /**
   * Starts the guard over the file as soon as a side file is found replaced, before anything closes this connection
   * (better-sqlite3 closes it as the process ends, whether or not the store is closed).
   */
  private guardNow(): void {
    const identity = this.identity;
    if (identity?.replacement()?.sideFile === true) void guardFile(identity.realPath);
  }
}

/**
 * Connections of stores whose file was replaced under them, by the journal file's device and inode: kept from the
 * collector, which would close them. SQLite shares one view of a file's index among the connections of a process, so
 * while one is kept the file cannot be opened again in this process without that stale view.
 */
const keptOpen = new Map<string, Database>();

/**
 * As the process is about to end on its own (better-sqlite3 then closes every connection), a guard over each file a
 * store holds open whose side file was replaced, found or not by a write: an idle store is closed at exit too.
 */
let exitWatched = false;
/** The files a guard was asked for as the process was about to end: once each. */
const guardedAtExit = new Set<string>();
function watchExit(): void {
  if (exitWatched) return;
  exitWatched = true;
  process.on('beforeExit', () => {
    for (const path of FileIdentity.sideFilesReplaced()) {
      // A guard that cannot start (its file's log was deleted, say) ends at once, and the process is about to end
      // again: asked again there, the process spawned guards for ever instead of ending.
      if (guardedAtExit.has(path)) continue;
      guardedAtExit.add(path);
      void guardFile(path);
    }
  });
}

const optional = <R, T>(record: R | undefined, map: (record: R) => T): T | undefined => (record === undefined ? undefined : map(record));

/**
 * Opens (creating if needed, unless `mustExist` or `readonly`) a SQLite journal: WAL, synchronous=FULL, every
 * write an IMMEDIATE transaction, and a bounded busy timeout that surfaces as StoreBusyError.
 */
export function openSqliteStore(path: string, options: SqliteStoreOptions = {}): SessionStore {
  const readonly = options.readonly === true;
  const mustExist = readonly || options.mustExist === true;
  checkSqlitePath(path, mustExist);
  const timeout = checkBusyTimeout(options.busyTimeoutMs ?? STORE_DEFAULTS.busyTimeoutMs);
  const file = FileIdentity.current(path);
  if (file !== null && keptOpen.has(file)) {
    throw new StoreReplacedError(path, 'a store of this process found its files replaced under it and its connection is kept open, which SQLite would share with a new one: end this process, then open the file again');
  }
  // A store of this process with the file open whose -wal or -shm was replaced: SQLite would share its stale view of
  // the index with the new connection, whose writes would then overwrite what another process wrote since.
  if (file !== null) FileIdentity.checkOthers(file, path);
  let db: Database;
  try {
    db = new Database(path, { timeout, readonly, fileMustExist: mustExist });
  } catch (error) {
    throw mapSqliteError(error, '*');
  }
  try {
    prepareDatabase(db, path, { ...options, mustExist, readonly });
  } catch (error) {
    db.close();
    throw mapSqliteError(error, '*');
  }
  return new JournalStore(new SqliteBackend(db, path), options.clock ? { clock: options.clock } : {});
}
