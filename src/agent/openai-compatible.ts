/**
 * A chat-completions client for any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama, LM Studio, ...),
 * over the platform's `fetch`: no SDK. It sends the conversation and the tool definitions, and reads back one
 * assistant message. It never retries: a failed request is an error for the caller.
 */
import { ChatModelError, InvalidInputError } from '../errors.js';
import { parseJson } from '../json/parse.js';
import type { JsonObject, JsonValue } from '../json/types.js';
import { describeValue, thrownMessage, truncateUtf8 } from '../text.js';
import type { ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatToolCall } from './model.js';

export interface OpenAiCompatibleOptions {
  /** The API root, such as `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`; `/chat/completions` is appended. */
  readonly baseUrl: string | URL;
  readonly model: string;
  /** Sent as `Authorization: Bearer …` when given. */
  readonly apiKey?: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** Extra request fields (temperature, max_tokens, …), merged under the ones this client sets. */
  readonly body?: Readonly<JsonObject>;
  /** Largest accepted response body, in bytes. Default 8 MiB. */
  readonly maxResponseBytes?: number;
  /** Defaults to the global `fetch`. */
  readonly fetch?: typeof fetch;
}

function wireMessage(message: ChatMessage): JsonObject {
  switch (message.role) {
    case 'system':
    case 'user':
      return { role: message.role, content: message.content };
    case 'assistant': {
      const wire: JsonObject = { role: 'assistant', content: message.content };
      if (message.toolCalls && message.toolCalls.length > 0) {
        wire.tool_calls = message.toolCalls.map((call) => ({
          id: call.id,
          type: 'function',
          function: { name: call.name, arguments: call.arguments },
        }));
      }
      return wire;
    }
    case 'tool':
      return { role: 'tool', tool_call_id: message.toolCallId, content: message.content };
  }
}

function requestBody(model: string, request: ChatRequest, extra: Readonly<JsonObject> | undefined): JsonObject {
  const body: JsonObject = { ...(extra ?? {}), model, messages: request.messages.map(wireMessage) };
  if (request.tools.length > 0) {
    body.tools = request.tools.map((tool) => ({
      type: 'function',
      function: { name: tool.name, description: tool.description, parameters: tool.parameters },
    }));
  }
  return body;
}

const isObject = (value: unknown): value is Record<string, JsonValue> => typeof value === 'object' && value !== null && !Array.isArray(value);

function bad(message: string): ChatModelError {
  return new ChatModelError('model_bad_response', `not a chat completion: ${message}`);
}

function readResponse(body: JsonValue): ChatResponse {
  if (!isObject(body) || !Array.isArray(body.choices) || body.choices.length === 0) throw bad('no choices');
  const message = isObject(body.choices[0]) ? body.choices[0].message : undefined;
  if (!isObject(message)) throw bad('choices[0].message is missing');
  const content = message.content;
  if (content !== null && content !== undefined && typeof content !== 'string') throw bad('message.content is not text');
  const wireCalls = message.tool_calls ?? [];
  if (!Array.isArray(wireCalls)) throw bad('message.tool_calls is not a list');
  const toolCalls: ChatToolCall[] = wireCalls.map((wire, index) => {
    const fn = isObject(wire) ? wire.function : undefined;
    if (!isObject(wire) || !isObject(fn) || typeof fn.name !== 'string') throw bad(`tool_calls[${index}] has no function name`);
    const args = fn.arguments;
    return {
      id: typeof wire.id === 'string' && wire.id.length > 0 ? wire.id : `call_${index}`,
      name: fn.name,
      // Some servers send the arguments as an object rather than JSON text.
      arguments: typeof args === 'string' ? args : args === undefined || args === null ? '{}' : JSON.stringify(args),
    };
  });
  // A refusal comes in its own field, with no content: it is the model's answer, and the run journals it as such.
  const refusal = typeof message.refusal === 'string' && message.refusal.length > 0 ? message.refusal : null;
  return { text: typeof content === 'string' ? content : refusal, toolCalls };
}

/** Bytes of an error response read for its message (which is cut to 512 bytes). */
const ERROR_BODY_BYTES = 4096;

/**
 * The response body as text, read as it arrives and never past `maxBytes`: a body without a Content-Length, or
 * with a false one, is cut off there (`over`, the rest cancelled), not buffered whole.
 */
async function readBounded(response: Response, maxBytes: number): Promise<{ readonly text: string; readonly over: boolean }> {
  const reader = response.body?.getReader();
  if (reader === undefined) return { text: '', over: false };
  const decoder = new TextDecoder();
  let text = '';
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return { text: text + decoder.decode(), over: false };
    bytes += value.byteLength;
    if (bytes > maxBytes) {
      await reader.cancel().catch(() => undefined);
      return { text: text + decoder.decode(value.subarray(0, value.byteLength - (bytes - maxBytes))), over: true };
    }
    text += decoder.decode(value, { stream: true });
  }
}

/**
 * What a failed exchange with the server is: the caller's own abort (its signal's reason, as when the signal was
 * aborted before the run), or the server unreachable, before or while it answered.
 */
function exchangeFailure(error: unknown, signal: AbortSignal | undefined, url: string, when: string): unknown {
  if (signal?.aborted) return signal.reason;
  return new ChatModelError('model_unreachable', `${when} ${url}: ${thrownMessage(error)}`, null, { cause: error });
}

/** A ChatModel over an OpenAI-compatible `/chat/completions` endpoint. */
export function openAiCompatibleModel(options: OpenAiCompatibleOptions): ChatModel {
  const url = `${String(options.baseUrl).replace(/\/+$/, '')}/chat/completions`;
  const maxBytes = options.maxResponseBytes ?? 8 * 1024 * 1024;
  if (!Number.isSafeInteger(maxBytes) || maxBytes <= 0) {
    throw new InvalidInputError('maxResponseBytes', `must be a positive integer, got ${describeValue(maxBytes)}`);
  }
  const doFetch = options.fetch ?? fetch;
  return {
    async complete(request, signal) {
      const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json', ...(options.headers ?? {}) };
      if (options.apiKey !== undefined) headers.authorization = `Bearer ${options.apiKey}`;
      let response: Response;
      try {
        response = await doFetch(url, {
          method: 'POST',
          headers,
          body: JSON.stringify(requestBody(options.model, request, options.body)),
          ...(signal ? { signal } : {}),
        });
      } catch (error) {
        throw exchangeFailure(error, signal, url, 'could not reach');
      }
      const length = response.headers.get('content-length');
      const declared = length === null ? Number.NaN : Number(length);
      if (Number.isFinite(declared) && declared > maxBytes) {
        await response.body?.cancel().catch(() => undefined);
        throw new ChatModelError('model_bad_response', `the response is ${declared} bytes, over the limit of ${maxBytes}`, response.status);
      }
      let read: { readonly text: string; readonly over: boolean };
      try {
        read = await readBounded(response, response.ok ? maxBytes : Math.min(maxBytes, ERROR_BODY_BYTES));
      } catch (error) {
        throw exchangeFailure(error, signal, url, 'the connection failed while reading the response of');
      }
      const text = read.text;
      if (!response.ok) {
        const retryAfter = response.headers.get('retry-after');
        throw new ChatModelError('model_http_error', `${url} answered HTTP ${response.status}: ${truncateUtf8(text, 512)}`, response.status, {
          retryAfter: retryAfter === null ? null : truncateUtf8(retryAfter, 256),
        });
      }
      if (read.over) throw new ChatModelError('model_bad_response', `the response is over the limit of ${maxBytes} bytes`, response.status);
      let body: JsonValue;
      try {
        body = parseJson(text, { maxBytes });
      } catch (error) {
        throw new ChatModelError('model_bad_response', `the response is not JSON: ${(error as Error).message}`, response.status, { cause: error });
      }
      return readResponse(body);
    },
  };
}
