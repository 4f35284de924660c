export { aiSdkTools, jingweiHalted, type AiSdkToolsOptions } from './bridges/ai-sdk.js';
export { describeToolFailure, modelFacingOutcome, type ModelFacingOutcome } from './bridges/outcome.js';
export { ToolCallFailedError, ToolRuntimeHaltedError } from './errors.js';
