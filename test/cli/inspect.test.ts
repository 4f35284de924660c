/** `jingwei inspect` against real SQLite stores, run as the compiled program; a 100,000-event session included. */
import { externalIdempotencyKey, operationOriginIn } from '../../src/tool/idempotency.js';
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { ToolRuntimeConfig } from '../../src/tool/types.js';
import { alphaHistory, cli, cliAsync, cliOnTty, COLOUR, haveScript, quietHistory, writeBigSession, writeStore } from './helpers.js';

const dir = tempDir('jingwei-cli-inspect-');

describe('jingwei inspect <session>', () => {
  let path: string;
  before(async () => {
    path = tempDbPath(dir, 'journal');
    await writeStore(path, { alpha: alphaHistory(), quiet: quietHistory(), empty: [] });
  });

  it('lists every call without its own success with status, next step and why; exit 1 while calls need attention', () => {
    const r = cli(['inspect', path, 'alpha']);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stderr, '');
    assert.match(r.stdout, /^Session alpha: 10 events, 4 tool calls, 1 succeeded\.\nNeeds attention: 3 calls \(1 needs_review, 2 retry_allowed\)\.\n/);
    assert.match(r.stdout, /^CALL\s+TOOL\s+EFFECT\s+STATUS\s+NEXT STEP\s+WHY$/m);
    assert.match(r.stdout, /^c-idem\s+create_order\s+idempotent\s+outcome_unknown\s+retry_allowed\s+outcome unknown \(body started, then body_failure\) and effect idempotent: one attempt may be prepared, reusing the operation key$/m);
    assert.match(r.stdout, /^c-pay\s+charge_card\s+non_idempotent\s+outcome_unknown\s+needs_review\s+outcome unknown \(body started, no result\) and effect non_idempotent: a trusted review saying not_executed is required$/m);
    assert.match(r.stdout, /^c-ship\s+ship_order\s+non_idempotent\s+not_executed\s+retry_allowed\s+not executed \(body never started: no start marker, no result\)/m);
    assert.doesNotMatch(r.stdout, /^c-ok/m, 'a success is not listed');
  });

  it('exit 0 when nothing needs attention; an empty session says so', () => {
    const quiet = cli(['inspect', path, 'quiet']);
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.match(quiet.stdout, /^Session quiet: 4 events, 1 tool call, 1 succeeded\.\nNothing needs attention\.\n$/);
    const empty = cli(['inspect', path, 'empty']);
    assert.equal(empty.code, 0, empty.stderr);
    assert.match(empty.stdout, /has no events yet/);
  });

  it('--json carries the assessment for scripts', () => {
    const r = cli(['inspect', path, 'alpha', '--json']);
    assert.equal(r.code, 1);
    const doc = JSON.parse(r.stdout) as { needs_attention: number; calls: Array<{ call_id: string; next_step: string; status: string; result: unknown }>; by_next_step: Record<string, number> };
    assert.equal(doc.needs_attention, 3);
    assert.deepEqual(doc.calls.map((c) => [c.call_id, c.status, c.next_step]), [
      ['c-idem', 'outcome_unknown', 'retry_allowed'],
      ['c-pay', 'outcome_unknown', 'needs_review'],
      ['c-ship', 'not_executed', 'retry_allowed'],
    ]);
    assert.deepEqual(doc.calls[0]!.result, { call_id: 'c-idem', outcome: { status: 'failed', category: 'body_failure', code: 'tool_body_failure', message: 'body_failure happened', retryable: true } });
    assert.equal(doc.by_next_step.needs_review, 1);
  });
});

describe('jingwei inspect <session> <call>', () => {
  let path: string;
  before(async () => {
    path = tempDbPath(dir, 'calls');
    await writeStore(path, { alpha: alphaHistory() });
  });

  it('needs_review: the policy rows flagged_started and needs_review, why, what a host may do; exit 1', async () => {
    const r = cli(['inspect', path, 'alpha', 'c-pay']);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /^Call c-pay in session alpha\n/);
    assert.match(r.stdout, /^ {2}tool\s+charge_card \(non_idempotent, revision v1\)$/m);
    assert.match(r.stdout, /^ {2}journal\s+tool_call at seq 7; tool_started at seq 8; no tool_result$/m);
    assert.match(r.stdout, /^ {2}next step\s+needs_review$/m);
    assert.match(r.stdout, /^ {2}evidence\/flagged_started: A flagged call whose start marker is recorded, without a success → The body started/m);
    assert.match(r.stdout, /^ {2}retry\/needs_review: Outcome uncertain, contract Unknown \/ NonIdempotent → Return NeedsReview/m);
    assert.match(r.stdout, /^Why: outcome unknown \(body started, no result\) and effect non_idempotent/m);
    const store = openSqliteStore(path, { readonly: true });
    const history = await store.loadHistory('alpha');
    await store.close();
    const reference = externalIdempotencyKey({ sessionId: 'alpha', operationOrigin: operationOriginIn(history, { taskId: 'retry-task', key: 'k-pay' })!, operation: { taskId: 'retry-task', key: 'k-pay' } });
    assert.match(r.stdout, new RegExp(`^What a host may do: Check the external system .*externalIdempotencyKey, '${reference}'.*outcome: 'not_executed'`, 'm'));
  });

  it('no start marker: the flagged_never_started row, retry_allowed even for a non_idempotent tool; exit 1', () => {
    const r = cli(['inspect', path, 'alpha', 'c-ship']);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /no tool_started \(the body never started\)/);
    assert.match(r.stdout, /^ {2}evidence\/flagged_never_started: A call flagged to record a start marker, with no marker, .* → The body provably never started/m);
    assert.match(r.stdout, /^ {2}retry\/not_executed: The body provably never started → A new attempt may be prepared/m);
    assert.match(r.stdout, /prepareToolRetry\(history, 'c-ship'\)/);
  });

  it('retry_allowed for an idempotent failure: the safe_to_repeat row, and the reference its write may have been made under', async () => {
    const r = cli(['inspect', path, 'alpha', 'c-idem']);
    assert.equal(r.code, 1);
    assert.match(r.stdout, /^ {2}result\s+failed body_failure \(tool_body_failure: body_failure happened\)$/m);
    assert.match(r.stdout, /^ {2}retry\/safe_to_repeat: Outcome uncertain, contract ReadOnly \/ Idempotent/m);
    // u139 #3: an operator who took "the retry reuses the key" for "nothing was made" reviewed a made charge as
    // not_executed with no reference to look it up by; a redeploy then sent the model to charge again.
    const store = openSqliteStore(path, { readonly: true });
    const history = await store.loadHistory('alpha');
    await store.close();
    const reference = externalIdempotencyKey({ sessionId: 'alpha', operationOrigin: operationOriginIn(history, { taskId: 'retry-task', key: 'k-idem' })!, operation: { taskId: 'retry-task', key: 'k-idem' } });
    assert.match(r.stdout, new RegExp(`Its write may have been made: the retry sends the same reference \\(externalIdempotencyKey, '${reference}'\\).*Review it as not_executed only once the provider shows nothing under that reference`));
    assert.doesNotMatch(cli(['inspect', path, 'alpha', 'c-ship']).stdout, /Its write may have been made/, 'not for a call whose body never started');
  });

  it('a succeeded call: the succeeded rows, nothing to do, exit 0; --json names the rows', () => {
    const r = cli(['inspect', path, 'alpha', 'c-ok']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^ {2}status\s+completed$/m);
    assert.match(r.stdout, /^ {2}retry\/succeeded: A success result, or the host has verified completion → Refuse the retry/m);
    assert.match(r.stdout, /Nothing to do: the call succeeded\. Never retry it\./);
    const json = JSON.parse(cli(['inspect', path, 'alpha', 'c-pay', '--json']).stdout) as Record<string, unknown>;
    assert.equal(json.next_step, 'needs_review');
    assert.equal(json.started_seq, 8);
    assert.equal(json.result_seq, null);
    assert.deepEqual((json.decision_rows as Array<{ rule: string }>).map((row) => row.rule), ['evidence/flagged_started', 'retry/needs_review']);
  });

  it('an unknown call is a usage error (exit 2)', () => {
    const r = cli(['inspect', path, 'alpha', 'c-nope']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /no call "c-nope" in session alpha/);
  });
});

describe('jingwei inspect on a 100,000-event session', () => {
  let path: string;
  let open = 0;
  let calls = 0;
  before(async () => {
    path = tempDbPath(dir, 'big');
    ({ calls, open } = await writeBigSession(path, 'big', 100_000));
  });

  it('loads, verifies and assesses all of it; no progress line when stderr is not a terminal', async () => {
    const r = await cliAsync(['inspect', path, 'big']);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stderr, '', 'the progress indicator is for terminals only');
    assert.match(r.stdout, new RegExp(`^Session big: 100,000 events, ${calls.toLocaleString('en-US')} tool calls, ${(calls - open).toLocaleString('en-US')} succeeded\\.\\n`));
    assert.match(r.stdout, new RegExp(`Needs attention: ${open} calls \\(${open} retry_allowed\\)`));
    assert.equal(r.stdout.split('\n').filter((l) => /^c\d+\s+probe\s+idempotent\s+outcome_unknown\s+retry_allowed/.test(l)).length, open);
    const one = await cliAsync(['inspect', path, 'big', 'c10']);
    assert.equal(one.code, 1, one.stderr);
    assert.match(one.stdout, /^Call c10 in session big\n/);
  });

  it('on a terminal: a progress line on stderr, colour, and none of the colour with NO_COLOR', { skip: haveScript() ? false : 'needs script(1) for a pseudo-terminal' }, () => {
    const tty = cliOnTty(['inspect', path, 'big']);
    assert.equal(tty.code, 1, tty.stdout);
    assert.match(tty.stdout, /loading and verifying 100,000 events of big/);
    assert.match(tty.stdout, /assessing 100,000 events of big/);
    assert.match(tty.stdout, /\r\u001b\[2K/, 'the progress line erases itself');
    assert.match(tty.stdout, COLOUR);
    assert.match(tty.stdout, /Session big: 100,000 events/);

    const plain = cliOnTty(['inspect', path, 'big'], { env: { NO_COLOR: '1' } });
    assert.equal(plain.code, 1);
    assert.match(plain.stdout, /loading and verifying 100,000 events of big/, 'progress still shows');
    assert.doesNotMatch(plain.stdout, COLOUR, 'but never in colour');
  });

  it('small sessions never show progress, even on a terminal', { skip: haveScript() ? false : 'needs script(1)' }, async () => {
    const small = tempDbPath(dir, 'small');
    await writeStore(small, { quiet: quietHistory() });
    const tty = cliOnTty(['inspect', small, 'quiet']);
    assert.equal(tty.code, 0);
    assert.doesNotMatch(tty.stdout, /loading and verifying/);
  });
});

/** A SQLite journal whose session `sessionId` holds a task and a gateway to a non-idempotent `send_mail` running `body`. */
async function mailHost(name: string, sessionId: string, body: () => Promise<string>, config: Pick<ToolRuntimeConfig, 'onEvent'> = {}) {
  const path = tempDbPath(dir, name);
  const store = openSqliteStore(path);
  const owner = await store.acquire(sessionId, { owner: 'host-a' });
  await owner.startTask('t');
  const mail = { name: 'send_mail', metadata: new ToolMetadata('sends a mail', { type: 'object' }).withEffect('non_idempotent', 'mail-v1'), execute: body };
  const gateway = createToolRuntime({ tools: [mail], grants: { agent: '*' }, ...config }).bind({ owner, taskId: 't', caller: 'agent' });
  return { path, store, owner, gateway };
}

describe('jingwei inspect <call> of a call whose body is running now', () => {
  it('says the call may still be running and that nothing is to be done yet, as the inbox refuses its review (r69 #4)', async () => {
    let finish: () => void = () => {};
    let started: () => void = () => {};
    const inBody = new Promise<void>((resolve) => { started = resolve; });
    const { path, store, owner, gateway } = await mailHost('running', 'live', async () => {
      started();
      await new Promise<void>((resolve) => { finish = resolve; });
      return 'sent';
    });
    const call = gateway.call('send_mail', { to: 'ann@example.com' });
    await inBody;
    try {
      const callId = (await store.loadHistory('live')).flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call.id] : []))[0]!;
      const r = await cliAsync(['inspect', path, 'live', callId]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stdout, /running\s+the call may still be running: the host that made it holds the session with a live lease and no result is journaled/);
      assert.match(r.stdout, /What a host may do: Not yet: wait for the call's host/);
      const json = await cliAsync(['inspect', path, 'live', callId, '--json']);
      assert.equal((JSON.parse(json.stdout) as { in_flight: string | null }).in_flight, 'no_result');
    } finally {
      finish();
      await call;
    }
    const after = await cliAsync(['inspect', path, 'live', (await call).call.id, '--json']);
    assert.equal((JSON.parse(after.stdout) as { in_flight: string | null }).in_flight, null, 'once its result is journaled, it is not');
    await owner.release();
    await store.close();
  });
});

describe('jingwei inspect <call> of an attempt stopped between its marker and its body', () => {
  it('gives the marker\'s time as the start marker\'s, not as a body that started (r70 F4)', async () => {
    let ran = 0;
    const controller = new AbortController();
    const { path, store, owner, gateway } = await mailHost('stopped', 'stopped', async () => { ran += 1; return 'sent'; }, {
      onEvent: (e) => { if (e.type === 'body_started') controller.abort(); },
    });
    const call = await gateway.callWithOptions('send_mail', { to: 'ann@example.com' }, { signal: controller.signal });
    assert.equal(ran, 0);
    await owner.release();
    await store.close();
    const r = await cliAsync(['inspect', path, 'stopped', call.call.id]);
    assert.match(r.stdout, /times\s+called [^;]+; start marker [^;]+; result [^(]+\(stopped before its body was called/);
    assert.doesNotMatch(r.stdout, /body started/);
  });
});
