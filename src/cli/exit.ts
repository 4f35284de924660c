/**
 * Exit codes, the same for every command (docs/operator-guide.md lists them):
 *   0  ok
 *   1  findings: a corrupt journal, invalid tool evidence, a rejected import, or (inspect) calls that need a host
 *      decision
 *   2  usage: unknown command or option, a missing or extra argument, no such session or call
 *   3  store or IO: the store cannot be opened or read (missing file, not a jingwei store, locked, unreachable),
 *      a file cannot be read or written, or an unexpected error
 */
import { JingweiError, JournalCorruptError } from '../errors.js';
import { escapeControl } from './escape.js';

export const EXIT = { ok: 0, findings: 1, usage: 2, store: 3 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

export const EXIT_CODES_HELP = `Exit codes:
  0  ok
  1  findings: a corrupt journal, invalid tool evidence, a rejected import, or calls needing a host decision
  2  usage error: bad command, option or argument; no such session or call
  3  store or IO error: the store or a file cannot be opened, read or written`;

/** A mistake in how the program was called. Exit 2; the message says what to do instead. */
export class UsageError extends Error {
  constructor(message: string, readonly hint?: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The store or a file could not be reached. Exit 3. */
export class StoreAccessError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreAccessError';
  }
}

/** Library error codes that are findings about the data rather than failures to reach it. */
const FINDING_CODES = new Set([
  'journal_corrupt',
  'import_rejected',
  'invalid_evidence',
  'binding_changed',
  'session_exists',
  'session_busy',
  'anchor_mismatch',
  'anchor_invalid',
  'export_unrepresentable',
  'decision_stale',
  'call_in_flight',
  'decision_binding_changed',
]);

const USAGE_CODES = new Set(['invalid_input', 'decision_not_found']);

export function exitCodeFor(error: unknown): ExitCode {
  if (error instanceof UsageError) return EXIT.usage;
  if (error instanceof StoreAccessError) return EXIT.store;
  if (error instanceof JingweiError) {
    if (FINDING_CODES.has(error.code)) return EXIT.findings;
    if (USAGE_CODES.has(error.code)) return EXIT.usage;
    return EXIT.store;
  }
  return EXIT.store;
}

/** One line (or a few) for stderr: what went wrong, in the operator's terms; journal text in it is made safe. */
export function describeError(error: unknown): string {
  return describeRaw(error).split('\n').map(escapeControl).join('\n');
}

function describeRaw(error: unknown): string {
  if (error instanceof JournalCorruptError) {
    return `journal corrupt: session ${error.sessionId}, seq ${error.seq}, reason ${error.reason}\n  ${error.message}`;
  }
  if (error instanceof UsageError) return error.hint ? `${error.message}\n${error.hint}` : error.message;
  if (error instanceof JingweiError) return error.message.startsWith(`${error.code}:`) ? error.message : `${error.code}: ${error.message}`;
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? `${code}: ${error.message}` : error.message;
  }
  return String(error);
}
