export { aiSdkTools, jingweiHalted, type AiSdkToolsOptions } from './bridges/ai-sdk.js';
// Resumable tool loops (docs/design.md#bridges-resume-from-the-journal).
export { aiSdkRun, type AiSdkLanguageModel, type AiSdkRun, type AiSdkRunOptions } from './bridges/ai-sdk-run.js';
export type { BridgeRunOptions, BridgeRunStatus } from './bridges/run.js';
export type { AgentRecoveryPolicy, AgentToolCall } from './agent/run-calls.js';
export { describeToolFailure, modelFacingOutcome, type ModelFacingOutcome } from './bridges/outcome.js';
export { ToolCallFailedError, ToolRuntimeHaltedError } from './errors.js';
