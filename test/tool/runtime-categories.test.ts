/**
 * One test per failure category the canonical runtime records (all 13), on SQLite and PostgreSQL: the category and code, the
 * journal order (call, the tool_started marker only where the body started, result), one turn, and the ledger.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { SessionEvent, ToolFailureCategory } from '../../src/event/types.js';
import { ToolBodyError } from '../../src/errors.js';
import { encodeEventText } from '../../src/event/codec.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import type { ToolApprover, ToolExecution, ToolGuard } from '../../src/tool/types.js';
import { endHungBodies, never, rig, tool, type Rig } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';

const RESERVE = 1000;

async function check(
  r: Rig,
  execution: ToolExecution,
  expected: { category: ToolFailureCategory; code: string; started: boolean; outputCharged: number; ledger?: readonly string[] },
): Promise<void> {
  const outcome = execution.result.outcome;
  assert.equal(outcome.status, 'failed');
  if (outcome.status !== 'failed') return;
  assert.equal(outcome.category, expected.category);
  assert.equal(outcome.code, expected.code);
  // The store's records of the task's changes (docs/design.md#the-task-ledger-in-the-chain), each in a turn of its
  // own: the rig's start first, then any change during the call. The call's events are the others.
  const all = await r.store.loadHistory(r.sessionId);
  assert.equal(all[0]!.kind.type, 'task_ledger');
  const changes = all.flatMap((e) => (e.kind.type === 'task_ledger' ? [e.kind.ledger.change] : []));
  assert.deepEqual(changes, expected.ledger ?? ['started']);
  const history = all.filter((e) => e.kind.type !== 'task_ledger');
  const kinds = history.map((e: SessionEvent) => e.kind.type);
  assert.deepEqual(kinds, expected.started ? ['tool_call', 'tool_started', 'tool_result'] : ['tool_call', 'tool_result']);
  assert.equal(new Set(history.map((e) => e.turnId)).size, 1, 'one turn');
  assert.equal(execution.startedEvent !== null, expected.started);
  assert.deepEqual(history[0], execution.callEvent);
  assert.deepEqual(history[history.length - 1], execution.resultEvent);
  const task = await r.owner.task(r.taskId);
  assert.deepEqual([task.charged.toolCalls, task.charged.toolOutputBytes], [1, expected.outputCharged]);
  assert.equal(task.charged.journalBytes, history.reduce((sum, e) => sum + Buffer.byteLength(encodeEventText(e)), 0), 'the task is charged its events\' wire bytes');
  assert.equal(task.reservedOutputBytes, 0, 'every reservation is settled');
  endHungBodies();
  await r.store.close();
}

const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false };
const ok = tool('ok', async () => 'done', new ToolMetadata('ok', schema));
const gated = (approver: ToolApprover) => ({
  tools: [tool('gated', async () => 'ran', new ToolMetadata('gated', { type: 'object' }).withApproval('human'))],
  approvers: { human: approver },
  maxOutputBytes: RESERVE,
});

forEachStore('every failure category is recorded as evidence', (target) => {
  it('unavailable: not granted to the caller (the body never starts; output refunded)', async () => {
    const r = await rig(target, { tools: [ok], grants: { agent: [] }, maxOutputBytes: RESERVE });
    await check(r, await r.gateway.call('ok', { n: 1 }), { category: 'unavailable', code: 'tool_unavailable', started: false, outputCharged: 0 });
  });

  it('unavailable: a name nobody registered', async () => {
    const r = await rig(target, { tools: [ok], maxOutputBytes: RESERVE });
    await check(r, await r.gateway.call('nope', {}), { category: 'unavailable', code: 'tool_unavailable', started: false, outputCharged: 0 });
  });

  it('invalid_arguments: the JSON Schema rejects the arguments', async () => {
    const r = await rig(target, { tools: [ok], maxOutputBytes: RESERVE });
    const execution = await r.gateway.call('ok', { n: 'one' });
    assert.match((execution.result.outcome as { message: string }).message, /\/n must be integer/);
    await check(r, execution, { category: 'invalid_arguments', code: 'tool_arguments_invalid', started: false, outputCharged: 0 });
  });

  it('invalid_arguments: a `format` in the schema is checked (an invalid e-mail), with no console noise', async () => {
    const mail = tool('mail', async () => 'sent', new ToolMetadata('mail', {
      type: 'object',
      properties: { to: { type: 'string', format: 'email' }, at: { type: 'string', format: 'date-time' } },
      required: ['to'],
    }));
    const warnings: unknown[] = [];
    const original = console.warn;
    console.warn = (...args: unknown[]) => { warnings.push(args); };
    let r: Rig;
    try {
      r = await rig(target, { tools: [mail], maxOutputBytes: RESERVE });
    } finally {
      console.warn = original;
    }
    assert.deepEqual(warnings, [], 'no "unknown format" warning');
    const execution = await r.gateway.call('mail', { to: 'not an address' });
    assert.match((execution.result.outcome as { message: string }).message, /\/to must match format "email"/);
    const good = await r.gateway.call('mail', { to: 'ops@example.com', at: '2026-11-30T20:00:00Z' });
    assert.equal(good.result.outcome.status, 'succeeded');
    const bad = await r.gateway.call('mail', { to: 'ops@example.com', at: 'yesterday' });
    assert.equal((bad.result.outcome as { category: string }).category, 'invalid_arguments');
    // check() expects one call in the journal: judge the first on a fresh rig's terms.
    const outcome = execution.result.outcome;
    assert.equal(outcome.status === 'failed' && outcome.category, 'invalid_arguments');
    assert.equal(outcome.status === 'failed' && outcome.code, 'tool_arguments_invalid');
    await r.store.close();
  });

  it('denied: a guard denies', async () => {
    const seen: string[] = [];
    const guards: ToolGuard[] = [
      ({ call }) => { seen.push(`first:${call.name}`); return null; },
      () => ({ code: 'policy_blocked', message: 'not on weekends', retryable: true }),
      () => { seen.push('never reached'); return null; },
    ];
    const r = await rig(target, { tools: [ok], guards, maxOutputBytes: RESERVE });
    const execution = await r.gateway.call('ok', { n: 1 });
    assert.deepEqual(seen, ['first:ok']);
    assert.equal((execution.result.outcome as { retryable: boolean }).retryable, true);
    await check(r, execution, { category: 'denied', code: 'policy_blocked', started: false, outputCharged: 0 });
  });

  it('guard_fault: a guard throws', async () => {
    const r = await rig(target, { tools: [ok], guards: [() => { throw new Error('guard crashed'); }], maxOutputBytes: RESERVE });
    await check(r, await r.gateway.call('ok', { n: 1 }), { category: 'guard_fault', code: 'tool_guard_panicked', started: false, outputCharged: 0 });
  });

  it('approval_unavailable: the approver cannot decide', async () => {
    const r = await rig(target, gated(async () => ({ decision: 'unavailable' })));
    await check(r, await r.gateway.call('gated', {}), { category: 'approval_unavailable', code: 'tool_approval_unavailable', started: false, outputCharged: 0 });
  });

  it('approval_denied: the approver says no', async () => {
    const r = await rig(target, gated(async () => ({ decision: 'denied', code: 'human_said_no', message: 'not this one' })));
    await check(r, await r.gateway.call('gated', {}), { category: 'approval_denied', code: 'human_said_no', started: false, outputCharged: 0 });
  });

  it('approval_fault: the approver throws', async () => {
    const r = await rig(target, gated(async () => { throw new Error('approval service crashed'); }));
    await check(r, await r.gateway.call('gated', {}), { category: 'approval_fault', code: 'tool_authorizer_panicked', started: false, outputCharged: 0 });
  });

  it('timeout: a body that ignores its signal cannot hold the call open; its late return is discarded', async () => {
    let sawAbort = false;
    const stuck = tool('stuck', async (_req, signal) => {
      signal.addEventListener('abort', () => { sawAbort = true; });
      return never();
    });
    const r = await rig(target, { tools: [stuck], maxOutputBytes: RESERVE });
    // Long enough that the call and its marker are durable before the deadline, so the body does start.
    const execution = await r.gateway.callWithOptions('stuck', {}, { timeoutMs: 2_000 });
    assert.equal(sawAbort, true, 'the body was told through its signal');
    assert.equal((execution.result.outcome as { retryable: boolean }).retryable, true);
    await check(r, execution, { category: 'timeout', code: 'tool_timeout', started: true, outputCharged: RESERVE });
  });

  it('timeout: a body that rejects once told to stop is discarded, and its rejection is not left unhandled', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      let rejected = false;
      const quitting = tool('quitting', (_req, signal) => new Promise((_resolve, reject) => {
        signal.addEventListener('abort', () => setTimeout(() => { rejected = true; reject(new Error('gave up')); }, 5));
      }));
      const r = await rig(target, { tools: [quitting], maxOutputBytes: RESERVE });
      const execution = await r.gateway.callWithOptions('quitting', {}, { timeoutMs: 2_000 });
      await check(r, execution, { category: 'timeout', code: 'tool_timeout', started: true, outputCharged: RESERVE });
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(rejected, true, 'the body rejected after the deadline won');
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('timeout while waiting for approval: recorded without the start marker', async () => {
    const r = await rig(target, gated(() => never()));
    const execution = await r.gateway.callWithOptions('gated', {}, { timeoutMs: 30 });
    await check(r, execution, { category: 'timeout', code: 'tool_timeout', started: false, outputCharged: 0 });
  });

  it('cancelled: the caller aborts a running body', async () => {
    const controller = new AbortController();
    const slow = tool('slow', async () => { controller.abort(); return never(); });
    const r = await rig(target, { tools: [slow], maxOutputBytes: RESERVE });
    const execution = await r.gateway.callWithOptions('slow', {}, { signal: controller.signal });
    await check(r, execution, { category: 'cancelled', code: 'tool_cancelled', started: true, outputCharged: RESERVE });
  });

  it('body_failure: the tool reports a failure', async () => {
    const failing = tool('failing', async () => { throw new ToolBodyError('lost_receipt', 'the receipt was lost', { retryable: true }); });
    const r = await rig(target, { tools: [failing], maxOutputBytes: RESERVE });
    await check(r, await r.gateway.call('failing', {}), { category: 'body_failure', code: 'lost_receipt', started: true, outputCharged: RESERVE });
  });

  it('body_panic: the tool crashes', async () => {
    const crashing = tool('crashing', async () => { throw new TypeError('undefined is not a function'); });
    const r = await rig(target, { tools: [crashing], maxOutputBytes: RESERVE });
    await check(r, await r.gateway.call('crashing', {}), { category: 'body_panic', code: 'tool_body_panicked', started: true, outputCharged: RESERVE });
  });

  it('output_limit: the output is over the limit, counted in UTF-8 bytes', async () => {
    const euro = tool('euro', async () => '€'.repeat(400));
    const r = await rig(target, { tools: [euro], maxOutputBytes: RESERVE });
    // 1,200 bytes were produced; the charge stops at the reservation (docs/design.md#budgets-are-exact).
    await check(r, await r.gateway.call('euro', {}), { category: 'output_limit', code: 'tool_output_limit', started: true, outputCharged: RESERVE });
  });

  it('output_limit: counted as the journal stores the output, JSON-escaped', async () => {
    // 200 bytes of text, 1,200 in the journal (`\u0001`): over the limit as written (docs/design.md#output-is-counted-as-it-is-journaled).
    const control = tool('control', async () => '\u0001'.repeat(200));
    const r = await rig(target, { tools: [control], maxOutputBytes: RESERVE });
    const execution = await r.gateway.call('control', {});
    assert.match(execution.result.outcome.status === 'failed' ? execution.result.outcome.message : '', /the output is 200 bytes, 1200 as the journal stores it \(JSON-escaped\), over the limit of 1000/);
    await check(r, execution, { category: 'output_limit', code: 'tool_output_limit', started: true, outputCharged: RESERVE });
  });

  it('an output at its limit as the journal stores it succeeds, charged what it takes there', async () => {
    const quotes = tool('quotes', async () => '"'.repeat(RESERVE / 2));
    const r = await rig(target, { tools: [quotes], maxOutputBytes: RESERVE });
    const execution = await r.gateway.call('quotes', {});
    assert.equal(execution.result.outcome.status, 'succeeded');
    assert.deepEqual((await r.owner.task(r.taskId)).charged.toolOutputBytes, RESERVE);
    await r.store.close();
  });

  it('budget: the task is stopped while the body runs', async () => {
    let r: Rig | undefined;
    const waits = tool('waits', async () => { await r!.owner.stopTask(r!.taskId, 'operator stop'); return never(); });
    r = await rig(target, { tools: [waits], maxOutputBytes: RESERVE });
    const execution = await r.gateway.call('waits', {});
    await check(r, execution, { category: 'budget', code: 'tool_budget_stopped', started: true, outputCharged: RESERVE, ledger: ['started', 'stopped'] });
  });

  it('budget: the task is completed while the call waits for approval (the body never starts)', async () => {
    let r: Rig | undefined;
    let ran = 0;
    // The approver approves only after the host has completed the task: the approval must not start the body.
    const approver: ToolApprover = async () => { await r!.owner.completeTask(r!.taskId); return { decision: 'approved' }; };
    r = await rig(target, {
      tools: [tool('gated', async () => { ran++; return 'ran'; }, new ToolMetadata('gated', { type: 'object' }).withApproval('human'))],
      approvers: { human: approver },
      maxOutputBytes: RESERVE,
    });
    const execution = await r.gateway.call('gated', {});
    assert.equal(ran, 0, 'the body never ran');
    assert.match((execution.result.outcome as { message: string }).message, /task was completed while this call waited; its body never ran/);
    await check(r, execution, { category: 'budget', code: 'tool_budget_stopped', started: false, outputCharged: 0, ledger: ['started', 'completed'] });
  });
});
