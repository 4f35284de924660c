/**
 * The catalogue of errors: every error class of the library lives in this module. Every error the library throws
 * is a JingweiError with a stable `code` from JINGWEI_ERROR_CODES; callers switch on `code` (or use `instanceof`);
 * messages are for people and may change. The table in docs/errors.md lists exactly this catalogue (a test checks it).
 *
 * ToolBodyError is the one class here that the library never throws: a tool body throws it to report its own
 * failure, and its `code` is the tool's own, recorded as is.
 */
import type { ToolCall, ToolFailureCategory, ToolResult } from './event/types.js';

/** Every `code` a JingweiError can carry, with the class that carries it. */
export const JINGWEI_ERROR_CODES = Object.freeze({
  invalid_input: 'InvalidInputError',
  invalid_json: 'JsonParseError',
  not_canonicalizable: 'CanonicalJsonError',
  invalid_event: 'WireDecodeError',
  invalid_physical_log: 'PhysicalLogError',
  import_rejected: 'JournalImportError',
  session_busy: 'SessionBusyError',
  stale_owner: 'StaleOwnerError',
  journal_corrupt: 'JournalCorruptError',
  journal_full: 'JournalFullError',
  store_busy: 'StoreBusyError',
  store_closed: 'StoreClosedError',
  store_directory_missing: 'StorePathError',
  store_not_found: 'StorePathError',
  store_not_sqlite: 'StorePathError',
  store_not_journal: 'StorePathError',
  store_hard_linked: 'StorePathError',
  store_log_without_database: 'StorePathError',
  driver_missing: 'DriverMissingError',
  schema_too_new: 'StoreUnavailableError',
  store_failure: 'StoreUnavailableError',
  session_exists: 'StoreConflictError',
  duplicate_event_id: 'StoreConflictError',
  history_changed: 'StoreConflictError',
  task_not_found: 'TaskNotFoundError',
  task_not_running: 'TaskNotRunningError',
  budget_exhausted: 'BudgetExhaustedError',
  idempotency_conflict: 'IdempotencyConflictError',
  tool_config_invalid: 'ToolConfigError',
  empty_name: 'ToolPreflightError',
  name_too_long: 'ToolPreflightError',
  malformed_name: 'ToolPreflightError',
  unsafe_integer: 'ToolPreflightError',
  duplicate_key: 'ToolPreflightError',
  unavailable_tool: 'ToolPreflightError',
  arguments_too_large: 'ToolPreflightError',
  arguments_not_serializable: 'ToolPreflightError',
  invalid_options: 'ToolPreflightError',
  overloaded: 'ToolOverloadedError',
  turn_closed: 'ToolTurnClosedError',
  recording_failed: 'ToolRecordingError',
  invalid_evidence: 'ToolRetryError',
  legacy_call: 'ToolRetryError',
  completed: 'ToolRetryError',
  needs_review: 'ToolRetryError',
  not_latest_attempt: 'ToolRetryError',
  binding_changed: 'ToolRetryError',
  consumed: 'ToolRetryError',
  not_in_doubt: 'ToolRetryError',
  body_running: 'ToolRetryError',
  being_reconciled: 'ToolRetryError',
  identical_in_doubt: 'ToolRetryError',
  plan_not_serializable: 'ToolRetryPlanNotSerializableError',
  model_unreachable: 'ChatModelError',
  model_http_error: 'ChatModelError',
  model_bad_response: 'ChatModelError',
  model_incomplete: 'ChatModelError',
  model_script_exhausted: 'ChatModelError',
  tool_call_failed: 'ToolCallFailedError',
  runtime_error: 'ToolRuntimeHaltedError',
  mcp_unavailable: 'McpUnavailableError',
  mcp_probe_failed: 'McpProbeError',
  anchor_mismatch: 'AnchorError',
  anchor_invalid: 'AnchorError',
  store_replaced: 'StoreReplacedError',
  export_unrepresentable: 'ExportUnrepresentableError',
  decision_not_found: 'DecisionError',
  decision_stale: 'DecisionError',
  call_in_flight: 'DecisionError',
  decision_binding_changed: 'DecisionError',
  decision_identical: 'DecisionError',
  decision_wait_timeout: 'DecisionError',
  decision_wait_aborted: 'DecisionError',
  inbox_unsupported: 'DecisionError',
  operation_in_doubt: 'OperationInDoubtError',
  operation_confirmed: 'OperationConfirmedError',
  operation_made_by_identical: 'OperationMadeByIdenticalError',
  run_busy: 'AgentRunBusyError',
} as const);

export type JingweiErrorCode = keyof typeof JINGWEI_ERROR_CODES;

/**
 * The codes the runtime itself records in a failed tool result (part of the journal's wire format, so they never
 * change meaning). A failed result may also carry a code chosen by the host: a guard's or approver's denial, or a
 * tool body's ToolBodyError.
 */
export const RECORDED_FAILURE_CODES = Object.freeze([
  'tool_unavailable',
  'tool_availability_fault',
  'tool_arguments_invalid',
  'tool_arguments_validation_fault',
  'tool_guard_panicked',
  'tool_guard_malformed',
  'tool_authorizer_panicked',
  'tool_approval_malformed',
  'tool_approval_unavailable',
  'tool_timeout',
  'tool_cancelled',
  'tool_budget_stopped',
  'tool_stopped_before_body',
  'tool_body_panicked',
  'tool_output_not_json',
  'tool_output_panicked',
  'tool_output_limit',
  'tool_superseded',
  'tool_in_doubt',
  'tool_approval_pending',
  'tool_approval_denied_by_operator',
  'tool_contract_changed',
  'tool_review_waiting',
] as const);

export type RecordedFailureCode = (typeof RECORDED_FAILURE_CODES)[number];

export class JingweiError extends Error {
  readonly code: JingweiErrorCode;
  constructor(code: JingweiErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** A value from outside (JSON text, an argument, an id) broke a limit or a format rule. Nothing was written. */
export class InvalidInputError extends JingweiError {
  declare readonly code: 'invalid_input';
  readonly field: string;
  constructor(field: string, message: string, options?: { cause?: unknown }) {
    super('invalid_input', `${field}: ${message}`, options);
    this.field = field;
  }
}

/**
 * Untrusted JSON text could not be parsed within the bounds. `offset` is the UTF-16 index of the problem; `path`
 * (e.g. `$.arguments.amount`) names the value for an `unsafe_integer`, and is null otherwise.
 */
export class JsonParseError extends JingweiError {
  declare readonly code: 'invalid_json';
  readonly offset: number;
  readonly reason: JsonParseReason;
  readonly path: string | null;
  constructor(reason: JsonParseReason, offset: number, message: string, path: string | null = null) {
    super('invalid_json', `${message} (at offset ${offset})`);
    this.reason = reason;
    this.offset = offset;
    this.path = path;
  }
}
export type JsonParseReason =
  | 'syntax'
  | 'too_large'
  | 'too_deep'
  | 'duplicate_key'
  | 'lone_surrogate'
  | 'trailing_data'
  | 'unexpected_end'
  /** An integer literal beyond ±(2^53 − 1): it would not be held exactly. */
  | 'unsafe_integer';

/** A JSON value cannot be put in canonical form (a non-finite number, a lone surrogate, a non-JSON value). */
export class CanonicalJsonError extends JingweiError {
  declare readonly code: 'not_canonicalizable';
  constructor(message: string) {
    super('not_canonicalizable', message);
  }
}

/** A wire record does not match the journal's format. `path` names the offending field. */
export class WireDecodeError extends JingweiError {
  declare readonly code: 'invalid_event';
  readonly path: string;
  constructor(path: string, message: string) {
    super('invalid_event', `${path}: ${message}`);
    this.path = path;
  }
}

export type PhysicalLogViolation = 'wrong_session' | 'wrong_sequence' | 'duplicate_event_id';
/** `validatePhysicalLog` found an event out of place. */
export class PhysicalLogError extends JingweiError {
  declare readonly code: 'invalid_physical_log';
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
  declare readonly code: 'session_busy';
  readonly sessionId: string;
  readonly holder: string;
  readonly epoch: number;
  /** When the holder's lease runs out (ms since the Unix epoch, the store's clock); null when no lease is recorded. */
  readonly leaseExpiresAt: number | null;
  /**
   * `requestedBy`: the owner name the refused acquire gave, when known. `leaseRanOut`: the store's clock is past the
   * lease (an acquire without `takeover` is refused all the same), so the message says how to take the session over.
   */
  constructor(sessionId: string, holder: string, epoch: number, leaseExpiresAt: number | null = null, requestedBy?: string, leaseRanOut = false) {
    const at = leaseExpiresAt === null ? '' : new Date(leaseExpiresAt).toISOString();
    const lease = leaseExpiresAt === null ? ''
      : leaseRanOut ? `; its lease ran out at ${at} (a holder that stopped without releasing it): acquire with takeover 'expired' to take the session over`
        : `; its lease runs until ${at}`;
    // The acquire's own name: an owner this process has not released, another process using the name, or an earlier
    // acquire whose commit landed and whose answer was lost.
    const same = requestedBy === holder
      ? `. That is the name this acquire gives: an owner acquired under it and not released holds the session (one this process still holds, another process using the name, or an earlier acquire whose answer was lost on a network store); release that owner, or take the session with takeover 'expired' once its lease runs out`
      : '';
    super('session_busy', `session ${sessionId} is held by ${holder} (epoch ${epoch})${lease}${same}`);
    this.sessionId = sessionId;
    this.holder = holder;
    this.epoch = epoch;
    this.leaseExpiresAt = leaseExpiresAt;
  }
}

/** This owner has been fenced (a later acquire raised the epoch) or released. Nothing was written. */
export class StaleOwnerError extends JingweiError {
  declare readonly code: 'stale_owner';
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
  | 'storage'
  | 'task_ledger'
  | 'attention_index'
  | 'operation_index';
/** The stored journal failed verification. Nothing is repaired, skipped or truncated. */
export class JournalCorruptError extends JingweiError {
  declare readonly code: 'journal_corrupt';
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
  declare readonly code: 'store_busy';
  constructor(message: string, options?: { cause?: unknown }) {
    super('store_busy', message, options);
  }
}

export type StoreUnavailableCode = 'store_closed' | 'schema_too_new' | 'store_failure';
/** The store was closed, or its schema is not one this code understands. */
export class StoreUnavailableError extends JingweiError {
  declare readonly code: StoreUnavailableCode;
  constructor(code: StoreUnavailableCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/** A call or load on a store after its `close()`. `location` names the store (a path, a schema), when it has one. */
export class StoreClosedError extends StoreUnavailableError {
  declare readonly code: 'store_closed';
  readonly kind: string;
  readonly location: string | undefined;
  constructor(kind: string, location?: string) {
    super('store_closed', `the ${kind} store${location === undefined ? '' : ` at ${location}`} is closed`);
    this.kind = kind;
    this.location = location;
  }
}

export type StorePathErrorCode = 'store_directory_missing' | 'store_not_found' | 'store_not_sqlite' | 'store_not_journal' | 'store_hard_linked' | 'store_log_without_database';
/**
 * A store path cannot be opened as asked: its directory does not exist, the file is missing (with `mustExist`),
 * the file is not a SQLite database, it holds no journal (with `mustExist` or `readonly`), it has more than one
 * name (hard links), or it is empty or missing beside a write-ahead log that holds commits. Nothing was created.
 */
export class StorePathError extends JingweiError {
  declare readonly code: StorePathErrorCode;
  readonly path: string;
  constructor(code: StorePathErrorCode, path: string, detail: string, options?: { cause?: unknown }) {
    super(code, `${path}: ${detail}`, options);
    this.path = path;
  }
}

/** An entry point needs an optional driver package that is not installed; `packageName` is what to install. */
export class DriverMissingError extends JingweiError {
  declare readonly code: 'driver_missing';
  readonly packageName: string;
  readonly entry: string;
  constructor(packageName: string, entry: string, options?: { cause?: unknown }) {
    super('driver_missing', `${entry} needs the ${packageName} package, which is not installed: npm install ${packageName}`, options);
    this.packageName = packageName;
    this.entry = entry;
  }
}

export class TaskNotFoundError extends JingweiError {
  declare readonly code: 'task_not_found';
  readonly taskId: string;
  constructor(taskId: string, sessionId: string) {
    super('task_not_found', `task ${taskId} does not exist in session ${sessionId}`);
    this.taskId = taskId;
  }
}

/** A stopped or completed task admits nothing. Nothing was recorded. */
export class TaskNotRunningError extends JingweiError {
  declare readonly code: 'task_not_running';
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
  declare readonly code: 'budget_exhausted';
  readonly taskId: string;
  readonly resource: 'tool_calls' | 'tool_output_bytes' | 'journal_bytes';
  constructor(taskId: string, resource: 'tool_calls' | 'tool_output_bytes' | 'journal_bytes', detail: string) {
    super('budget_exhausted', `task ${taskId}: ${resource} budget exhausted (${detail})`);
    this.taskId = taskId;
    this.resource = resource;
  }
}

/** The same operation (session, task, key) arrived with different canonical arguments. The earlier record is unchanged. */
export class IdempotencyConflictError extends JingweiError {
  declare readonly code: 'idempotency_conflict';
  readonly taskId: string;
  readonly key: string;
  /** The session whose operation it is, when the helper that refused knows it (the idempotency helpers do). */
  readonly sessionId: string | undefined;
  constructor(taskId: string, key: string, sessionId?: string) {
    super('idempotency_conflict', `operation ${key} of task ${taskId}${sessionId === undefined ? '' : ` in session ${sessionId}`} was already used with different arguments`);
    this.taskId = taskId;
    this.key = key;
    this.sessionId = sessionId;
  }
}

/** The session's journal would exceed the history limits that recovery can inspect. Nothing was written. */
export class JournalFullError extends JingweiError {
  declare readonly code: 'journal_full';
  readonly sessionId: string;
  constructor(sessionId: string, detail: string) {
    super('journal_full', `journal of session ${sessionId} is full: ${detail}`);
    this.sessionId = sessionId;
  }
}

export type StoreConflictCode = 'session_exists' | 'duplicate_event_id' | 'history_changed';
/** An import or task operation conflicts with what the store already holds. Nothing was written. */
export class StoreConflictError extends JingweiError {
  declare readonly code: StoreConflictCode;
  constructor(code: StoreConflictCode, message: string) {
    super(code, message);
  }
}

/** A JSONL journal failed verification on import. `line` is 1-based. Nothing was written. */
export class JournalImportError extends JingweiError {
  declare readonly code: 'import_rejected';
  readonly line: number;
  constructor(line: number, message: string, options?: { cause?: unknown }) {
    super('import_rejected', `line ${line}: ${message}`, options);
    this.line = line;
  }
}

export type AnchorFailureReason = 'rewritten' | 'truncated' | 'rolled_back' | 'unanchored' | 'bad_signature' | 'malformed';

/**
 * A journal or an export disagrees with a signed checkpoint of its chain head (`anchor_mismatch`: `reason` is
 * rewritten, truncated, rolled_back or unanchored), or a checkpoint itself cannot be trusted (`anchor_invalid`:
 * bad_signature or malformed). `seq` is the first sequence number that is wrong or missing (-1 when none applies).
 */
export class AnchorError extends JingweiError {
  declare readonly code: 'anchor_mismatch' | 'anchor_invalid';
  readonly sessionId: string;
  readonly seq: number;
  readonly reason: AnchorFailureReason;
  constructor(sessionId: string, seq: number, reason: AnchorFailureReason, detail: string, options?: { cause?: unknown }) {
    const invalid = reason === 'bad_signature' || reason === 'malformed';
    super(invalid ? 'anchor_invalid' : 'anchor_mismatch', `session ${sessionId}${seq >= 0 ? ` at seq ${seq}` : ''} (${reason}): ${detail}`, options);
    this.sessionId = sessionId;
    this.seq = seq;
    this.reason = reason;
  }
}

/**
 * The store's file was removed or replaced under an open store (or its write-ahead log was): the store refuses
 * every write, so a second host cannot start over on a fresh file while this one's acknowledged events vanish.
 */
export class StoreReplacedError extends JingweiError {
  declare readonly code: 'store_replaced';
  readonly location: string;
  constructor(location: string, detail: string, options?: { cause?: unknown }) {
    super('store_replaced', `the store at ${location} was removed or replaced while open (${detail}); nothing was written`, options);
    this.location = location;
  }
}

/**
 * `exportRustJournal` met a record the original format cannot hold without changing what recovery concludes
 * from it. `seq` is the event's position in our journal. Nothing was written.
 */
export class ExportUnrepresentableError extends JingweiError {
  declare readonly code: 'export_unrepresentable';
  readonly seq: number;
  constructor(seq: number, detail: string, options?: { cause?: unknown }) {
    super('export_unrepresentable', `seq ${seq}: ${detail}`, options);
    this.seq = seq;
  }
}

/** The runtime's configuration is inconsistent; raised by createToolRuntime, never at call time. */
export class ToolConfigError extends JingweiError {
  declare readonly code: 'tool_config_invalid';
  constructor(message: string, options?: { cause?: unknown }) {
    super('tool_config_invalid', message, options);
  }
}

export type ToolPreflightCode =
  | 'empty_name'
  | 'name_too_long'
  /** The name is not well-formed text (a lone surrogate, a control or format character). */
  | 'malformed_name'
  | 'arguments_too_large'
  | 'arguments_not_serializable'
  /** An integer beyond ±(2^53 − 1) in the arguments: it cannot be journaled exactly; send it as a string. */
  | 'unsafe_integer'
  /** A model's argument text naming one key twice in an object: one of its values would go unread. */
  | 'duplicate_key'
  /** A tool this caller cannot use (not registered or not granted), with arguments too large to journal for it. */
  | 'unavailable_tool'
  | 'invalid_options';
/** A call rejected before anything was reserved or recorded. */
export class ToolPreflightError extends JingweiError {
  declare readonly code: ToolPreflightCode;
  constructor(code: ToolPreflightCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/** More calls are in flight than `maxInFlight` allows. Nothing was recorded or charged. */
export class ToolOverloadedError extends JingweiError {
  declare readonly code: 'overloaded';
  constructor(limit: number) {
    super('overloaded', `${limit} tool calls are already in flight`);
  }
}

/** The gateway's binding signal fired; it admits nothing more. */
export class ToolTurnClosedError extends JingweiError {
  declare readonly code: 'turn_closed';
  constructor() {
    super('turn_closed', 'the gateway was cancelled and admits no more calls');
  }
}

const MARKER_MAY_HAVE_LANDED =
  '. The body was not called. If the commit landed all the same (its answer lost on the way back), the journal reads the call as started, in doubt until a person reviews it; this host journals that its body was not called at its next write or heartbeat';

const BODY_NOT_CALLED =
  '. The body was not called: this host lost its hold on the session after the start marker and before the body. The journal reads the call as started, in doubt until a person reviews it; a review may record not_executed on this evidence';

/**
 * Evidence could not be written (the owner was fenced, or storage failed). `stage` says which write; at stage
 * `call` nothing ran; at `started` the body never ran; at `result` the outcome is in `result`: the body ran, unless
 * the runtime stopped the attempt between the start marker and the body (an interrupt's category with code
 * `tool_stopped_before_body`; `bodyNotCalled`, which the message then says).
 */
export class ToolRecordingError extends JingweiError {
  declare readonly code: 'recording_failed';
  readonly stage: 'call' | 'started' | 'result';
  readonly call: ToolCall;
  readonly result: ToolResult | null;
  constructor(stage: 'call' | 'started' | 'result', call: ToolCall, result: ToolResult | null, cause: unknown, markerMayHaveLanded = false, bodyNotCalled = false) {
    const what = stage === 'started' ? 'start marker' : stage;
    const note = markerMayHaveLanded ? MARKER_MAY_HAVE_LANDED : stage === 'result' && bodyNotCalled ? BODY_NOT_CALLED : '';
    super('recording_failed', `could not record the ${what} of ${call.name} (${call.id}): ${String((cause as Error)?.message ?? cause)}${note}`, { cause });
    this.stage = stage;
    this.call = call;
    this.result = result;
  }
}

/**
 * Throw this from a tool body to report a failure; anything else thrown is recorded as a panic. Its `code` is the
 * tool's own (any string) and is recorded as is, so it is not a JingweiError: the library never throws it.
 */
export class ToolBodyError extends Error {
  readonly code: string;
  readonly retryable: boolean;
  constructor(code: string, message: string, options?: { retryable?: boolean; cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.retryable = options?.retryable ?? false;
  }
}

export type ToolRetryErrorCode =
  | 'invalid_evidence'
  | 'legacy_call'
  | 'completed'
  | 'needs_review'
  | 'not_latest_attempt'
  | 'binding_changed'
  | 'consumed'
  | 'not_in_doubt'
  | 'body_running'
  | 'being_reconciled'
  | 'identical_in_doubt';

/** Why a retry cannot be planned or used. `detail` says which evidence failed (docs/design.md, retries). */
export class ToolRetryError extends JingweiError {
  declare readonly code: ToolRetryErrorCode;
  readonly detail: string;
  /** `hint`: what to do, for people, in the message only (`detail` stays the retry table's reason). */
  constructor(code: ToolRetryErrorCode, detail: string, hint?: string) {
    super(code, `${code}: ${detail}${hint === undefined ? '' : `; ${hint}`}`);
    this.detail = detail;
  }
}

/**
 * A caller-keyed call whose operation already has an attempt that did not complete (it failed, is in doubt, or is
 * still open). Nothing ran and nothing was written: the library never retries by itself. Recover the attempt
 * `callId` explicitly (assess it, review or reconcile it, then `prepareToolRetry`); a new key would make the write
 * again if that attempt made it (docs/design.md#caller-keys-and-replay).
 */
export class OperationInDoubtError extends JingweiError {
  declare readonly code: 'operation_in_doubt';
  readonly taskId: string;
  readonly operationKey: string;
  /** The latest attempt of the operation: the call to recover. */
  readonly callId: string;
  /** What became of that attempt, without ids or keys (a model may read it: ToolRuntimeHaltedError). */
  readonly detail: string;
  /** `advice`: what to do; by default, recover that call (the runtime says to wait when it is still running here). */
  constructor(taskId: string, operationKey: string, callId: string, detail: string, advice = 'recover that call explicitly') {
    super('operation_in_doubt', `operation ${operationKey} of task ${taskId} is not completed (latest attempt ${callId}: ${detail}); ${advice}`);
    this.taskId = taskId;
    this.operationKey = operationKey;
    this.callId = callId;
    this.detail = detail;
  }
}

/**
 * A call with a caller key whose latest attempt has no result, or did not succeed, while a journaled review of that
 * attempt says it was completed (the write confirmed outside the journal): the operation is done, nothing is left to
 * recover or retry, and no output is journaled for the key to return. Nothing ran and nothing was written.
 */
export class OperationConfirmedError extends JingweiError {
  declare readonly code: 'operation_confirmed';
  readonly taskId: string;
  readonly operationKey: string;
  /** The attempt the review is about. */
  readonly callId: string;
  /** Who confirmed it, and on what evidence, as journaled. */
  readonly actor: string;
  readonly evidence: string;
  constructor(taskId: string, operationKey: string, callId: string, actor: string, evidence: string) {
    super('operation_confirmed', `operation ${operationKey} of task ${taskId} is completed: a review by ${JSON.stringify(actor)} says attempt ${callId} ` +
      `made its write (${JSON.stringify(evidence)}); its output was never journaled, so a call under this key has none to return, and nothing is left to recover or retry`);
    this.taskId = taskId;
    this.operationKey = operationKey;
    this.callId = callId;
    this.actor = actor;
    this.evidence = evidence;
  }
}

/**
 * A call with a caller key whose latest attempt did not succeed while an identical write has made what it asked for:
 * the in-doubt guard refused the attempt as a repeat of that write, made since (its attempt succeeded, or a journaled
 * review says it completed); or the key's write was decided against (a `not_executed` review, its retry denied) and a
 * repeat of it, retried, has made it. What the key asked for is done, by that other call. Nothing is left to recover
 * or retry under the key, and it has no output of its own to return. Nothing ran and nothing was written.
 */
export class OperationMadeByIdenticalError extends JingweiError {
  declare readonly code: 'operation_made_by_identical';
  readonly taskId: string;
  readonly operationKey: string;
  /** The key's latest attempt. */
  readonly callId: string;
  /** The attempt that made the identical write (its success, or the one a `completed` review confirmed). */
  readonly madeByCallId: string;
  constructor(taskId: string, operationKey: string, callId: string, madeByCallId: string) {
    super('operation_made_by_identical', `operation ${operationKey} of task ${taskId} is completed by an identical call: attempt ${madeByCallId} has made ` +
      `the write its latest attempt ${callId} did not; this key has no output of its own to return, and nothing is left to recover or retry`);
    this.taskId = taskId;
    this.operationKey = operationKey;
    this.callId = callId;
    this.madeByCallId = madeByCallId;
  }
}

/**
 * `runAgent` or `resumeAgent` was asked to drive a run that is already being driven through the same owner (a second
 * click on "resume" while the first is still running). Nothing was read or written; wait for the first to return.
 * Two processes are kept apart by the session's fencing instead (docs/design.md#resumable-runs).
 */
export class AgentRunBusyError extends JingweiError {
  declare readonly code: 'run_busy';
  readonly sessionId: string;
  readonly runId: string;
  /** `taken`: thrown to a loop whose run a newer open or a drive has taken since. */
  constructor(sessionId: string, runId: string, taken = false) {
    super('run_busy', taken
      ? `run ${runId} of session ${sessionId} was taken by a newer open or runAgent through this owner; this loop journals and calls nothing more`
      : `run ${runId} of session ${sessionId} is already running through this owner; wait for it to return`);
    this.sessionId = sessionId;
    this.runId = runId;
  }
}

/** Thrown by `JSON.stringify(plan)`: a plan is ephemeral host evidence and never leaves the process. */
export class ToolRetryPlanNotSerializableError extends JingweiError {
  declare readonly code: 'plan_not_serializable';
  constructor() {
    super('plan_not_serializable', 'a ToolRetryPlan cannot be serialized; prepare a new one from the confirmed history');
  }
}

export type ChatModelErrorCode = 'model_unreachable' | 'model_http_error' | 'model_bad_response' | 'model_incomplete' | 'model_script_exhausted';
/** The model server could not be reached, refused the request, or answered something that is not a chat completion. */
export class ChatModelError extends JingweiError {
  declare readonly code: ChatModelErrorCode;
  /** The HTTP status, when the server answered. */
  readonly status: number | null;
  /**
   * The server's `Retry-After` header as it sent it (seconds or an HTTP date), for an HTTP error that carried one;
   * null otherwise. The library never retries a model request: this is for the host that does.
   */
  readonly retryAfter: string | null;
  constructor(code: ChatModelErrorCode, message: string, status: number | null = null, options?: { cause?: unknown; retryAfter?: string | null }) {
    super(code, message, options);
    this.status = status;
    this.retryAfter = options?.retryAfter ?? null;
  }
}

/** What a bridge reports about one failed call: model-facing, nothing the model must not see. */
export interface ToolCallFailure {
  /** The whole model-facing sentence. */
  readonly text: string;
  /** A recorded failure's category, or `preflight` for a call refused before anything was recorded. */
  readonly category: ToolFailureCategory | 'preflight';
  /** The recorded (or preflight) failure code: one of RECORDED_FAILURE_CODES, a ToolPreflightCode or the host's own. */
  readonly code: string;
  /** Whether the body started (its `tool_started` marker is journaled): its effects may then have happened. */
  readonly started: boolean;
}

/**
 * A recorded tool failure, thrown by a bridge's tool so the framework reports it to the model as an error.
 * Its message is the model-facing text; it carries nothing the model must not see. The journal already holds the
 * call and its result; hosts that need them use the bridge's `onExecution` option. `failureCode` is the recorded
 * failure's code.
 */
export class ToolCallFailedError extends JingweiError {
  declare readonly code: 'tool_call_failed';
  readonly tool: string;
  readonly category: ToolFailureCategory | 'preflight';
  readonly failureCode: string;
  readonly started: boolean;

  constructor(tool: string, failure: ToolCallFailure) {
    super('tool_call_failed', failure.text);
    this.tool = tool;
    this.category = failure.category;
    this.failureCode = failure.code;
    this.started = failure.started;
  }
}

/**
 * A call the runtime refused to admit or record (budget exhausted, task stopped, stale owner, storage failure,
 * overload, a closed gateway), or whose recorded outcome the host's own `onExecution` hook failed to take: nothing
 * more should run in this session until the host looks. `cause` holds the original error; the message is
 * model-safe and true to what ran: a result that could not be recorded after the body started says the tool may
 * have taken effect, and a failed hook (`recorded`: the outcome the journal holds) says the call was recorded.
 * `code` is the original JingweiError's code (e.g. `budget_exhausted`, `stale_owner`, `recording_failed`), or
 * `runtime_error` when the original is not a JingweiError.
 */
export class ToolRuntimeHaltedError extends JingweiError {
  readonly tool: string;

  constructor(tool: string, cause: unknown, recorded?: 'succeeded' | 'failed') {
    const code: JingweiErrorCode = cause instanceof JingweiError ? cause.code : 'runtime_error';
    const name = JSON.stringify(tool);
    const what = recorded !== undefined
      ? `The call of tool ${name} was recorded (${recorded}), but the host failed to handle its outcome (${code})`
      : cause instanceof ToolRecordingError && cause.stage === 'result'
        ? `Tool ${name} started, but its result could not be recorded (${code}): it may have taken effect; check before doing it again`
        : cause instanceof OperationInDoubtError
          // A run stopped at a call (waiting for an approval, or open for a review): the cause says which, without the
          // operation's key, task or call id (its message, for the host, has them).
          ? `Tool ${name} was not run now (${code}): ${cause.detail}`
          : `Tool ${name} could not be run: the tool runtime refused the call (${code})`;
    super(code, `${what}. Do not call tools again.`, { cause });
    this.tool = tool;
  }
}

/**
 * An MCP connection cannot serve requests: it was closed, or it gave up reconnecting after its bounded attempts
 * (`reconnect()` tries again). Calls through its tools are recorded as `unavailable`, never sent.
 */
export class McpUnavailableError extends JingweiError {
  declare readonly code: 'mcp_unavailable';
  readonly server: string;
  readonly state: 'failed' | 'closed';
  constructor(server: string, state: 'failed' | 'closed', detail: string, options?: { cause?: unknown }) {
    super('mcp_unavailable', `MCP server ${server} is unavailable (${state}): ${detail}`, options);
    this.server = server;
    this.state = state;
  }
}

/** An idempotency probe could not reach a verdict (the server refused the first call, or could not be reached). */
export class McpProbeError extends JingweiError {
  declare readonly code: 'mcp_probe_failed';
  constructor(message: string, options?: { cause?: unknown }) {
    super('mcp_probe_failed', message, options);
  }
}

export type DecisionErrorCode =
  | 'decision_not_found'
  | 'decision_stale'
  | 'call_in_flight'
  | 'decision_binding_changed'
  | 'decision_identical'
  | 'decision_wait_timeout'
  | 'decision_wait_aborted'
  | 'inbox_unsupported';

/**
 * The decision inbox refused something, and wrote nothing: an unknown request (`decision_not_found`), a request
 * already decided, used or superseded by a newer attempt (`decision_stale`), a review of a call that may
 * still be running (`call_in_flight`), a decision offered to an attempt with
 * another binding (`decision_binding_changed`), an approval of a call identical to one already approved in the same
 * session (`decision_identical`), a wait that ran out or was aborted, or a backend without an inbox.
 */
export class DecisionError extends JingweiError {
  declare readonly code: DecisionErrorCode;
  readonly decisionId: string | null;
  constructor(code: DecisionErrorCode, decisionId: string | null, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.decisionId = decisionId;
  }
}
