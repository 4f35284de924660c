import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ToolEffect } from '../../src/event/types.js';
import { ToolNextStep, assessSession } from '../../src/tool/assess.js';
import { ToolRecoveryStatus } from '../../src/tool/recovery.js';
import { HistoryBuilder, expectRetryError, failed, succeeded } from '../support/history.js';

describe('assessSession', () => {
  it('lists every call without its own success, with the next step and the row that decided it', () => {
    const h = new HistoryBuilder();
    h.message('start');
    // op-a: body failed, retried, the retry succeeded -> attempt 1 is completed (a later attempt succeeded).
    const a1 = h.call({ id: 'a1', key: 'op-a', effect: ToolEffect.Idempotent });
    h.result('a1', failed('body_failure', true));
    h.retry(a1, { id: 'a2' });
    h.result('a2', succeeded());
    // op-b: non_idempotent, no result -> needs review.
    h.call({ id: 'b1', key: 'op-b', effect: ToolEffect.NonIdempotent });
    // op-c: idempotent timeout, retried and denied -> c1 superseded, c2 retry allowed (not executed), c1's outcome open.
    const c1 = h.call({ id: 'c1', key: 'op-c', effect: ToolEffect.Idempotent });
    h.result('c1', failed('timeout', true));
    h.retry(c1, { id: 'c2' });
    h.result('c2', failed('denied'));
    // op-d: flagged, died waiting for approval -> not executed, retry allowed.
    h.call({ id: 'd1', key: 'op-d', effect: ToolEffect.NonIdempotent, startMarker: true });
    // op-e: flagged, body started, no result -> needs review.
    h.call({ id: 'e1', key: 'op-e', effect: ToolEffect.Unknown, startMarker: true });
    h.started('e1');
    // legacy call with a failure.
    h.call({ id: 'l1', legacy: true });
    h.result('l1', failed('body_failure'));
    // read_only with unknown outcome -> retry allowed.
    h.call({ id: 'r1', key: 'op-r', effect: ToolEffect.ReadOnly });
    h.result('r1', failed('cancelled'));

    const report = assessSession(h.build());
    assert.equal(report.sessionId, 'retry-session');
    assert.equal(report.events, h.events.length);
    const byId = new Map(report.calls.map((c) => [c.callId as string, c]));
    assert.deepEqual([...byId.keys()], ['a1', 'b1', 'c1', 'c2', 'd1', 'e1', 'l1', 'r1']);

    const expect = (id: string, status: string, nextStep: string, attempt: number, reason: RegExp) => {
      const entry = byId.get(id)!;
      assert.equal(entry.status, status, id);
      assert.equal(entry.nextStep, nextStep, id);
      assert.equal(entry.attempt, attempt, id);
      assert.match(entry.reason, reason, id);
      assert.doesNotMatch(entry.reason, /\n/);
    };
    expect('a1', ToolRecoveryStatus.OutcomeUnknown, ToolNextStep.Completed, 1, /attempt 2 \(a2\) of this operation succeeded/);
    expect('b1', ToolRecoveryStatus.OutcomeUnknown, ToolNextStep.NeedsReview, 1,
      /^outcome unknown \(no result\) and effect non_idempotent: a trusted review saying not_executed is required$/);
    expect('c1', ToolRecoveryStatus.OutcomeUnknown, ToolNextStep.Superseded, 1, /attempt 2 \(c2\) is newer/);
    expect('c2', ToolRecoveryStatus.NotExecuted, ToolNextStep.RetryAllowed, 2, /not executed \(rejected before the body: denied\)/);
    expect('d1', ToolRecoveryStatus.NotExecuted, ToolNextStep.RetryAllowed, 1, /no start marker/);
    expect('e1', ToolRecoveryStatus.OutcomeUnknown, ToolNextStep.NeedsReview, 1,
      /^outcome unknown \(body started, no result\) and effect unknown: a trusted review saying not_executed is required$/);
    expect('l1', ToolRecoveryStatus.OutcomeUnknown, ToolNextStep.Legacy, 1, /legacy call/);
    expect('r1', ToolRecoveryStatus.OutcomeUnknown, ToolNextStep.RetryAllowed, 1, /effect read_only: one attempt may be prepared/);

    assert.equal(byId.get('l1')!.effect, null);
    assert.equal(byId.get('c2')!.key, 'op-c');
    assert.equal(byId.get('c2')!.attempts, 2);
    assert.equal(byId.get('c2')!.result?.outcome.status, 'failed');
    assert.deepEqual(report.totals, {
      calls: 9,
      succeeded: 1,
      listed: 8,
      byNextStep: { retry_allowed: 3, needs_review: 2, completed: 1, superseded: 1, legacy: 1 },
      byStatus: { completed: 1, not_executed: 2, outcome_unknown: 6 },
      byAttention: { in_doubt: 4, interrupted: 1, none: 3 },
    });
    // Attention means attention: in doubt (b1, e1, r1) or interrupted before any answer (d1). c2's denial was
    // recorded before the body, but c1's timeout, before it, may have taken effect and nothing settled it: the
    // operation is still in doubt, and c2, its latest attempt, is the call to act on (the attention index agrees).
    assert.deepEqual(
      Object.fromEntries(report.calls.map((c) => [c.callId, c.attention])),
      { a1: 'none', b1: 'in_doubt', c1: 'none', c2: 'in_doubt', d1: 'interrupted', e1: 'in_doubt', l1: 'none', r1: 'in_doubt' },
    );
    assert.match(byId.get('c2')!.reason, /; attempt 1 \(c1\) before it may have taken effect, and nothing has settled that$/);
  });

  it("carries an operation's open outcome to its latest attempt until a success or a review settles it", () => {
    const h = new HistoryBuilder();
    // op-x: idempotent, body started then cancelled; two retries refused before their bodies: the latest is in doubt.
    const x1 = h.call({ id: 'x1', key: 'op-x', effect: ToolEffect.Idempotent, startMarker: true });
    h.started('x1');
    h.result('x1', failed('cancelled'));
    const x2 = h.retry(x1, { id: 'x2', startMarker: true });
    h.result('x2', failed('approval_unavailable'));
    h.retry(x2, { id: 'x3', startMarker: true });
    h.result('x3', failed('denied'));
    // op-y: non_idempotent, body started, reviewed not_executed, its retry refused: the review settled the doubt.
    h.call({ id: 'y1', key: 'op-y', effect: ToolEffect.NonIdempotent, startMarker: true });
    h.started('y1');
    h.push({ type: 'tool_review', review: { callId: 'y1' as never, actor: 'ops:ana', outcome: 'not_executed', evidence: 'no order in the shop', source: 'human' } });
    const review = { actor: 'ops:ana', outcome: 'not_executed', evidence: 'no order in the shop' } as const;
    h.retry(h.events.find((e) => e.kind.type === 'tool_call' && e.kind.call.id === 'y1')!, { id: 'y2', startMarker: true, review });
    h.result('y2', failed('denied'));
    const attention = Object.fromEntries(assessSession(h.build()).calls.map((c) => [c.callId, [c.nextStep, c.attention]]));
    assert.deepEqual(attention, {
      x1: ['superseded', 'none'], x2: ['superseded', 'none'], x3: ['retry_allowed', 'in_doubt'],
      y1: ['superseded', 'none'], y2: ['retry_allowed', 'none'],
    });
  });

  it('a corrupt history throws invalid_evidence; a changed binding throws binding_changed', () => {
    const h = new HistoryBuilder();
    h.result('nothing', succeeded());
    expectRetryError(() => assessSession(h.build()), 'invalid_evidence');
    assert.match(expectRetryError(() => assessSession([]), 'invalid_evidence').message, /the history is empty/);
    // Not an array at all is said so, not called empty (u118).
    assert.match(expectRetryError(() => assessSession('nope' as never), 'invalid_evidence').message, /the history must be an array of session events \(loadHistory's\), got a string/);
    const b = new HistoryBuilder();
    const first = b.call({ effect: ToolEffect.Idempotent });
    b.retry(first, { id: 'attempt-2', arguments: { ok: false } });
    expectRetryError(() => assessSession(b.build()), 'binding_changed');
  });
});
