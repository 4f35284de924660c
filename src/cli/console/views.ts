/**
 * Two of the console's pages, rendered on the server (the queue is in queue-page.ts): a session (its timeline,
 * budgets and lease) and a call (its evidence, the rule that decided its status, and the decision forms). Every
 * piece of journal text goes through `h` (or `lines`, which keeps its line breaks); what the operator typed into a
 * form that comes back goes through `formValue`, so it is sent again unchanged.
 */
import { encodeToolResult } from '../../event/codec.js';
import { TOOL_REVIEW_OUTCOMES } from '../../event/types.js';
import type { DecisionRow } from '../../store/inbox-rows.js';
import { attemptsOf, bodyEndWords, bodyRanText, decisionRows, markerWord, nextStepAdvice, resultWord, runningText, type CallRecord } from '../assessment.js';
import { durationText, timeText } from '../format.js';
import { assessedCall, callBasis, reviewRefusal, type SessionView } from './data.js';
import { callHref, formValue, h, hId, hShortId, lines, notice, seg, sessionHref, type NoticeKind } from './html.js';
import { TIMELINE_LEGEND, timelineSvg } from './timeline.js';

export interface ViewContext {
  /** The console's path, `/<prefix>`: every link and form goes under it. */
  readonly base: string;
  readonly readOnly: boolean;
  readonly csrf: string;
}

/** The fields of a form that came back with an error, as the operator typed them. */
export interface TypedForm {
  readonly outcome?: string;
  readonly evidence?: string;
  readonly reason?: string;
}

function options(values: readonly string[], selected: string | undefined, blank: string): string {
  return [`<option value="">${h(blank)}</option>`, ...values.map((v) => `<option value="${h(v)}"${v === selected ? ' selected' : ''}>${h(v)}</option>`)].join('');
}

/** A textarea holding `value` exactly: the parser drops one newline right after the tag, so one is always written. */
function textarea(id: string, name: string, value: string | undefined): string {
  return `<textarea id="${id}" name="${name}">\n${formValue(value)}</textarea>`;
}

function field(name: string, value: string): string {
  return `<dt>${h(name)}</dt><dd>${value}</dd>`;
}

function leaseText(view: SessionView): string {
  const s = view.summary;
  if (s === null) return 'no owner row';
  if (!s.held) return `released (last owner ${h(s.owner ?? '-')})`;
  const until = s.leaseExpiresAt !== null ? new Date(s.leaseExpiresAt).toISOString() : null;
  const state = s.leaseExpired ? '<span class="bad">lease expired</span>: its owner stopped writing and heartbeating' : 'lease live';
  return `held by <b>${h(s.owner ?? '-')}</b> (epoch ${h(s.epoch)}), ${state}${until ? `, until ${h(timeText(until))}` : ''}`;
}

function budgetRows(view: SessionView): string {
  if (view.tasks.length === 0) return '<tr><td colspan="6" class="muted">No task rows.</td></tr>';
  return view.tasks.map((t) => `<tr><td>${hId(t.taskId)}</td><td>${h(t.state)}</td>
<td>${h(t.chargedToolCalls)} of ${h(t.limitToolCalls)}</td>
<td>${h(t.chargedOutputBytes)} of ${h(t.limitOutputBytes)}${t.reservedOutputBytes > 0 ? ` (${h(t.reservedOutputBytes)} reserved)` : ''}</td>
<td>${t.limitJournalBytes !== undefined ? `${h(t.chargedJournalBytes ?? 0)} of ${h(t.limitJournalBytes)}` : '-'}</td><td>${h(t.stopReason ?? '-')}</td></tr>`).join('');
}

export function sessionPage(view: SessionView, base: string): string {
  const a = view.assessment;
  const calls = a?.calls ?? [];
  return `<h1>Session <span class="mono">${hId(view.sessionId)}</span></h1>
<dl class="fields">
${field('events', h(view.history.length))}
${field('lease', leaseText(view))}
${field('tool calls', a ? `${h(a.totals.calls)} (${h(a.totals.succeeded)} succeeded, ${h(a.totals.byAttention.in_doubt)} in doubt, ${h(a.totals.byAttention.interrupted)} interrupted)` : '0')}
${field('first and last event', `${h(timeText(view.history[0]?.recordedAt))} — ${h(timeText(view.history[view.history.length - 1]?.recordedAt))}`)}
</dl>
<h2>Timeline</h2>
<div id="timeline">${timelineSvg(view, base)}</div>
${TIMELINE_LEGEND}
<h2>Budgets</h2>
<table id="budgets"><thead><tr><th>Task</th><th>State</th><th>Tool calls</th><th>Output bytes</th><th>Journal bytes</th><th>Stopped</th></tr></thead><tbody>${budgetRows(view)}</tbody></table>
<h2>Calls without their own success</h2>
<table id="calls"><thead><tr><th>Call</th><th>Tool</th><th>Effect</th><th>Status</th><th>Next step</th><th>Why</th></tr></thead><tbody>
${calls.length === 0 ? '<tr><td colspan="6" class="muted">None.</td></tr>' : calls.map((c) => `<tr data-call="${h(c.callId)}"><td class="mono"><a href="${h(callHref(base, view.sessionId, c.callId))}">${hShortId(c.callId)}</a></td><td>${h(c.name)}</td><td>${h(c.effect ?? 'legacy')}</td><td class="${c.attention === 'in_doubt' ? 'doubt' : ''}">${h(c.status)}</td><td>${h(c.nextStep)}</td><td>${h(c.reason)}</td></tr>`).join('')}
</tbody></table>`;
}

function resultHtml(record: CallRecord): string {
  const r = record.result;
  if (r === null) return 'none recorded';
  const o = r.outcome;
  if (o.status === 'succeeded') return '<span class="ok">succeeded</span>';
  return `<span class="bad">failed ${h(o.category)}</span> <span class="mono">${h(o.code)}</span>: ${h(o.message)}`;
}

function timesHtml(record: CallRecord, readAt: string): string {
  const called = record.event.recordedAt;
  if (!called) return 'not recorded';
  const started = record.started?.recordedAt;
  const ended = record.resultEvent?.recordedAt;
  const parts = [`called ${h(timeText(called))}`];
  if (started) parts.push(`${markerWord(record)} ${h(timeText(started))} (after ${h(durationText(called, started) ?? '?')})`);
  if (ended) parts.push(`result ${h(timeText(ended))}${started ? ` (${h(bodyRanText(record, durationText(started, ended) ?? '?'))})` : ''}`);
  else parts.push(`no result for ${h(durationText(started ?? called, readAt) ?? '?')}`);
  const end = record.bodyEnd?.event.recordedAt;
  if (end) parts.push(`body ended ${h(timeText(end))}`);
  return parts.join('; ');
}

/** An approval request decided but not yet used: the decision, and what happens to it next. */
function decidedHtml(row: DecisionRow): string {
  return `<b>${h(row.decision)}</b> by ${h(row.actor)}${row.reason ? `: <span class="lines">${lines(row.reason)}</span>` : ''} (${h(timeText(row.decidedAt))}), not yet used: the session's host uses it on its next attempt of this operation with the same tool, revision and arguments; if that host is gone, the startup routine with retry_safe (recoverAbandoned) makes it, or resume the session's run on another`;
}

export interface CallNotice {
  readonly kind: NoticeKind;
  readonly text: string;
}

export function callPage(view: SessionView, callId: string, ctx: ViewContext, shown: CallNotice | null, form: TypedForm = {}): string {
  const record = view.calls.get(callId)!;
  const call = record.call;
  const op = call.operation;
  const assessed = assessedCall(view, callId);
  const attempts = attemptsOf(view.calls, call);
  const n = attempts.findIndex((r) => r.call.id === callId) + 1;
  const reconciler = record.reviews.filter((r) => r.review.source === 'reconciler');
  const waiting = view.inboxReviews.get(callId);
  const approval = view.openApprovals.get(callId);
  const decided = view.decidedApprovals.get(callId);
  const refusal = reviewRefusal(view, callId);
  const basis = callBasis(view, callId);
  const marker = op?.startMarker === true ? (record.started ? `tool_started at seq ${record.started.seq}` : 'no tool_started: the body never started') : 'records no start marker';
  const approvalRecord = record.started?.kind.type === 'tool_started' ? record.started.kind.approval : record.result?.approval;
  const parts: string[] = [];
  parts.push(`<h1>Call <span class="mono">${hId(call.id)}</span></h1>`);
  parts.push(`<p>in session <a href="${h(sessionHref(ctx.base, view.sessionId))}">${hId(view.sessionId)}</a></p>`);
  if (shown) parts.push(notice(shown.kind, shown.text));
  const running = view.running.get(callId);
  if (running !== undefined) parts.push(`<div id="call-running">${notice('info', `Not to be reviewed yet: ${runningText(running)}.`)}</div>`);
  parts.push(`<dl class="fields" id="evidence">
${field('tool', op ? `${h(call.name)} (${h(op.contract.effect)}, revision ${h(op.contract.revision)})` : `${h(call.name)} (legacy record: no operation)`)}
${op ? field('operation', `task ${hId(op.taskId)}, key <span class="mono">${hId(op.key)}</span>`) : ''}
${field('arguments', `<span class="mono">${h(JSON.stringify(call.arguments))}</span>`)}
${field('attempt', `${n} of ${attempts.length}${op?.retry ? `, retry of <span class="mono">${hId(op.retry.callId)}</span>` : ''}`)}
${field('journal', `tool_call at seq ${h(record.event.seq)}; ${h(marker)}; ${record.resultEvent ? `tool_result at seq ${h(record.resultEvent.seq)}` : 'no tool_result'}${record.bodyEnd ? `; body_ended at seq ${h(record.bodyEnd.event.seq)}: ${record.result ? 'after its result its body' : 'its host journaled that its body'} ${h(bodyEndWords(record.bodyEnd.ended))}` : ''}`)}
${field('times', timesHtml(record, view.readAt))}
${approvalRecord ? field('approval', `${h(approvalRecord.decision)}${approvalRecord.actor ? ` by ${h(approvalRecord.actor)}` : ''}${approvalRecord.reason ? `: ${h(approvalRecord.reason)}` : ''} <span class="mono">${h(approvalRecord.requestId)}</span>${decided ? ' <span class="muted">(as journaled when this attempt ended)</span>' : ''}`) : ''}
${decided ? field('decided since', decidedHtml(decided)) : ''}
${field('result', `${resultHtml(record)}${decided && record.result?.outcome.status === 'failed' && record.result.outcome.category === 'approval_pending' ? '<br><span class="muted">This result was journaled while the request waited; a person has decided it since (above).</span>' : ''}`)}
${record.reviews.map((r) => field(r.review.source === 'reconciler' ? 'reconciler' : 'review', `${h(r.review.outcome)} by ${h(r.review.actor)} (${h(r.review.source)}, seq ${h(r.event.seq)}): <span class="lines">${lines(r.review.evidence)}</span>`)).join('')}
${waiting ? field('inbox review', `${h(waiting.decision)} by ${h(waiting.actor)}: <span class="lines">${lines(waiting.reason)}</span> <span class="muted">(${h(waiting.id)}, not yet journaled by the session's owner)</span>`) : ''}
${field('status', `<b class="${assessed?.attention === 'in_doubt' ? 'doubt' : ''}" id="call-status">${h(assessed?.status ?? 'completed')}</b>`)}
${field('next step', `<b id="call-next-step">${h(assessed?.nextStep ?? 'completed')}</b>`)}
</dl>`);
  parts.push('<h2>The rule that decided its status</h2><div class="card" id="rules">');
  for (const row of decisionRows(assessed)) parts.push(`<p><b class="mono">${h(row.rule)}</b>: ${h(row.condition)} → ${h(row.explanation)}</p>`);
  parts.push(`<p><b>Why:</b> ${h(assessed?.reason ?? 'its own result is a success')}</p>`);
  parts.push(`<p><b>Reconciler:</b> ${reconciler.length === 0 ? 'no answer journaled' : reconciler.map((r) => `${h(r.review.outcome)} by ${h(r.review.actor)}: <span class="lines">${lines(r.review.evidence)}</span>`).join('; ')}</p>`);
  parts.push(`<p class="muted"><b>What a host may do:</b> ${h(nextStepAdvice(view.sessionId, view.history, call, assessed))}</p></div>`);
  parts.push(decisionForms(view, callId, ctx, { refusal, basis, approval, decided, form }));
  if (attempts.length > 1) {
    parts.push('<h2>Attempts of this operation</h2><table id="attempts"><thead><tr><th>#</th><th>Call</th><th>Seq</th><th>Result</th><th>Status</th><th>Next step</th></tr></thead><tbody>');
    attempts.forEach((r, i) => {
      const x = assessedCall(view, r.call.id);
      parts.push(`<tr><td>${i + 1}</td><td class="mono"><a href="${h(callHref(ctx.base, view.sessionId, r.call.id))}">${hShortId(r.call.id)}</a>${r.call.id === callId ? ' ← this call' : ''}</td><td>${h(r.event.seq)}</td><td>${h(resultWord(r))}</td><td>${h(x?.status ?? 'completed')}</td><td>${h(x?.nextStep ?? 'completed')}</td></tr>`);
    });
    parts.push('</tbody></table>');
  }
  if (record.result) parts.push(`<h2>Recorded result</h2><pre class="card mono" id="recorded-result">${lines(JSON.stringify(encodeToolResult(record.result), null, 2))}</pre>`);
  return parts.join('\n');
}

/**
 * The review CLI's own warning, on the form of a call whose body started and left no result: a takeover fences the
 * old host's writes, not its body, which may still be running in a process nobody stopped.
 */
function stoppedFirst(view: SessionView, callId: string): string {
  const record = view.calls.get(callId);
  if (!record?.started || record.result !== null) return '';
  return '<p class="notice warn" id="stopped-first">Its body started and no result is journaled. A takeover fences the old host\'s writes, not its body: before <b>not_executed</b>, make sure the process that ran the call has stopped.</p>';
}

function decisionForms(
  view: SessionView,
  callId: string,
  ctx: ViewContext,
  d: { refusal: string | null; basis: string; approval: DecisionRow | undefined; decided: DecisionRow | undefined; form: TypedForm },
): string {
  const parts: string[] = ['<h2>Decide</h2>'];
  const waiting = view.inboxReviews.get(callId);
  if (ctx.readOnly) {
    parts.push('<p class="notice info">This console is read-only (--read-only): decisions are made elsewhere.</p>');
    return parts.join('');
  }
  const csrf = `<input type="hidden" name="csrf" value="${formValue(ctx.csrf)}">`;
  if (d.decided) {
    parts.push(`<p class="card" id="decided-approval">Approval request <span class="mono">${h(d.decided.id)}</span> is decided: ${decidedHtml(d.decided)}. It takes one decision.</p>`);
  }
  if (d.approval) {
    parts.push(`<form class="card" method="post" action="${h(`${ctx.base}/approval/${seg(d.approval.id)}`)}" id="approval-form">
${csrf}<p>Approval request <span class="mono">${h(d.approval.id)}</span>, waiting since ${h(timeText(d.approval.createdAt))}${d.approval.note ? `; the approver's note: ${h(d.approval.note)}` : ''}. The host uses the decision once, on the next attempt with the same tool, revision and arguments.</p>
<label for="a-reason">Reason (recorded with the decision)</label>${textarea('a-reason', 'reason', d.form.reason)}
<p><label><input type="checkbox" name="allow-identical" value="yes"> A second identical write is meant: approve even if an identical call (same tool and arguments) was already approved in this session</label></p>
<p><button type="submit" name="decision" value="approve">Approve</button> <button class="danger" type="submit" name="decision" value="deny">Deny</button></p></form>`);
  }
  if (d.refusal === null) {
    parts.push(`<form class="card" method="post" action="${h(`${callHref(ctx.base, view.sessionId, callId)}/review`)}" id="review-form">
${csrf}<input type="hidden" name="basis" value="${formValue(d.basis)}">
<p>Record a review: what the outside system shows happened to this operation. It waits in the decision inbox until the session's host journals it; a <b>not_executed</b> review lets the host retry once, a <b>completed</b> one resolves the call for good.${waiting ? ` It replaces the inbox review above (${h(waiting.id)}), which is then never journaled.` : ''}</p>
<label for="r-outcome">Outcome</label><select id="r-outcome" name="outcome">${options(TOOL_REVIEW_OUTCOMES, d.form.outcome, 'choose…')}</select>
<label for="r-evidence">Evidence you checked</label>${textarea('r-evidence', 'evidence', d.form.evidence)}
${stoppedFirst(view, callId)}${assessedCall(view, callId)?.bodyEnded?.ended === 'returned'
  ? '<p id="late-return"><label><input type="checkbox" name="despite_late_return" value="yes"> Its body went on after its result and returned, so it most likely made its write: I checked the outside system, and the write was not made (needed for <b>not_executed</b>).</label></p>'
  : ''}
<p><button type="submit">Record review</button></p></form>`);
  } else if (!d.approval && !d.decided) {
    parts.push(`<p class="muted" id="no-review">No review can be recorded: ${h(d.refusal)}.</p>`);
  }
  return parts.join('');
}
