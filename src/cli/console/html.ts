/**
 * HTML for the console: one escape for every piece of text (journal text is model-controlled: tool names, arguments,
 * error messages), the page layout with its stylesheet and the small inline script that keeps the queue live.
 * Nothing is ever inserted into a page without going through `h` (or `attr`).
 */
import { createHash } from 'node:crypto';
import { escapeControl } from '../escape.js';

/** Text made safe for HTML element content and quoted attribute values; control and bidi characters become visible escapes. */
export function h(value: string | number | null | undefined): string {
  if (value === null || value === undefined) return '';
  return escapeControl(String(value))
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** A path segment (ids are journal text too). */
export function seg(value: string): string {
  return encodeURIComponent(value);
}

export function shortText(id: string): string {
  return id.length <= 16 ? id : `…${id.slice(-8)}`;
}

const STYLE = `
:root { color-scheme: light; --fg:#1d2433; --muted:#5b6478; --line:#d8dce6; --warn:#a15c00; --bad:#b42318; --ok:#1a7f37; --accent:#2456c9; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, sans-serif; color: var(--fg); margin: 0; background: #f6f7fa; }
header { background: #1d2433; color: #fff; padding: 10px 24px; display: flex; gap: 24px; align-items: baseline; }
header a { color: #fff; text-decoration: none; } header .brand { font-weight: 700; }
header .who { margin-left: auto; color: #c9d1e3; font-size: 13px; }
main { padding: 16px 24px 40px; max-width: 1280px; }
h1 { font-size: 20px; margin: 4px 0 12px; } h2 { font-size: 16px; margin: 22px 0 8px; }
table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: #eef0f5; font-weight: 600; font-size: 12px; text-transform: uppercase; letter-spacing: .03em; color: var(--muted); }
td.mono, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; word-break: break-all; }
.doubt { color: var(--warn); font-weight: 600; } .bad { color: var(--bad); } .ok { color: var(--ok); } .muted { color: var(--muted); }
.notice { padding: 10px 14px; border-radius: 6px; margin: 10px 0 16px; border: 1px solid; }
.notice.error { background: #fdecea; border-color: #f3b4ad; color: #7a1c12; }
.notice.done { background: #e8f5ec; border-color: #a7d8b4; color: #14532d; }
.notice.info { background: #eef3fd; border-color: #bcd0f7; color: #1e3a8a; }
form.filters { display: flex; gap: 10px; flex-wrap: wrap; align-items: end; margin-bottom: 12px; }
label { display: block; font-size: 12px; color: var(--muted); }
input, select, textarea { font: inherit; padding: 4px 6px; border: 1px solid var(--line); border-radius: 4px; background: #fff; }
textarea { width: 100%; min-height: 60px; }
button { font: inherit; padding: 5px 14px; border-radius: 4px; border: 1px solid var(--accent); background: var(--accent); color: #fff; cursor: pointer; }
button.secondary { background: #fff; color: var(--accent); } button.danger { background: var(--bad); border-color: var(--bad); }
dl.fields { display: grid; grid-template-columns: 170px 1fr; gap: 4px 12px; background: #fff; border: 1px solid var(--line); padding: 12px; margin: 0; }
dl.fields dt { color: var(--muted); } dl.fields dd { margin: 0; }
.card { background: #fff; border: 1px solid var(--line); padding: 12px 14px; margin: 10px 0; border-radius: 4px; }
.live { font-size: 12px; color: var(--muted); } .live b { color: var(--ok); }
svg.timeline { background: #fff; border: 1px solid var(--line); }
svg.timeline text { font: 11px system-ui, sans-serif; fill: var(--fg); }
.legend span { display: inline-block; margin-right: 14px; font-size: 12px; color: var(--muted); }
.legend i { display: inline-block; width: 12px; height: 10px; margin-right: 4px; vertical-align: middle; }
`;

/** The queue's live update: server-sent events replace the table body with rows rendered (and escaped) by the server. */
const LIVE_SCRIPT = `
(() => {
  const body = document.getElementById('queue-rows');
  const state = document.getElementById('live-state');
  if (!body || !window.EventSource) return;
  const source = new EventSource('/events' + location.search);
  source.addEventListener('queue', (e) => {
    const data = JSON.parse(e.data);
    body.innerHTML = data.rows;
    document.getElementById('approval-rows').innerHTML = data.approvals;
    document.getElementById('queue-count').textContent = data.count;
    state.innerHTML = '<b>live</b> · updated ' + new Date().toLocaleTimeString();
  });
  source.onerror = () => { state.textContent = 'reconnecting…'; };
})();
`;

/** The Content-Security-Policy source of the one inline script: no other script runs on these pages. */
export const LIVE_SCRIPT_HASH = `'sha256-${createHash('sha256').update(LIVE_SCRIPT).digest('base64')}'`;

export interface PageOptions {
  readonly title: string;
  readonly actor: string | null;
  readonly readOnly: boolean;
  readonly live?: boolean;
}

/** A whole page: `body` is already HTML (built with `h`). */
export function page(options: PageOptions, body: string): string {
  const who = options.readOnly ? 'read-only: nothing can be decided here' : `deciding as <b>${h(options.actor)}</b>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${h(options.title)} · jingwei console</title><style>${STYLE}</style></head>
<body><header><a class="brand" href="/">jingwei console</a><a href="/">Queue</a><span class="who">${who}</span></header>
<main>${body}</main>${options.live === true ? `<script>${LIVE_SCRIPT}</script>` : ''}</body></html>`;
}

export type NoticeKind = 'error' | 'done' | 'info';

export function notice(kind: NoticeKind, text: string): string {
  return `<div class="notice ${kind}" role="${kind === 'error' ? 'alert' : 'status'}" data-notice="${kind}">${h(text)}</div>`;
}
