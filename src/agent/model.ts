/**
 * The small model interface the reference agent runs on: one chat-completions request in, one assistant message
 * out. An OpenAI-compatible client over `fetch` and a scripted model for tests implement it; anything else that
 * can answer `complete` can too.
 */
import { ChatModelError } from '../errors.js';
import type { JsonObject } from '../json/types.js';
import { RUN_LIMITS } from '../limits.js';
import { describeValue, utf8Length } from '../text.js';

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

/**
 * A model's answer checked against ChatResponse before anything of it is journaled or acted on. A ChatModel is the
 * host's own code (or an adapter), so its answer is input: anything else fails with ChatModelError
 * `model_bad_response` naming the field, and the run stops where it was, to be resumed once the model answers well.
 */
export function checkChatResponse(response: unknown): ChatResponse {
  const bad = (field: string, expected: string, got: unknown) =>
    new ChatModelError('model_bad_response', `the model's answer is not a ChatResponse: ${field} must be ${expected}, got ${describeValue(got)}`);
  if (typeof response !== 'object' || response === null || Array.isArray(response)) throw bad('the answer', 'an object { text, toolCalls }', response);
  // Each field is read once, into a copy the run journals and acts on: an answer whose getters would read otherwise
  // a second time cannot have one call journaled and another run.
  let text: unknown;
  let toolCalls: unknown;
  try {
    ({ text, toolCalls } = response as { text?: unknown; toolCalls?: unknown });
  } catch (error) {
    throw new ChatModelError('model_bad_response', `the model's answer could not be read: ${describeValue(error)}`, null, { cause: error });
  }
  if (text !== null && typeof text !== 'string') throw bad('text', 'a string or null', text);
  if (text !== null && text.length > RUN_LIMITS.maxAnswerBytes / 3 && utf8Length(text) > RUN_LIMITS.maxAnswerBytes) {
    throw new ChatModelError(
      'model_bad_response',
      `the model's answer text is ${utf8Length(text)} bytes, over a run's limit of ${RUN_LIMITS.maxAnswerBytes} (RUN_LIMITS.maxAnswerBytes); nothing of it is journaled`,
    );
  }
  if (!Array.isArray(toolCalls)) throw bad('toolCalls', 'an array (empty when the model is done)', toolCalls);
  const calls: ChatToolCall[] = [];
  const count = toolCalls.length;
  for (let i = 0; i < count; i++) {
    let call: unknown;
    let read: Record<'id' | 'name' | 'arguments', unknown>;
    try {
      call = toolCalls[i];
      if (typeof call !== 'object' || call === null || Array.isArray(call)) throw bad(`toolCalls[${i}]`, 'an object { id, name, arguments }', call);
      const { id, name, arguments: args } = call as Record<string, unknown>;
      read = { id, name, arguments: args };
    } catch (error) {
      if (error instanceof ChatModelError) throw error;
      throw new ChatModelError('model_bad_response', `the model's answer could not be read: ${describeValue(error)}`, null, { cause: error });
    }
    for (const field of ['id', 'name', 'arguments'] as const) {
      if (typeof read[field] !== 'string') throw bad(`toolCalls[${i}].${field}`, field === 'arguments' ? 'JSON text (a string)' : 'a string', read[field]);
    }
    calls.push({ id: read.id as string, name: read.name as string, arguments: read.arguments as string });
  }
  return { text, toolCalls: calls };
}
