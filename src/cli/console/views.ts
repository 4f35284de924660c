/**
 * The console's three pages, rendered on the server: the queue, a session (its timeline, budgets and lease) and a
 * call (its evidence, the rule that decided its status, and the decision forms). Every piece of journal text goes
 * through `h`.
 */
import { encodeToolResult } from '../../event/codec.js';
import { TOOL_EFFECTS, TOOL_REVIEW_OUTCOMES } from '../../event/types.js';
import type { DecisionRow } from '../../store/inbox-rows.js';
import { ATTENTION_STATUSES } from '../../store/rows.js';
import type { AttentionItem } from '../../store/types.js';
import { attemptsOf, decisionRows, nextStepAdvice, resultWord, type CallRecord } from '../assessment.js';
import { durationText, timeText } from '../format.js';
import { assessedCall, callBasis, reviewRefusal, type QueueFilters, type QueueView, type SessionView } from './data.js';
import { h, notice, seg, shortText, type NoticeKind } from './html.js';
import { TIMELINE_LEGEND, timelineSvg } from './timeline.js';

export interface ViewContext {
  readonly readOnly: boolean;
  readonly csrf: string;
}

const sessionHref = (id: string) => `/session/${seg(id)}`;
const callHref = (session: string, call: string) => `/session/${seg(session)}/call/${seg(call)}`;

function itemTimes(item: AttentionItem, now: string): string {
  const ran = item.startedAt ? durationText(item.startedAt, item.endedAt ?? now) : null;
  if (ran !== null) return item.endedAt ? `body ran ${ran}` : `body started ${ran} ago, no result`;
  const waited = durationText(item.calledAt, item.endedAt ?? now);
  if (waited === null) return '-';
  return item.endedAt ? `ended after ${waited}` : `no result for ${waited}`;
}

/** The rows of the queue table (also what the live updates send). */
export function queueRows(view: QueueView, now: string): string {
  if (view.items.length === 0) return '<tr><td colspan="8" class="muted">Nothing needs attention.</td></tr>';
  return view.items.map((i) => `<tr data-call="${h(i.callId)}">
<td class="mono">${h(timeText(i.calledAt))}</td>
<td><a href="${h(sessionHref(i.sessionId))}">${h(i.sessionId)}</a></td>
<td class="mono"><a href="${h(callHref(i.sessionId, i.callId))}" title="${h(i.callId)}">${h(shortText(i.callId))}</a></td>
<td>${h(i.tool)}</td><td>${h(i.effect)}</td>
<td class="${i.inDoubt ? 'doubt' : ''}">${h(i.status)}${i.inDoubt ? ' · IN DOUBT' : ''}</td>
<td>${h(i.category ?? '-')}</td><td>${h(itemTimes(i, now))}</td></tr>`).join('\n');
}

export function approvalRows(approvals: readonly DecisionRow[], now: string): string {
  if (approvals.length === 0) return '<tr><td colspan="6" class="muted">No approval request is waiting.</td></tr>';
  return approvals.map((r) => `<tr data-request="${h(r.id)}">
<td class="mono">${h(timeText(r.createdAt))}</td>
<td class="mono"><a href="${h(callHref(r.sessionId, r.callId))}">${h(r.id)}</a></td>
<td><a href="${h(sessionHref(r.sessionId))}">${h(r.sessionId)}</a></td>
<td>${h(r.tool ?? '-')}</td><td>${h(durationText(r.createdAt, now) ?? '-')}</td><td>${h(r.note ?? '-')}</td></tr>`).join('\n');
}

export function queueCount(view: QueueView): string {
  return `${view.items.length}${view.truncated ? '+' : ''} item${view.items.length === 1 ? '' : 's'}, ${view.approvals.length} approval request${view.approvals.length === 1 ? '' : 's'}`;
}

function options(values: readonly string[], selected: string | undefined, blank: string): string {
  return [`<option value="">${h(blank)}</option>`, ...values.map((v) => `<option value="${h(v)}"${v === selected ? ' selected' : ''}>${h(v)}</option>`)].join('');
}

export function queuePage(view: QueueView, filters: QueueFilters, errors: readonly string[], now: string): string {
  return `<h1>Needs attention <span class="live" id="live-state">connecting…</span></h1>
${errors.map((e) => notice('error', `Filter ignored: ${e}.`)).join('')}
<form class="filters" method="get" action="/">
<div><label for="f-tool">Tool</label><input id="f-tool" name="tool" value="${h(filters.tool)}" placeholder="any"></div>
<div><label for="f-effect">Effect</label><select id="f-effect" name="effect">${options(TOOL_EFFECTS, filters.effect, 'any')}</select></div>
<div><label for="f-status">Status</label><select id="f-status" name="status">${options(ATTENTION_STATUSES, filters.status, 'open (no result, unknown)')}</select></div>
<div><label for="f-age">Older than</label><input id="f-age" name="older_than" size="6" value="${h(filters.olderThan?.text)}" placeholder="10m"></div>
<div><button type="submit">Filter</button> <a href="/">clear</a></div>
</form>
<p class="muted" id="queue-count">${h(queueCount(view))}</p>
<table id="queue"><thead><tr><th>Called at</th><th>Session</th><th>Call</th><th>Tool</th><th>Effect</th><th>Status</th><th>Result</th><th>Times</th></tr></thead>
<tbody id="queue-rows">${queueRows(view, now)}</tbody></table>
<h2>Approval requests waiting for a person</h2>
<table id="approvals"><thead><tr><th>Since</th><th>Request</th><th>Session</th><th>Tool</th><th>Waiting</th><th>Note</th></tr></thead>
<tbody id="approval-rows">${approvalRows(view.approvals, now)}</tbody></table>
<p class="muted">IN DOUBT: an unknown or non-idempotent tool whose body started or may have. Find out in the outside system what happened, then record a review on the call's page. Newest first; the list updates by itself.</p>`;
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
  return view.tasks.map((t) => `<tr><td>${h(t.taskId)}</td><td>${h(t.state)}</td>
<td>${h(t.chargedToolCalls)} of ${h(t.limitToolCalls)}</td>
<td>${h(t.chargedOutputBytes)} of ${h(t.limitOutputBytes)}${t.reservedOutputBytes > 0 ? ` (${h(t.reservedOutputBytes)} reserved)` : ''}</td>
<td>${t.limitJournalBytes !== undefined ? `${h(t.chargedJournalBytes ?? 0)} of ${h(t.limitJournalBytes)}` : '-'}</td><td>${h(t.stopReason ?? '-')}</td></tr>`).join('');
}

export function sessionPage(view: SessionView): string {
  const a = view.assessment;
  const calls = a?.calls ?? [];
  return `<h1>Session <span class="mono">${h(view.sessionId)}</span></h1>
<dl class="fields">
${field('events', h(view.history.length))}
${field('lease', leaseText(view))}
${field('tool calls', a ? `${h(a.totals.calls)} (${h(a.totals.succeeded)} succeeded, ${h(a.totals.byAttention.in_doubt)} in doubt, ${h(a.totals.byAttention.interrupted)} interrupted)` : '0')}
${field('first and last event', `${h(timeText(view.history[0]?.recordedAt))} — ${h(timeText(view.history[view.history.length - 1]?.recordedAt))}`)}
</dl>
<h2>Timeline</h2>
<div id="timeline">${timelineSvg(view)}</div>
${TIMELINE_LEGEND}
<h2>Budgets</h2>
<table id="budgets"><thead><tr><th>Task</th><th>State</th><th>Tool calls</th><th>Output bytes</th><th>Journal bytes</th><th>Stopped</th></tr></thead><tbody>${budgetRows(view)}</tbody></table>
<h2>Calls without their own success</h2>
<table id="calls"><thead><tr><th>Call</th><th>Tool</th><th>Effect</th><th>Status</th><th>Next step</th><th>Why</th></tr></thead><tbody>
${calls.length === 0 ? '<tr><td colspan="6" class="muted">None.</td></tr>' : calls.map((c) => `<tr data-call="${h(c.callId)}"><td class="mono"><a href="${h(callHref(view.sessionId, c.callId))}">${h(shortText(c.callId))}</a></td><td>${h(c.name)}</td><td>${h(c.effect ?? 'legacy')}</td><td class="${c.attention === 'in_doubt' ? 'doubt' : ''}">${h(c.status)}</td><td>${h(c.nextStep)}</td><td>${h(c.reason)}</td></tr>`).join('')}
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
  if (started) parts.push(`body started ${h(timeText(started))} (after ${h(durationText(called, started) ?? '?')})`);
  if (ended) parts.push(`result ${h(timeText(ended))}${started ? ` (body ran ${h(durationText(started, ended) ?? '?')})` : ''}`);
  else parts.push(`no result for ${h(durationText(started ?? called, readAt) ?? '?')}`);
  return parts.join('; ');
}

export interface CallNotice {
  readonly kind: NoticeKind;
  readonly text: string;
}

export function callPage(view: SessionView, callId: string, ctx: ViewContext, shown: CallNotice | null, form: { outcome?: string; evidence?: string; reason?: string } = {}): string {
  const record = view.calls.get(callId)!;
  const call = record.call;
  const op = call.operation;
  const assessed = assessedCall(view, callId);
  const attempts = attemptsOf(view.calls, call);
  const n = attempts.findIndex((r) => r.call.id === callId) + 1;
  const reconciler = record.reviews.filter((r) => r.review.source === 'reconciler');
  const waiting = view.inboxReviews.get(callId);
  const approval = view.openApprovals.get(callId);
  const refusal = reviewRefusal(view, callId);
  const basis = callBasis(view, callId);
  const marker = op?.startMarker === true ? (record.started ? `tool_started at seq ${record.started.seq}` : 'no tool_started: the body never started') : 'records no start marker';
  const approvalRecord = record.started?.kind.type === 'tool_started' ? record.started.kind.approval : record.result?.approval;
  const parts: string[] = [];
  parts.push(`<h1>Call <span class="mono">${h(call.id)}</span></h1>`);
  parts.push(`<p>in session <a href="${h(sessionHref(view.sessionId))}">${h(view.sessionId)}</a></p>`);
  if (shown) parts.push(notice(shown.kind, shown.text));
  parts.push(`<dl class="fields" id="evidence">
${field('tool', op ? `${h(call.name)} (${h(op.contract.effect)}, revision ${h(op.contract.revision)})` : `${h(call.name)} (legacy record: no operation)`)}
${op ? field('operation', `task ${h(op.taskId)}, key <span class="mono">${h(op.key)}</span>`) : ''}
${field('arguments', `<span class="mono">${h(JSON.stringify(call.arguments))}</span>`)}
${field('attempt', `${n} of ${attempts.length}${op?.retry ? `, retry of <span class="mono">${h(op.retry.callId)}</span>` : ''}`)}
${field('journal', `tool_call at seq ${h(record.event.seq)}; ${h(marker)}; ${record.resultEvent ? `tool_result at seq ${h(record.resultEvent.seq)}` : 'no tool_result'}`)}
${field('times', timesHtml(record, view.readAt))}
${approvalRecord ? field('approval', `${h(approvalRecord.decision)}${approvalRecord.actor ? ` by ${h(approvalRecord.actor)}` : ''}${approvalRecord.reason ? `: ${h(approvalRecord.reason)}` : ''} <span class="mono">${h(approvalRecord.requestId)}</span>`) : ''}
${field('result', resultHtml(record))}
${record.reviews.map((r) => field(r.review.source === 'reconciler' ? 'reconciler' : 'review', `${h(r.review.outcome)} by ${h(r.review.actor)} (${h(r.review.source)}, seq ${h(r.event.seq)}): ${h(r.review.evidence)}`)).join('')}
${waiting ? field('inbox review', `${h(waiting.decision)} by ${h(waiting.actor)}: ${h(waiting.reason)} <span class="muted">(${h(waiting.id)}, not yet journaled by the session's owner)</span>`) : ''}
${field('status', `<b class="${assessed?.attention === 'in_doubt' ? 'doubt' : ''}" id="call-status">${h(assessed?.status ?? 'completed')}</b>`)}
${field('next step', `<b id="call-next-step">${h(assessed?.nextStep ?? 'completed')}</b>`)}
</dl>`);
  parts.push('<h2>The rule that decided its status</h2><div class="card" id="rules">');
  for (const row of decisionRows(assessed)) parts.push(`<p><b class="mono">${h(row.rule)}</b>: ${h(row.condition)} → ${h(row.explanation)}</p>`);
  parts.push(`<p><b>Why:</b> ${h(assessed?.reason ?? 'its own result is a success')}</p>`);
  parts.push(`<p><b>Reconciler:</b> ${reconciler.length === 0 ? 'no answer journaled' : reconciler.map((r) => `${h(r.review.outcome)} by ${h(r.review.actor)}: ${h(r.review.evidence)}`).join('; ')}</p>`);
  parts.push(`<p class="muted"><b>What a host may do:</b> ${h(nextStepAdvice(view.sessionId, call, assessed))}</p></div>`);
  parts.push(decisionForms(view, callId, ctx, { refusal, basis, approval, form }));
  if (attempts.length > 1) {
    parts.push('<h2>Attempts of this operation</h2><table id="attempts"><thead><tr><th>#</th><th>Call</th><th>Seq</th><th>Result</th><th>Status</th><th>Next step</th></tr></thead><tbody>');
    attempts.forEach((r, i) => {
      const x = assessedCall(view, r.call.id);
      parts.push(`<tr><td>${i + 1}</td><td class="mono"><a href="${h(callHref(view.sessionId, r.call.id))}">${h(shortText(r.call.id))}</a>${r.call.id === callId ? ' ← this call' : ''}</td><td>${h(r.event.seq)}</td><td>${h(resultWord(r))}</td><td>${h(x?.status ?? 'completed')}</td><td>${h(x?.nextStep ?? 'completed')}</td></tr>`);
    });
    parts.push('</tbody></table>');
  }
  if (record.result) parts.push(`<h2>Recorded result</h2><pre class="card mono">${h(JSON.stringify(encodeToolResult(record.result), null, 2))}</pre>`);
  return parts.join('\n');
}

function decisionForms(
  view: SessionView,
  callId: string,
  ctx: ViewContext,
  d: { refusal: string | null; basis: string; approval: DecisionRow | undefined; form: { outcome?: string; evidence?: string; reason?: string } },
): string {
  const parts: string[] = ['<h2>Decide</h2>'];
  if (ctx.readOnly) {
    parts.push('<p class="notice info">This console is read-only (--read-only): decisions are made elsewhere.</p>');
    return parts.join('');
  }
  const csrf = `<input type="hidden" name="csrf" value="${h(ctx.csrf)}">`;
  if (d.approval) {
    parts.push(`<form class="card" method="post" action="/approval/${h(seg(d.approval.id))}" id="approval-form">
${csrf}<p>Approval request <span class="mono">${h(d.approval.id)}</span>, waiting since ${h(timeText(d.approval.createdAt))}${d.approval.note ? `; the approver's note: ${h(d.approval.note)}` : ''}. The host uses the decision once, on the next attempt with the same tool, revision and arguments.</p>
<label for="a-reason">Reason (recorded with the decision)</label><textarea id="a-reason" name="reason">${h(d.form.reason)}</textarea>
<p><button type="submit" name="decision" value="approve">Approve</button> <button class="danger" type="submit" name="decision" value="deny">Deny</button></p></form>`);
  }
  if (d.refusal === null) {
    parts.push(`<form class="card" method="post" action="${h(callHref(view.sessionId, callId))}/review" id="review-form">
${csrf}<input type="hidden" name="basis" value="${h(d.basis)}">
<p>Record a review: what the outside system shows happened to this operation. It waits in the decision inbox until the session's host journals it; a <b>not_executed</b> review lets the host retry once, a <b>completed</b> one resolves the call for good.</p>
<label for="r-outcome">Outcome</label><select id="r-outcome" name="outcome">${options(TOOL_REVIEW_OUTCOMES, d.form.outcome, 'choose…')}</select>
<label for="r-evidence">Evidence you checked</label><textarea id="r-evidence" name="evidence">${h(d.form.evidence)}</textarea>
<p><button type="submit">Record review</button></p></form>`);
  } else if (!d.approval) {
    parts.push(`<p class="muted" id="no-review">No review can be recorded: ${h(d.refusal)}.</p>`);
  }
  return parts.join('');
}
