/**
 * Jingwei: a durable, auditable tool runtime for AI agents. Tools declare their side effects; every call and
 * result is journaled before and after the body runs; after a crash, recovery proves what happened and plans at
 * most one explicit retry.
 */
export * from './event/index.js';
export * from './errors.js';
export * from './ids.js';
export { LIMITS, RUNTIME_DEFAULTS, TASK_DEFAULTS, STORE_DEFAULTS } from './limits.js';
export { canonicalJson, compactJsonBytes, jsonDigest, jsonEquals } from './json/canonical.js';
export { parseJson, type ParseJsonOptions } from './json/parse.js';
export type { JsonObject, JsonPrimitive, JsonValue } from './json/types.js';
export type * from './store/types.js';
export { createMemoryStore } from './store/memory.js';
export { JournalImportError, parseJournal } from './store/jsonl.js';
export { ToolMetadata, DEFAULT_CONTRACT, type JsonSchema } from './tool/metadata.js';
export type * from './tool/types.js';
export { createToolRuntime } from './tool/runtime.js';
export { ToolBodyError, ToolConfigError, ToolOverloadedError, ToolPreflightError, ToolRecordingError, ToolTurnClosedError, type ToolPreflightCode } from './tool/errors.js';
export { ToolRetryError, type ToolRetryErrorCode } from './tool/retry-error.js';
export { inspectToolRecovery, prepareToolRetry, ToolRecoveryStatus, validateToolContract, type ToolRecoveryAssessment } from './tool/recovery.js';
export { ToolRetryPlan, ToolRetryPlanNotSerializableError, type ToolRetryBinding } from './tool/retry-plan.js';
export { assessSession, ToolNextStep, type SessionAssessment, type SessionAssessmentTotals, type ToolCallAssessment } from './tool/assess.js';
export { externalIdempotencyKey, idempotencyScope, type IdempotencyRequest, type IdempotencyScope, type IdempotentOutcome } from './tool/idempotency.js';
export { FAULT_POINTS, setFaultHook, type FaultPoint } from './fault.js';
export * from './agent/index.js';
