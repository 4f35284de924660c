/**
 * Durable approvals across real processes, on SQLite and PostgreSQL: a host asks and gets pending, is SIGKILLed,
 * an operator decides with `jingwei approve` / `jingwei deny` from another process, and a new host resumes the
 * operation: the call runs exactly once with the approval's actor in its journal (or is recorded as denied by the
 * operator); a decision is never used twice, and an approval for one set of arguments is refused for another.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { decisionInbox } from '../../src/store/inbox.js';
import { ChildProcess } from '../support/child.js';
import { forEachStore, type JournalLocation } from '../support/stores.js';
import { tempDir } from '../support/tmp.js';
import { cliAsync } from '../cli/helpers.js';

const script = fileURLToPath(new URL('./children/approval-host.js', import.meta.url));
const dir = tempDir();
let n = 0;

interface Report {
  ok: boolean; callId: string; status: string; category: string | null; code: string | null;
  resultApproval: { requestId: string; decision: string; actor?: string; reason?: string } | null;
  startedApproval: { requestId: string; decision: string; actor?: string; reason?: string } | null;
}

/** The store argument the CLI takes for this location. */
function cliTarget(location: JournalLocation): string {
  if (location.schema === undefined) return location.target;
  const url = new URL(location.target);
  url.searchParams.set('schema', location.schema);
  return url.toString();
}

function host(location: JournalLocation, session: string, mailbox: string, ...args: string[]): ChildProcess {
  return new ChildProcess(script, [location.target, location.schema ?? '-', session, mailbox, ...args]);
}

/** A host that asks, gets pending, and is SIGKILLed while it waits. */
async function askAndDie(location: JournalLocation, session: string, mailbox: string, to: string): Promise<Report> {
  const child = host(location, session, mailbox, 'ask', to);
  const report = await child.next<Report>();
  assert.equal(report.ok, true, JSON.stringify(report) + child.stderr);
  child.proc.kill('SIGKILL');
  assert.equal((await child.exited).signal, 'SIGKILL');
  return report;
}

async function resume(location: JournalLocation, session: string, mailbox: string, callId: string, to: string): Promise<Report> {
  const child = host(location, session, mailbox, 'resume', callId, to);
  const report = await child.next<Report>();
  await child.exited;
  return report;
}

const mails = (mailbox: string): string[] => (existsSync(mailbox) ? readFileSync(mailbox, 'utf8').split('\n').filter(Boolean) : []);

forEachStore('durable approvals across processes', (target) => {
  it('pending, host killed, `jingwei approve` from another process, a new host runs the call exactly once with the actor journaled', async () => {
    const location = target.fresh();
    const session = `s-approve-${++n}`;
    const mailbox = join(dir, `${target.name}-mailbox-${n}`);
    const asked = await askAndDie(location, session, mailbox, 'ann@example.com');
    assert.equal(asked.category, 'approval_pending');
    const requestId = asked.resultApproval!.requestId;

    const approved = await cliAsync(['approve', cliTarget(location), requestId, '--actor', 'alice', '--reason', 'recipient checked', '--json']);
    assert.equal(approved.code, 0, approved.stderr);
    const row = JSON.parse(approved.stdout) as { state: string; actor: string };
    assert.equal(row.state, 'decided');
    assert.equal(row.actor, 'alice');

    const resumed = await resume(location, session, mailbox, asked.callId, 'ann@example.com');
    assert.equal(resumed.status, 'succeeded', JSON.stringify(resumed));
    assert.deepEqual(resumed.startedApproval, { requestId, decision: 'approved', actor: 'alice', reason: 'recipient checked' });
    assert.deepEqual(mails(mailbox), ['ann@example.com'], 'the mail was sent exactly once');

    // The decision is spent: deciding again is refused (exit 1), and a further attempt asks again (pending).
    const again = await cliAsync(['approve', cliTarget(location), requestId, '--actor', 'alice']);
    assert.equal(again.code, 1, again.stderr);
    assert.match(again.stderr, /decision_stale/);
    const store = await location.open();
    const history = await store.loadHistory(session);
    const started = history.filter((e) => e.kind.type === 'tool_started');
    assert.equal(started.length, 1);
    assert.deepEqual((started[0]!.kind as { approval?: unknown }).approval, resumed.startedApproval);
    assert.equal((await decisionInbox(store).get(requestId))?.state, 'consumed');
    await store.close();
  });

  it('the same with `jingwei deny`: the new host records approval_denied by the operator and the mail is never sent', async () => {
    const location = target.fresh();
    const session = `s-deny-${++n}`;
    const mailbox = join(dir, `${target.name}-mailbox-${n}`);
    const asked = await askAndDie(location, session, mailbox, 'ann@example.com');
    const requestId = asked.resultApproval!.requestId;
    const denied = await cliAsync(['deny', cliTarget(location), requestId, '--actor', 'bob', '--reason', 'wrong recipient']);
    assert.equal(denied.code, 0, denied.stderr);
    assert.match(denied.stdout, /Denied approval_/);
    const resumed = await resume(location, session, mailbox, asked.callId, 'ann@example.com');
    assert.equal(resumed.category, 'approval_denied', JSON.stringify(resumed));
    assert.equal(resumed.code, 'tool_approval_denied_by_operator');
    assert.deepEqual(resumed.resultApproval, { requestId, decision: 'denied', actor: 'bob', reason: 'wrong recipient' });
    assert.deepEqual(mails(mailbox), []);
  });

  it('an approval is used at most once, and never for other arguments', async () => {
    const location = target.fresh();
    const session = `s-once-${++n}`;
    const mailbox = join(dir, `${target.name}-mailbox-${n}`);
    const asked = await askAndDie(location, session, mailbox, 'ann@example.com');
    const requestId = asked.resultApproval!.requestId;
    assert.equal((await cliAsync(['approve', cliTarget(location), requestId, '--actor', 'alice'])).code, 0);

    // Other arguments for the same operation: refused before anything is written; the approval stays unused.
    const other = await resume(location, session, mailbox, asked.callId, 'eve@example.com');
    assert.equal(other.ok, false);
    assert.equal(other.code, 'binding_changed');
    const store = await location.open();
    assert.equal((await decisionInbox(store).get(requestId))?.state, 'decided');

    const first = await resume(location, session, mailbox, asked.callId, 'ann@example.com');
    assert.equal(first.status, 'succeeded', JSON.stringify(first));
    // A later attempt of the same operation (its latest, now completed) is refused; the spent decision is never
    // offered again: the inbox holds nothing open or decided for the session.
    const second = await resume(location, session, mailbox, first.callId, 'ann@example.com');
    assert.equal(second.ok, false);
    assert.equal(second.code, 'completed');
    assert.deepEqual(mails(mailbox), ['ann@example.com']);
    assert.deepEqual((await decisionInbox(store).list({ sessionId: session })).items, []);
    await store.close();
  });
});
