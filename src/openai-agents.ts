export { openAiAgentsTools, type OpenAiAgentsToolsOptions } from './bridges/openai-agents.js';
export { describeToolFailure, modelFacingOutcome, type ModelFacingOutcome } from './bridges/outcome.js';
export { ToolCallFailedError, ToolRuntimeHaltedError } from './errors.js';
