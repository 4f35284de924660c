/**
 * `jingwei/agent`: the reference agent loop (`runAgent`, `resumeAgent`), the model clients it drives, and the framework-neutral
 * helpers every bridge is built from: what a model may read about a call (`modelFacingOutcome`,
 * `describeToolFailure`), one gateway call run for a model (`runForModel`), the tool schemas a framework takes
 * (`objectSchema`, `selectSchemas`), and the errors a bridge throws. It imports no framework package.
 */
export type { ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatToolCall, ChatToolDefinition } from './agent/model.js';
export { openAiCompatibleModel, type OpenAiCompatibleOptions } from './agent/openai-compatible.js';
export { scriptedModel, type ScriptedModel, type ScriptedTurn } from './agent/scripted-model.js';
// Resumable runs (docs/design.md#resumable-runs): the key each requested call gets, and the run id's rules.
export { runOperationKey } from './agent/run-journal.js';
export { RUN_LIMITS } from './limits.js';
export { resumeAgent, runAgent, type AgentRecoveryPolicy, type AgentRunResult, type AgentStopReason, type AgentToolCall, type ResumeAgentOptions, type RunAgentOptions } from './agent/run-agent.js';
export { describeToolFailure, modelFacingOutcome, runForModel, type ModelFacingOutcome } from './bridges/outcome.js';
export { objectSchema, selectSchemas } from './bridges/schema.js';
export { ChatModelError, ToolCallFailedError, ToolRuntimeHaltedError, type ChatModelErrorCode, type ToolCallFailure } from './errors.js';
// Thrown by `callWithOptions` with a caller key whose operation did not complete; exported here, with the runs
// that key their calls, while the root entry is at its size limit.
export { AgentRunBusyError, OperationConfirmedError, OperationInDoubtError, OperationMadeByIdenticalError } from './errors.js';
export { IDEMPOTENCY_KEY_HEADER, idempotencyHeaders, jingweiFetch, type IdempotencyKeyed, type JingweiFetchOptions } from './bridges/idempotency-fetch.js';
