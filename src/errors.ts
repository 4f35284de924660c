/**
 * Every error the library throws is a JingweiError with a stable `code`. Callers switch on `code` (or use
 * `instanceof`); messages are for people and may change.
 */
export class JingweiError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** A value from outside (JSON text, an argument, an id) broke a limit or a format rule. Nothing was written. */
export class InvalidInputError extends JingweiError {
  readonly field: string;
  constructor(field: string, message: string, options?: { cause?: unknown }) {
    super('invalid_input', `${field}: ${message}`, options);
    this.field = field;
  }
}

/** Untrusted JSON text could not be parsed within the bounds. `offset` is the UTF-16 index of the problem. */
export class JsonParseError extends JingweiError {
  readonly offset: number;
  readonly reason: JsonParseReason;
  constructor(reason: JsonParseReason, offset: number, message: string) {
    super('invalid_json', `${message} (at offset ${offset})`);
    this.reason = reason;
    this.offset = offset;
  }
}
export type JsonParseReason =
  | 'syntax'
  | 'too_large'
  | 'too_deep'
  | 'duplicate_key'
  | 'lone_surrogate'
  | 'trailing_data'
  | 'unexpected_end';

/** A JSON value cannot be put in canonical form (a non-finite number, a lone surrogate, a non-JSON value). */
export class CanonicalJsonError extends JingweiError {
  constructor(message: string) {
    super('not_canonicalizable', message);
  }
}

/** A wire record does not match the journal's format. `path` names the offending field. */
export class WireDecodeError extends JingweiError {
  readonly path: string;
  constructor(path: string, message: string) {
    super('invalid_event', `${path}: ${message}`);
    this.path = path;
  }
}

export type PhysicalLogViolation = 'wrong_session' | 'wrong_sequence' | 'duplicate_event_id';
/** `validatePhysicalLog` found an event out of place. */
export class PhysicalLogError extends JingweiError {
  readonly index: number;
  readonly violation: PhysicalLogViolation;
  constructor(violation: PhysicalLogViolation, index: number, message: string) {
    super('invalid_physical_log', message);
    this.violation = violation;
    this.index = index;
  }
}

/** Another owner holds the session; acquire again with `takeover: true` once it is known to be dead or fenced. */
export class SessionBusyError extends JingweiError {
  readonly sessionId: string;
  readonly holder: string;
  readonly epoch: number;
  constructor(sessionId: string, holder: string, epoch: number) {
    super('session_busy', `session ${sessionId} is held by ${holder} (epoch ${epoch})`);
    this.sessionId = sessionId;
    this.holder = holder;
    this.epoch = epoch;
  }
}

/** This owner has been fenced (a later acquire raised the epoch) or released. Nothing was written. */
export class StaleOwnerError extends JingweiError {
  readonly sessionId: string;
  readonly epoch: number;
  constructor(sessionId: string, epoch: number, detail: string) {
    super('stale_owner', `owner of session ${sessionId} at epoch ${epoch} is stale: ${detail}`);
    this.sessionId = sessionId;
    this.epoch = epoch;
  }
}

export type JournalCorruptReason =
  | 'hash_mismatch'
  | 'seq_gap'
  | 'head_mismatch'
  | 'order'
  | 'duplicate_id'
  | 'malformed_event'
  | 'epoch'
  | 'wrong_session'
  | 'too_large'
  | 'storage';
/** The stored journal failed verification. Nothing is repaired, skipped or truncated. */
export class JournalCorruptError extends JingweiError {
  readonly sessionId: string;
  readonly seq: number;
  readonly reason: JournalCorruptReason;
  constructor(sessionId: string, seq: number, reason: JournalCorruptReason, detail: string, options?: { cause?: unknown }) {
    super('journal_corrupt', `journal of session ${sessionId} is corrupt at seq ${seq} (${reason}): ${detail}`, options);
    this.sessionId = sessionId;
    this.seq = seq;
    this.reason = reason;
  }
}

/** The store could not take its write lock within the bounded wait. Nothing was written; try again. */
export class StoreBusyError extends JingweiError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('store_busy', message, options);
  }
}

/** The store was closed, or its schema is not one this code understands. */
export class StoreUnavailableError extends JingweiError {
  constructor(code: 'store_closed' | 'schema_too_new' | 'store_failure', message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/** A call or load on a store after its `close()`. `location` names the store (a path, a schema), when it has one. */
export class StoreClosedError extends StoreUnavailableError {
  readonly kind: string;
  readonly location: string | undefined;
  constructor(kind: string, location?: string) {
    super('store_closed', `the ${kind} store${location === undefined ? '' : ` at ${location}`} is closed`);
    this.kind = kind;
    this.location = location;
  }
}

export type StorePathErrorCode = 'store_directory_missing' | 'store_not_found' | 'store_not_sqlite' | 'store_not_journal';
/**
 * A store path cannot be opened as asked: its directory does not exist, the file is missing (with `mustExist`),
 * the file is not a SQLite database, or it holds no journal (with `mustExist` or `readonly`). Nothing was created.
 */
export class StorePathError extends JingweiError {
  readonly path: string;
  constructor(code: StorePathErrorCode, path: string, detail: string, options?: { cause?: unknown }) {
    super(code, `${path}: ${detail}`, options);
    this.path = path;
  }
}

/** An entry point needs an optional driver package that is not installed; `packageName` is what to install. */
export class DriverMissingError extends JingweiError {
  readonly packageName: string;
  readonly entry: string;
  constructor(packageName: string, entry: string, options?: { cause?: unknown }) {
    super('driver_missing', `${entry} needs the ${packageName} package, which is not installed: npm install ${packageName}`, options);
    this.packageName = packageName;
    this.entry = entry;
  }
}

export class TaskNotFoundError extends JingweiError {
  readonly taskId: string;
  constructor(taskId: string, sessionId: string) {
    super('task_not_found', `task ${taskId} does not exist in session ${sessionId}`);
    this.taskId = taskId;
  }
}

/** A stopped or completed task admits nothing. Nothing was recorded. */
export class TaskNotRunningError extends JingweiError {
  readonly taskId: string;
  readonly state: string;
  constructor(taskId: string, state: string) {
    super('task_not_running', `task ${taskId} is ${state} and admits nothing`);
    this.taskId = taskId;
    this.state = state;
  }
}

/** The task's budget cannot cover one more attempt. Nothing was recorded or charged. */
export class BudgetExhaustedError extends JingweiError {
  readonly taskId: string;
  readonly resource: 'tool_calls' | 'tool_output_bytes';
  constructor(taskId: string, resource: 'tool_calls' | 'tool_output_bytes', detail: string) {
    super('budget_exhausted', `task ${taskId}: ${resource} budget exhausted (${detail})`);
    this.taskId = taskId;
    this.resource = resource;
  }
}

/** The same (task, key) arrived with different canonical arguments. The earlier record is unchanged. */
export class IdempotencyConflictError extends JingweiError {
  readonly taskId: string;
  readonly key: string;
  constructor(taskId: string, key: string) {
    super('idempotency_conflict', `operation ${key} of task ${taskId} was already used with different arguments`);
    this.taskId = taskId;
    this.key = key;
  }
}

/** The session's journal would exceed the history limits that recovery can inspect. Nothing was written. */
export class JournalFullError extends JingweiError {
  readonly sessionId: string;
  constructor(sessionId: string, detail: string) {
    super('journal_full', `journal of session ${sessionId} is full: ${detail}`);
    this.sessionId = sessionId;
  }
}

/** An import or task operation conflicts with what the store already holds. Nothing was written. */
export class StoreConflictError extends JingweiError {
  constructor(code: 'session_exists' | 'task_in_other_session', message: string) {
    super(code, message);
  }
}
