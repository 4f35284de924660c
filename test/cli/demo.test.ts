/**
 * `jingwei demo`, the program `npm start` runs: five worker processes SIGKILLed at real fault points, then the
 * recovering host. Run as the compiled program against a real SQLite journal and business database.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { tempDir } from '../support/tmp.js';
import { cli, cliAsync, COLOUR, type Run } from './helpers.js';

const dir = tempDir('jingwei-cli-demo-');

describe('jingwei demo', () => {
  const journal = `${dir}/shop.db`;
  let run: Run;
  let session: string;
  before(async () => {
    run = await cliAsync(['demo', journal]);
    session = /session {3}(demo-[0-9a-f]{8}),/.exec(run.stdout)?.[1] ?? '';
  });

  it('tells the whole story and exits 0', () => {
    assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
    assert.equal(run.stderr, '');
    assert.doesNotMatch(run.stdout, COLOUR, 'no colour when stdout is not a terminal');
    assert.ok(session, 'the session is named');
    const parts = ['1. Five crashes', '2. The recovering host takes over and assesses', '3. What the rules allow', '4. An operator reviews the charge', '5. The journal after recovery', '6. Invariants'];
    let at = 0;
    for (const part of parts) {
      const next = run.stdout.indexOf(`\n${part}\n`, at);
      assert.ok(next > at, `${part} comes next`);
      at = next;
    }
    assert.match(run.stdout, /All invariants hold\./);
  });

  it('kills one worker per tool, at the chosen fault point, with SIGKILL', () => {
    const kills = [...run.stdout.matchAll(/^ {2}\d\. (\S+)\s+worker \d+ killed \(SIGKILL\) at (\S+)$/gm)].map((m) => [m[1], m[2]]);
    assert.deepEqual(kills, [
      ['check_stock', 'started:after'],
      ['create_order', 'body:after'],
      ['charge_card', 'started:after'],
      ['ship_order', 'call:after'],
      ['notify_customer', 'body:after'],
    ]);
    assert.match(run.stdout, /2\. create_order[\s\S]*?tool body {7}wrote order row 1 and its dedup record in one transaction/);
    assert.match(run.stdout, /3\. charge_card[\s\S]*?tool body {7}never ran/);
    assert.match(run.stdout, /5\. notify_customer[\s\S]*?tool body {7}sent the e-mail: outbox row 1/);
  });

  it('assesses before acting: the table with each effect’s next step', () => {
    const table = run.stdout.slice(run.stdout.indexOf('2. The recovering'), run.stdout.indexOf('3. What the rules allow'));
    assert.match(table, /acquire\(\) is refused with session_busy: worker-5 still holds the session at epoch 5/);
    assert.match(table, /gets epoch 6/);
    assert.match(table, /^ {2}CALL\s+TOOL\s+EFFECT\s+STATUS\s+NEXT STEP\s+WHY$/m);
    const rows = [...table.matchAll(/^ {2}…[0-9a-f]{8}\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+\S/gm)].map((m) => m.slice(1, 5));
    assert.deepEqual(rows, [
      ['check_stock', 'read_only', 'outcome_unknown', 'retry_allowed'],
      ['create_order', 'idempotent', 'outcome_unknown', 'retry_allowed'],
      ['charge_card', 'non_idempotent', 'outcome_unknown', 'needs_review'],
      ['ship_order', 'non_idempotent', 'not_executed', 'retry_allowed'],
      ['notify_customer', 'unknown', 'outcome_unknown', 'needs_review'],
    ]);
  });

  it('retries what is allowed, refuses the rest, and retries the charge only after the review', () => {
    const prose = run.stdout.replace(/\s+/g, ' '); // paragraphs are wrapped
    assert.match(prose, /create_order[\s\S]*?succeeded \{"order_id":1\}[\s\S]*?replayed its stored result; wrote nothing/);
    assert.match(prose, /ship_order[\s\S]*?the warehouse manager was asked again, and approved/);
    assert.equal([...prose.matchAll(/prepareToolRetry refuses: needs_review\./g)].length, 2);
    assert.match(prose, /payment provider's ledger: no charge/);
    assert.match(prose, /ToolRetryReview \{ actor: 'ops:maria \(payments desk\)', outcome: 'not_executed'/);
    assert.match(prose, /the retry succeeded \{"charge_id":1\}/);
    assert.match(prose, /notify_customer is left alone\. The outbox holds 1 e-mail/);
  });

  it('ends with the invariants checked', () => {
    const checks = run.stdout.slice(run.stdout.indexOf('6. Invariants')).split('\n').filter((l) => /^ {2}[✓✗] /.test(l));
    assert.equal(checks.length, 6);
    assert.ok(checks.every((l) => l.startsWith('  ✓ ')), checks.join('\n'));
    assert.match(checks.join('\n'), /budget charged: 9 tool calls for 9 journaled attempts/);
  });

  it('leaves the shop database with exactly one record per side effect', () => {
    const db = new Database(`${dir}/shop.business.db`, { readonly: true });
    try {
      const count = (table: string) => (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
      assert.deepEqual(
        ['orders', 'jw_idempotency', 'payments', 'shipments', 'outbox'].map(count),
        [1, 1, 1, 1, 1],
      );
    } finally {
      db.close();
    }
  });

  it('leaves a journal the operator commands agree with', () => {
    const sessions = cli(['sessions', journal]);
    assert.equal(sessions.code, 0, sessions.stderr);
    // 23 events: the store's record of the task's start (docs/design.md#the-task-ledger-in-the-chain) and the story's 22.
    assert.match(sessions.stdout, new RegExp(`^${session}\\s+23\\s+6\\s+recovery-host\\s+released\\s+1 \\(1 needs_review\\)$`, 'm'));
    const inspect = cli(['inspect', journal, session]);
    assert.equal(inspect.code, 1, 'notify_customer still needs a review');
    assert.match(inspect.stdout, /^…[0-9a-f]{8}\s+notify_customer\s+unknown\s+outcome_unknown\s+needs_review/m);
    assert.equal(cli(['verify', journal, session]).code, 0);
    const events = cli(['events', journal, session]);
    assert.match(events.stdout, /charge_card\s+call …[0-9a-f]{8}\s+non_idempotent\/payments-v1\s+key …[0-9a-f]{8}\s+retry of …[0-9a-f]{8}, review not_executed by ops:maria/);
    assert.match(events.stdout, /^\s*0\s+.*\s+task_ledger\s+task \S+ {2}started {2}calls 0\/20 /m, 'the task\'s start is the first event');
  });

  it('runs again in the same files, as a new session', async () => {
    const second = await cliAsync(['demo', journal]);
    assert.equal(second.code, 0, second.stdout + second.stderr);
    const sessions = cli(['sessions', journal, '--json']);
    assert.equal((JSON.parse(sessions.stdout) as { sessions: unknown[] }).sessions.length, 2);
  });

  it('refuses a PostgreSQL URL (2) and a file that is not a jingwei journal (3)', () => {
    assert.equal(cli(['demo', 'postgres://localhost/x']).code, 2);
    const r = cli(['demo', `${dir}/shop.business.db`]);
    assert.equal(r.code, 3);
    assert.match(r.stderr, /not a jingwei journal/);
  });
});
