/** Every bound the library enforces, in one place (docs/design.md#limits). Sizes are UTF-8 bytes unless named otherwise. */
export const LIMITS = {
  /** Events in one history handed to recovery, or held by one session. */
  maxHistoryEvents: 100_000,
  /** Compact JSON size of a whole history (wire form). Exactly this size passes. */
  maxHistoryBytes: 16 * 1024 * 1024,
  /** Ids, operation keys, contract revisions, audit and review text, after trimming non-empty. */
  maxTextBytes: 1024,
  /** Tool names: non-empty (not trimmed), at most this many bytes. */
  maxToolNameBytes: 256,
  /** Compact JSON of one call's arguments. */
  maxArgumentsBytes: 1024 * 1024,
  /**
   * Compact JSON of the arguments of a call to a tool the caller cannot use (not registered, or not granted). Such a
   * call is journaled with its `unavailable` result only up to this size; a larger one is refused before anything is
   * recorded, so calls to tools that do not exist cannot fill a session's journal.
   */
  maxUnavailableArgumentsBytes: 4 * 1024,
  /**
   * Nesting of one call's arguments: the journal line adds three levels above them (event, kind, call), and every
   * line must stay within maxJsonDepth so an exported journal can always be imported again.
   */
  maxArgumentsDepth: 256 - 3,
  /**
   * A call's deadline and a tool's timeout ceiling, in ms: Node's timers hold at most 2^31 − 1 ms (about 24.8 days)
   * and fire at once for anything longer, which would time out every call the moment it starts.
   */
  maxTimeoutMs: 2_147_483_647,
  /**
   * Journal room an admitted call keeps, beyond its output reservation, until its result is recorded: its start
   * marker, its result (a failure's code and message, an approval record) and one review, each at its largest
   * (every id and text at its limit, every character escaped), measured by test/store/evidence-room.test.ts.
   */
  evidenceRoomBytes: 128 * 1024,
  /**
   * Journal room an operation whose outcome is open (its write in doubt, or its call still running) keeps for one
   * review at its largest (37,145 bytes, measured by test/store/evidence-room.test.ts), so a person can always record
   * what became of the write (docs/design.md#a-result-always-has-room).
   */
  reviewRoomBytes: 40 * 1024,
  /** Journal events an admitted call keeps until its result is written: its marker, its result, a body's end and a review. */
  evidenceRoomEvents: 4,
  /** Journal events an operation whose outcome is open keeps: a body's end and a review. */
  reviewRoomEvents: 2,
  /**
   * The session id, task id and operation key of one idempotency helper record together, in UTF-8 bytes: PostgreSQL
   * keys the record on them, and a B-tree entry holds at most about 2,700 bytes. Every operation the runtime makes
   * fits (its ids at most 1,024 bytes each, a key at most 200); the helpers refuse a request over it on both engines.
   */
  maxIdempotencyIdBytes: 2_400,
  /** Failure code and message are truncated (never rejected) to this many bytes on a character boundary. */
  maxDiagnosticBytes: 1024,
  /** Untrusted JSON documents handed to the bounded parser, unless a caller passes a smaller bound. */
  maxJsonBytes: 64 * 1024 * 1024,
  /** Nesting depth accepted by the bounded parser and the canonical-JSON routine. */
  maxJsonDepth: 256,
  /** One line of a JSONL journal on import. */
  maxJsonlLineBytes: 16 * 1024 * 1024,
  /**
   * Pages of an MCP server's `tools/list` the bridge follows (`nextCursor`) before it gives up with
   * McpUnavailableError: a server whose listing never ends (or repeats a cursor) cannot be imported.
   */
  maxMcpToolListPages: 1_000,
  /**
   * How long the bridge waits for an MCP server to answer the DELETE that ends an HTTP session it gives up or closes
   * before it closes the client anyway: a server that does not answer must not hold up the host's shutdown.
   */
  mcpSessionEndMs: 2_000,
  /**
   * Reconcilers one reconcile pass asks at the same time. They are asked at once so a pass over many calls in doubt
   * takes about the longest answer, not the sum; the bound keeps a session with hundreds of them from sending as
   * many lookups to the outside system at once.
   */
  maxConcurrentReconcilerAsks: 8,
} as const;

/** Runtime defaults (docs/design.md#the-admission-order). */
export const RUNTIME_DEFAULTS = {
  timeoutMs: 30_000,
  maxOutputBytes: 64 * 1024,
  maxInFlight: 1024,
  /**
   * Times a call's result is written while the store answers `store_busy` (a lock held past the store's busy or lock
   * timeout): what the body did is known, and a busy store wrote nothing, so giving up at once would leave a finished
   * call in doubt for a person to review (docs/design.md#a-busy-store-does-not-lose-a-result).
   */
  resultWriteAttempts: 3,
  /**
   * How long reconcileUncertainCalls waits for one reconciler's answer before it reports it `failed` and goes on: a
   * lookup that never answers would hold a resume, or a host's startup routine, for ever (docs/design.md#reconcilers).
   */
  reconcileTimeoutMs: 30_000,
} as const;

/** Task budget defaults (docs/design.md#tasks-and-budgets). */
export const TASK_DEFAULTS = {
  toolCalls: 128,
  toolOutputBytes: 16 * 1024 * 1024,
  /**
   * Journal bytes a task's tool calls, markers and results may take: half a session's journal, so one task that
   * fills it (a model sending huge arguments) exhausts its own budget, never the session (docs/design.md#budgets-are-exact).
   */
  journalBytes: 8 * 1024 * 1024,
} as const;

/** Store defaults: how long a writer waits for a lock before a typed busy error. */
export const STORE_DEFAULTS = {
  busyTimeoutMs: 5_000,
  /**
   * How far ahead of the reader's clock a call's recorded time may be and still count as recent for an age filter
   * (`--older-than`): ordinary skew between hosts. A time further ahead says nothing of the call's age, and the call
   * is listed (docs/design.md#recorded-times).
   */
  clockAheadMs: 60_000,
  /**
   * How far ahead of the importing host's clock an imported event's recorded time may be: past it, the file is
   * refused at that line. Times never decrease, so one such event would stamp every later event of the session.
   */
  importAheadMs: 24 * 60 * 60 * 1000,
  /**
   * How long a release, a close or the startup routine waits for tool bodies still running in the process before it
   * says so once, as a process warning: a body that ignores its abort signal would otherwise hold a shutdown silently.
   */
  bodyWaitWarningMs: 5_000,
} as const;

/** PostgreSQL store defaults: bounded waits surface as StoreBusyError instead of hanging. */
export const POSTGRES_DEFAULTS = {
  lockTimeoutMs: STORE_DEFAULTS.busyTimeoutMs,
  statementTimeoutMs: 30_000,
  idleInTransactionTimeoutMs: 60_000,
  poolSize: 10,
  connectTimeoutMs: 10_000,
  /**
   * How much longer than the statement timeout the client waits for an answer before it gives the connection up: the
   * server enforces its timeouts only while it can be reached, and a network partition that drops packets without a
   * reset would otherwise hold a call, a wait or close() until the network heals.
   */
  answerMarginMs: 5_000,
  /**
   * After a transaction lost its connection, how long in all it waits for a server that refuses connections while it
   * restarts, trying again with a growing wait (docs/design.md#a-lost-connection-is-tried-again).
   */
  reconnectWaitMs: 5_000,
} as const;

/** Session leases (docs/design.md#leases): how long an owner's hold lasts without a write or a heartbeat. */
export const LEASE_LIMITS = {
  /** The lease an acquire takes when it names none. */
  defaultMs: 30_000,
  /** Shortest lease accepted: a heartbeat every third of it must still be practical. */
  minMs: 100,
  /** Longest lease accepted (one day). */
  maxMs: 24 * 60 * 60 * 1000,
} as const;

/** The startup routine (docs/design.md#recovering-abandoned-sessions). */
export const RECOVERY_LIMITS = {
  /** At most this many sessions recovered at once (`concurrency`); each holds a store connection while it works. */
  maxConcurrency: 64,
} as const;

/** Caller-given operation keys (docs/design.md#caller-keys-and-replay). */
export const OPERATION_KEY_LIMITS = {
  /** At most this many bytes (all ASCII, so also characters). */
  maxBytes: 200,
  /** Letters, digits and `-_.:/@`, starting with a letter or digit: safe in logs, URLs and the CLI. */
  pattern: /^[A-Za-z0-9][A-Za-z0-9._:/@-]*$/,
} as const;

/** Agent run ids (docs/design.md#resumable-runs): each requested call's operation key is `<runId>/<step>/<index>`. */
export const RUN_LIMITS = {
  /** At most this many characters (ASCII), so the derived key stays within OPERATION_KEY_LIMITS.maxBytes. */
  maxRunIdBytes: 160,
  /**
   * The longest answer text a run journals for one step (UTF-8 bytes). A run keeps it with the assistant message,
   * the step's model_response and, at its end, run_finished, none of them charged to a task: a longer answer is
   * refused (ChatModelError `model_bad_response`) before any of it is journaled, so a model cannot fill the session.
   */
  maxAnswerBytes: 256 * 1024,
  /** OPERATION_KEY_LIMITS's characters without `/`, which separates the key's parts. */
  pattern: /^[A-Za-z0-9][A-Za-z0-9._:@-]*$/,
} as const;

/** A deadline in milliseconds the runtime accepts: a positive integer of at most LIMITS.maxTimeoutMs. */
export function isTimeoutMs(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0 && value <= LIMITS.maxTimeoutMs;
}
