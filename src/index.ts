/**
 * Jingwei: a durable, auditable tool runtime for AI agents. Tools declare their side effects; every call and
 * result is journaled before and after the body runs; after a crash, recovery proves what happened and plans at
 * most one explicit retry.
 *
 * The root entry holds what an application needs: the runtime and tool metadata, the memory store, recovery,
 * assessment, the errors, and the public types. The journal's wire format is in `jingwei/wire`, the reference agent
 * and model clients in `jingwei/agent`, the stores in `jingwei/sqlite` and `jingwei/postgres`, and the framework
 * bridges in `jingwei/ai-sdk`, `jingwei/openai-agents` and `jingwei/mcp`. Every value exported here is listed in
 * test/package/exports.snapshot.json.
 */

// The runtime and tool metadata.
export { createToolRuntime } from './tool/runtime.js';
export { ToolMetadata, type JsonSchema } from './tool/metadata.js';
export type * from './tool/types.js';
export type * from './tool/telemetry-types.js';
export { ToolEffect, ToolReviewOutcome } from './event/types.js';
export type * from './event/types.js';
export type { CallId, EventId, OperationKey, SessionId, TaskId, TurnId } from './ids.js';
export type { JsonObject, JsonPrimitive, JsonValue } from './json/types.js';
export { LIMITS, RUNTIME_DEFAULTS, TASK_DEFAULTS } from './limits.js';
export { externalIdempotencyKey, idempotencyScope, type ExternalKeyRequest, type IdempotencyRequest, type IdempotencyScope, type IdempotentOutcome } from './tool/idempotency.js';

// Stores: the contract every store meets, and the in-memory one (SQLite and PostgreSQL have their own entries).
export type * from './store/types.js';
export { createMemoryStore } from './store/memory.js';

// Recovery and assessment.
export { inspectToolRecovery, prepareToolRetry, ToolRecoveryStatus, type ToolRecoveryAssessment } from './tool/recovery.js';
export { ToolRetryPlan, type ToolRetryBinding } from './tool/retry-plan.js';
export { assessSession, ToolNextStep, type SessionAssessment, type SessionAssessmentTotals, type ToolCallAssessment } from './tool/assess.js';

// Errors: the classes an application meets from the APIs above, and the catalogue's types. The wire format's own
// errors are exported by `jingwei/wire`, the agent's and bridges' by `jingwei/agent`.
export {
  BudgetExhaustedError,
  DriverMissingError,
  IdempotencyConflictError,
  InvalidInputError,
  JingweiError,
  JournalCorruptError,
  JournalFullError,
  JournalImportError,
  RECORDED_FAILURE_CODES,
  SessionBusyError,
  StaleOwnerError,
  StoreBusyError,
  StoreConflictError,
  StoreUnavailableError,
  TaskNotFoundError,
  TaskNotRunningError,
  ToolBodyError,
  ToolConfigError,
  ToolOverloadedError,
  ToolPreflightError,
  ToolRecordingError,
  ToolRetryError,
  ToolRetryPlanNotSerializableError,
  ToolTurnClosedError,
  type JingweiErrorCode,
  type JournalCorruptReason,
  type JsonParseReason,
  type PhysicalLogViolation,
  type RecordedFailureCode,
  type StoreConflictCode,
  type StoreUnavailableCode,
  type ToolPreflightCode,
  type ToolRetryErrorCode,
} from './errors.js';
