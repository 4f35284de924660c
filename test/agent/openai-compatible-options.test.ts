/**
 * The OpenAI-compatible client checks its options when it is made (r78 A M2): a bad base URL, header, body, model or
 * key is the host's configuration error, InvalidInputError naming the option, with no request sent. Before, they
 * failed at the first step as `model_unreachable` ("could not reach …"), which a host retrying on that code retried
 * for ever; a missing model was left out of the request and a key that was not text was sent as "[object Object]".
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { inspect } from 'node:util';
import { ChatModelError, openAiCompatibleModel, type OpenAiCompatibleOptions } from '../../src/agent.js';
import { InvalidInputError } from '../../src/errors.js';
import { toWellFormed } from '../../src/text.js';

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
    ['apiKey', { apiKey: 'sk-1\u0000' }],
    ['baseUrl', { baseUrl: 'https://user:pw@model.invalid/v1' }],
    ['headers', { headers: { 'bad header': 'x' } }],
    ['headers', { headers: ['x'] }],
    ['headers.x-n', { headers: { 'x-n': 1 } }],
    ['apiKey', { apiKey: 'sk-1\r\nx-evil: 1' }],
    ['headers.api-key', { headers: { 'api-key': 'sk-1\r\nx' } }],
    ['body', { body: { n: 1n } }],
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

it('a key or a password never reaches the error (r79 F4)', () => {
  const secretKept = (e: unknown) => e instanceof InvalidInputError && !e.message.includes('hunter2');
  assert.throws(() => openAiCompatibleModel({ baseUrl: 'ws://user:hunter2@model.invalid/v1', model: 'm' }), secretKept);
  assert.throws(() => openAiCompatibleModel({ baseUrl: 'user:hunter2 not a url', model: 'm' }), secretKept);
  assert.throws(() => openAiCompatibleModel({ baseUrl: 'https://user:hunter2@model.invalid/v1', model: 'm' }), secretKept);
  assert.throws(() => openAiCompatibleModel({ baseUrl: 'https://model.invalid/v1', model: 'm', apiKey: 'sk-hunter2\u0000' }), secretKept);
  assert.throws(() => openAiCompatibleModel({ baseUrl: 'https://model.invalid/v1', model: 'm', headers: { 'api-key': 'hunter2\r\n' } }), secretKept);
});

it('configurations that worked before still work: a field left undefined in body, an empty key for a local server (r79 F5)', async () => {
  const seen: { url: string; headers: Headers; body: Record<string, unknown> }[] = [];
  const fetch = (async (url: string, init: RequestInit) => {
    seen.push({ url, headers: new Headers(init.headers), body: JSON.parse(String(init.body)) as Record<string, unknown> });
    return new Response(JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'hello' } }] }));
  }) as unknown as typeof globalThis.fetch;
  const cfg: { temperature?: number } = {};
  await openAiCompatibleModel({ baseUrl: 'http://127.0.0.1:11434/v1', model: 'llama', apiKey: '', body: { temperature: cfg.temperature, max_tokens: 50 } as unknown as Record<string, number>, fetch }).complete(request);
  assert.equal(seen[0]!.headers.get('authorization'), null, 'an empty key sends none');
  assert.deepEqual(seen[0]!.body.max_tokens, 50);
  assert.equal('temperature' in seen[0]!.body, false, 'left out, as JSON.stringify leaves it out');
});

it('the URL is the one given: spaces around it trimmed, a query kept as a query, a Headers object sent (r79 F6)', async () => {
  const seen: { url: string; headers: Headers }[] = [];
  const fetch = (async (url: string, init: RequestInit) => {
    seen.push({ url, headers: new Headers(init.headers) });
    return new Response(JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'hello' } }] }));
  }) as unknown as typeof globalThis.fetch;
  await openAiCompatibleModel({ baseUrl: ' https://model.invalid/v1/ ', model: 'm', headers: new Headers({ 'x-team': 'ops' }) as unknown as Record<string, string>, fetch }).complete(request);
  await openAiCompatibleModel({ baseUrl: 'https://x.openai.azure.com/openai/deployments/d?api-version=2024-02-01', model: 'm', fetch }).complete(request);
  assert.equal(seen[0]!.url, 'https://model.invalid/v1/chat/completions');
  assert.equal(seen[0]!.headers.get('x-team'), 'ops');
  assert.equal(seen[1]!.url, 'https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-02-01');
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

it('a key in the URL\'s query never reaches a model error (r80 G4)', async () => {
  const failing = (async () => { throw new TypeError('fetch failed'); }) as unknown as typeof globalThis.fetch;
  const refusing = (async () => new Response('no', { status: 401 })) as unknown as typeof globalThis.fetch;
  for (const fetch of [failing, refusing]) {
    const model = openAiCompatibleModel({ baseUrl: 'https://generativelanguage.invalid/v1beta/openai?key=hunter2', model: 'm', fetch });
    await assert.rejects(model.complete(request), (e: unknown) => e instanceof ChatModelError && !e.message.includes('hunter2') && e.message.includes('https://generativelanguage.invalid/v1beta/openai/chat/completions'));
  }
});

it('headers as fetch takes them: a character past Latin-1 refused by name, pairs and a library\'s Headers sent, apiKey replaces Authorization (r80 G5, G6)', async () => {
  const seen: Headers[] = [];
  const fetch = (async (_url: string, init: RequestInit) => {
    seen.push(new Headers(init.headers));
    return new Response(JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'hello' } }] }));
  }) as unknown as typeof globalThis.fetch;
  const base = { baseUrl: 'https://model.invalid/v1', model: 'm', fetch };
  assert.throws(() => openAiCompatibleModel({ ...base, apiKey: 'sk-hunter2\u201d' }), (e: unknown) => e instanceof InvalidInputError && e.field === 'apiKey' && !e.message.includes('hunter2'));
  assert.throws(() => openAiCompatibleModel({ ...base, headers: { 'api-key': '\u201chunter2' } }), (e: unknown) => e instanceof InvalidInputError && e.field === 'headers.api-key' && !e.message.includes('hunter2'));
  // A Headers of another library (undici's, say) is not this platform's class, but reads the same.
  const foreign = { entries: () => new Map([['api-key', 'k1']]).entries(), get: (name: string) => (name === 'api-key' ? 'k1' : null) };
  await openAiCompatibleModel({ ...base, headers: foreign as unknown as Record<string, string> }).complete(request);
  await openAiCompatibleModel({ ...base, headers: [['x-team', 'ops']] as unknown as Record<string, string> }).complete(request);
  await openAiCompatibleModel({ ...base, apiKey: 'sk-1', headers: { Authorization: 'Basic abc' } }).complete(request);
  assert.equal(seen[0]!.get('api-key'), 'k1');
  assert.equal(seen[1]!.get('x-team'), 'ops');
  assert.equal(seen[2]!.get('authorization'), 'Bearer sk-1', 'apiKey replaces an Authorization header, as the docs say');
});

it('a fetch whose error quotes the URL (node-fetch) leaks no query, neither in the message nor in a cause (r81 R1, R8)', async () => {
  const quoting = (async (url: string) => {
    throw new Error(`request to ${url} failed, reason: connect ECONNREFUSED`, { cause: new Error(`base: ${url}`) });
  }) as unknown as typeof globalThis.fetch;
  const echoing = (async (url: string) => new Response(`unknown route ${url}`, { status: 404 })) as unknown as typeof globalThis.fetch;
  for (const fetch of [quoting, echoing]) {
    const model = openAiCompatibleModel({ baseUrl: 'https://generativelanguage.invalid/v1beta/openai?key=hun%74er2', model: 'm', fetch });
    await assert.rejects(model.complete(request), (e: unknown) => {
      assert.ok(e instanceof ChatModelError, String(e));
      const everything = `${e.message} ${inspect(e, { depth: 10 })}`;
      assert.ok(!/hun(%74|t)er2/.test(everything), everything);
      return true;
    });
  }
});

it('a key read as a number is not quoted; control characters and repeated names are handled as fetch would (r81 R4, R5, R7)', async () => {
  const base = { baseUrl: 'https://model.invalid/v1', model: 'm' };
  assert.throws(() => openAiCompatibleModel({ ...base, apiKey: 987654321012 as unknown as string }), (e: unknown) => e instanceof InvalidInputError && e.field === 'apiKey' && !e.message.includes('987654321012'));
  assert.throws(() => openAiCompatibleModel({ ...base, headers: { 'api-key': 987654321012 as unknown as string } }), (e: unknown) => e instanceof InvalidInputError && !e.message.includes('987654321012'));
  for (const bad of ['k\u007f', 'k\u000b', 'k\u0001', 'k\u001b[0m']) {
    assert.throws(() => openAiCompatibleModel({ ...base, apiKey: bad }), (e: unknown) => e instanceof InvalidInputError && e.field === 'apiKey', JSON.stringify(bad));
  }
  const seen: Headers[] = [];
  const fetch = (async (_url: string, init: RequestInit) => {
    seen.push(new Headers(init.headers));
    return new Response(JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'hello' } }] }));
  }) as unknown as typeof globalThis.fetch;
  await openAiCompatibleModel({ ...base, apiKey: 'k\tv', headers: [['x-tag', 'a'], ['X-Tag', 'b']] as unknown as Record<string, string>, fetch }).complete(request);
  await openAiCompatibleModel({ ...base, headers: new Map([['api-key', 'k1']]) as unknown as Record<string, string>, fetch }).complete(request);
  await openAiCompatibleModel({ ...base, headers: (function* pairs() { yield ['api-key', 'k2']; })() as unknown as Record<string, string>, fetch }).complete(request);
  assert.equal(seen[0]!.get('x-tag'), 'a, b');
  assert.equal(seen[1]!.get('api-key'), 'k1', 'a Map is sent (r81 R6)');
  assert.equal(seen[2]!.get('api-key'), 'k2', 'a generator of pairs is sent (r81 R6)');
});

it('a key in the query is taken out of what a server echoes in any form, and fetch\'s reason code is kept (r82 G3-G5)', async () => {
  // Value `sk/AB+cd=9`, sent as sk%2FAB%2Bcd%3D9: echoed raw, decoded, form-decoded, with lower-case escapes, and
  // escaped as Go and PHP write JSON.
  const forms = ['sk%2FAB%2Bcd%3D9', 'sk/AB+cd=9', 'sk/AB cd=9', 'sk%2fAB%2bcd%3d9', 'sk\\/AB+cd=9', 'sk/AB+cd\\u003d9', 'key=sk%2FAB%2Bcd%3D9\\u0026api-version=2024-02-01'];
  const echoing = (async () => new Response(`{"error":{"message":"bad key ${forms.join(' ')}"}}`, { status: 401 })) as unknown as typeof globalThis.fetch;
  const base = 'https://x.invalid/openai/deployments/d?key=sk%2FAB%2Bcd%3D9&api-version=2024-02-01';
  await assert.rejects(openAiCompatibleModel({ baseUrl: base, model: 'm', fetch: echoing }).complete(request), (e: unknown) => {
    assert.ok(e instanceof ChatModelError && e.code === 'model_http_error', String(e));
    assert.doesNotMatch(e.message, /AB/, e.message);
    return true;
  });
  const refused = (async () => { throw new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) }); }) as unknown as typeof globalThis.fetch;
  await assert.rejects(openAiCompatibleModel({ baseUrl: base, model: 'm', fetch: refused }).complete(request), (e: unknown) => e instanceof ChatModelError && /fetch failed \(ECONNREFUSED\)/.test(e.message));
  // A short query value is a setting, left as it is: messages are not garbled.
  const short = (async () => { throw new TypeError('fetch failed'); }) as unknown as typeof globalThis.fetch;
  await assert.rejects(openAiCompatibleModel({ baseUrl: 'https://x.invalid/v1?e', model: 'm', fetch: short }).complete(request), (e: unknown) => e instanceof ChatModelError && /fetch failed$/.test(e.message));
});

it('a key sent as a bare query token, a parameter name, after a `;`, or echoed as Python or HTML write it is taken out (r83 H1, H3)', async () => {
  const cases: Array<[string, string[]]> = [
    ['?S3CRETKEYBARE', ['S3CRETKEYBARE']],
    ['?S3CRETKEYNAME=1', ['S3CRETKEYNAME']],
    ['?api-version=2024;key=S3CRETKEYSEMI', ['S3CRETKEYSEMI']],
    ['?key=ab%2Bcd%2Fef%3D%3DXY', ['ab%2Bcd/ef%3D%3DXY', 'ab+cd/ef==XY']],
    ['?key=S3CR%3CT%3EKEY', ['S3CR&lt;T&gt;KEY']],
  ];
  for (const [query, echoes] of cases) {
    const quoting = (async (url: string) => new Response(`{"error":"no route ${url} ${echoes.join(' ')}"}`, { status: 404 })) as unknown as typeof globalThis.fetch;
    const failing = (async (url: string) => { throw new Error(`request to ${url} failed`); }) as unknown as typeof globalThis.fetch;
    for (const fetch of [quoting, failing]) {
      await assert.rejects(openAiCompatibleModel({ baseUrl: `https://x.invalid/v1${query}`, model: 'm', fetch }).complete(request), (e: unknown) => {
        assert.ok(e instanceof ChatModelError, String(e));
        const everything = `${e.message} ${inspect(e, { depth: 10 })}`;
        assert.doesNotMatch(everything, /S3CR|ab.cd/, `${query}: ${everything}`);
        return true;
      });
    }
  }
  // A short setting is left as it is: Azure's own words about it stay readable.
  const settings = (async () => new Response('{"error":"the format json is not supported"}', { status: 400 })) as unknown as typeof globalThis.fetch;
  await assert.rejects(openAiCompatibleModel({ baseUrl: 'https://x.invalid/v1?format=json', model: 'm', fetch: settings }).complete(request), (e: unknown) => e instanceof ChatModelError && /format json is not supported/.test(e.message));
});

it('a key echoed in capitals, as HTML character references, cut short, wrapped, or as a reason code is taken out; a header line given as a name is not quoted (r84 F3, F4)', async () => {
  const key = 'sk_live_4eC39HqLyjWDarjtT1zdp7dcQ9';
  const echoes = [
    key.toUpperCase(),
    key.replace(/[^a-zA-Z0-9]/g, (c) => `&#x${c.charCodeAt(0).toString(16)};`),
    key.replace(/_/g, '&#95;'),
    key.slice(0, 20),
    key.slice(-16),
    `${key.slice(0, 17)}\n${key.slice(17)}`,
  ];
  for (const echo of echoes) {
    const quoting = (async () => new Response(`<p>API key not valid: ${echo}</p>`, { status: 400 })) as unknown as typeof globalThis.fetch;
    const failing = (async () => { throw new AggregateError([], `all failed: ${echo}`); }) as unknown as typeof globalThis.fetch;
    for (const fetch of [quoting, failing]) {
      await assert.rejects(openAiCompatibleModel({ baseUrl: `https://x.invalid/v1?key=${key}`, model: 'm', fetch }).complete(request), (e: unknown) => {
        assert.ok(e instanceof ChatModelError, String(e));
        const everything = `${e.message} ${inspect(e, { depth: 10 })}`;
        for (let i = 0; i + 8 <= key.length; i += 1) assert.ok(!everything.toLowerCase().includes(key.slice(i, i + 8).toLowerCase()), `${JSON.stringify(echo)}: ${everything}`);
        return true;
      });
    }
  }
  const coded = (async () => { throw new TypeError('fetch failed', { cause: Object.assign(new Error('x'), { code: key.toUpperCase() }) }); }) as unknown as typeof globalThis.fetch;
  await assert.rejects(openAiCompatibleModel({ baseUrl: `https://x.invalid/v1?key=${key}`, model: 'm', fetch: coded }).complete(request), (e: unknown) => e instanceof ChatModelError && !/SK_LIVE|4EC39/.test(e.message) && /fetch failed/.test(e.message));
  const base = { baseUrl: 'https://model.invalid/v1', model: 'm' };
  for (const headers of [{ [`Authorization: Bearer ${key}`]: 'x' }, [[`x-api-key ${key}`, 'x']], new Map([[`api-key=${key}`, 'x']])]) {
    assert.throws(() => openAiCompatibleModel({ ...base, headers: headers as unknown as Record<string, string> }), (e: unknown) => e instanceof InvalidInputError && e.field === 'headers' && !e.message.includes('4eC39'));
  }
});

it('a 200 answer that is not JSON, HTML5 names, a cut through a surrogate pair and a long thrown message keep the key out; a bad header name says which (r85 #2, #3, #5-#7)', async () => {
  const key = 'sk_live+4eC/39Hq+LyjWD/arjt';
  const url = `https://x.invalid/v1?key=${encodeURIComponent(key)}`;
  const noKey = (e: unknown): boolean => {
    assert.ok(e instanceof ChatModelError, String(e));
    const everything = `${e.message} ${inspect(e, { depth: 10 })}`;
    for (let i = 0; i + 8 <= key.length; i += 1) assert.ok(!everything.includes(key.slice(i, i + 8)), everything);
    return true;
  };
  const duplicate = (async (u: string) => new Response(`{"${u}":1,"${u}":2}`, { status: 200 })) as unknown as typeof globalThis.fetch;
  await assert.rejects(openAiCompatibleModel({ baseUrl: url, model: 'm', fetch: duplicate }).complete(request), (e: unknown) => noKey(e) && (e as ChatModelError).code === 'model_bad_response' && (e as Error).cause === undefined);
  const named = (async () => new Response(`bad ${key.replace(/\+/g, '&plus;').replace(/\//g, '&sol;')}`, { status: 401 })) as unknown as typeof globalThis.fetch;
  await assert.rejects(openAiCompatibleModel({ baseUrl: url, model: 'm', fetch: named }).complete(request), noKey);
  const long = (async () => { throw new Error(`${'x'.repeat(1024 * 1024)} ${key}`); }) as unknown as typeof globalThis.fetch;
  await assert.rejects(openAiCompatibleModel({ baseUrl: url, model: 'm', fetch: long }).complete(request), (e: unknown) => noKey(e) && (e as Error).message.length < 4096);
  // U+1FA00 shares its second half with U+1F600: a match of the key's text may start inside it.
  const astral = 'k\u{1F600}secretvalue';
  const cut = (async () => { throw new Error(`echo \u{1FA00}${astral.slice(3)} end`); }) as unknown as typeof globalThis.fetch;
  await assert.rejects(openAiCompatibleModel({ baseUrl: `https://x.invalid/v1?key=${encodeURIComponent(astral)}`, model: 'm', fetch: cut }).complete(request), (e: unknown) => {
    assert.ok(e instanceof ChatModelError && !/secretva/.test(e.message), String(e));
    assert.equal(toWellFormed(e.message), e.message, `no half of a character is left: ${JSON.stringify(e.message)}`);
    return true;
  });
  assert.throws(() => openAiCompatibleModel({ baseUrl: 'https://model.invalid/v1', model: 'm', headers: { 'x-ok': 'a', 'x-also': 'b', 'x bad': 'c' } }), (e: unknown) => e instanceof InvalidInputError && /header 3 /.test(e.message));
});
