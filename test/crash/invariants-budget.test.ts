/**
 * The crash matrices' budget invariant (test/crash/invariants.ts), checked on journals built by hand: the output a
 * task was charged must be what its journal justifies, exactly. An attempt stopped between its start marker and its
 * body never ran, and its reservation is refunded; one whose body may have run is charged its whole reservation.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolEffect } from '../../src/event/types.js';
import { FIXTURE, HistoryBuilder } from '../support/history.js';
import { checkInvariants } from './invariants.js';

const RESERVATION = 65_536;

function stoppedAttempt(firstOutcome: { category: 'cancelled' | 'body_failure' }) {
  const h = new HistoryBuilder();
  h.call({ id: 'attempt-1', effect: ToolEffect.ReadOnly, startMarker: true });
  h.started('attempt-1');
  h.result('attempt-1', { status: 'failed', category: firstOutcome.category, code: 'tool_stopped_before_body', message: 'm', retryable: false });
  return h.build();
}

const charges = (toolOutputBytes: number) => ({ [FIXTURE.task]: { toolCalls: 1, toolOutputBytes, reservedOutputBytes: 0 } });

it('a stop before the body justifies no output charge; a charge of its reservation is a mismatch', () => {
  const history = stoppedAttempt({ category: 'cancelled' });
  assert.deepEqual(checkInvariants(history, [], charges(0), RESERVATION).problems, []);
  assert.match(checkInvariants(history, [], charges(RESERVATION), RESERVATION).problems.join('\n'), /65536 output bytes charged, the journal justifies 0/);
});

it("a body's own failure carrying that code ran: it justifies its whole reservation", () => {
  const history = stoppedAttempt({ category: 'body_failure' });
  assert.deepEqual(checkInvariants(history, [], charges(RESERVATION), RESERVATION).problems, []);
  assert.match(checkInvariants(history, [], charges(0), RESERVATION).problems.join('\n'), /0 output bytes charged, the journal justifies 65536/);
});

/** A non-idempotent attempt with a start marker, interrupted as `code` says, then retried without a review. */
function retriedAfter(code: string): ReturnType<HistoryBuilder['build']> {
  const h = new HistoryBuilder();
  const first = h.call({ id: 'attempt-1', effect: ToolEffect.NonIdempotent, startMarker: true });
  h.started('attempt-1');
  h.result('attempt-1', { status: 'failed', category: 'cancelled', code, message: 'm', retryable: false });
  h.retry(first, { id: 'attempt-2', effect: ToolEffect.NonIdempotent, startMarker: true });
  return h.build();
}

it('a retry without a review of an attempt stopped before its body is no re-execution; of one stopped in its body, it is', () => {
  const problems = (code: string) => checkInvariants(retriedAfter(code), [], { [FIXTURE.task]: { toolCalls: 2, toolOutputBytes: 0, reservedOutputBytes: RESERVATION } }, RESERVATION);
  assert.equal(problems('tool_stopped_before_body').unreviewedReexecutions, 0);
  assert.equal(problems('tool_cancelled').unreviewedReexecutions, 1);
});
