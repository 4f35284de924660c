/**
 * Text helpers for people: short ids, numbers, tables, one-line event summaries. Every piece of journal text goes
 * through `safe` (or `clip`, `shortId`, which use it) before it is shown: control characters, bidi overrides and
 * lone surrogates become visible escapes.
 */
import type { SessionEvent, ToolResult } from '../event/types.js';
import { escapeControl, hex } from './escape.js';
import { describeTarget } from './target.js';
import { visibleLength, type Style } from './io.js';

/** Journal text made safe for a terminal, whole (see escape.ts). */
export function safe(text: string): string {
  return escapeControl(String(text));
}

/**
 * One word of a command line for a person to paste into a POSIX shell: single-quoted unless it holds only characters
 * no shell treats specially, so an id or a name from the journal (`ord-7 $(touch x)`) is never run as a command, and
 * terminal-safe.
 */
export function shellWord(text: string): string {
  const word = /^[\w.,:@/+-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
  return safe(word);
}

/** The store argument of a command line shown to a person: a PostgreSQL URL's password masked (they fill it in), quoted. */
export function storeWord(target: string): string {
  return shellWord(describeTarget(target));
}

/**
 * An id for people, whole: terminal-safe, and unambiguous. A backslash that would read as the start of a printed
 * escape and every space character (one makes a table cell look like two; a no-break or wide one looks like a plain
 * one) are escaped too, and so is every combining mark of an id not in Unicode's composed form (NFC): `cafe` and a
 * combining acute print as `cafe\u0301`, never as the composed `café` of another id. So two ids never print alike,
 * and a reading command given the printed form finds the id it came from.
 */
export function safeId(id: string): string {
  const text = String(id);
  return safe(text.replace(text.normalize('NFC') === text ? ID_ESCAPES : ID_ESCAPES_AND_MARKS, hex));
}

/** An id in a message, in double quotes: as safeId prints it, with a quote in it escaped so the quotes delimit it. */
export function quotedId(id: string): string {
  return `"${safeId(id).replaceAll('"', '\\u0022')}"`;
}

const ID_ESCAPES = /\\(?=u[0-9a-fA-F]{4})|\p{Zs}/gu;
const ID_ESCAPES_AND_MARKS = /\\(?=u[0-9a-fA-F]{4})|\p{Zs}|\p{M}/gu;

/** Ids minted by the library are a prefix and a UUID; tables show the last 8 characters, which are random. */
export function shortId(id: string): string {
  const text = safeId(id);
  return text.length <= 16 ? text : `…${text.slice(-8)}`;
}

export function num(n: number): string {
  return n.toLocaleString('en-US');
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${num(n)} ${n === 1 ? one : many}`;
}

function cut(flat: string, max: number): string {
  const chars = [...flat];
  return chars.length <= max ? flat : `${chars.slice(0, Math.max(1, max - 1)).join('')}…`;
}

const flatten = (text: string): string => String(text).replace(/\r?\n/g, '⏎');

/** Cuts text to `max` visible characters with an ellipsis; newlines become ⏎ so one event stays one line; safe. */
export function clip(text: string, max: number): string {
  return cut(safe(flatten(text)), max);
}

export interface Column {
  readonly header: string;
  readonly align?: 'left' | 'right';
}

function wrap(text: string, width: number): string[] {
  const out: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    let w = word;
    while (visibleLength(w) > width) {
      if (line) {
        out.push(line);
        line = '';
      }
      out.push(w.slice(0, width));
      w = w.slice(width);
    }
    if (!line) line = w;
    else if (visibleLength(line) + 1 + visibleLength(w) <= width) line += ` ${w}`;
    else {
      out.push(line);
      line = w;
    }
  }
  out.push(line);
  return out;
}

/**
 * Aligned columns with a header. With `width` (a terminal's), the last column wraps under itself; without it
 * (a pipe or a file) every row stays on one line, so the output can be grepped.
 */
export function table(columns: readonly Column[], rows: readonly (readonly string[])[], style: Style, options: { width?: number; indent?: string } = {}): string {
  const indent = options.indent ?? '';
  const widths = columns.map((c, i) => Math.max(visibleLength(c.header), ...rows.map((r) => visibleLength(r[i] ?? ''))));
  const pad = (text: string, i: number) => {
    const gap = ' '.repeat(Math.max(0, widths[i]! - visibleLength(text)));
    return columns[i]!.align === 'right' ? gap + text : text + gap;
  };
  const last = columns.length - 1;
  const lead = widths.slice(0, last).reduce((sum, w) => sum + w + 2, 0);
  const room = options.width !== undefined ? options.width - indent.length - lead : undefined;
  const lines: string[] = [];
  lines.push(indent + style.bold(columns.map((c, i) => (i === last ? c.header : pad(c.header, i))).join('  ').trimEnd()));
  for (const row of rows) {
    const head = row.slice(0, last).map((cell, i) => pad(cell, i)).join('  ');
    const tail = row[last] ?? '';
    const parts = room !== undefined && room >= 24 && visibleLength(tail) > room ? wrap(tail, room) : [tail];
    lines.push(`${indent}${head}${last > 0 ? '  ' : ''}${parts[0]}`.trimEnd());
    for (const part of parts.slice(1)) lines.push(`${indent}${' '.repeat(lead)}${part}`);
  }
  return lines.join('\n');
}

/**
 * A paragraph for a person: wrapped to `width` (a terminal's) with `indent` on every line after the first, or one
 * line when there is no width (pipes and files).
 */
export function paragraph(text: string, width: number | undefined, indent = ''): string {
  if (width === undefined || width - indent.length < 30) return text;
  return wrap(text, width - indent.length).join(`\n${indent}`);
}

export function outcomeText(result: ToolResult): string {
  const o = result.outcome;
  if (o.status === 'succeeded') return `succeeded ${clip(o.output, 60)}`;
  // The approval request a result names, whole: what `jingwei approve` and `inspect` take, never cut off with the message.
  const notes = [...(o.retryable ? ['retryable'] : []), ...(result.approval !== undefined ? [`request ${safeId(result.approval.requestId)}`] : [])];
  return `failed ${o.category} ${safe(o.code)}: ${clip(o.message, 60)}${notes.length > 0 ? ` (${notes.join(', ')})` : ''}`;
}

/** One event on one line: what happened, with the ids an operator needs next (shortened; --json has them whole). */
export function eventSummary(event: SessionEvent, style: Style): string {
  const k = event.kind;
  switch (k.type) {
    case 'tool_call': {
      const call = k.call;
      const op = call.operation;
      const parts = [style.bold(safe(call.name).padEnd(15)), `call ${shortId(call.id)}`];
      if (op) {
        parts.push(`${op.contract.effect}/${clip(op.contract.revision, 40)}`, `key ${shortId(op.key)}`);
        if (op.retry) {
          const review = op.retry.review ? `, review ${op.retry.review.outcome} by ${clip(op.retry.review.actor, 40)}` : '';
          parts.push(`retry of ${shortId(op.retry.callId)}${review}`);
        }
      } else parts.push(style.dim('legacy: no operation'));
      parts.push(`args ${clip(JSON.stringify(call.arguments), 60)}`);
      return parts.join('  ');
    }
    case 'tool_started': {
      // An operator's approval this start used: who answered, and which request (the journal's proof of the decision).
      const by = k.approval?.actor !== undefined ? `  approved by ${clip(k.approval.actor, 40)} (request ${shortId(k.approval.requestId)})` : '';
      return `call ${shortId(k.callId)}  body starting${by}`;
    }
    case 'tool_result': {
      const o = k.result.outcome;
      const text = outcomeText(k.result);
      return `call ${shortId(k.result.callId)}  ${o.status === 'succeeded' ? style.green(text) : style.red(text)}`;
    }
    case 'tool_review': {
      const r = k.review;
      const text = `${r.source} review ${r.outcome} by ${clip(r.actor, 40)}: ${clip(r.evidence, 80)}`;
      return `call ${shortId(r.callId)}  ${r.outcome === 'uncertain' ? style.yellow(text) : text}`;
    }
    case 'task_ledger': {
      const l = k.ledger;
      const reason = l.stopReason !== null ? ` (${clip(l.stopReason, 60)})` : '';
      return `task ${clip(l.taskId, 40)}  ${l.change}${reason}  calls ${l.charged.toolCalls}/${l.limits.toolCalls}` +
        `  output ${l.charged.toolOutputBytes}/${l.limits.toolOutputBytes} B  journal ${l.charged.journalBytes}/${l.limits.journalBytes} B`;
    }
    case 'user_message':
    case 'assistant_message':
      return safe(JSON.stringify(cut(flatten(k.text), 100)));
    case 'custom':
      return `${clip(k.plugin, 40)}/${clip(k.kind, 40)}  ${clip(JSON.stringify(k.payload), 80)}`;
    case 'opaque':
      return style.dim(`(kept as is, not interpreted) ${clip(JSON.stringify(k.fields), 80)}`);
  }
}

export function eventType(event: SessionEvent): string {
  return event.kind.type === 'opaque' ? clip(event.kind.wireType, 40) : event.kind.type;
}

/** A recorded time as people read it: `2026-12-01 10:00:00.123Z`; `-` where the event carries none. */
export function timeText(recordedAt: string | null | undefined): string {
  return recordedAt ? recordedAt.replace('T', ' ') : '-';
}

/** How long between two recorded times (`350 ms`, `4.2 s`, `3 min 5 s`, `2 h 10 min`, `3 d 4 h`); null without both. */
export function durationText(from: string | null | undefined, to: string | null | undefined): string | null {
  if (!from || !to) return null;
  const ms = Date.parse(to) - Date.parse(from);
  if (!Number.isFinite(ms) || ms < 0) return null;
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86_400)} d ${Math.floor((s % 86_400) / 3600)} h`;
}

/** An age such as `--older-than 30m`: a number with s, m, h or d (or ms), as milliseconds; null when malformed. */
export function parseAge(text: string): number | null {
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(text.trim());
  if (!m) return null;
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 'ms' | 's' | 'm' | 'h' | 'd'];
  const value = Number(m[1]) * unit;
  return Number.isSafeInteger(value) ? value : null;
}
