/**
 * A stale attempt cannot start, read back from the journal: the evidence pass refuses a start marker written after
 * a newer attempt of the same operation, and a result written after one unless the journal shows that body started
 * while it was the latest attempt or never started (issue 13, finding 5, the evidence half).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ToolEffect } from '../../src/event/types.js';
import { checkToolEvidence, inspectToolRecovery } from '../../src/tool/recovery.js';
import { FIXTURE, HistoryBuilder, expectRetryError, failed, succeeded } from '../support/history.js';

/** attempt-1 (flagged, non-idempotent, waiting for approval: no marker, no result), then attempt-2 retrying it. */
function waitingThenRetried(): HistoryBuilder {
  const h = new HistoryBuilder();
  const first = h.call({ effect: ToolEffect.NonIdempotent, startMarker: true });
  h.retry(first, { id: 'attempt-2', startMarker: true });
  return h;
}

describe('stale markers and results in the evidence pass', () => {
  it('refuses a start marker of a call written after a newer attempt of its operation', () => {
    const h = waitingThenRetried();
    h.started(FIXTURE.call);
    const error = expectRetryError(() => checkToolEvidence(h.build()), 'invalid_evidence');
    assert.match(error.detail, /^event 2: tool_started for attempt-1 comes after a newer attempt attempt-2 of its operation/);
    expectRetryError(() => inspectToolRecovery(h.build(), 'attempt-2'), 'invalid_evidence');
  });

  it('refuses the forged journal of finding 5: both bodies ran, the late one after the newer attempt', () => {
    const h = waitingThenRetried();
    h.started('attempt-2');
    h.result('attempt-2', succeeded('charged by attempt-2'));
    h.started(FIXTURE.call);
    h.result(FIXTURE.call, succeeded('charged by attempt-1'));
    expectRetryError(() => checkToolEvidence(h.build()), 'invalid_evidence');
  });

  it('refuses a body result of a flagged call written after a newer attempt without a start before it', () => {
    for (const outcome of [succeeded(), failed('body_failure'), failed('body_panic'), failed('output_limit')]) {
      const h = waitingThenRetried();
      h.result(FIXTURE.call, outcome);
      const error = expectRetryError(() => checkToolEvidence(h.build()), 'invalid_evidence');
      assert.match(error.detail, /^event 2: result for attempt-1 comes after a newer attempt attempt-2/);
    }
  });

  it('accepts what the runtime writes: a superseded or denied late result, and a late result of a body that started first', () => {
    for (const category of ['unavailable', 'denied', 'timeout', 'cancelled'] as const) {
      const h = waitingThenRetried();
      h.result(FIXTURE.call, failed(category));
      checkToolEvidence(h.build());
      assert.equal(inspectToolRecovery(h.build(), 'attempt-2').status, 'not_executed');
    }
    // An idempotent call retried while its body ran: its own late result is evidence from before the retry.
    const h = new HistoryBuilder();
    const first = h.call({ effect: ToolEffect.Idempotent, startMarker: true });
    h.started(FIXTURE.call);
    h.retry(first, { id: 'attempt-2', startMarker: true });
    h.started('attempt-2');
    h.result(FIXTURE.call, succeeded());
    h.result('attempt-2', succeeded());
    checkToolEvidence(h.build());
  });
});
