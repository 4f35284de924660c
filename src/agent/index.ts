export type { ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatToolCall, ChatToolDefinition } from './model.js';
export { ChatModelError, openAiCompatibleModel, type OpenAiCompatibleOptions } from './openai-compatible.js';
export { scriptedModel, type ScriptedModel, type ScriptedTurn } from './scripted-model.js';
export { runAgent, type AgentRunResult, type AgentStopReason, type AgentToolCall, type RunAgentOptions } from './run-agent.js';
export type { ModelFacingOutcome } from '../bridges/outcome.js';
export { IDEMPOTENCY_KEY_HEADER, idempotencyHeaders, jingweiFetch, type IdempotencyKeyed, type JingweiFetchOptions } from '../bridges/idempotency-fetch.js';
