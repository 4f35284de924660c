export { openAiAgentsTools, type OpenAiAgentsToolsOptions } from './bridges/openai-agents.js';
export { ToolCallFailedError, ToolRuntimeHaltedError, describeToolFailure, modelFacingOutcome, type ModelFacingOutcome } from './bridges/outcome.js';
