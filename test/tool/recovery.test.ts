/**
 * The retry tests 1–3 of Jingwei for Rust, ported with the same fixtures and assertions, plus the body-start
 * marker rule (docs/design.md#the-body-start-marker). Test 4 is in retry-plan.test.ts; test 5 needs the real runtime and lives with it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeEvent, encodeEvent } from '../../src/event/codec.js';
import { PRE_BODY_CATEGORIES, ToolEffect, ToolReviewOutcome, type ToolFailureCategory } from '../../src/event/types.js';
import type { CallId } from '../../src/ids.js';
import { assessSession } from '../../src/tool/assess.js';
import { ToolRecoveryStatus, checkToolEvidence, inspectToolRecovery, prepareToolRetry } from '../../src/tool/recovery.js';
import { ToolRetryPlan } from '../../src/tool/retry-plan.js';
import {
  FIXTURE,
  HistoryBuilder,
  callOf,
  expectRetryError,
  failed,
  replaceCall,
  review,
  succeeded,
} from '../support/history.js';

const ALL_EFFECTS = [ToolEffect.Unknown, ToolEffect.NonIdempotent, ToolEffect.ReadOnly, ToolEffect.Idempotent];

describe('retry tests of Jingwei for Rust (pure)', () => {
  it('uncertain_effects_require_explicit_review_and_completed_always_blocks', () => {
    for (const effect of ALL_EFFECTS) {
      const h = new HistoryBuilder();
      h.call({ effect });
      const history = h.build();
      assert.equal(inspectToolRecovery(history, FIXTURE.call).status, ToolRecoveryStatus.OutcomeUnknown, effect);

      const safe = effect === ToolEffect.ReadOnly || effect === ToolEffect.Idempotent;
      if (safe) assert.ok(prepareToolRetry(history, FIXTURE.call, null) instanceof ToolRetryPlan, effect);
      else expectRetryError(() => prepareToolRetry(history, FIXTURE.call, null), 'needs_review', effect);

      assert.ok(prepareToolRetry(history, FIXTURE.call, review(ToolReviewOutcome.NotExecuted)) instanceof ToolRetryPlan);
      expectRetryError(() => prepareToolRetry(history, FIXTURE.call, review(ToolReviewOutcome.Completed)), 'completed');

      h.result(FIXTURE.call, succeeded());
      expectRetryError(() => prepareToolRetry(h.build(), FIXTURE.call, review(ToolReviewOutcome.NotExecuted)), 'completed');
    }
  });

  it('failure_retryable_flag_does_not_prove_non_execution', () => {
    const uncertain: ToolFailureCategory[] = ['body_failure', 'timeout', 'cancelled', 'budget'];
    for (const category of uncertain) {
      const h = new HistoryBuilder();
      h.call({ effect: ToolEffect.NonIdempotent });
      h.result(FIXTURE.call, failed(category, true));
      expectRetryError(() => prepareToolRetry(h.build(), FIXTURE.call, null), 'needs_review', category);
    }
    const h = new HistoryBuilder();
    h.call({ effect: ToolEffect.NonIdempotent });
    h.result(FIXTURE.call, failed('approval_denied', true));
    assert.ok(prepareToolRetry(h.build(), FIXTURE.call, null) instanceof ToolRetryPlan);
  });

  it('malformed_legacy_and_stale_attempts_fail_closed', () => {
    const legacy = new HistoryBuilder();
    legacy.call({ legacy: true, effect: ToolEffect.Idempotent });
    expectRetryError(() => prepareToolRetry(legacy.build(), FIXTURE.call, null), 'legacy_call');

    const misplaced = new HistoryBuilder();
    const only = misplaced.call({ effect: ToolEffect.Idempotent });
    expectRetryError(() => inspectToolRecovery([{ ...only, seq: 2 }], FIXTURE.call), 'invalid_evidence');

    const h = new HistoryBuilder();
    const original = h.call({ effect: ToolEffect.Idempotent });
    const plan = prepareToolRetry(h.build(), FIXTURE.call, null);
    const operation = plan.takeOperation({
      sessionId: FIXTURE.session,
      taskId: FIXTURE.task,
      name: FIXTURE.tool,
      arguments: FIXTURE.args,
      contract: { effect: ToolEffect.Idempotent, revision: FIXTURE.revision },
    });
    h.rawCall({ id: 'attempt-2' as CallId, name: FIXTURE.tool, arguments: FIXTURE.args, operation });
    const history = h.build();
    assert.equal(history[1]!.seq, 1);
    assert.equal(operation.retry?.eventId, original.eventId);
    expectRetryError(() => prepareToolRetry(history, FIXTURE.call, null), 'not_latest_attempt');
    assert.ok(prepareToolRetry(history, 'attempt-2', null) instanceof ToolRetryPlan);

    const changed = replaceCall(history, 1, (call) => ({ ...call, arguments: { ok: false } }));
    expectRetryError(() => inspectToolRecovery(changed, 'attempt-2'), 'binding_changed');

    const wire = encodeEvent(original);
    const wireCall = { ...(wire.kind as Record<string, unknown>).call as Record<string, unknown> };
    delete wireCall.operation;
    const decoded = decodeEvent({ ...wire, kind: { type: 'tool_call', call: wireCall } });
    assert.equal(callOf(decoded).operation, undefined);
  });
});

describe('body-start marker', () => {
  it('a flagged non_idempotent call with no marker and no result is not_executed and plans without review', () => {
    const h = new HistoryBuilder();
    h.call({ effect: ToolEffect.NonIdempotent, startMarker: true });
    const assessment = inspectToolRecovery(h.build(), FIXTURE.call);
    assert.equal(assessment.status, ToolRecoveryStatus.NotExecuted);
    assert.equal(assessment.startedEvent, null);
    const plan = prepareToolRetry(h.build(), FIXTURE.call);
    assert.equal(plan.sourceCallId, FIXTURE.call);
    assert.equal(plan.review, null);
  });

  it('a flagged call with no marker and a failure recorded before the body is not_executed, whatever the category', () => {
    for (const category of ['timeout', 'cancelled', 'budget', 'approval_denied'] as const) {
      const h = new HistoryBuilder();
      h.call({ effect: ToolEffect.Unknown, startMarker: true });
      h.result(FIXTURE.call, failed(category, false));
      assert.equal(inspectToolRecovery(h.build(), FIXTURE.call).status, ToolRecoveryStatus.NotExecuted, category);
      assert.ok(prepareToolRetry(h.build(), FIXTURE.call) instanceof ToolRetryPlan);
    }
  });

  it('with the marker the outcome is unknown and needs review until a not_executed review', () => {
    const h = new HistoryBuilder();
    h.call({ effect: ToolEffect.NonIdempotent, startMarker: true });
    const started = h.started(FIXTURE.call);
    const history = h.build();
    const assessment = inspectToolRecovery(history, FIXTURE.call);
    assert.equal(assessment.status, ToolRecoveryStatus.OutcomeUnknown);
    assert.equal(assessment.startedEvent, started);
    expectRetryError(() => prepareToolRetry(history, FIXTURE.call), 'needs_review');
    expectRetryError(() => prepareToolRetry(history, FIXTURE.call, review(ToolReviewOutcome.Uncertain)), 'needs_review');
    const plan = prepareToolRetry(history, FIXTURE.call, review(ToolReviewOutcome.NotExecuted));
    assert.equal(plan.review?.outcome, ToolReviewOutcome.NotExecuted);
  });

  it('a marker with a pre-body category contradicts itself: invalid_evidence, fail closed', () => {
    for (const category of PRE_BODY_CATEGORIES) {
      const h = new HistoryBuilder();
      h.call({ effect: ToolEffect.NonIdempotent, startMarker: true });
      h.started(FIXTURE.call);
      h.result(FIXTURE.call, failed(category));
      expectRetryError(() => inspectToolRecovery(h.build(), FIXTURE.call), 'invalid_evidence', category);
      expectRetryError(() => prepareToolRetry(h.build(), FIXTURE.call), 'invalid_evidence', category);
      expectRetryError(() => assessSession(h.build()), 'invalid_evidence', category);
    }
  });

  it('finding 7: no marker but a result that says the body ran is invalid_evidence, never a retry without review', () => {
    for (const outcome of [failed('body_failure'), failed('body_panic'), failed('output_limit'), succeeded()]) {
      const h = new HistoryBuilder();
      h.call({ effect: ToolEffect.NonIdempotent, startMarker: true });
      h.result(FIXTURE.call, outcome);
      const label = outcome.status === 'failed' ? outcome.category : 'succeeded';
      const error = expectRetryError(() => prepareToolRetry(h.build(), FIXTURE.call), 'invalid_evidence', label);
      assert.match(error.detail, /^event 1: call attempt-1: no start marker, yet .* says the body ran$/);
      expectRetryError(() => inspectToolRecovery(h.build(), FIXTURE.call), 'invalid_evidence', label);
      expectRetryError(() => assessSession(h.build()), 'invalid_evidence', label);
      // The same pass is available on its own, for import.
      expectRetryError(() => checkToolEvidence(h.build()), 'invalid_evidence', label);
    }
    const fine = new HistoryBuilder();
    fine.call({ effect: ToolEffect.NonIdempotent, startMarker: true });
    fine.started(FIXTURE.call);
    fine.result(FIXTURE.call, failed('body_failure'));
    checkToolEvidence(fine.build());
  });

  it('an unflagged call follows the category rule: missing result is outcome_unknown', () => {
    const h = new HistoryBuilder();
    h.call({ effect: ToolEffect.NonIdempotent });
    assert.equal(inspectToolRecovery(h.build(), FIXTURE.call).status, ToolRecoveryStatus.OutcomeUnknown);
    expectRetryError(() => prepareToolRetry(h.build(), FIXTURE.call), 'needs_review');
  });

  it('a plan from a flagged call returns an operation without the flag: the runtime sets it', () => {
    const h = new HistoryBuilder();
    h.call({ effect: ToolEffect.Idempotent, startMarker: true });
    h.started(FIXTURE.call);
    const operation = prepareToolRetry(h.build(), FIXTURE.call).takeOperation({
      sessionId: FIXTURE.session,
      taskId: FIXTURE.task,
      name: FIXTURE.tool,
      arguments: FIXTURE.args,
      contract: { effect: ToolEffect.Idempotent, revision: FIXTURE.revision },
    });
    assert.equal(operation.startMarker, undefined);
    assert.equal(operation.key, FIXTURE.key);
  });
});

describe('inspectToolRecovery results', () => {
  it('returns the call, its events and its attempt number', () => {
    const h = new HistoryBuilder();
    const first = h.call({ effect: ToolEffect.Idempotent });
    h.result(FIXTURE.call, failed('body_failure'));
    const second = h.retry(first, { id: 'attempt-2' });
    const result = h.result('attempt-2', failed('denied'));
    const assessment = inspectToolRecovery(h.build(), 'attempt-2');
    assert.equal(assessment.call, callOf(second));
    assert.equal(assessment.callEvent, second);
    assert.equal(assessment.resultEvent, result);
    assert.equal(assessment.attempt, 2);
    assert.equal(assessment.status, ToolRecoveryStatus.NotExecuted);
  });

  it('refuses an earlier attempt once another attempt succeeded (completed before classification)', () => {
    const h = new HistoryBuilder();
    const first = h.call({ effect: ToolEffect.Idempotent });
    h.retry(first, { id: 'attempt-2' });
    h.result(FIXTURE.call, succeeded());
    expectRetryError(() => inspectToolRecovery(h.build(), 'attempt-2'), 'completed');
    expectRetryError(() => inspectToolRecovery(h.build(), FIXTURE.call), 'not_latest_attempt');
  });

  it('a legacy call is inspected normally; with a success, prepare says completed rather than legacy_call', () => {
    const h = new HistoryBuilder();
    h.call({ legacy: true });
    assert.equal(inspectToolRecovery(h.build(), FIXTURE.call).status, ToolRecoveryStatus.OutcomeUnknown);
    h.result(FIXTURE.call, succeeded());
    assert.equal(inspectToolRecovery(h.build(), FIXTURE.call).status, ToolRecoveryStatus.Completed);
    expectRetryError(() => prepareToolRetry(h.build(), FIXTURE.call), 'completed');
  });
});
