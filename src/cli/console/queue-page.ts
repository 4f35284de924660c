/**
 * The queue page, rendered on the server: the operations that need attention, the approval requests waiting for a
 * person, those decided whose decision no attempt has used yet, and the review decisions waiting to be journaled (as
 * `jingwei queue` lists them). Each list is
 * filtered, then cut at QUEUE_MAX rows with a link to the next page; the live stream sends the same parts again.
 * Store text goes through `h`; the filters the operator typed go back into their fields through `formValue`.
 */
import { TOOL_EFFECTS } from '../../event/types.js';
import { ATTENTION_STATUSES } from '../../store/rows.js';
import { attentionTimes, REVIEWED_NOT_EXECUTED_HINT } from '../assessment.js';
import { durationText, num, shellWord, timeText } from '../format.js';
import { QUEUE_MAX, queueQuery, type QueueFilters, type QueuePaging, type QueueView } from './data.js';
import { callHref, formValue, h, hId, hShortId, notice, sessionHref } from './html.js';

/** The rows of the operations table. */
export function queueRows(view: QueueView, now: string, base: string): string {
  if (view.items.items.length === 0) return '<tr><td colspan="8" class="muted">Nothing needs attention.</td></tr>';
  return view.items.items.map((i) => `<tr data-call="${h(i.callId)}">
<td class="mono">${h(timeText(i.calledAt))}</td>
<td><a href="${h(sessionHref(base, i.sessionId))}">${hId(i.sessionId)}</a></td>
<td class="mono"><a href="${h(callHref(base, i.sessionId, i.callId))}" title="${hId(i.callId)}">${hShortId(i.callId)}</a></td>
<td>${h(i.tool)}</td><td>${h(i.effect)}</td>
<td class="${i.inDoubt ? 'doubt' : ''}">${h(i.status)}${i.inDoubt ? ' · IN DOUBT' : ''}</td>
<td>${h(i.category ?? '-')}</td><td>${h(attentionTimes(i, now, view.bodyEnds.get(i.callId)))}</td></tr>`).join('\n');
}

/** The rows of the open approval requests. */
export function approvalRows(view: QueueView, now: string, base: string): string {
  const rows = view.approvals.items;
  if (view.decisionsNotListed !== null) return `<tr><td colspan="6" class="muted">Approval requests are ${h(notListed(view))}.</td></tr>`;
  if (rows.length === 0) return '<tr><td colspan="6" class="muted">No approval request is waiting.</td></tr>';
  return rows.map((r) => `<tr data-request="${h(r.id)}">
<td class="mono">${h(timeText(r.createdAt))}</td>
<td class="mono"><a href="${h(callHref(base, r.sessionId, r.callId))}">${h(r.id)}</a></td>
<td><a href="${h(sessionHref(base, r.sessionId))}">${hId(r.sessionId)}</a></td>
<td>${h(r.tool ?? '-')}</td><td>${h(durationText(r.createdAt, now) ?? '-')}</td><td>${h(r.note ?? '-')}</td></tr>`).join('\n');
}

/** The rows of the approval requests decided but not yet used by an attempt. */
export function decidedRows(view: QueueView, now: string, base: string): string {
  const rows = view.decided.items;
  if (view.decisionsNotListed !== null) return `<tr><td colspan="6" class="muted">Decided requests are ${h(notListed(view))}.</td></tr>`;
  if (rows.length === 0) return '<tr><td colspan="6" class="muted">No decision is waiting to be used.</td></tr>';
  return rows.map((r) => `<tr data-decided="${h(r.id)}">
<td class="mono">${h(timeText(r.decidedAt ?? r.createdAt))}</td>
<td class="mono"><a href="${h(callHref(base, r.sessionId, r.callId))}">${h(r.id)}</a></td>
<td><a href="${h(sessionHref(base, r.sessionId))}">${hId(r.sessionId)}</a></td>
<td>${h(r.tool ?? '-')}</td><td>${h(`${r.decision ?? '-'} by ${r.actor ?? '-'}`)}</td><td>${h(durationText(r.decidedAt ?? r.createdAt, now) ?? '-')}</td></tr>`).join('\n');
}

/** The rows of the review decisions waiting for their session's host to journal them. */
export function reviewRows(view: QueueView, now: string, base: string): string {
  const rows = view.reviews.items;
  if (view.decisionsNotListed !== null) return `<tr><td colspan="6" class="muted">Review decisions are ${h(notListed(view))}.</td></tr>`;
  if (rows.length === 0) return '<tr><td colspan="6" class="muted">No review decision is waiting to be journaled.</td></tr>';
  return rows.map((r) => `<tr data-review="${h(r.id)}">
<td class="mono">${h(timeText(r.createdAt))}</td>
<td class="mono"><a href="${h(callHref(base, r.sessionId, r.callId))}">${h(r.id)}</a></td>
<td><a href="${h(sessionHref(base, r.sessionId))}">${hId(r.sessionId)}</a></td>
<td>${h(r.tool ?? '-')}</td><td>${h(`${r.decision ?? '-'} by ${r.actor ?? '-'}`)}</td><td>${h(durationText(r.createdAt, now) ?? '-')}</td></tr>`).join('\n');
}

const counted = (n: number, more: boolean, one: string, many: string) => `${num(n)}${more ? '+' : ''} ${n === 1 && !more ? one : many}`;

/** Why the decision lists are empty when they were not read, as the end of a sentence. */
function notListed(view: QueueView): string {
  return view.decisionsNotListed === 'this store keeps no decision inbox' ? 'not kept: this store keeps no decision inbox' : view.decisionsNotListed ?? '';
}

/** The counts above the tables, `+` where a list goes on past this page. */
export function queueCount(view: QueueView): string {
  if (view.decisionsNotListed !== null) return `${counted(view.items.items.length, view.items.next !== null, 'item', 'items')}; decisions ${notListed(view)}`;
  return [
    counted(view.items.items.length, view.items.next !== null, 'item', 'items'),
    counted(view.approvals.items.length, view.approvals.next !== null, 'approval request waiting', 'approval requests waiting'),
    counted(view.decided.items.length, view.decided.next !== null, 'decision not yet used', 'decisions not yet used'),
    counted(view.reviews.items.length, view.reviews.next !== null, 'review decision not yet journaled', 'review decisions not yet journaled'),
  ].join(', ');
}

/** The same command in a terminal, from where this list stops. */
function cliFrom(filters: QueueFilters, option: string, next: string): string {
  return [
    'jingwei queue <store>',
    ...(filters.tool !== undefined ? [`--tool ${shellWord(filters.tool)}`] : []),
    ...(filters.olderThan !== undefined ? [`--older-than ${shellWord(filters.olderThan.text)}`] : []),
    `--${option} ${shellWord(next)}`,
  ].join(' ');
}

/** Under a list: whether it goes on, the link to its next page and the command that lists the rest; back to its start. */
function moreLine(base: string, filters: QueueFilters, paging: QueuePaging, which: 'cursor' | 'approvalsAfter' | 'decidedAfter' | 'reviewsAfter', next: string | null, what: string): string {
  const option = { cursor: 'cursor', approvalsAfter: 'approvals-after', decidedAfter: 'decided-after', reviewsAfter: 'reviews-after' }[which];
  const parts: string[] = [];
  if (next !== null) {
    parts.push(`More ${h(what)} than this page lists (at most ${num(QUEUE_MAX)}, after filtering): <a href="${h(`${base}/${queueQuery(filters, { ...paging, [which]: next })}`)}" data-more="${h(which)}">the next ${num(QUEUE_MAX)}</a>, or in a terminal <span class="mono">${h(cliFrom(filters, option, next))}</span>.`);
  }
  if (paging[which] !== undefined) {
    const { [which]: _, ...rest } = paging;
    parts.push(`<a href="${h(`${base}/${queueQuery(filters, rest)}`)}">Back to the first page</a>.`);
  }
  return parts.join(' ');
}

/** The parts of the queue page the live stream replaces, by element id, as HTML. */
export function queueParts(view: QueueView, filters: QueueFilters, paging: QueuePaging, now: string, base: string): Record<string, string> {
  return {
    'queue-count': h(queueCount(view)),
    'queue-rows': queueRows(view, now, base),
    'queue-more': moreLine(base, filters, paging, 'cursor', view.items.next, 'operations'),
    'approval-rows': approvalRows(view, now, base),
    'approvals-more': moreLine(base, filters, paging, 'approvalsAfter', view.approvals.next, 'approval requests'),
    'decided-rows': decidedRows(view, now, base),
    'decided-more': moreLine(base, filters, paging, 'decidedAfter', view.decided.next, 'decided requests'),
    'review-rows': reviewRows(view, now, base),
    'reviews-more': moreLine(base, filters, paging, 'reviewsAfter', view.reviews.next, 'review decisions'),
  };
}

function options(values: readonly string[], selected: string | undefined, blank: string): string {
  return [`<option value="">${h(blank)}</option>`, ...values.map((v) => `<option value="${h(v)}"${v === selected ? ' selected' : ''}>${h(v)}</option>`)].join('');
}

export function queuePage(view: QueueView, filters: QueueFilters, paging: QueuePaging, errors: readonly string[], now: string, base: string): string {
  const p = queueParts(view, filters, paging, now, base);
  return `<h1>Needs attention <span class="live" id="live-state">connecting…</span></h1>
${errors.map((e) => notice('error', `Filter ignored: ${e}.`)).join('')}
<form class="filters" method="get" action="${h(base)}/">
<div><label for="f-tool">Tool</label><input id="f-tool" name="tool" value="${formValue(filters.tool)}" placeholder="any"></div>
<div><label for="f-effect">Effect</label><select id="f-effect" name="effect">${options(TOOL_EFFECTS, filters.effect, 'any')}</select></div>
<div><label for="f-status">Status</label><select id="f-status" name="status">${options(ATTENTION_STATUSES, filters.status, 'needs attention (no result, unknown, reviewed not executed)')}</select></div>
<div><label for="f-age">Older than</label><input id="f-age" name="older_than" size="6" value="${formValue(filters.olderThan?.text)}" placeholder="10m"></div>
<div><button type="submit">Filter</button> <a href="${h(base)}/">clear</a></div>
</form>
<p class="muted" id="queue-count">${p['queue-count']}</p>
<table id="queue"><thead><tr><th>Called at</th><th>Session</th><th>Call</th><th>Tool</th><th>Effect</th><th>Status</th><th>Result</th><th>Times</th></tr></thead>
<tbody id="queue-rows" data-events="${h(`${base}/events${queueQuery(filters, paging)}`)}">${p['queue-rows']}</tbody></table>
<p class="muted" id="queue-more">${p['queue-more']}</p>
<h2>Approval requests waiting for a person</h2>
<table id="approvals"><thead><tr><th>Since</th><th>Request</th><th>Session</th><th>Tool</th><th>Waiting</th><th>Note</th></tr></thead>
<tbody id="approval-rows">${p['approval-rows']}</tbody></table>
<p class="muted" id="approvals-more">${p['approvals-more']}</p>
<h2>Decided, waiting for the session's host to use the decision</h2>
<table id="decided"><thead><tr><th>Decided at</th><th>Request</th><th>Session</th><th>Tool</th><th>Decision</th><th>Unused for</th></tr></thead>
<tbody id="decided-rows">${p['decided-rows']}</tbody></table>
<p class="muted" id="decided-more">${p['decided-more']}</p>
<h2>Review decisions waiting for the session's host to journal them</h2>
<table id="reviews"><thead><tr><th>Recorded at</th><th>Decision</th><th>Session</th><th>Tool</th><th>Outcome</th><th>Waiting</th></tr></thead>
<tbody id="review-rows">${p['review-rows']}</tbody></table>
<p class="muted" id="reviews-more">${p['reviews-more']}</p>
<p class="muted">IN DOUBT: an unknown or non-idempotent tool whose body started or may have. Find out in the outside system what happened, then record a review on the call's page. ${h(REVIEWED_NOT_EXECUTED_HINT)}. Operations newest first, requests oldest first; the lists update by themselves. A decided request is used once, by the session's host on its next attempt of the operation; one that stays listed means that host has not come back: resume the session's run on another host. So does a review decision that stays listed: nothing acts on it (a retry of its operation is refused) until the session's host journals it.</p>`;
}
