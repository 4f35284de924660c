/**
 * A session's timeline as SVG, drawn to scale in recorded time: one lane per operation with its attempts side by
 * side, each attempt from its call to its result: the wait before the body (checks, an approval), the body from its
 * start marker, the result (coloured by outcome), reviews as diamonds, and an attempt still open drawn to the time the
 * page was read. Every label is journal text, escaped with `h`.
 */
import type { CallRecord } from '../assessment.js';
import type { SessionView } from './data.js';
import { durationText, safeId, shortId } from '../format.js';
import { callHref, h } from './html.js';

const WIDTH = 1100;
const LABEL = 230;
const LANE = 62;
const TOP = 30;
const PLOT = WIDTH - LABEL - 20;

interface Lane {
  readonly label: string;
  readonly sub: string;
  readonly attempts: CallRecord[];
}

function lanesOf(view: SessionView): Lane[] {
  const lanes = new Map<string, Lane>();
  for (const record of view.calls.values()) {
    const op = record.call.operation;
    const id = op ? `op:${op.taskId}\u0000${op.key}` : `call:${record.call.id}`;
    const lane = lanes.get(id) ?? { label: record.call.name, sub: op ? `task ${safeId(op.taskId)} · key ${shortId(op.key)}` : 'legacy call', attempts: [] };
    lane.attempts.push(record);
    lanes.set(id, lane);
  }
  return [...lanes.values()];
}

const ms = (t: string | null | undefined): number | null => {
  if (!t) return null;
  const v = Date.parse(t);
  return Number.isFinite(v) ? v : null;
};

function colourOf(record: CallRecord): string {
  if (record.result === null) return '#a15c00';
  const o = record.result.outcome;
  if (o.status === 'succeeded') return '#1a7f37';
  return o.category === 'approval_pending' ? '#6d5bd0' : '#b42318';
}

/** The timeline, or a sentence when the journal carries no recorded times. */
export function timelineSvg(view: SessionView, base: string): string {
  const times = view.history.map((e) => ms(e.recordedAt)).filter((t): t is number => t !== null);
  if (times.length === 0 || view.calls.size === 0) {
    return '<p class="muted">No timeline: this session has no tool calls with recorded times.</p>';
  }
  const lanes = lanesOf(view);
  const anyOpen = lanes.some((l) => l.attempts[l.attempts.length - 1]!.result === null) || view.openApprovals.size > 0;
  const t0 = Math.min(...times);
  const t1 = Math.max(...times, anyOpen ? (ms(view.readAt) ?? 0) : 0);
  const span = Math.max(t1 - t0, 1);
  const x = (t: number) => LABEL + ((t - t0) / span) * PLOT;
  const height = TOP + lanes.length * LANE + 30;
  const parts: string[] = [];
  parts.push(`<svg class="timeline" role="img" aria-label="timeline of the session" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" xmlns="http://www.w3.org/2000/svg">`);
  for (let i = 0; i <= 5; i++) {
    const t = t0 + (span * i) / 5;
    const px = x(t).toFixed(1);
    parts.push(`<line x1="${px}" y1="${TOP - 8}" x2="${px}" y2="${height - 22}" stroke="#e3e6ee"/>`);
    parts.push(`<text x="${px}" y="${height - 8}" text-anchor="middle">+${h(durationText(new Date(t0).toISOString(), new Date(t).toISOString()) ?? '0 ms')}</text>`);
  }
  parts.push(`<text x="${LABEL}" y="14">${h(new Date(t0).toISOString().replace('T', ' '))}</text>`);
  lanes.forEach((lane, i) => {
    const y = TOP + i * LANE;
    const name = lane.label.length > 22 ? `${lane.label.slice(0, 21)}…` : lane.label;
    parts.push(`<text x="8" y="${y + 16}"><tspan font-weight="600">${h(name)}</tspan> · ${lane.attempts.length} attempt${lane.attempts.length === 1 ? '' : 's'}</text>`);
    parts.push(`<text x="8" y="${y + 30}" fill="#5b6478">${h(lane.sub.length > 34 ? `${lane.sub.slice(0, 33)}…` : lane.sub)}</text>`);
    lane.attempts.forEach((record, n) => {
      const next = lane.attempts[n + 1];
      parts.push(attemptSvg(view, base, record, n + 1, y, x, ms(next?.event.recordedAt)));
    });
    // Reviews last, above the bars: a review is journaled when a later host uses it, often as the retry starts.
    for (const record of lane.attempts) {
      for (const r of record.reviews) {
        const t = ms(r.event.recordedAt);
        if (t === null) continue;
        const cx = x(t).toFixed(1);
        const fill = r.review.outcome === 'completed' ? '#1a7f37' : r.review.outcome === 'not_executed' ? '#2456c9' : '#a15c00';
        parts.push(`<path d="M${cx} ${y - 4} l6 7 l-6 7 l-6 -7 z" fill="${fill}" stroke="#fff"><title>${h(`review ${r.review.outcome} by ${r.review.actor} (${r.review.source}): ${r.review.evidence}`)}</title></path>`);
      }
    }
  });
  parts.push('</svg>');
  return parts.join('');
}

/**
 * One attempt. An attempt without a result is drawn to the next attempt of its operation (it was given up for
 * that one) or, for the latest, to the time the page was read.
 */
function attemptSvg(view: SessionView, base: string, record: CallRecord, n: number, y: number, x: (t: number) => number, nextCalled: number | null): string {
  const called = ms(record.event.recordedAt);
  if (called === null) return '';
  const readAt = ms(view.readAt) ?? called;
  const started = ms(record.started?.recordedAt);
  const ended = ms(record.resultEvent?.recordedAt);
  const end = ended ?? nextCalled ?? readAt;
  const href = callHref(base, view.sessionId, record.call.id);
  const out: string[] = [`<a href="${h(href)}" data-call="${h(record.call.id)}"><title>${h(`attempt ${n}: ${record.call.name} (${safeId(record.call.id)})`)}</title>`];
  const bodyStart = started ?? end;
  const approvalWait = record.started?.kind.type === 'tool_started' && record.started.kind.approval !== undefined;
  // Before the body: checks, and an operator's approval when the marker carries one.
  out.push(`<rect x="${x(called).toFixed(1)}" y="${y + 6}" width="${Math.max(x(bodyStart) - x(called), 2).toFixed(1)}" height="14" fill="${approvalWait ? '#d9d3f7' : '#e3e6ee'}" stroke="#9aa3b5"/>`);
  if (started !== null) {
    out.push(`<rect x="${x(started).toFixed(1)}" y="${y + 4}" width="${Math.max(x(end) - x(started), 2).toFixed(1)}" height="18" fill="${colourOf(record)}" opacity="${ended === null ? 0.45 : 0.85}"${ended === null ? ' stroke-dasharray="4 3" stroke="#a15c00"' : ''}/>`);
    out.push(`<line x1="${x(started).toFixed(1)}" y1="${y + 1}" x2="${x(started).toFixed(1)}" y2="${y + 25}" stroke="#1d2433" stroke-width="1.5"/>`);
  }
  if (ended !== null) out.push(`<circle cx="${x(ended).toFixed(1)}" cy="${y + 13}" r="5" fill="${colourOf(record)}" stroke="#fff"/>`);
  const approval = view.openApprovals.get(record.call.id);
  if (approval !== undefined && ended !== null) {
    out.push(`<rect x="${x(ended).toFixed(1)}" y="${y + 9}" width="${Math.max(x(readAt) - x(ended), 2).toFixed(1)}" height="8" fill="#6d5bd0" opacity="0.3"/>`);
  }
  const decided = view.decidedApprovals.get(record.call.id);
  const waiting = approval !== undefined ? 'waiting for a person' : decided !== undefined ? `${decided.decision ?? 'decided'}, waiting for the host` : null;
  const label = labelOf(record, nextCalled !== null && ended === null ? new Date(nextCalled).toISOString() : view.readAt, waiting);
  const labelX = Math.min(x(called) + 2, WIDTH - 260);
  out.push(`<text x="${labelX.toFixed(1)}" y="${y + 36 + ((n - 1) % 2) * 13}" fill="#5b6478">#${n} ${h(label)}${nextCalled !== null && ended === null ? ', then retried' : ''}</text>`);
  out.push('</a>');
  return out.join('');
}

function labelOf(record: CallRecord, readAt: string, waiting: string | null): string {
  const called = record.event.recordedAt;
  const started = record.started?.recordedAt;
  const ended = record.resultEvent?.recordedAt;
  const o = record.result?.outcome;
  const result = o === undefined ? 'no result' : o.status === 'succeeded' ? 'succeeded' : o.category;
  if (started) {
    const ran = durationText(started, ended ?? readAt) ?? '?';
    return ended ? `body ${ran}, ${result}` : `body started, no result for ${ran}`;
  }
  const waited = durationText(called, ended ?? readAt) ?? '?';
  if (waiting !== null) return `${result}, ${waiting}`;
  return ended ? `${result} after ${waited}` : `no result for ${waited}`;
}

/** The legend under the timeline. */
export const TIMELINE_LEGEND = `<p class="legend"><span><i style="background:#e3e6ee;border:1px solid #9aa3b5"></i>before the body (checks)</span><span><i style="background:#d9d3f7"></i>approval wait</span><span><i style="background:#1a7f37"></i>body, succeeded</span><span><i style="background:#b42318"></i>failed</span><span><i style="background:#a15c00;opacity:.5"></i>body, no result</span><span><i style="background:#6d5bd0"></i>approval pending</span><span>◆ review</span><span>| body start</span></p>`;
