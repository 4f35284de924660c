/**
 * The operator's side of a journaled review, on a real SQLite journal: once a `completed` review is recorded for an
 * uncertain call, `jingwei inspect` exits 0, no plan can be prepared, `jingwei sessions` shows nothing needing
 * attention (so the routine of docs/operator-guide.md takes nothing over), and `events` / `inspect <call>` show it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { prepareToolRetry } from '../../src/index.js';
import { recordToolReview } from '../../src/review.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { cli, uncertainCall, uncertainMailCall } from './helpers.js';

const dir = tempDir();

describe('a completed review, as the operator sees it', () => {
  it('inspect exits 0, sessions needs no attention, events and inspect <call> show the review', async () => {
    const path = tempDbPath(dir, 'journal');
    const store = openSqliteStore(path);
    const owner = await store.acquire('mail-1', { owner: 'host-a' });
    const call = await uncertainMailCall(owner);

    assert.equal(cli(['inspect', path, 'mail-1']).code, 1, 'needs_review before the review');
    const history = await store.loadHistory('mail-1');
    await recordToolReview(owner, history, call, { actor: 'ops:maria', evidence: 'the provider shows the mail as sent', outcome: 'completed' });
    await owner.release();
    const reviewed = await store.loadHistory('mail-1');
    assert.throws(() => prepareToolRetry(reviewed, call), { code: 'completed' });
    await store.close();

    const inspect = cli(['inspect', path, 'mail-1']);
    assert.equal(inspect.code, 0, inspect.stdout + inspect.stderr);
    assert.match(inspect.stdout, /Nothing needs attention\./);
    const json = JSON.parse(cli(['inspect', path, 'mail-1', '--json']).stdout) as { needs_attention: number; calls: { next_step: string; review: { actor: string; outcome: string; source: string } }[] };
    assert.equal(json.needs_attention, 0);
    assert.equal(json.calls[0]?.next_step, 'completed');
    assert.deepEqual(json.calls[0]?.review && { actor: json.calls[0].review.actor, outcome: json.calls[0].review.outcome, source: json.calls[0].review.source }, { actor: 'ops:maria', outcome: 'completed', source: 'human' });

    const one = cli(['inspect', path, 'mail-1', call]);
    assert.equal(one.code, 0);
    assert.match(one.stdout, /reviewed\s+completed by ops:maria \(human\): the provider shows the mail as sent/);
    assert.match(one.stdout, /a completed review by ops:maria resolved this call for good/);

    const events = cli(['events', path, 'mail-1']);
    assert.equal(events.code, 0);
    assert.match(events.stdout, /tool_review\s+call …\w{8}\s+human review completed by ops:maria: the provider shows the mail as sent/);

    // The routine takes over only a session that needs attention: this one does not, so its epoch stays.
    const sessions = JSON.parse(cli(['sessions', path, '--json']).stdout) as { sessions: { session_id: string; needs_attention: number; epoch: number }[] };
    const row = sessions.sessions.find((s) => s.session_id === 'mail-1');
    assert.equal(row?.needs_attention, 0);
    assert.equal(row?.epoch, 1, 'nobody took the session over');
  });

  it('a review naming a session with a typo, or a call by part of its id, says which was not found (u118b #2)', async () => {
    const path = tempDbPath(dir, 'typos');
    const call = await uncertainCall(path, 'mail-kill');
    const review = (session: string, id: string) => cli(['review', path, id, '--session', session, '--outcome', 'completed', '--evidence', 'sent', '--actor', 'ops']);
    const typo = review('mail-kil', call);
    assert.equal(typo.code, 2, typo.stderr);
    assert.match(typo.stderr, /decision_not_found: session mail-kil has no events: is its id right and whole\? \(jingwei sessions lists the sessions\)/);
    const part = review('mail-kill', call.slice(-8));
    assert.equal(part.code, 2, part.stderr);
    assert.match(part.stderr, /session mail-kill has no call \w{8} \(a review takes the call's whole id, toolcall_…, as jingwei inspect prints it\)/);
    assert.equal(review('mail-kill', call).code, 0, 'the whole id is taken');
  });
});
