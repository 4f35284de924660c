/**
 * The small model interface the reference agent runs on: one chat-completions request in, one assistant message
 * out. An OpenAI-compatible client over `fetch` and a scripted model for tests implement it; anything else that
 * can answer `complete` can too.
 */
import type { JsonObject } from '../json/types.js';

/** One tool call the model asked for. */
export interface ChatToolCall {
  /** The model's id for the call; tool messages answer it. Not a Jingwei call id. */
  readonly id: string;
  readonly name: string;
  /** The arguments as the model wrote them: JSON text, not yet parsed. */
  readonly arguments: string;
}

export type ChatMessage =
  | { readonly role: 'system'; readonly content: string }
  | { readonly role: 'user'; readonly content: string }
  | { readonly role: 'assistant'; readonly content: string | null; readonly toolCalls?: readonly ChatToolCall[] }
  | { readonly role: 'tool'; readonly toolCallId: string; readonly content: string };

/** A tool as the model sees it: name, description and argument schema; nothing else. */
export interface ChatToolDefinition {
  readonly name: string;
  readonly description: string;
  readonly parameters: JsonObject;
}

export interface ChatRequest {
  readonly messages: readonly ChatMessage[];
  readonly tools: readonly ChatToolDefinition[];
}

/** The assistant's answer: text, tool calls, or both. No tool calls means the model is done. */
export interface ChatResponse {
  readonly text: string | null;
  readonly toolCalls: readonly ChatToolCall[];
}

export interface ChatModel {
  complete(request: ChatRequest, signal?: AbortSignal): Promise<ChatResponse>;
}
