/**
 * An operator replaces a review while the session's owner is journaling the inbox: the owner listed the review, then
 * the operator's replacement superseded it. The owner skips what is no longer waiting (the replacement waits for its
 * next pass) instead of journaling it and then failing the whole pass on the inbox's refusal to mark it.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { createJournalStore } from '../../src/backend.js';
import { ToolBodyError } from '../../src/errors.js';
import type { InboxBackend } from '../../src/store/inbox-rows.js';
import { decisionInbox } from '../../src/store/inbox.js';
import type { JournalStore } from '../../src/store/journal-store.js';
import { createMemoryStore } from '../../src/store/memory.js';
import type { JournalBackend } from '../../src/store/rows.js';
import type { SessionStore } from '../../src/store/types.js';
import { journalInboxReviews } from '../../src/tool/inbox-review.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { tool } from '../support/runtime.js';

/** A memory store whose inbox runs `meanwhile` once, after a listing has been read and before it is returned. */
function storeWithRace() {
  const inner = (createMemoryStore() as JournalStore).backend;
  let meanwhile: (() => Promise<unknown>) | null = null;
  const inbox: InboxBackend = {
    transactDecision: (id, decide) => inner.inbox!.transactDecision(id, decide),
    transactReview: (sessionId, callId, decide) => inner.inbox!.transactReview(sessionId, callId, decide),
    listDecisions: async (query) => {
      const rows = await inner.inbox!.listDecisions(query);
      const run = meanwhile;
      meanwhile = null;
      if (run) await run();
      return rows;
    },
  };
  const backend = new Proxy(inner, {
    get(target, property) {
      if (property === 'inbox') return inbox;
      const value = Reflect.get(target, property) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  }) as JournalBackend;
  return { store: createJournalStore(backend), race: (run: () => Promise<unknown>) => { meanwhile = run; } };
}

/** A mail whose provider hung up (its outcome unknown), its host gone, and carol's `not_executed` review waiting. */
async function reviewedMail(store: SessionStore) {
  const host = await store.acquire('s', { owner: 'host-a' });
  await host.startTask('t');
  const mail = tool('send_mail', async () => { throw new ToolBodyError('connection_reset', 'the provider hung up'); },
    new ToolMetadata('sends a mail', { type: 'object' }).withEffect('non_idempotent', 'v1'));
  const callId = (await createToolRuntime({ tools: [mail], grants: { agent: '*' } }).bind({ owner: host, taskId: 't', caller: 'agent' }).call('send_mail', {})).call.id;
  await host.release();
  const inbox = decisionInbox(store);
  const first = await inbox.recordReview({ sessionId: 's', callId, outcome: 'not_executed', evidence: 'not in the outbox', actor: 'carol' });
  return { callId, inbox, first };
}

it('a review replaced after the owner listed it is not journaled, and the pass goes on; the replacement is journaled next', async () => {
  const { store, race } = storeWithRace();
  const { callId, inbox, first } = await reviewedMail(store);
  const owner = await store.acquire('s', { owner: 'host-b' });
  let second = '';
  race(async () => {
    second = (await inbox.recordReview({ sessionId: 's', callId, outcome: 'completed', evidence: 'the provider sent it', actor: 'dan', replaces: first.id })).id;
  });
  const pass = await journalInboxReviews(owner, store, await store.loadHistory('s'));
  assert.deepEqual([pass.journaled, pass.stale], [[], []], 'the replaced review is neither journaled nor marked stale');
  assert.equal((await inbox.get(first.id))?.state, 'superseded');
  const next = await journalInboxReviews(owner, store, pass.history);
  assert.deepEqual(next.journaled.map((j) => [j.decisionId, j.outcome, j.actor]), [[second, 'completed', 'dan']]);
  await store.close();
});

it('a review superseded after its owner journaled it is marked consumed by that event: the journal holds it', async () => {
  const { store } = storeWithRace();
  const { callId, inbox, first } = await reviewedMail(store);
  await inbox.recordReview({ sessionId: 's', callId, outcome: 'completed', evidence: 'the provider sent it', actor: 'dan', replaces: first.id });
  const marked = await inbox.markReviewJournaled(first.id, 'event_1');
  assert.deepEqual([marked.state, marked.consumedBy, marked.note], ['consumed', 'event_1', null]);
  await store.close();
});
