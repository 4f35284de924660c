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

/**
 * An MCP connection cannot serve requests: it was closed, or it gave up reconnecting after its bounded attempts
 * (`reconnect()` tries again). Calls through its tools are recorded as `unavailable`, never sent.
 */
export class McpUnavailableError extends JingweiError {
  readonly server: string;
  readonly state: 'failed' | 'closed';
  constructor(server: string, state: 'failed' | 'closed', detail: string) {
    super('mcp_unavailable', `MCP server ${server} is unavailable (${state}): ${detail}`);
    this.server = server;
    this.state = state;
  }
}

/** An idempotency probe could not reach a verdict (the server refused the first call, or could not be reached). */
export class McpProbeError extends JingweiError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('mcp_probe_failed', message, options);
  }
}
