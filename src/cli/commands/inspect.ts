import { bodyMayStillRun } from '../../tool/late-bodies.js';
import { encodeToolResult, encodeToolReviewRecord } from '../../event/codec.js';
import type { SessionEvent } from '../../event/types.js';
import type { DecisionRow } from '../../store/inbox-rows.js';
import { decisionInboxIfAny } from '../../store/inbox.js';
import { JournalStore } from '../../store/journal-store.js';
import type { SessionStore } from '../../store/types.js';
import { assessSession, type SessionAssessment, type ToolCallAssessment } from '../../tool/assess.js';
import { callsAwaitingApproval, decidedApprovals, operationOf } from '../../tool/recover.js';
import {
  attemptsOf,
  bodyEndWords,
  bodyRanText,
  attentionOf,
  attentionText,
  callTable,
  colourStatus,
  colourStep,
  decisionRows,
  inboxReviewJson,
  indexCalls,
  journaledReviewText,
  overtakenReviews,
  pendingInboxReviews,
  withInboxReviews,
  nextStepAdvice,
  resultWord,
  reviewText,
  runningText,
  markerWord,
  type CallRecord,
} from '../assessment.js';
import { STORE_ARGUMENT, type Command, type CommandContext } from '../command.js';
import { EXIT, UsageError, type ExitCode } from '../exit.js';
import { durationText, num, paragraph, plural, safe, safeId, shellWord, shortId, storeWord, table, timeText } from '../format.js';
import { loadSession, matchId, withStore } from '../session.js';

function assessedJson(c: ToolCallAssessment, inbox: ReadonlyMap<string, DecisionRow>) {
  return {
    call_id: c.callId,
    name: c.name,
    effect: c.effect,
    revision: c.revision,
    task_id: c.taskId,
    key: c.key,
    status: c.status,
    next_step: c.nextStep,
    attention: c.attention,
    reason: c.reason,
    attempt: c.attempt,
    attempts: c.attempts,
    seq: c.seq,
    event_id: c.eventId,
    turn_id: c.turnId,
    result: c.result ? encodeToolResult(c.result) : null,
    review: c.review ? encodeToolReviewRecord(c.review) : null,
    inbox_review: inboxReviewJson(inbox.get(c.callId)),
  };
}

/** The inbox decision `id` names exactly (an approval request or a review decision), when it names one. */
async function decisionNamed(store: SessionStore, id: string): Promise<DecisionRow | undefined> {
  if (!/^(approval|review)_/.test(id)) return undefined;
  return decisionInboxIfAny(store)?.get(id);
}

/** For an id shaped as an inbox decision's that names neither a decision nor a session: the refusal that says so. */
function notADecision(id: string): UsageError | null {
  const kind = /^(approval|review)_/.exec(id)?.[1];
  if (kind === undefined) return null;
  return new UsageError(
    `no ${kind === 'approval' ? 'approval request' : 'review decision'} (nor session) ${safe(JSON.stringify(id))} in this store`,
    `A decision takes its whole id, ${kind}_ and 36 characters, as jingwei queue and jingwei events print it.`,
  );
}

function decisionHeading(row: DecisionRow): string {
  const what = row.kind === 'approval' ? 'Approval request' : 'Review decision';
  const approver = row.binding?.approver !== undefined ? `, asked of approver ${safe(row.binding.approver)}` : '';
  const decided = row.decision !== null ? `, ${safe(row.decision)} by ${safe(row.actor ?? '')}` : '';
  const why = row.state === 'superseded' && row.note !== null ? `: ${safe(row.note)}` : '';
  return `${what} ${safeId(row.id)} (${row.state}${decided}${approver}${why}) is about this call:`;
}

function sessionView(ctx: CommandContext, sessionId: string, assessment: SessionAssessment, inbox: ReadonlyMap<string, DecisionRow>, overtaken: number, approvals: readonly DecisionRow[]): ExitCode {
  const { out, options, args } = ctx;
  const attention = attentionOf(assessment);
  const code = attention.total > 0 ? EXIT.findings : EXIT.ok;
  if (options.json === true) {
    out.line(JSON.stringify({
      session_id: sessionId,
      events: assessment.events,
      tool_calls: assessment.totals.calls,
      succeeded: assessment.totals.succeeded,
      needs_attention: attention.total,
      handled_failures: attention.handled,
      by_next_step: assessment.totals.byNextStep,
      by_status: assessment.totals.byStatus,
      inbox_reviews: inbox.size,
      inbox_reviews_overtaken: overtaken,
      decided_approvals: approvals.map((row) => ({ request: row.id, call_id: row.callId, decision: row.decision, actor: row.actor })),
      calls: assessment.calls.map((c) => assessedJson(c, inbox)),
    }, null, 2));
    return code;
  }
  const s = out.style;
  const t = assessment.totals;
  out.line(s.bold(`Session ${safeId(sessionId)}: ${plural(assessment.events, 'event')}, ${plural(t.calls, 'tool call')}, ${num(t.succeeded)} succeeded.`));
  out.line(attention.total > 0 ? s.yellow(`Needs attention: ${attentionText(attention).replace(/^\d+/, (n) => plural(Number(n), 'call'))}.`) : s.green('Nothing needs attention.'));
  if (attention.handled > 0) {
    out.line(s.dim(`${plural(attention.handled, 'failure')} recorded before the body, provably not run: shown below, not pending work for a person (a resumed agent run makes one again that a shutdown or a lost lease interrupted in the step it stopped in).`));
  }
  if (approvals.length > 0) {
    const who = approvals.map((row) => `${safe(row.decision ?? '')} by ${safe(row.actor ?? '')} (${shortId(row.callId)})`).join(', ');
    out.line(s.yellow(`${plural(approvals.length, 'call')} ${approvals.length === 1 ? 'waits' : 'wait'} for a host to use the decision made on its approval request: ${who}. ` +
      'A host retries each once (its run resumed, the startup routine with retry_safe, or prepareToolRetry), and the decision answers for that attempt.'));
  }
  const toJournal = inbox.size - overtaken;
  if (toJournal > 0) {
    out.line(s.dim(`${plural(toJournal, 'review decision')} in the decision inbox ${toJournal === 1 ? 'waits' : 'wait'} to be journaled by the session's owner (journalInboxReviews, jingwei/review).`));
  }
  if (overtaken > 0) {
    out.line(s.yellow(`${plural(overtaken, 'review decision')} in the decision inbox ${overtaken === 1 ? 'was' : 'were'} overtaken by the call's own events since ${overtaken === 1 ? 'it was' : 'they were'} made: the session's owner marks ${overtaken === 1 ? 'it' : 'them'} stale, and no retry uses ${overtaken === 1 ? 'it' : 'them'}; review the call again with what the journal shows now.`));
  }
  if (assessment.calls.length === 0) return code;
  out.line();
  out.line(`Calls without their own success (${num(assessment.calls.length)}), in journal order:`);
  out.line(callTable(assessment.calls, s, out.width !== undefined ? { width: out.width } : {}));
  out.line();
  out.line(s.dim(`One call in detail: jingwei inspect ${storeWord(args.store!)} ${shellWord(safeId(sessionId))} <call>`));
  return code;
}

async function callView(
  ctx: CommandContext,
  store: SessionStore,
  sessionId: string,
  history: readonly SessionEvent[],
  assessment: SessionAssessment,
  inbox: ReadonlyMap<string, DecisionRow>,
): Promise<ExitCode> {
  const { out, options, args } = ctx;
  const calls = indexCalls(history);
  const record = matchId([...calls.values()], (r) => r.call.id, args.call!, 'call');
  if (!record) throw new UsageError(`no call ${JSON.stringify(args.call)} in session ${safeId(sessionId)}`, `To see its calls, run: jingwei events ${storeWord(args.store!)} ${shellWord(safeId(sessionId))}`);
  // What the inbox would refuse a review of: its host holds the session with a live lease and the call is not over.
  const inFlight = store instanceof JournalStore ? (await store.callInFlight(sessionId, record.call.id)).inFlight : null;
  const byId = new Map(assessment.calls.map((c) => [c.callId as string, c]));
  const assessed = byId.get(record.call.id) ?? null;
  const call = record.call;
  const op = call.operation;
  const rows = decisionRows(assessed);
  const status = assessed?.status ?? 'completed';
  const nextStep = assessed?.nextStep ?? 'completed';
  const attempts = attemptsOf(calls, call);
  const attemptIndex = attempts.findIndex((a) => a.call.id === call.id) + 1;
  const stateOf = (a: CallRecord) => {
    const x = byId.get(a.call.id);
    return x ? { status: x.status, next_step: x.nextStep } : { status: 'completed', next_step: 'completed' };
  };
  const width = out.width;
  const attention = assessed?.attention ?? 'none';
  const code = attention !== 'none' ? EXIT.findings : EXIT.ok;
  if (options.json === true) {
    out.line(JSON.stringify({
      session_id: sessionId,
      call_id: call.id,
      name: call.name,
      effect: op?.contract.effect ?? null,
      revision: op?.contract.revision ?? null,
      task_id: op?.taskId ?? null,
      key: op?.key ?? null,
      start_marker: op?.startMarker === true,
      retry_of: op?.retry ? { call_id: op.retry.callId, event_id: op.retry.eventId, review: op.retry.review } : null,
      arguments: call.arguments,
      called_at: record.event.recordedAt ?? null,
      started_at: record.started?.recordedAt ?? null,
      ended_at: record.resultEvent?.recordedAt ?? null,
      waited_before_body: durationText(record.event.recordedAt, record.started?.recordedAt),
      body_ran: durationText(record.started?.recordedAt, record.resultEvent?.recordedAt),
      call_seq: record.event.seq,
      started_seq: record.started?.seq ?? null,
      result_seq: record.resultEvent?.seq ?? null,
      result: record.result ? encodeToolResult(record.result) : null,
      ...lateBodyJson(history, record),
      in_flight: inFlight,
      reviews: record.reviews.map((r) => ({ seq: r.event.seq, ...encodeToolReviewRecord(r.review) })),
      inbox_review: inboxReviewJson(inbox.get(call.id)),
      status,
      next_step: nextStep,
      attention,
      reason: assessed?.reason ?? 'its own result is a success',
      decision_rows: rows,
      attempt: attemptIndex,
      attempts: attempts.map((a) => ({ call_id: a.call.id, seq: a.event.seq, result: resultWord(a), ...stateOf(a) })),
    }, null, 2));
    return code;
  }
  const s = out.style;
  const field = (name: string, value: string) => out.line(`  ${name.padEnd(10)}  ${value}`);
  out.line(s.bold(`Call ${safeId(call.id)}`) + ` in session ${safeId(sessionId)}`);
  field('tool', op ? `${safe(call.name)} (${op.contract.effect}, revision ${safe(op.contract.revision)})` : `${safe(call.name)} (legacy record: no operation)`);
  if (op) field('operation', `task ${safeId(op.taskId)}, key ${safeId(op.key)}`);
  field('arguments', safe(JSON.stringify(call.arguments)));
  field('attempt', `${attemptIndex} of ${attempts.length}` + (op?.retry ? `, retry of ${safeId(op.retry.callId)}` : ''));
  const review = reviewText(call);
  if (review) field('review', review);
  const marker = op?.startMarker === true ? (record.started ? `tool_started at seq ${record.started.seq}` : 'no tool_started (the body never started)') : 'records no start marker (not the canonical runtime)';
  field('journal', `tool_call at seq ${record.event.seq}; ${marker}; ${record.resultEvent ? `tool_result at seq ${record.resultEvent.seq}` : 'no tool_result'}`);
  field('times', timesText(record));
  for (const r of record.reviews) field('reviewed', `${journaledReviewText(r.review)} (seq ${r.event.seq})`);
  const waiting = inbox.get(call.id);
  if (waiting) field('inbox', `${safe(waiting.decision ?? '')} by ${safe(waiting.actor ?? '')}: ${safe(waiting.reason ?? '')} (${safeId(waiting.id)}, not yet journaled by the owner)`);
  field('result', record.result ? resultWord(record) + (record.result.outcome.status === 'failed' ? ` (${safe(record.result.outcome.code)}: ${safe(record.result.outcome.message)})` : '') : 'none recorded');
  const late = lateBodyText(history, record);
  if (late) field('late body', late);
  if (inFlight !== null) field('running', s.yellow(`${runningText(inFlight)}.`));
  field('status', colourStatus(status, s));
  field('next step', colourStep(nextStep, s));
  out.line();
  out.line(s.bold('The retry policy says:'));
  for (const row of rows) out.line('  ' + paragraph(`${row.rule}: ${row.condition} → ${row.explanation}`, width === undefined ? undefined : width - 2, '    '));
  out.line(paragraph(`${s.bold('Why:')} ${safe(assessed?.reason ?? 'its own result is a success')}`, width, '  '));
  out.line();
  const advice = inFlight !== null ? 'Not yet: wait for the call\'s host to record its result or the end of its body, or to stop (its lease runs out); then look again.'
    : waiting?.decision === 'completed' && assessed?.nextStep === 'completed' && assessed.rule !== 'reviewed_completed'
    ? `Nothing to do but journal it: the completed review ${waiting.id} in the decision inbox resolves this call; the session's owner journals it with journalInboxReviews (jingwei/review). Never retry it.`
    : nextStepAdvice(sessionId, history, call, assessed);
  out.line(paragraph(`${s.bold('What a host may do:')} ${safe(advice)}`, width, '  '));
  if (attempts.length > 1) {
    out.line();
    out.line(s.bold(`Attempts of this operation (${attempts.length}):`));
    const cells = attempts.map((a, i) => {
      const st = stateOf(a);
      return [`#${i + 1}`, shortId(a.call.id), String(a.event.seq), resultWord(a), colourStatus(st.status, s), colourStep(st.next_step, s), a.call.id === call.id ? '← this call' : ''];
    });
    out.line(table(
      [{ header: 'ATTEMPT' }, { header: 'CALL' }, { header: 'SEQ', align: 'right' }, { header: 'RESULT' }, { header: 'STATUS' }, { header: 'NEXT STEP' }, { header: '' }],
      cells,
      s,
      { indent: '  ' },
    ));
  }
  return code;
}

/**
 * What the journal says of a body that went on after its result (docs/design.md#a-body-that-outlives-its-attempt):
 * how and when it ended, or that it may still be running; null for every other call.
 */
function lateBodyText(history: readonly SessionEvent[], record: CallRecord): string | null {
  const end = record.bodyEnd;
  if (end) {
    const what = record.result ? 'went on after its result and ended:' : 'no result is journaled; its host journaled that the body';
    return `${what} ${bodyEndWords(end.ended)}${end.event.recordedAt ? `, ${timeText(end.event.recordedAt)}` : ''} (seq ${end.event.seq})`;
  }
  return bodyMayStillRun(history, record.call.id) ? 'may still be running: its result records an interrupt while it ran, and no end of it is journaled yet' : null;
}

function lateBodyJson(history: readonly SessionEvent[], record: CallRecord) {
  const end = record.bodyEnd;
  return {
    body_ended: end ? { ended: end.ended, seq: end.event.seq, recorded_at: end.event.recordedAt ?? null } : null,
    body_may_still_run: end === null && bodyMayStillRun(history, record.call.id),
  };
}

/** When the call, its start marker and its result were recorded, and the durations between them. */
function timesText(record: CallRecord): string {
  const called = record.event.recordedAt;
  if (!called) return 'not recorded (written before the store kept times)';
  const parts = [`called ${timeText(called)}`];
  const started = record.started?.recordedAt;
  const ended = record.resultEvent?.recordedAt;
  const waited = durationText(called, started);
  if (started) parts.push(`${markerWord(record)} ${timeText(started)}` + (waited && waited !== '0 ms' ? ` (waited ${waited}: approval or checks)` : ''));
  const ran = durationText(started, ended);
  if (ended) parts.push(ran ? `result ${timeText(ended)} (${bodyRanText(record, ran)})` : `result ${timeText(ended)}`);
  else parts.push('no result yet');
  return parts.join('; ');
}

export const inspectCommand: Command = {
  name: 'inspect',
  summary: 'assess a session after a crash: every call without success, its status, next step and why',
  arguments: [
    STORE_ARGUMENT,
    { name: 'session', required: true, help: 'a session id, or a unique part of one; or an approval request or review decision id (approval_…, review_…): the call it is about' },
    { name: 'call', required: false, help: 'a call id, or a unique part of one: show that call and the decision-table row that applies' },
  ],
  options: {
    json: { type: 'boolean', help: 'print one JSON document instead of text' },
  },
  description: `
Loads the session's confirmed journal, verifies it, and assesses it the way a recovering host does: every tool
call without its own success is listed with its recovery status (completed, not_executed, outcome_unknown), the
next step (retry_allowed, needs_review, completed, superseded, legacy) and the reason. Given a call, it shows that
call's journal records, every attempt of its operation, the rows of the retry policy that apply, and
what a host may do, and the reviews journaled for it (the latest one counts: a completed review resolves the
call). A review decision recorded with 'jingwei review' and not yet journaled by the session's owner is part of
the picture: a completed one resolves its call (it waits to be journaled), a not_executed one is what the retry
will use. Given an approval request's id in place of the session (as 'jingwei queue' lists it), it shows the call
that request would let run, its arguments in full: what an approval answers for. This command never writes:
retries and reviews go through the host API.`,
  exitCodes: `This command exits 1 when a call needs attention (its outcome is in doubt, or it was interrupted before
anyone saw an answer; for one call: that call), or when the journal is corrupt or its tool evidence invalid. A
failure recorded before the body and delivered to its caller is shown but does not need attention, and so is a
call a completed review resolved, journaled or waiting in the decision inbox.`,
  examples: ['jingwei inspect journal.db demo-1a2b3c4d', 'jingwei inspect journal.db demo-1a2b3c4d 9f3e2a71', 'jingwei inspect journal.db approval_0190…'],
  async run(given) {
    return withStore(given.args.store!, async (store) => {
      const decision = given.args.call === undefined ? await decisionNamed(store, given.args.session!) : undefined;
      const ctx = decision === undefined ? given : { ...given, args: { ...given.args, session: decision.sessionId, call: decision.callId } };
      const { io, args, out } = ctx;
      if (decision !== undefined && ctx.options.json !== true) out.line(ctx.out.style.bold(decisionHeading(decision)));
      const { history, sessionId, progress } = await loadSession(store, args.session!, io).catch((error: unknown) => {
        throw decision === undefined && given.args.call === undefined && error instanceof UsageError ? notADecision(given.args.session!) ?? error : error;
      });
      let assessment: SessionAssessment | null = null;
      let inbox: ReadonlyMap<string, DecisionRow> = new Map();
      let approvals: DecisionRow[] = [];
      try {
        progress.update(`assessing ${num(history.length)} events of ${safeId(sessionId)}`);
        if (history.length > 0) assessment = assessSession(history);
        if (assessment !== null) {
          inbox = (await pendingInboxReviews(store, sessionId)).get(sessionId) ?? new Map();
          assessment = withInboxReviews(assessment, inbox, history);
          const decided = await decidedApprovals(store, sessionId);
          approvals = callsAwaitingApproval(history).flatMap((c) => decided.get(operationOf(c.taskId!, c.key!)) ?? []);
        }
      } finally {
        progress.done();
      }
      if (assessment === null) {
        if (args.call !== undefined) throw new UsageError(`session ${safeId(sessionId)} has no events, so no call ${safe(JSON.stringify(args.call))}`);
        if (ctx.options.json === true) out.line(JSON.stringify({ session_id: sessionId, events: 0, tool_calls: 0, needs_attention: 0, calls: [] }, null, 2));
        else out.line(`Session ${safeId(sessionId)} has no events yet. Nothing needs attention.`);
        return EXIT.ok;
      }
      return args.call === undefined ? sessionView(ctx, sessionId, assessment, inbox, overtakenReviews(inbox, history), approvals) : callView(ctx, store, sessionId, history, assessment, inbox);
    });
  },
};
