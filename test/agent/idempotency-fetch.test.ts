/**
 * Idempotency keys end to end over HTTP: `jingweiFetch` sends the operation's key as `Idempotency-Key` on every
 * attempt of one operation. An HTTP call killed after the API applied it, then retried under the same operation
 * through the recovery API, applies once.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { IDEMPOTENCY_KEY_HEADER, idempotencyHeaders, jingweiFetch } from '../../src/agent.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { assessSession } from '../../src/tool/assess.js';
import { externalIdempotencyKey, operationOriginIn } from '../../src/tool/idempotency.js';
import { prepareToolRetry } from '../../src/tool/recovery.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { createOrderTool, startOrdersApi, type OrdersApi } from './fixtures/orders-http.js';
import { tempDbPath, tempDir } from '../support/tmp.js';

const dir = tempDir('jingwei-fetch-');
const crashChild = fileURLToPath(new URL('./children/fetch-crash-child.js', import.meta.url));
const apis: OrdersApi[] = [];
after(async () => {
  for (const api of apis) await api.close();
});

const request = { sessionId: 'session-1', operationOrigin: 'evt_first', operation: { taskId: 'task-1', key: 'operation_1' } };
const KEY = externalIdempotencyKey(request);

/** A fetch that answers ok and keeps the headers of every request it was given. */
function recordingFetch(): { seen: Headers[]; fake: typeof fetch } {
  const seen: Headers[] = [];
  const fake = (async (_input: unknown, init?: RequestInit) => {
    seen.push(new Headers(init?.headers));
    return new Response('ok');
  }) as typeof fetch;
  return { seen, fake };
}

describe('the Idempotency-Key helpers', () => {
  it('idempotencyHeaders uses the one key format, externalIdempotencyKey', () => {
    assert.deepEqual(idempotencyHeaders(request), { 'Idempotency-Key': KEY });
    assert.equal(idempotencyHeaders(request)[IDEMPOTENCY_KEY_HEADER], externalIdempotencyKey(request));
    assert.deepEqual(idempotencyHeaders(request, 'X-Request-Key'), { 'X-Request-Key': KEY });
    assert.throws(() => idempotencyHeaders(request, 'bad header'), { code: 'invalid_input' });
  });

  it('jingweiFetch sets the key on every request, over any key the caller set, keeping other headers', async () => {
    const { seen, fake } = recordingFetch();
    const f = jingweiFetch(request, { fetch: fake });
    await f('http://example.invalid/a', { headers: { 'Idempotency-Key': 'something-else', Accept: 'text/plain' } });
    await f(new Request('http://example.invalid/b', { headers: { 'X-Trace': '7' } }));
    assert.deepEqual(seen.map((h) => h.get('idempotency-key')), [KEY, KEY]);
    assert.equal(seen[0]!.get('accept'), 'text/plain');
    assert.equal(seen[1]!.get('x-trace'), '7');
  });

  it('jingweiFetch keeps fetch\'s own rule for a Request and init, and sends no second key under another header', async () => {
    const { seen, fake } = recordingFetch();
    const target = new Request('http://example.invalid/c', { headers: { 'X-Trace': '7', Authorization: 'Bearer old' } });
    await jingweiFetch(request, { fetch: fake })(target, { headers: { Authorization: 'Bearer new' } });
    const plain = new Headers(new Request(target, { headers: { Authorization: 'Bearer new' } }).headers);
    assert.equal(plain.get('x-trace'), null, 'fetch itself drops the Request\'s headers when init gives headers');
    assert.deepEqual([seen[0]!.get('x-trace'), seen[0]!.get('authorization'), seen[0]!.get('idempotency-key')], [null, 'Bearer new', KEY]);
    await jingweiFetch(request, { fetch: fake, header: 'X-Request-Key' })('http://example.invalid/d', { headers: { 'Idempotency-Key': 'the caller\'s own' } });
    assert.deepEqual([seen[1]!.get('x-request-key'), seen[1]!.get('idempotency-key')], [KEY, null], 'one key, under the header asked for');
  });
});

// u139 #2: a body that created a customer and then charged, both through jingweiFetch, sent the charge under the
// customer's key: a server deduplicating on the key alone answered the charge with the customer, recorded succeeded.
// u140 #4: another query or body went out under the key too, and so did any write through a wrapper made from a copy.
it('jingweiFetch refuses, unsent, a write to another method, URL, query or text body than the first its key went with; reads and the same write again pass', async () => {
  const { seen, fake } = recordingFetch();
  const body = { ...request, operation: { taskId: 'task-1', key: 'operation_two_writes' } };
  const f = jingweiFetch(body, { fetch: fake });
  await f('http://example.invalid/customers?token=s3cret', { method: 'POST', body: '{"name":"ana"}' });
  await f('HTTP://Example.invalid/customers?token=s3cret#again', { method: 'post', body: '{"name":"ana"}' });
  await f('http://example.invalid/customers/7');
  await jingweiFetch({ ...body }, { fetch: fake })(new Request('http://example.invalid/customers?token=s3cret', { method: 'POST', body: 'a stream is not compared' }));
  const refusals: Array<[string, RequestInit, RegExp]> = [
    ['http://example.invalid/charges', { method: 'POST' }, /^POST http:\/\/example\.invalid\/charges would be sent under the idempotency key that POST http:\/\/example\.invalid\/customers was sent with: one call makes one keyed write/],
    ['http://example.invalid/customers?token=s3cret', { method: 'PUT', body: '{"name":"ana"}' }, /^PUT http:\/\/example\.invalid\/customers would be sent/],
    ['http://example.invalid/customers?token=tok2', { method: 'POST', body: '{"name":"ana"}' }, /^POST http:\/\/example\.invalid\/customers \(another query\) would be sent/],
    ['http://example.invalid/customers?token=s3cret', { method: 'POST', body: '{"name":"bob"}' }, /^POST http:\/\/example\.invalid\/customers \(another body\) would be sent/],
  ];
  for (const [input, init, message] of refusals) {
    // A wrapper made from a copy of the request sends the same key: it is refused all the same.
    await assert.rejects(jingweiFetch({ ...body }, { fetch: fake })(input, init), (error: Error & { code?: string }) => {
      assert.equal(error.code, 'invalid_input');
      assert.match(error.message.replace(/^(invalid_input: )?input: /, ''), message);
      assert.doesNotMatch(error.message, /s3cret|tok2/);
      return true;
    });
  }
  assert.equal(seen.length, 4, 'the refused writes were never sent');
  await jingweiFetch({ ...request, operation: { taskId: 'task-1', key: 'operation_another' } }, { fetch: fake })('http://example.invalid/charges', { method: 'POST' });
  assert.equal(seen.length, 5, 'another operation (another key) sends its own first write');
});

describe('an HTTP call killed after the API applied it', () => {
  it('retried under the same operation through the recovery API: the same key, applied once', async () => {
    const api = await startOrdersApi();
    apis.push(api);
    const journal = tempDbPath(dir, 'fetch');
    const child = spawn(process.execPath, [crashChild, journal, 'fetch-session', api.url], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, s) => resolve(s)));
    assert.equal(signal, 'SIGKILL', `the host was not killed: ${output}`);
    assert.equal(api.applied.length, 1, 'the API applied the order before the host died');

    const store = openSqliteStore(journal);
    const owner = await store.acquire('fetch-session', { owner: 'recovery-host', takeover: true });
    const history = await store.loadHistory('fetch-session');
    const [call] = assessSession(history).calls;
    assert.ok(call);
    assert.deepEqual([call.status, call.nextStep], ['outcome_unknown', 'retry_allowed']);

    const gateway = createToolRuntime({ tools: [createOrderTool(api.url)], grants: { agent: '*' } }).bind({ owner, taskId: 'order-task', caller: 'agent' });
    const retried = await gateway.callWithOptions('create_order', { item: 'tea' }, { retry: prepareToolRetry(history, call.callId, null) });
    assert.equal(retried.result.outcome.status, 'succeeded');
    assert.equal(retried.call.operation!.key, call.key);
    assert.deepEqual(JSON.parse((retried.result.outcome as { output: string }).output), { order: 1, item: 'tea' }, 'the first order, replayed');

    const key = externalIdempotencyKey({ sessionId: 'fetch-session', operationOrigin: operationOriginIn(history, { taskId: 'order-task', key: call.key! })!, operation: { taskId: 'order-task', key: call.key! } });
    assert.deepEqual(api.requests.map((r) => r.key), [key, key], 'both attempts carried the same key');
    assert.equal(api.applied.length, 1, 'applied once');

    // A new logical action gets a new key, and a new order.
    const fresh = await gateway.call('create_order', { item: 'cake' });
    assert.notEqual(api.requests.at(-1)!.key, key);
    assert.equal(fresh.result.outcome.status, 'succeeded');
    assert.equal(api.applied.length, 2);
    await store.close();
  });
});
