export { aiSdkTools, jingweiHalted, type AiSdkToolsOptions } from './bridges/ai-sdk.js';
export { ToolCallFailedError, ToolRuntimeHaltedError, describeToolFailure, modelFacingOutcome, type ModelFacingOutcome } from './bridges/outcome.js';
