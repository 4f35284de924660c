/**
 * A journal as a version without the attention index left it: a mail whose body started and whose caller gave up on
 * it (its outcome unknown), and a mail that was sent. The schema tests write it with today's store, take the index
 * and everything after it away with raw SQL, and reopen it: the upgrade must fill the index from the journal, so the
 * queue lists the first mail and the in-doubt guard refuses to send it again.
 */
import assert from 'node:assert/strict';
import type { SessionOwner, SessionStore } from '../../src/store/types.js';
import { recordToolReview } from '../../src/tool/review.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { mailer } from './mailer.js';

export const MAIL_SESSION = 'mail-session';
const TASK = 'mail-task';
const ARGS = { to: 'ana@example.com', subject: 'Your order' };

/** A gateway of `owner`'s task onto a mail tool in `mode`, and the mails it sent. */
function mailGateway(owner: SessionOwner, mode: { hang: boolean; giveUp?: () => void }) {
  const { tool, sent } = mailer(mode);
  return { gateway: createToolRuntime({ tools: [tool], grants: { agent: '*' } }).bind({ owner, taskId: TASK, caller: 'agent' }), sent };
}

/** Writes the two mails and releases the session. Returns the call id of the mail in doubt. */
export async function writeMails(store: SessionStore): Promise<string> {
  const caller = new AbortController();
  const owner = await store.acquire(MAIL_SESSION, { owner: 'old-host' });
  await owner.startTask(TASK);
  const first = await mailGateway(owner, { hang: true, giveUp: () => caller.abort() }).gateway.callWithOptions('send_mail', ARGS, { signal: caller.signal });
  assert.ok(first.startedEvent, 'the first mail started');
  const delivered = await mailGateway(owner, { hang: false }).gateway.call('send_mail', { ...ARGS, subject: 'Another' });
  assert.equal(delivered.result.outcome.status, 'succeeded');
  await owner.release();
  return first.call.id;
}

/** The upgraded store knows the mail in doubt: listed, and a repeat refused before its body. */
export async function checkIndexFilled(store: SessionStore, inDoubtCallId: string): Promise<void> {
  const queue = await store.attention();
  assert.deepEqual(queue.items.map((i) => [i.callId, i.status, i.inDoubt]), [[inDoubtCallId, 'outcome_unknown', true]]);
  const done = await store.attention({ status: 'completed' });
  assert.equal(done.items.length, 1, 'the mail that was sent is in the index as completed');
  const owner = await store.acquire(MAIL_SESSION, { owner: 'new-host' });
  const { gateway, sent } = mailGateway(owner, { hang: false });
  const repeat = await gateway.call('send_mail', { subject: 'Your order', to: 'ana@example.com' });
  const outcome = repeat.result.outcome;
  assert.equal(outcome.status === 'failed' ? outcome.code : outcome.status, 'tool_in_doubt');
  assert.deepEqual(sent, [], 'the mail left in doubt before the upgrade is not sent again');
  await owner.release();
}

/** Journals a person's `not_executed` review of the mail in doubt: the write it says did not happen is still due. */
export async function reviewNotExecuted(store: SessionStore, callId: string): Promise<void> {
  const owner = await store.acquire(MAIL_SESSION, { owner: 'reviewer' });
  await recordToolReview(owner, await store.loadHistory(MAIL_SESSION), callId, { actor: 'alice', outcome: 'not_executed', evidence: 'not in the outbox' });
  await owner.release();
}

/**
 * The upgraded store lists the mail a review said was not sent as `reviewed_not_executed`, not in doubt: a release
 * before it made such a row `resolved`, and the queue never listed a write still to be made.
 */
export async function checkReviewedListed(store: SessionStore, callId: string): Promise<void> {
  const queue = await store.attention();
  assert.deepEqual(queue.items.map((i) => [i.callId, i.status, i.inDoubt]), [[callId, 'reviewed_not_executed', false]]);
}

/**
 * Takes a SQLite journal back to an earlier version's layout of the attention index, where a later version changed its
 * columns, and records that version: what a journal of that release holds, for an upgrade test.
 */
export function sqliteBackToVersion(db: { exec(sql: string): unknown; pragma(sql: string): unknown }, version: number): void {
  if (version < 11) db.exec('ALTER TABLE jw_attention DROP COLUMN pending_since');
  db.pragma(`user_version = ${version}`);
}
