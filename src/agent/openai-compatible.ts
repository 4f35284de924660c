/**
 * A chat-completions client for any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama, LM Studio, ...),
 * over the platform's `fetch`: no SDK. It sends the conversation and the tool definitions, and reads back one
 * assistant message. It never retries: a failed request is an error for the caller.
 */
import { ChatModelError } from '../errors.js';
import { parseJson } from '../json/parse.js';
import type { JsonObject, JsonValue } from '../json/types.js';
import { thrownMessage, truncateUtf8 } from '../text.js';
import { checkOptions, type Target } from './openai-compatible-options.js';
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
  /**
   * Longest a request may take, from sending it to the last byte of the answer, in milliseconds. Default 600,000
   * (10 minutes): a server that stops answering, or trickles its answer, fails the run's step as `model_unreachable`
   * rather than holding it for ever.
   */
  readonly timeoutMs?: number;
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

/**
 * Why a choice's answer is not whole, by its `finish_reason`: cut at the token limit, or stopped by the server's
 * content filter. Its text would read as the run's final answer and its tool calls may have lost their arguments'
 * ends, so neither is taken: the run stops before anything of it is journaled, to be resumed (with a larger
 * `max_tokens`, say). Every other reason, or none, is a whole answer.
 */
const INCOMPLETE: Readonly<Record<string, string>> = {
  length: 'the answer was cut off at the token limit (finish_reason "length"); a larger max_tokens lets it finish',
  content_filter: 'the server\'s content filter stopped the answer (finish_reason "content_filter")',
};

function readResponse(body: JsonValue): ChatResponse {
  if (!isObject(body) || !Array.isArray(body.choices) || body.choices.length === 0) throw bad('no choices');
  const choice = body.choices[0];
  const message = isObject(choice) ? choice.message : undefined;
  if (!isObject(message)) throw bad('choices[0].message is missing');
  const finish = isObject(choice) ? choice.finish_reason : undefined;
  if (typeof finish === 'string' && Object.hasOwn(INCOMPLETE, finish)) throw new ChatModelError('model_incomplete', INCOMPLETE[finish] as string, 200);
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
  // A refusal comes in its own field, with no content (null, absent, or an empty string, as some servers send it): it
  // is the model's answer, and the run journals it as such.
  const refusal = typeof message.refusal === 'string' && message.refusal.length > 0 ? message.refusal : null;
  const text = typeof content === 'string' ? content : null;
  return { text: (text === null || text === '') && refusal !== null ? refusal : text, toolCalls };
}

/** Bytes of an error response read for its message (which is cut to 512 bytes). */
const ERROR_BODY_BYTES = 4096;

/**
 * The response body as text, read as it arrives and never past `maxBytes`: a body without a Content-Length, or
 * with a false one, is cut off there (`over`, the rest cancelled), not buffered whole.
 */
async function readBounded(response: Response, maxBytes: number, signal: AbortSignal): Promise<{ readonly text: string; readonly over: boolean }> {
  const reader = response.body?.getReader();
  if (reader === undefined) return { text: '', over: false };
  // A fetch that does not tie its body to the signal (a host's own fetch) still stops reading when it aborts.
  const stop = () => void reader.cancel(signal.reason).catch(() => undefined);
  signal.addEventListener('abort', stop, { once: true });
  try {
    return await readChunks(reader, maxBytes, signal);
  } finally {
    signal.removeEventListener('abort', stop);
  }
}

async function readChunks(reader: ReadableStreamDefaultReader<Uint8Array>, maxBytes: number, signal: AbortSignal): Promise<{ readonly text: string; readonly over: boolean }> {
  const decoder = new TextDecoder();
  let text = '';
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    // A cancelled read ends as if the body had: the abort, not the short text, is what happened.
    if (signal.aborted) throw signal.reason;
    if (done) return { text: text + decoder.decode(), over: false };
    bytes += value.byteLength;
    if (bytes > maxBytes) {
      await reader.cancel().catch(() => undefined);
      return { text: text + decoder.decode(value.subarray(0, value.byteLength - (bytes - maxBytes))), over: true };
    }
    text += decoder.decode(value, { stream: true });
  }
}

/** One request's deadline, and the caller's signal joined with it. */
interface Exchange {
  readonly signal: AbortSignal;
  readonly caller: AbortSignal | undefined;
  readonly timeoutMs: number;
  readonly timedOut: () => boolean;
  readonly done: () => void;
}

function startExchange(caller: AbortSignal | undefined, timeoutMs: number): Exchange {
  const joined = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    joined.abort(new Error(`no whole answer within ${timeoutMs} ms`));
  }, timeoutMs);
  // A listener taken off when the request ends, so a host's one signal for a long run gathers nothing.
  const follow = () => joined.abort(caller?.reason);
  if (caller?.aborted) follow();
  else caller?.addEventListener('abort', follow, { once: true });
  return {
    signal: joined.signal,
    caller,
    timeoutMs,
    timedOut: () => timedOut && !caller?.aborted,
    done: () => {
      clearTimeout(timer);
      caller?.removeEventListener('abort', follow);
    },
  };
}

/** The most of a fetch's or a server's text searched for the key: it can be any length (a fetch quoting a whole body). */
const QUOTED_MAX_BYTES = 16 * 1024;

/** A fetch's or a server's `text` as an error quotes it: cut, the URL's query taken out, and cut to `maxBytes`. */
function quoted(target: Target, text: string, maxBytes: number): string {
  return truncateUtf8(target.withoutQuery(truncateUtf8(text, QUOTED_MAX_BYTES)), maxBytes);
}

/**
 * What a failed exchange with the server is: the caller's own abort (its signal's reason, as when the signal was
 * aborted before the run), or the server unreachable before or while it answered, or too slow to answer whole.
 */
function exchangeFailure(error: unknown, exchange: Exchange, target: Target, when: string): unknown {
  if (exchange.caller?.aborted) return exchange.caller.reason;
  const shown = target.shownUrl;
  // The system's code for what failed (ECONNREFUSED, ENOTFOUND, a TLS error), which fetch's own message ("fetch failed")
  // leaves to its cause.
  const code = (error as { cause?: { code?: unknown } } | null)?.cause?.code;
  const reason = quoted(target, `${truncateUtf8(thrownMessage(error), QUOTED_MAX_BYTES)}${typeof code === 'string' && /^[A-Z0-9_]{2,40}$/.test(code) ? ` (${code})` : ''}`, 2048);
  const what = exchange.timedOut() ? `${shown} gave no whole answer within ${exchange.timeoutMs} ms` : `${when} ${shown}: ${reason}`;
  // A fetch's error may name the URL, query and all, anywhere in its cause chain: with a query that may carry a key
  // the error is not kept as the cause.
  return new ChatModelError('model_unreachable', what, null, target.queryMayCarryKey ? {} : { cause: error });
}


/** A ChatModel over an OpenAI-compatible `/chat/completions` endpoint. */
export function openAiCompatibleModel(options: OpenAiCompatibleOptions): ChatModel {
  const { target, model, headers, body: extra, maxBytes, timeoutMs, fetch: doFetch } = checkOptions(options);
  const { url, shownUrl } = target;
  return {
    async complete(request, signal) {
      const exchange = startExchange(signal, timeoutMs);
      try {
        return await exchangeWith(request, exchange);
      } finally {
        exchange.done();
      }
    },
  };

  async function exchangeWith(request: ChatRequest, exchange: Exchange): Promise<ChatResponse> {
    let response: Response;
    try {
      response = await doFetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify(requestBody(model, request, extra)),
        signal: exchange.signal,
      });
    } catch (error) {
      throw exchangeFailure(error, exchange, target, 'could not reach');
    }
    const length = response.headers.get('content-length');
    const declared = length === null ? Number.NaN : Number(length);
    if (Number.isFinite(declared) && declared > maxBytes) {
      await response.body?.cancel().catch(() => undefined);
      throw new ChatModelError('model_bad_response', `the response is ${declared} bytes, over the limit of ${maxBytes}`, response.status);
    }
    let read: { readonly text: string; readonly over: boolean };
    try {
      read = await readBounded(response, response.ok ? maxBytes : Math.min(maxBytes, ERROR_BODY_BYTES), exchange.signal);
    } catch (error) {
      throw exchangeFailure(error, exchange, target, 'the connection failed while reading the response of');
    }
    const text = read.text;
    if (!response.ok) {
      const retryAfter = response.headers.get('retry-after');
      throw new ChatModelError('model_http_error', `${shownUrl} answered HTTP ${response.status}: ${quoted(target, text, 512)}`, response.status, {
        retryAfter: retryAfter === null ? null : truncateUtf8(retryAfter, 256),
      });
    }
    if (read.over) throw new ChatModelError('model_bad_response', `the response is over the limit of ${maxBytes} bytes`, response.status);
    let body: JsonValue;
    try {
      body = parseJson(text, { maxBytes });
    } catch (error) {
      // The reader's message may quote the body (a duplicate key), and a server may echo the URL, query and all, in it.
      throw new ChatModelError('model_bad_response', `the response is not JSON: ${quoted(target, thrownMessage(error), 512)}`, response.status, target.queryMayCarryKey ? {} : { cause: error });
    }
    return readResponse(body);
  }
}
