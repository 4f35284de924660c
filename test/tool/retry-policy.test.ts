/**
 * The retry policy's tables drive the code: for every recorded combination (flag, marker, result, effect, review,
 * place among the attempts) prepareToolRetry, inspectToolRecovery and assessSession give exactly what the matching
 * rows say, every row is reached, and the CLI shows each row's own words.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decisionRows } from '../../src/cli/assessment.js';
import {
  TOOL_FAILURE_CATEGORIES,
  ToolEffect,
  ToolReviewOutcome,
  type SessionEvent,
  type ToolRecordedOutcome,
} from '../../src/event/types.js';
import { assessSession, type ToolCallAssessment } from '../../src/tool/assess.js';
import { inspectToolRecovery, prepareToolRetry } from '../../src/tool/recovery.js';
import { ToolRetryError } from '../../src/errors.js';
import type { CallId } from '../../src/ids.js';
import {
  EVIDENCE_RULES,
  RETRY_RULES,
  evidenceRuleFor,
  retryRuleFor,
  type AttemptRef,
  type EvidenceRuleId,
  type RetryFacts,
  type RetryRuleId,
} from '../../src/tool/retry-policy.js';
import { FIXTURE, HistoryBuilder, callOf, review, succeeded } from '../support/history.js';

const outcomes: readonly (ToolRecordedOutcome | null)[] = [
  null,
  succeeded(),
  ...TOOL_FAILURE_CATEGORIES.map((category): ToolRecordedOutcome => ({ status: 'failed', category, code: 'c', message: 'm', retryable: false })),
  // An interrupt the runtime recorded before calling the body (the marker written, the body never called).
  { status: 'failed', category: 'cancelled', code: 'tool_stopped_before_body', message: 'm', retryable: false },
];
const reviews = [null, ...Object.values(ToolReviewOutcome)];

interface Case {
  readonly effect: ToolEffect;
  readonly legacy: boolean;
  readonly flagged: boolean;
  readonly started: boolean;
  readonly outcome: ToolRecordedOutcome | null;
  /**
   * 'only': one attempt; 'earlier': a newer attempt exists (no result); 'earlier_done': a newer attempt succeeded;
   * 'after_done': an earlier attempt succeeded; 'repeat_done': one attempt, after an identical operation (another
   * key) whose body started, which a `completed` review settled after this call's result; 'made_by_repeat': the
   * second attempt, after a first whose body started and a review said was not made, then an identical repeat (another
   * key) refused by the in-doubt guard whose retry succeeded; 'repeat_open': one attempt, after an identical
   * operation (another key) whose body started and that nothing has settled.
   */
  readonly place: 'only' | 'earlier' | 'earlier_done' | 'after_done' | 'repeat_done' | 'made_by_repeat' | 'repeat_open';
}

function* cases(): Generator<Case> {
  for (const effect of Object.values(ToolEffect))
    for (const legacy of [false, true])
      for (const flagged of [false, true])
        for (const started of [false, true])
          for (const outcome of outcomes)
            for (const place of ['only', 'earlier', 'earlier_done', 'after_done', 'repeat_done', 'made_by_repeat', 'repeat_open'] as const) {
              if (legacy && (flagged || started || place !== 'only')) continue;
              if (!flagged && started) continue;
              yield { effect, legacy, flagged, started, outcome, place };
            }
}

/** The history, and the id of the call the case asks about. */
function historyOf(c: Case): { history: SessionEvent[]; callId: string; sibling: AttemptRef | null; newer: AttemptRef | null; repeated: AttemptRef | null; madeBy: AttemptRef | null; waitsOn?: AttemptRef } {
  const h = new HistoryBuilder();
  const mine = (id: string, prev?: SessionEvent) => {
    const spec = { id, effect: c.effect, legacy: c.legacy, startMarker: c.flagged };
    const event = prev === undefined ? h.call(spec) : h.retry(prev, spec);
    if (c.started) h.started(id);
    if (c.outcome !== null) h.result(id, c.outcome);
    return event;
  };
  switch (c.place) {
    case 'only':
      mine(FIXTURE.call);
      return { history: h.build(), callId: FIXTURE.call, sibling: null, newer: null, repeated: null, madeBy: null };
    case 'repeat_done': {
      h.call({ id: 'identical-1', key: 'identical-op', effect: ToolEffect.NonIdempotent, startMarker: true });
      h.started('identical-1');
      mine(FIXTURE.call);
      h.push({ type: 'tool_review', review: { callId: 'identical-1' as CallId, actor: 'ops', evidence: 'in the ledger', outcome: 'completed', source: 'human' } });
      // Only a refusal by the in-doubt guard is a repeat of it; any other call beside it is a call of its own.
      const repeat = !c.legacy && c.outcome?.status === 'failed' && c.outcome.category === 'in_doubt';
      return { history: h.build(), callId: FIXTURE.call, sibling: null, newer: null, repeated: repeat ? { attempt: 1, callId: 'identical-1' } : null, madeBy: null };
    }
    case 'repeat_open': {
      h.call({ id: 'identical-1', key: 'identical-op', effect: ToolEffect.NonIdempotent, startMarker: true });
      h.started('identical-1');
      mine(FIXTURE.call);
      // A repeat the guard refused waits on that write while it is in doubt: a retry of it would only be refused again.
      const repeat = !c.legacy && c.outcome?.status === 'failed' && c.outcome.category === 'in_doubt';
      return { history: h.build(), callId: FIXTURE.call, sibling: null, newer: null, repeated: null, madeBy: null, ...(repeat ? { waitsOn: { attempt: 1, callId: 'identical-1' } } : {}) };
    }
    case 'earlier':
    case 'earlier_done': {
      const first = mine(FIXTURE.call);
      h.retry(first, { id: 'attempt-2', startMarker: true });
      if (c.place === 'earlier_done') {
        h.started('attempt-2');
        h.result('attempt-2', succeeded());
      }
      const newer = { attempt: 2, callId: 'attempt-2' };
      return { history: h.build(), callId: FIXTURE.call, sibling: c.place === 'earlier_done' ? newer : null, newer, repeated: null, madeBy: null };
    }
    case 'made_by_repeat': {
      const first = h.call({ effect: c.effect, startMarker: true });
      h.started(FIXTURE.call);
      h.push({ type: 'tool_review', review: { callId: FIXTURE.call as CallId, actor: 'ops', evidence: 'not in the ledger', outcome: 'not_executed', source: 'human' } });
      mine('attempt-2', first);
      const repeat = h.call({ id: 'repeat', key: 'repeat-op', effect: ToolEffect.NonIdempotent, startMarker: true });
      h.result('repeat', { status: 'failed', category: 'in_doubt', code: 'tool_in_doubt', message: 'an identical call may already have taken effect', retryable: false });
      h.retry(repeat, { id: 'repeat-2', startMarker: true });
      h.started('repeat-2');
      h.result('repeat-2', succeeded());
      // Only a write that was not made, that the guard reads, and that no denial had settled before the repeat was
      // refused (this attempt's result comes first) is made by its repeat.
      const notMade = evidenceRuleFor({ flagged: c.flagged, marker: c.started, result: c.outcome }).status === 'not_executed';
      const denied = c.outcome?.status === 'failed' && (c.outcome.category === 'denied' || c.outcome.category === 'approval_denied');
      const madeBy = notMade && !denied && c.effect !== ToolEffect.ReadOnly ? { attempt: 2, callId: 'repeat-2' } : null;
      return { history: h.build(), callId: 'attempt-2', sibling: null, newer: null, repeated: null, madeBy };
    }
    case 'after_done': {
      const first = h.call({ effect: c.effect, startMarker: true });
      h.started(FIXTURE.call);
      h.result(FIXTURE.call, succeeded());
      mine('attempt-2', first);
      return { history: h.build(), callId: 'attempt-2', sibling: { attempt: 1, callId: FIXTURE.call }, newer: null, repeated: null, madeBy: null };
    }
  }
}

function outcomeOf(fn: () => unknown): string {
  try {
    fn();
    return 'plan';
  } catch (error) {
    assert.ok(error instanceof ToolRetryError, String(error));
    return error.code;
  }
}

describe('the retry policy tables', () => {
  it('drive prepareToolRetry, inspectToolRecovery and assessSession for every combination; every row is reached', () => {
    const evidenceSeen = new Set<EvidenceRuleId>();
    const retrySeen = new Set<RetryRuleId>();
    let checked = 0;
    for (const c of cases()) {
      const { history, callId, sibling, newer, repeated, madeBy, waitsOn } = historyOf(c);
      const evidence = evidenceRuleFor({ flagged: c.flagged, marker: c.started, result: c.outcome });
      evidenceSeen.add(evidence.id);
      if (evidence.status === 'invalid') {
        assert.equal(outcomeOf(() => prepareToolRetry(history, callId, null)), 'invalid_evidence');
        assert.equal(outcomeOf(() => inspectToolRecovery(history, callId)), 'invalid_evidence');
        assert.equal(outcomeOf(() => assessSession(history)), 'invalid_evidence');
        checked += 1;
        continue;
      }
      const fact = evidence.fact(c.outcome);
      for (const r of reviews) {
        const facts: RetryFacts = {
          callId,
          attempt: c.place === 'after_done' || c.place === 'made_by_repeat' ? 2 : 1,
          status: evidence.status,
          fact,
          effect: c.legacy ? null : c.effect,
          review: r,
          newer,
          succeededSibling: sibling,
          repeatedCompleted: repeated,
          madeByRepeat: madeBy,
          waitsOn: waitsOn ?? null,
        };
        const rule = retryRuleFor(facts);
        retrySeen.add(rule.id);
        const got = outcomeOf(() => prepareToolRetry(history, callId, r === null ? null : review(r)));
        assert.equal(got, rule.refusal ?? 'plan', `${JSON.stringify(c)} review ${r}: row ${rule.id}`);
        if (rule.refusal !== null) {
          try {
            prepareToolRetry(history, callId, r === null ? null : review(r));
          } catch (error) {
            assert.equal((error as ToolRetryError).detail, rule.reason(facts));
          }
        }
        if (r !== null) continue;
        const inspected = outcomeOf(() => inspectToolRecovery(history, callId));
        assert.equal(inspected, rule.position ? rule.refusal : 'plan', `${JSON.stringify(c)}: inspect`);
        const assessed = assessSession(history).calls.find((x) => x.callId === callId);
        if (evidence.status === 'completed') {
          assert.equal(assessed, undefined, 'a call with its own success is not listed');
          continue;
        }
        assert.ok(assessed);
        assert.equal(assessed.status, evidence.status);
        assert.equal(assessed.evidenceRule, evidence.id);
        assert.equal(assessed.rule, rule.id);
        assert.equal(assessed.nextStep, rule.decision);
        // Its reason also says the earlier attempt's write is due, beside the row's own words.
        if (c.place === 'made_by_repeat') assert.ok(assessed.reason.startsWith(rule.reason(facts)), assessed.reason);
        else assert.equal(assessed.reason, rule.reason(facts));
      }
      checked += 1;
    }
    assert.ok(checked > 500, `${checked} combinations`);
    assert.deepEqual([...evidenceSeen].sort(), EVIDENCE_RULES.map((r) => r.id).sort(), 'every evidence row is reached');
    assert.deepEqual([...retrySeen].sort(), RETRY_RULES.map((r) => r.id).sort(), 'every retry row is reached');
  });

  it('the CLI shows every row in the words of the table, and nothing else', () => {
    const h = new HistoryBuilder();
    h.call({ effect: ToolEffect.NonIdempotent, startMarker: true });
    const base = assessSession(h.build()).calls[0]!;
    for (const rule of RETRY_RULES) {
      for (const evidence of EVIDENCE_RULES.filter((e) => e.status !== 'invalid' && e.status !== 'completed')) {
        const assessed: ToolCallAssessment = { ...base, evidenceRule: evidence.id, rule: rule.id };
        const rows = decisionRows(assessed);
        const last = rows[rows.length - 1]!;
        assert.deepEqual(last, { rule: `retry/${rule.id}`, condition: rule.condition, explanation: rule.explanation });
        if (rule.position) assert.equal(rows.length, 1, 'the place in the operation decides alone');
        else assert.deepEqual(rows[0], { rule: `evidence/${evidence.id}`, condition: evidence.condition, explanation: evidence.explanation });
      }
    }
    const success = EVIDENCE_RULES.find((e) => e.id === 'succeeded')!;
    const successRule = RETRY_RULES.find((r) => r.id === 'succeeded')!;
    assert.deepEqual(decisionRows(null), [
      { rule: 'evidence/succeeded', condition: success.condition, explanation: success.explanation },
      { rule: 'retry/succeeded', condition: successRule.condition, explanation: successRule.explanation },
    ]);
    assert.equal(callOf(h.events[0]!).id, FIXTURE.call);
  });
});
