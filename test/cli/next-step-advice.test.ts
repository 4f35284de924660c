/**
 * What `jingwei inspect` and the console tell a host to do next about a call, for the cases where the next step alone
 * would mislead: a refused repeat whose write was made, and a retry no routine will make because the call's agent run
 * has finished.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nextStepAdvice } from '../../src/cli/assessment.js';
import { RUN_PLUGIN } from '../../src/agent/run-journal.js';
import { ToolEffect } from '../../src/event/types.js';
import type { CallId } from '../../src/ids.js';
import { assessSession } from '../../src/tool/assess.js';
import { FIXTURE, HistoryBuilder, callOf } from '../support/history.js';

const spec = { effect: ToolEffect.NonIdempotent, startMarker: true } as const;
const run = (h: HistoryBuilder, kind: string, payload: Record<string, string | number | null>) =>
  h.push({ type: 'custom', plugin: RUN_PLUGIN, kind, payload: { runId: 'run1', ...payload } });

function adviceFor(h: HistoryBuilder, callId: string): string {
  const history = h.build();
  const event = history.find((e) => e.kind.type === 'tool_call' && e.kind.call.id === callId)!;
  const assessed = assessSession(history).calls.find((c) => c.callId === callId) ?? null;
  return nextStepAdvice(FIXTURE.session, history, callOf(event), assessed);
}

describe('next-step advice', () => {
  it('a not_executed review of a call of a finished run: the retry is the host\'s to make by hand', () => {
    const h = new HistoryBuilder();
    run(h, 'run_started', { taskId: FIXTURE.task, input: 'pay ana' });
    h.call({ ...spec, id: 'pay', key: 'run1/1/0' });
    h.started('pay');
    h.result('pay', { status: 'failed', category: 'timeout', code: 'tool_timeout', message: 'deadline', retryable: true });
    h.push({ type: 'tool_review', review: { callId: 'pay' as CallId, actor: 'ops', evidence: 'not in the ledger', outcome: 'not_executed', source: 'human' } });
    const open = adviceFor(h, 'pay');
    assert.match(open, /^A host may prepare one retry/);
    assert.doesNotMatch(open, /has finished/, 'a run that goes on retries it when resumed');
    run(h, 'run_finished', { stopReason: 'completed', steps: 2, text: 'I could not confirm the payment.' });
    assert.match(adviceFor(h, 'pay'), /Its agent run run1 has finished: no resume of the run and no startup routine makes this retry, only a host doing it by hand\.$/);
  });

  it('a refused repeat whose write was made is not said to have another attempt that succeeded', () => {
    const h = new HistoryBuilder();
    h.call({ ...spec, id: 'first', key: 'k-first' });
    h.started('first');
    h.call({ ...spec, id: 'repeat', key: 'k-repeat' });
    h.result('repeat', { status: 'failed', category: 'in_doubt', code: 'tool_in_doubt', message: 'an identical call (first) may already have taken effect', retryable: false });
    h.push({ type: 'tool_review', review: { callId: 'first' as CallId, actor: 'ops', evidence: 'in the ledger', outcome: 'completed', source: 'human' } });
    const advice = adviceFor(h, 'repeat');
    assert.match(advice, /^Nothing to do: the in-doubt guard refused this call as a repeat, and the identical write it repeated has been made/);
    assert.doesNotMatch(advice, /another attempt of this operation succeeded/);
  });
});
