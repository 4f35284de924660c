/**
 * The queue's age filter on approval requests (`jingwei queue --older-than`, the console): a request recorded ahead of
 * this host's clock (its writer's clock ran fast) is listed, as a call is, since its time says nothing of its age.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { SessionId } from '../../src/ids.js';
import { approvalRequests } from '../../src/cli/assessment.js';
import { STORE_DEFAULTS } from '../../src/limits.js';
import type { DecisionRow } from '../../src/store/inbox-rows.js';
import { JournalStore } from '../../src/store/journal-store.js';
import { createMemoryStore } from '../../src/store/memory.js';

it('an approval request recorded ahead of the reader\'s clock passes an age filter; one just recorded does not', async () => {
  const store = createMemoryStore();
  assert.ok(store instanceof JournalStore);
  const inbox = store.backend.inbox!;
  const request = (id: string, createdAt: number): DecisionRow => ({
    id, kind: 'approval', sessionId: 's' as SessionId, callId: `call-${id}`, state: 'open',
    binding: { taskId: 't', key: `k-${id}`, tool: 'wire', revision: 'v1', argumentsDigest: '0'.repeat(64) },
    tool: 'wire', note: null, decision: null, actor: null, reason: null,
    createdAt: new Date(createdAt).toISOString(), decidedAt: null, consumedAt: null, consumedBy: null,
  });
  const hour = 60 * 60 * 1000;
  for (const row of [request('approval_1', Date.now() + hour), request('approval_2', Date.now()), request('approval_3', Date.now() - 2 * hour)]) {
    await inbox.transactDecision(row.id, () => ({ write: row, result: null }));
  }
  const listed = await approvalRequests(store, 'open', { createdAtMost: Date.now() - 10 * 60 * 1000, limit: 10 });
  assert.deepEqual(listed.items.map((r) => r.id), ['approval_1', 'approval_3'], `an hour ahead (over ${STORE_DEFAULTS.clockAheadMs} ms) says nothing of its age`);
  await store.close();
});
