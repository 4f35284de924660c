/**
 * The whole decision table as a property: recorded facts (flag, marker, result) × effect × review, checked against
 * an oracle written straight from docs/design.md#recovery-status and docs/design.md#the-recovery-decision-table.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  PRE_BODY_CATEGORIES,
  TOOL_FAILURE_CATEGORIES,
  ToolEffect,
  ToolReviewOutcome,
  type ToolRecordedOutcome,
} from '../../src/event/types.js';
import { ToolRecoveryStatus, inspectToolRecovery, prepareToolRetry } from '../../src/tool/recovery.js';
import { ToolRetryError } from '../../src/errors.js';
import { ToolRetryPlan } from '../../src/tool/retry-plan.js';
import { FIXTURE, HistoryBuilder, review } from '../support/history.js';

const outcomeArb: fc.Arbitrary<ToolRecordedOutcome | null> = fc.oneof(
  fc.constant(null),
  fc.constant<ToolRecordedOutcome>({ status: 'succeeded', output: 'ok' }),
  fc.record({
    status: fc.constant('failed' as const),
    category: fc.constantFrom(...TOOL_FAILURE_CATEGORIES),
    code: fc.constant('code'),
    message: fc.constant('message'),
    retryable: fc.boolean(),
  }),
);

const caseArb = fc.record({
  effect: fc.constantFrom(...Object.values(ToolEffect)),
  legacy: fc.boolean(),
  flagged: fc.boolean(),
  started: fc.boolean(),
  outcome: outcomeArb,
  review: fc.constantFrom(null, ...Object.values(ToolReviewOutcome)),
});
type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

const BODY_RAN = new Set(['body_failure', 'body_panic', 'output_limit']);

/** A flagged call whose marker and result disagree: evidence our runtime never writes, refused (fail closed). */
function contradicts(c: Case): boolean {
  if (c.legacy || !c.flagged) return false;
  if (c.started) return c.outcome?.status === 'failed' && PRE_BODY_CATEGORIES.has(c.outcome.category);
  return c.outcome?.status === 'succeeded' || (c.outcome?.status === 'failed' && BODY_RAN.has(c.outcome.category));
}

function expectedStatus(c: Case): ToolRecoveryStatus | 'invalid_evidence' {
  if (contradicts(c)) return 'invalid_evidence';
  if (c.outcome?.status === 'succeeded') return ToolRecoveryStatus.Completed;
  if (!c.legacy && c.flagged) return c.started ? ToolRecoveryStatus.OutcomeUnknown : ToolRecoveryStatus.NotExecuted;
  if (c.outcome === null) return ToolRecoveryStatus.OutcomeUnknown;
  return PRE_BODY_CATEGORIES.has(c.outcome.category) ? ToolRecoveryStatus.NotExecuted : ToolRecoveryStatus.OutcomeUnknown;
}

function expectedPlan(c: Case): 'plan' | 'completed' | 'legacy_call' | 'needs_review' | 'invalid_evidence' {
  const status = expectedStatus(c);
  if (status === 'invalid_evidence') return status;
  if (status === ToolRecoveryStatus.Completed || c.review === ToolReviewOutcome.Completed) return 'completed';
  if (c.legacy) return 'legacy_call';
  if (status === ToolRecoveryStatus.NotExecuted) return 'plan';
  if (c.effect === ToolEffect.ReadOnly || c.effect === ToolEffect.Idempotent) return 'plan';
  return c.review === ToolReviewOutcome.NotExecuted ? 'plan' : 'needs_review';
}

function historyOf(c: Case) {
  const h = new HistoryBuilder();
  h.call({ effect: c.effect, legacy: c.legacy, startMarker: c.flagged });
  if (!c.legacy && c.flagged && c.started) h.started(FIXTURE.call);
  if (c.outcome !== null) h.result(FIXTURE.call, c.outcome);
  return h.build();
}

describe('decision table', () => {
  it('status and plan follow the table for every effect, review, flag, marker and recorded outcome', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const history = historyOf(c);
        let status: string;
        try {
          status = inspectToolRecovery(history, FIXTURE.call).status;
        } catch (error) {
          assert.ok(error instanceof ToolRetryError, String(error));
          status = error.code;
        }
        assert.equal(status, expectedStatus(c));
        const expected = expectedPlan(c);
        let got: string;
        try {
          const plan = prepareToolRetry(history, FIXTURE.call, c.review === null ? null : review(c.review));
          assert.ok(plan instanceof ToolRetryPlan);
          assert.equal(plan.review?.outcome ?? null, c.review);
          got = 'plan';
        } catch (error) {
          assert.ok(error instanceof ToolRetryError, String(error));
          got = error.code;
        }
        assert.equal(got, expected);
      }),
      { numRuns: 1000 },
    );
  });

  it('an uncertain review never unblocks an Unknown or NonIdempotent tool with an unknown outcome', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        fc.pre(expectedStatus(c) === ToolRecoveryStatus.OutcomeUnknown && !c.legacy);
        fc.pre(c.effect === ToolEffect.Unknown || c.effect === ToolEffect.NonIdempotent);
        assert.throws(
          () => prepareToolRetry(historyOf(c), FIXTURE.call, review(ToolReviewOutcome.Uncertain)),
          (e: unknown) => e instanceof ToolRetryError && e.code === 'needs_review',
        );
      }),
    );
  });

  it('a completed review always blocks, whatever the status', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        fc.pre(!contradicts(c));
        assert.throws(
          () => prepareToolRetry(historyOf(c), FIXTURE.call, review(ToolReviewOutcome.Completed)),
          (e: unknown) => e instanceof ToolRetryError && e.code === 'completed',
        );
      }),
    );
  });
});
