/**
 * HTML for the console: one escape for every piece of text (journal text is model-controlled: tool names, arguments,
 * error messages), the page layout with its stylesheet and the small inline script that keeps the queue live.
 * Nothing is ever inserted into a page without going through `h`, `lines` (the same, keeping line breaks) or, for
 * what the operator typed into a form that comes back, `formValue`.
 */
import { createHash } from 'node:crypto';
import { escapeControl } from '../escape.js';
import { safeId, shortId } from '../format.js';
import { htmlEntities } from '../../text.js';

/** Text made safe for HTML element content and quoted attribute values; control and bidi characters become visible escapes. */
export function h(value: string | number | null | undefined): string {
  if (value === null || value === undefined) return '';
  return htmlEntities(escapeControl(String(value)));
}

/**
 * An id (a session's, a call's, a task's, an operation key) for people, as the CLI prints it (`safeId`): spaces of
 * every kind and the combining marks of an id not in composed form become visible escapes, so two ids never look
 * alike on a page either, and a page agrees with `jingwei queue` on which session an item belongs to.
 */
export function hId(value: string): string {
  return htmlEntities(safeId(value));
}

/**
 * Text with its line breaks kept, for a block that shows them (a `<pre>`, or an element styled `white-space:
 * pre-wrap`): every other control and bidi character still becomes a visible escape, as with `h`.
 */
export function lines(value: string | null | undefined): string {
  if (value === null || value === undefined) return '';
  return String(value).split(/\r?\n/).map(h).join('\n');
}

/**
 * What an operator typed, put back into a form field (a `<textarea>` or an `<input value>`) exactly: only HTML's
 * own characters become entities, so the browser shows and sends the same text again. Never for journal text.
 */
export function formValue(value: string | null | undefined): string {
  if (value === null || value === undefined) return '';
  return htmlEntities(String(value));
}

/**
 * A path segment (ids are journal text too). A browser resolves the segments `.` and `..` (and their `%2E` forms)
 * before it sends a link, so a session or call whose id is one of them could not be opened: such an id is written
 * `!` and the id, and a `!` that starts any other id is escaped (`%21`), so a segment that starts with a bare `!`
 * is always this form. segValue reads a segment back.
 */
export function seg(value: string): string {
  if (value === '.' || value === '..') return `!${value}`;
  return encodeURIComponent(value).replace(/^!/, '%21');
}

/** The id a path segment written by seg stands for (URIError on a malformed escape). */
export function segValue(raw: string): string {
  return decodeURIComponent(raw.startsWith('!') ? raw.slice(1) : raw);
}

/** A session's page under the console's path `base` (`/<prefix>`). */
export function sessionHref(base: string, sessionId: string): string {
  return `${base}/session/${seg(sessionId)}`;
}

/** A call's page under the console's path `base`. */
export function callHref(base: string, sessionId: string, callId: string): string {
  return `${base}/session/${seg(sessionId)}/call/${seg(callId)}`;
}

/** A long minted id as tables show it (the CLI's `shortId`: its last 8 characters, which are random), escaped as `hId`. */
export function hShortId(id: string): string {
  return htmlEntities(shortId(id));
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
td.mono, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; word-break: break-all; white-space: pre-wrap; }
.doubt { color: var(--warn); font-weight: 600; } .bad { color: var(--bad); } .ok { color: var(--ok); } .muted { color: var(--muted); }
.notice { padding: 10px 14px; border-radius: 6px; margin: 10px 0 16px; border: 1px solid; }
.notice.error { background: #fdecea; border-color: #f3b4ad; color: #7a1c12; }
.notice.done { background: #e8f5ec; border-color: #a7d8b4; color: #14532d; }
.notice.info { background: #eef3fd; border-color: #bcd0f7; color: #1e3a8a; }
.notice.warn { background: #fff7e6; border-color: #f5c97a; color: #7a4a00; }
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
.lines, pre.card { white-space: pre-wrap; }
.legend i { display: inline-block; width: 12px; height: 10px; margin-right: 4px; vertical-align: middle; }
`;

/**
 * The queue's live update: server-sent events (from the address in the table's data-events) replace the parts of the
 * page they name (the tables' bodies, the counts, the links to more) with HTML rendered and escaped by the server.
 */
const LIVE_SCRIPT = `
(() => {
  const body = document.getElementById('queue-rows');
  const state = document.getElementById('live-state');
  if (!body || !window.EventSource) return;
  const source = new EventSource(body.dataset.events);
  source.addEventListener('queue', (e) => {
    const data = JSON.parse(e.data);
    for (const [id, html] of Object.entries(data.parts)) {
      const part = document.getElementById(id);
      if (part) part.innerHTML = html;
    }
    state.innerHTML = '<b>live</b> · updated ' + new Date().toLocaleTimeString();
  });
  source.onerror = () => { state.textContent = 'reconnecting…'; };
})();
`;

/** The Content-Security-Policy source of the one inline script: no other script runs on these pages. */
export const LIVE_SCRIPT_HASH = `'sha256-${createHash('sha256').update(LIVE_SCRIPT).digest('base64')}'`;

export interface PageOptions {
  readonly title: string;
  /** The console's path (`/<prefix>`), or null on a page answered outside it, which must not name it. */
  readonly base: string | null;
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
<body><header>${options.base === null ? '<span class="brand">jingwei console</span>' : `<a class="brand" href="${h(options.base)}/">jingwei console</a><a href="${h(options.base)}/">Queue</a>`}<span class="who">${who}</span></header>
<main>${body}</main>${options.live === true ? `<script>${LIVE_SCRIPT}</script>` : ''}</body></html>`;
}

export type NoticeKind = 'error' | 'done' | 'info';

export function notice(kind: NoticeKind, text: string): string {
  return `<div class="notice ${kind}" role="${kind === 'error' ? 'alert' : 'status'}" data-notice="${kind}">${h(text)}</div>`;
}
