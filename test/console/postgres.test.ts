/**
 * The console on a PostgreSQL store: the same program with a postgres:// URL. The queue lists an approval request
 * waiting in the store's decision inbox, and the call page's form approves it through the inbox, with the actor.
 * Runs when JINGWEI_PG_URL names a server (npm test starts a throwaway one).
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { decisionInbox } from '../../src/decisions.js';
import { describePostgres, freshSchema, openPostgresStore } from '../support/postgres.js';
import { hidden, http, login, pendingApprovalsIn, said, startConsoleProcess } from './support.js';

describePostgres('jingwei console on PostgreSQL', (url) => {
  it('lists an open approval request and approves it from its call page', async () => {
    const schema = freshSchema();
    const store = await openPostgresStore(url, { schema });
    try {
      const [request] = await pendingApprovalsIn(store, ['refund-pg']) as [{ session: string; requestId: string; callId: string }];
      const target = new URL(url);
      target.searchParams.set('schema', schema);
      const c = await startConsoleProcess(target.toString(), ['--actor', 'carol']);
      try {
        const cookie = await login(c);
        const queue = await http(c.port, 'GET', c.path('/'), { cookie });
        assert.equal(queue.status, 200);
        assert.match(queue.body, new RegExp(`data-request="${request.requestId}"`));
        const page = await http(c.port, 'GET', c.path(`/session/${request.session}/call/${request.callId}`), { cookie });
        assert.equal(page.status, 200);
        const csrf = hidden(page.body, 'csrf');
        const approved = await http(c.port, 'POST', c.path(`/approval/${request.requestId}`), { cookie, form: { csrf, decision: 'approve', reason: 'checked' } });
        assert.equal(approved.status, 200, said(approved));
        assert.match(said(approved), new RegExp(`Approved ${request.requestId} as carol`));
      } finally {
        await c.stop();
      }
      const row = await decisionInbox(store).get(request.requestId);
      assert.deepEqual([row?.state, row?.decision, row?.actor, row?.reason], ['decided', 'approved', 'carol', 'checked']);
    } finally {
      await store.close();
    }
  });
});
