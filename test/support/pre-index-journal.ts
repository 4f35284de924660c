/**
 * A journal as a version without the attention index left it: a mail whose body started and whose caller gave up on
 * it (its outcome unknown), and a mail that was sent. The schema tests write it with today's store, take the index
 * and everything after it away with raw SQL, and reopen it: the upgrade must fill the index from the journal, so the
 * queue lists the first mail and the in-doubt guard refuses to send it again.
 */
import assert from 'node:assert/strict';
import { ToolEffect } from '../../src/event/types.js';
import type { SessionStore } from '../../src/store/types.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';

export const MAIL_SESSION = 'mail-session';
const TASK = 'mail-task';
const ARGS = { to: 'ana@example.com', subject: 'Your order' };

function mailRuntime(mode: { hang: boolean; giveUp?: () => void }, sent: unknown[]) {
  const tool = {
    name: 'send_mail',
    metadata: new ToolMetadata('Sends one e-mail', { type: 'object' }).withEffect(ToolEffect.NonIdempotent, 'mail-v1'),
    async execute(request: { arguments: unknown }, signal: AbortSignal) {
      if (mode.hang) {
        const stopped = new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
        mode.giveUp?.();
        await stopped;
      }
      sent.push(request.arguments);
      return 'sent';
    },
  };
  return createToolRuntime({ tools: [tool], grants: { agent: '*' } });
}

/** Writes the two mails and releases the session. Returns the call id of the mail in doubt. */
export async function writeMails(store: SessionStore): Promise<string> {
  const caller = new AbortController();
  const sent: unknown[] = [];
  const owner = await store.acquire(MAIL_SESSION, { owner: 'old-host' });
  await owner.startTask(TASK);
  const gateway = mailRuntime({ hang: true, giveUp: () => caller.abort() }, sent).bind({ owner, taskId: TASK, caller: 'agent' });
  const first = await gateway.callWithOptions('send_mail', ARGS, { signal: caller.signal });
  assert.ok(first.startedEvent, 'the first mail started');
  const delivered = mailRuntime({ hang: false }, sent).bind({ owner, taskId: TASK, caller: 'agent' });
  assert.equal((await delivered.call('send_mail', { ...ARGS, subject: 'Another' })).result.outcome.status, 'succeeded');
  await owner.release();
  return first.call.id;
}

/** The upgraded store knows the mail in doubt: listed, and a repeat refused before its body. */
export async function checkIndexFilled(store: SessionStore, inDoubtCallId: string): Promise<void> {
  const queue = await store.attention();
  assert.deepEqual(queue.items.map((i) => [i.callId, i.status, i.inDoubt]), [[inDoubtCallId, 'outcome_unknown', true]]);
  const done = await store.attention({ status: 'completed' });
  assert.equal(done.items.length, 1, 'the mail that was sent is in the index as completed');
  const sent: unknown[] = [];
  const owner = await store.acquire(MAIL_SESSION, { owner: 'new-host' });
  const gateway = mailRuntime({ hang: false }, sent).bind({ owner, taskId: TASK, caller: 'agent' });
  const repeat = await gateway.call('send_mail', { subject: 'Your order', to: 'ana@example.com' });
  const outcome = repeat.result.outcome;
  assert.equal(outcome.status === 'failed' ? outcome.code : outcome.status, 'tool_in_doubt');
  assert.deepEqual(sent, [], 'the mail left in doubt before the upgrade is not sent again');
  await owner.release();
}
