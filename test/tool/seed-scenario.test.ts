/**
 * The founding scenario of explicit retries across real process boundaries, on SQLite and PostgreSQL, and the fifth
 * retry test of Jingwei for Rust in one process: an idempotent tool writes its record and fails; a retry is denied by a fresh approval; the
 * next retry is approved and succeeds. Three attempts, one operation key, one business record.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import type { ToolCall, ToolResult } from '../../src/event/types.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { inspectToolRecovery, prepareToolRetry } from '../../src/tool/recovery.js';
import { countingApprover, openLedger, probeTool } from '../support/orders.js';
import { forEachStore } from '../support/stores.js';

const child = fileURLToPath(new URL('./children/seed-child.js', import.meta.url));

interface Report { call: ToolCall; result: ToolResult; approvals: number; bodies: number; charged: { toolCalls: number } }

const category = (r: ToolResult) => (r.outcome.status === 'failed' ? r.outcome.category : 'succeeded');

forEachStore('the explicit-retry scenario', (target) => {
  it('across three processes: fail after the write, retry denied, retry approved; one business record', async () => {
    const location = target.fresh();
    const runPhase = (phase: number, decision: 'approve' | 'deny'): Report =>
      JSON.parse(execFileSync(process.execPath, [child, location.target, location.schema ?? '-', String(phase), decision], { encoding: 'utf8' })) as Report;
    const a = runPhase(1, 'approve');
    assert.equal(category(a.result), 'body_failure');
    assert.equal(a.approvals, 1);
    const b = runPhase(2, 'deny');
    assert.equal(category(b.result), 'approval_denied');
    assert.equal(b.approvals, 1, 'approval asked again on the first retry');
    assert.equal(b.bodies, 0);
    const c = runPhase(3, 'approve');
    assert.equal(category(c.result), 'succeeded');
    assert.equal(c.approvals, 1, 'approval asked again on the second retry');
    assert.equal(c.bodies, 1);

    assert.equal(new Set([a.call.id, b.call.id, c.call.id]).size, 3, 'three call ids');
    assert.equal(new Set([a.call.operation!.key, b.call.operation!.key, c.call.operation!.key]).size, 1, 'one operation key');
    const store = await location.open();
    const history = await store.loadHistory('retry-session');
    const callEvent = (id: string) => history.find((e) => e.kind.type === 'tool_call' && e.kind.call.id === id)!;
    assert.equal(b.call.operation!.retry!.callId, a.call.id);
    assert.equal(b.call.operation!.retry!.eventId, callEvent(a.call.id).eventId);
    assert.equal(c.call.operation!.retry!.callId, b.call.id);
    assert.equal(c.call.operation!.retry!.eventId, callEvent(b.call.id).eventId);
    assert.equal(c.charged.toolCalls, 3, 'three attempts charged');
    const ledger = await openLedger(location.target, location.schema);
    assert.equal(await ledger.count(), 1, 'exactly one business record');
    await ledger.close();
    assert.deepEqual(JSON.parse((c.result.outcome as { output: string }).output), { orderId: 1 }, 'the stored result is replayed');
    assert.throws(() => prepareToolRetry(history, c.call.id, null), { code: 'completed' });
    assert.throws(() => prepareToolRetry(history, a.call.id, null), { code: 'not_latest_attempt' });
    await store.close();
  });

  it('explicit_retry_reuses_key_after_runtime_reopen_and_rechecks_approval_and_budget (retry test 5 of Jingwei for Rust)', async () => {
    const location = target.fresh();
    const store = await location.open();
    const ledger = await openLedger(location.target, location.schema);
    const owner = await store.acquire('retry-session', { owner: 'retry-agent' });
    await owner.startTask('retry-task');
    let failReceipt = true;
    const build = (decision: 'approve' | 'deny') => {
      const approvals = { count: 0 };
      const bodies = { count: 0 };
      const runtime = createToolRuntime({
        tools: [probeTool(ledger, { failReceipt: () => failReceipt, bodies })],
        grants: { 'caller-owner': ['probe'] },
        approvers: { current: countingApprover(decision, approvals) },
      });
      return { gateway: runtime.bind({ owner, taskId: 'retry-task', caller: 'caller-owner' }), approvals, bodies };
    };

    const phaseA = build('approve');
    const a = await phaseA.gateway.call('probe', { ok: true });
    assert.equal(category(a.result), 'body_failure');
    assert.equal(phaseA.bodies.count, 1);
    let log = await store.loadHistory('retry-session');
    const planA = prepareToolRetry(log, a.call.id, null);

    failReceipt = false;
    const phaseB = build('deny');
    const b = await phaseB.gateway.callWithOptions('probe', { ok: true }, { retry: planA });
    assert.equal(category(b.result), 'approval_denied');
    assert.equal(phaseB.approvals.count, 1);
    assert.equal(phaseB.bodies.count, 0);
    log = await store.loadHistory('retry-session');
    assert.equal(inspectToolRecovery(log, b.call.id).status, 'not_executed');
    const planB = prepareToolRetry(log, b.call.id, null);

    const phaseC = build('approve');
    const c = await phaseC.gateway.callWithOptions('probe', { ok: true }, { retry: planB });
    assert.equal(category(c.result), 'succeeded');
    assert.notEqual(c.call.id, a.call.id);
    assert.equal(c.call.operation!.key, a.call.operation!.key);
    assert.equal(c.call.operation!.retry!.callId, b.call.id);
    assert.equal(phaseC.approvals.count, 1);
    assert.equal(await ledger.count(), 1);
    assert.equal(await ledger.dedupRecords(), 1);
    log = await store.loadHistory('retry-session');
    assert.throws(() => prepareToolRetry(log, c.call.id, null), { code: 'completed' });
    assert.equal((await owner.task('retry-task')).charged.toolCalls, 3);
    await ledger.close();
    await store.close();
  });
});
