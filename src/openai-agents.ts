export { openAiAgentsTools, type OpenAiAgentsToolsOptions } from './bridges/openai-agents.js';
// Resumable runs (docs/design.md#bridges-resume-from-the-journal).
export { openAiAgentsRun, type OpenAiAgentsRun, type OpenAiAgentsRunOptions } from './bridges/openai-agents-run.js';
export type { BridgeRunOptions, BridgeRunStatus } from './bridges/run.js';
export type { AgentRecoveryPolicy, AgentToolCall } from './agent/run-calls.js';
export { describeToolFailure, modelFacingOutcome, type ModelFacingOutcome } from './bridges/outcome.js';
export { ToolCallFailedError, ToolRuntimeHaltedError } from './errors.js';
