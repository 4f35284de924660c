/**
 * The OpenAI-compatible client checks its options when it is made (r78 A M2): a bad base URL, header, body, model or
 * key is the host's configuration error, InvalidInputError naming the option, with no request sent. Before, they
 * failed at the first step as `model_unreachable` ("could not reach …"), which a host retrying on that code retried
 * for ever; a missing model was left out of the request and a key that was not text was sent as "[object Object]".
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { openAiCompatibleModel, type OpenAiCompatibleOptions } from '../../src/agent.js';
import { InvalidInputError } from '../../src/errors.js';

const request = { messages: [{ role: 'user' as const, content: 'hi' }], tools: [] };

it('refuses bad options when the model is made, naming the option, and sends nothing', () => {
  let sent = 0;
  const fetch = (async () => { sent += 1; return new Response('{}'); }) as typeof globalThis.fetch;
  const good = { baseUrl: 'http://model.invalid/v1', model: 'm', fetch };
  const cases: Array<[string, Record<string, unknown>]> = [
    ['baseUrl', { baseUrl: 'not a url' }],
    ['baseUrl', { baseUrl: 'ftp://model.invalid/v1' }],
    ['baseUrl', { baseUrl: 42 }],
    ['model', { model: undefined }],
    ['model', { model: '' }],
    ['apiKey', { apiKey: { a: 1 } }],
    ['apiKey', { apiKey: '' }],
    ['headers', { headers: { 'bad header': 'x' } }],
    ['headers', { headers: ['x'] }],
    ['headers.x-n', { headers: { 'x-n': 1 } }],
    ['headers', { apiKey: 'sk-1\r\nx-evil: 1' }],
    ['body', { body: { n: 1n } }],
    ['body', { body: { temperature: Number.NaN } }],
    ['body', { body: 'temperature=0' }],
    ['timeoutMs', { timeoutMs: 2 ** 31 }],
    ['maxResponseBytes', { maxResponseBytes: 0 }],
    ['fetch', { fetch: 'curl' }],
  ];
  for (const [field, change] of cases) {
    assert.throws(() => openAiCompatibleModel({ ...good, ...change } as unknown as OpenAiCompatibleOptions), (e: unknown) => {
      assert.ok(e instanceof InvalidInputError, `${JSON.stringify(change, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v))}: ${String(e)}`);
      assert.equal(e.field, field, e.message);
      return true;
    });
  }
  assert.throws(() => openAiCompatibleModel(null as unknown as OpenAiCompatibleOptions), InvalidInputError);
  assert.equal(sent, 0);
});

it('a password in the base URL never reaches the error', () => {
  assert.throws(() => openAiCompatibleModel({ baseUrl: 'ws://user:hunter2@model.invalid/v1', model: 'm' }), (e: unknown) => e instanceof InvalidInputError && !e.message.includes('hunter2'));
  assert.throws(() => openAiCompatibleModel({ baseUrl: 'user:hunter2 not a url', model: 'm' }), (e: unknown) => e instanceof InvalidInputError && !e.message.includes('hunter2'));
});

it('good options send the model, the key, the headers and the body as given', async () => {
  let seen: { url: string; headers: Headers; body: Record<string, unknown> } | null = null;
  const fetch = (async (url: string, init: RequestInit) => {
    seen = { url, headers: new Headers(init.headers), body: JSON.parse(String(init.body)) as Record<string, unknown> };
    return new Response(JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'hello' } }] }));
  }) as unknown as typeof globalThis.fetch;
  const model = openAiCompatibleModel({ baseUrl: new URL('https://model.invalid/v1/'), model: 'm-1', apiKey: 'sk-1', headers: { 'x-team': 'ops' }, body: { temperature: 0.2 }, fetch });
  assert.equal((await model.complete(request)).text, 'hello');
  const got = seen as unknown as { url: string; headers: Headers; body: Record<string, unknown> };
  assert.equal(got.url, 'https://model.invalid/v1/chat/completions');
  assert.equal(got.headers.get('authorization'), 'Bearer sk-1');
  assert.equal(got.headers.get('x-team'), 'ops');
  assert.equal(got.body.model, 'm-1');
  assert.equal(got.body.temperature, 0.2);
});
