/**
 * Where the CLI writes, and how it looks there: colour only on a terminal, never with NO_COLOR set (or TERM=dumb).
 * Commands take an Io rather than touching `process` so the same code runs under the real program and stays honest
 * about which stream is a TTY.
 */
import { escapeOutput } from './escape.js';
export interface OutStream {
  write(text: string): unknown;
  readonly isTTY?: boolean;
  readonly columns?: number;
}

export interface Io {
  readonly stdout: OutStream;
  readonly stderr: OutStream;
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** The NO_COLOR convention: present and not empty disables colour. */
export function colourAllowed(stream: OutStream, env: Io['env']): boolean {
  if (stream.isTTY !== true) return false;
  const noColor = env.NO_COLOR;
  if (noColor !== undefined && noColor !== '') return false;
  return env.TERM !== 'dumb';
}

const CODES = {
  bold: [1, 22],
  dim: [2, 22],
  red: [31, 39],
  green: [32, 39],
  yellow: [33, 39],
  blue: [34, 39],
  magenta: [35, 39],
  cyan: [36, 39],
} as const;
export type StyleName = keyof typeof CODES;

export type Style = Record<StyleName, (text: string) => string> & { readonly enabled: boolean };

export function makeStyle(enabled: boolean): Style {
  const style = { enabled } as { enabled: boolean } & Record<StyleName, (text: string) => string>;
  for (const [name, [open, close]] of Object.entries(CODES) as Array<[StyleName, readonly [number, number]]>) {
    style[name] = enabled ? (text: string) => `\u001b[${open}m${text}\u001b[${close}m` : (text: string) => text;
  }
  return style;
}

/** Removes the escape sequences makeStyle adds, to measure what a terminal shows. */
export function visibleLength(text: string): number {
  return [...text.replace(/\u001b\[[0-9;]*m/g, '')].length;
}

/** A writer bound to one stream with its style. */
export class Printer {
  readonly style: Style;
  constructor(readonly stream: OutStream, env: Io['env']) {
    this.style = makeStyle(colourAllowed(stream, env));
  }

  /** Writes one line; anything unsafe for a terminal that is not the CLI's own colour is escaped (escape.ts). */
  line(text = ''): void {
    this.stream.write(escapeOutput(text) + '\n');
  }

  /** Terminal width when writing to a terminal, else undefined (pipes and files are never wrapped). */
  get width(): number | undefined {
    return this.stream.isTTY === true && typeof this.stream.columns === 'number' && this.stream.columns > 0 ? this.stream.columns : undefined;
  }
}
