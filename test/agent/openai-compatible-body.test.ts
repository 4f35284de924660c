/**
 * How the OpenAI-compatible client reads a response body: as it arrives, never past maxResponseBytes (a chunked
 * body included), every failure while reading typed, the caller's own abort as its signal's reason, and a refusal
 * as the model's answer.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { it } from 'node:test';
import { ChatModelError, openAiCompatibleModel } from '../../src/agent.js';

const request = { messages: [{ role: 'user' as const, content: 'hi' }], tools: [] };
const encoder = new TextEncoder();

/** A fetch answering with a body streamed from `pull`, with no Content-Length. */
function streaming(pull: (controller: ReadableStreamDefaultController<Uint8Array>) => void | Promise<void>, status = 200) {
  const state = { pulled: 0, cancelled: false };
  const fetch = (async () => new Response(new ReadableStream<Uint8Array>({
    pull: async (controller) => {
      state.pulled += 1;
      await pull(controller);
    },
    cancel: () => { state.cancelled = true; },
  }), { status })) as typeof globalThis.fetch;
  return { fetch, state };
}

it('stops reading a chunked body at maxResponseBytes and cancels the rest', async () => {
  const chunk = encoder.encode('x'.repeat(1024));
  // 64 KiB in all, so a client that buffers the whole body fails this test rather than hanging it.
  const { fetch, state } = streaming((controller) => (state.pulled > 64 ? controller.close() : controller.enqueue(chunk)));
  const model = openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', maxResponseBytes: 4096, fetch });
  await assert.rejects(model.complete(request), (e: unknown) => e instanceof ChatModelError && e.code === 'model_bad_response' && /over the limit of 4096 bytes/.test(e.message));
  assert.ok(state.pulled <= 6, `read ${state.pulled} chunks of 1 KiB`);
  assert.equal(state.cancelled, true);
});

it('reads at most a few KiB of an error body, for its message', async () => {
  const chunk = encoder.encode('overloaded '.repeat(100));
  const { fetch, state } = streaming((controller) => (state.pulled > 64 ? controller.close() : controller.enqueue(chunk)), 503);
  const model = openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', fetch });
  await assert.rejects(model.complete(request), (e: unknown) => e instanceof ChatModelError && e.code === 'model_http_error' && e.status === 503 && /answered HTTP 503: overloaded/.test(e.message));
  assert.ok(state.pulled <= 6, `read ${state.pulled} chunks`);
});

it('a connection that fails while the body is read is model_unreachable; the caller\'s abort is its signal\'s reason', async () => {
  const reset = streaming((controller) => controller.error(new TypeError('terminated')));
  const model = openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', fetch: reset.fetch });
  await assert.rejects(model.complete(request), (e: unknown) => e instanceof ChatModelError && e.code === 'model_unreachable' && /while reading the response.*terminated/.test(e.message));

  const controller = new AbortController();
  const reason = new Error('the host gave up');
  const slow = streaming(async (c) => {
    controller.abort(reason);
    c.error(new DOMException('This operation was aborted', 'AbortError'));
  });
  const aborting = openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', fetch: slow.fetch });
  await assert.rejects(aborting.complete(request, controller.signal), (e: unknown) => e === reason);

  const before = new AbortController();
  const refusing = (async () => { before.abort(reason); throw new DOMException('aborted', 'AbortError'); }) as typeof globalThis.fetch;
  const early = openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', fetch: refusing });
  await assert.rejects(early.complete(request, before.signal), (e: unknown) => e === reason, 'not reported as an unreachable server');
});

it('a refusal is the model\'s answer text, whether its content is null, absent or empty (pass r56 #3); content wins when it has text', async () => {
  const answer = (message: Record<string, unknown>) => {
    const body = JSON.stringify({ choices: [{ message: { role: 'assistant', ...message }, finish_reason: 'stop' }] });
    return openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', fetch: (async () => new Response(body)) as typeof globalThis.fetch }).complete(request);
  };
  const refusal = 'I cannot help with that.';
  for (const content of [{ content: null }, {}, { content: '' }]) {
    assert.deepEqual(await answer({ ...content, refusal }), { text: refusal, toolCalls: [] }, JSON.stringify(content));
  }
  assert.deepEqual(await answer({ content: 'Here it is.', refusal }), { text: 'Here it is.', toolCalls: [] });
  assert.deepEqual(await answer({ content: '' }), { text: '', toolCalls: [] }, 'no refusal: the empty text as sent');
});

it('an HTTP error carries the server\'s Retry-After for the host that retries', async () => {
  const answer = (headers: Record<string, string>) => (async () => new Response('slow down', { status: 429, headers })) as typeof globalThis.fetch;
  const limited = openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', fetch: answer({ 'retry-after': '7' }) });
  await assert.rejects(limited.complete(request), (e: unknown) => e instanceof ChatModelError && e.code === 'model_http_error' && e.status === 429 && e.retryAfter === '7');
  const plain = openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', fetch: answer({}) });
  await assert.rejects(plain.complete(request), (e: unknown) => e instanceof ChatModelError && e.retryAfter === null);
});

it('maxResponseBytes must be a positive integer: NaN or a negative limit would bound nothing', () => {
  for (const maxResponseBytes of [Number.NaN, -1, 0, 1.5, Number.POSITIVE_INFINITY]) {
    assert.throws(() => openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', maxResponseBytes }), { name: 'InvalidInputError', message: /maxResponseBytes/ });
  }
});

const answering = (choice: Record<string, unknown>) => (async () => new Response(JSON.stringify({ choices: [choice] }))) as typeof globalThis.fetch;
const placeOrder = { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'place_order', arguments: '{"item":"te' } }] };

it('an answer cut at the token limit or stopped by a content filter is model_incomplete, never a final answer or a call', async () => {
  for (const [finish_reason, message, why] of [
    ['length', placeOrder, /token limit.*max_tokens/],
    ['length', { role: 'assistant', content: 'The refund was iss' }, /token limit/],
    ['content_filter', { role: 'assistant', content: 'I will' }, /content filter/],
  ] as const) {
    const model = openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', fetch: answering({ message, finish_reason }) });
    await assert.rejects(model.complete(request), (e: unknown) => e instanceof ChatModelError && e.code === 'model_incomplete' && why.test(e.message), finish_reason);
  }
  // Every other reason, or none, is a whole answer.
  for (const finish_reason of ['stop', 'tool_calls', 'function_call', 'eos', null, undefined]) {
    const model = openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', fetch: answering({ message: { role: 'assistant', content: 'Done.' }, finish_reason }) });
    assert.deepEqual(await model.complete(request), { text: 'Done.', toolCalls: [] }, String(finish_reason));
  }
});

it('a server that never answers, or trickles its answer, is model_unreachable once timeoutMs has passed', async () => {
  // A fetch that honours its signal, and answers nothing.
  const silent = (async (_url: unknown, init?: RequestInit) => new Promise<Response>((_resolve, reject) => {
    init?.signal?.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')), { once: true });
  })) as typeof globalThis.fetch;
  const quiet = openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', timeoutMs: 50, fetch: silent });
  await assert.rejects(quiet.complete(request), (e: unknown) => e instanceof ChatModelError && e.code === 'model_unreachable' && /no whole answer within 50 ms/.test(e.message));

  // A body that trickles a byte at a time, from a fetch that does not tie its body to the signal: still cut off.
  const byte = encoder.encode(' ');
  const { fetch, state } = streaming(async (controller) => {
    await new Promise((resolve) => setTimeout(resolve, 10));
    controller.enqueue(byte);
  });
  const trickling = openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', timeoutMs: 80, fetch });
  await assert.rejects(trickling.complete(request), (e: unknown) => e instanceof ChatModelError && e.code === 'model_unreachable' && /within 80 ms/.test(e.message));
  assert.equal(state.cancelled, true);

  // The caller's own abort is still its reason, not a timeout.
  const controller = new AbortController();
  const reason = new Error('the host gave up');
  setTimeout(() => controller.abort(reason), 5);
  await assert.rejects(quiet.complete(request, controller.signal), (e: unknown) => e === reason);
});

it('a request takes its listener off the caller\'s signal when it ends, so one signal can serve a long run', async () => {
  const controller = new AbortController();
  const model = openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', fetch: answering({ message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }) });
  for (let i = 0; i < 20; i += 1) await model.complete(request, controller.signal);
  assert.equal(EventEmitter.getEventListeners(controller.signal, 'abort').length, 0);
});

it('timeoutMs must be a positive integer of milliseconds a timer can wait', () => {
  for (const timeoutMs of [Number.NaN, -1, 0, 1.5, Number.POSITIVE_INFINITY, 2 ** 31]) {
    assert.throws(() => openAiCompatibleModel({ baseUrl: 'http://model.invalid/v1', model: 'm', timeoutMs }), { name: 'InvalidInputError', message: /timeoutMs/ });
  }
});
