/**
 * examples/reconcile-http.ts against a mail provider on node:http that deduplicates on the idempotency key and
 * answers key lookups: one mail's response is lost after it was sent, another request is cut before the provider
 * accepted it. The reconciler tells the two apart, the retry sends the missing mail, and every mail goes out once.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { createMailTool, MAIL_REVISION } from '../../examples/reconcile-http.js';
import { assessSession, createMemoryStore, createToolRuntime, prepareToolRetry } from 'jingwei';
import { reconcileUncertainCalls } from 'jingwei/review';

interface Mail { readonly id: number; readonly to: string; readonly subject: string }

const sent = new Map<string, Mail>();
/** Subjects whose first request the provider drops: `after` once it sent the mail, `before` without sending it. */
const drop = new Map<string, 'before' | 'after'>();

async function body(request: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of request) text += String(chunk);
  return text;
}

const server = createServer(async (request, response) => {
  const url = request.url ?? '/';
  if (request.method === 'GET' && url.startsWith('/emails/by-key/')) {
    const mail = sent.get(decodeURIComponent(url.slice('/emails/by-key/'.length)));
    response.writeHead(mail ? 200 : 404, { 'content-type': 'application/json' }).end(JSON.stringify(mail ?? { error: 'no such key' }));
    return;
  }
  if (request.method === 'POST' && url === '/emails') {
    const key = String(request.headers['idempotency-key'] ?? '');
    const { to, subject } = JSON.parse(await body(request)) as { to: string; subject: string };
    const fault = drop.get(subject);
    drop.delete(subject);
    if (fault === 'before') return void request.socket.destroy();
    const mail = sent.get(key) ?? { id: sent.size + 1, to, subject };
    sent.set(key, mail);
    if (fault === 'after') return void request.socket.destroy();
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(mail));
    return;
  }
  response.writeHead(404).end();
});

let baseUrl = '';
before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('examples/reconcile-http.ts', () => {
  it('asks the provider by idempotency key: a lost response is completed, a refused request is retried once', async () => {
    const tools = [createMailTool(baseUrl)];
    const store = createMemoryStore();
    const owner = await store.acquire('mail-session', { owner: 'host' });
    await owner.startTask('task-1');
    const gateway = createToolRuntime({ tools, grants: { agent: '*' } }).bind({ owner, taskId: 'task-1', caller: 'agent' });

    drop.set('invoice', 'after');
    drop.set('receipt', 'before');
    const lostResponse = await gateway.call('send_email', { to: 'a@example.com', subject: 'invoice' });
    const neverSent = await gateway.call('send_email', { to: 'b@example.com', subject: 'receipt' });
    assert.equal(lostResponse.result.outcome.status, 'failed');
    assert.equal(neverSent.result.outcome.status, 'failed');
    const history = await store.loadHistory('mail-session');
    assert.equal(assessSession(history).totals.byNextStep.needs_review, 2, 'without a reconciler, a person decides both');

    const report = await reconcileUncertainCalls(owner, tools, history);
    assert.deepEqual(report.needsReview, [], 'no person is asked');
    assert.deepEqual(report.calls.map((c) => [c.callId, c.answer, c.review?.actor]), [
      [lostResponse.call.id, 'completed', `reconciler:send_email@${MAIL_REVISION}`],
      [neverSent.call.id, 'not_executed', `reconciler:send_email@${MAIL_REVISION}`],
    ]);
    assert.deepEqual(report.calls[0]?.output, { id: 1, to: 'a@example.com', subject: 'invoice' });

    assert.throws(() => prepareToolRetry(report.history, lostResponse.call.id), { code: 'completed' });
    const plan = prepareToolRetry(report.history, neverSent.call.id);
    const retried = await gateway.callWithOptions('send_email', { to: 'b@example.com', subject: 'receipt' }, { retry: plan });
    assert.equal(retried.result.outcome.status, 'succeeded');
    assert.equal(sent.size, 2, 'each mail went out exactly once');
    const final = assessSession(await store.loadHistory('mail-session'));
    assert.equal(final.totals.byNextStep.needs_review + final.totals.byNextStep.retry_allowed, 0, 'nothing left for anyone');
    await store.close();
  });
});
