/**
 * Exit codes, the same for every command (docs/operator-guide.md lists them):
 *   0  ok
 *   1  findings: a corrupt journal, invalid tool evidence, a rejected import, or (inspect) calls that need a host
 *      decision
 *   2  usage: unknown command or option, a missing or extra argument, no such session or call
 *   3  store or IO: the store cannot be opened or read (missing file, not a jingwei store, a damaged file, locked,
 *      unreachable), a file cannot be read or written, or an unexpected error
 */
import { JingweiError, JournalCorruptError } from '../errors.js';
import { escapeControl, hex } from './escape.js';

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
  'decision_identical',
]);

const USAGE_CODES = new Set(['invalid_input', 'decision_not_found']);

export function exitCodeFor(error: unknown): ExitCode {
  if (error instanceof UsageError) return EXIT.usage;
  if (error instanceof StoreAccessError) return EXIT.store;
  // A store whose file is damaged as a whole cannot be read: exit 3, as for a file that is not a journal at all.
  if (storeWide(error)) return EXIT.store;
  if (error instanceof JingweiError) {
    if (FINDING_CODES.has(error.code)) return EXIT.findings;
    if (USAGE_CODES.has(error.code)) return EXIT.usage;
    return EXIT.store;
  }
  return EXIT.store;
}

/** A failure as the JSON document a `--json` command prints instead of its result. */
export function errorDocument(error: unknown): { ok: false; error: Record<string, unknown> } {
  const code = error instanceof UsageError ? 'usage' : error instanceof StoreAccessError ? 'store_access'
    : error instanceof JingweiError ? error.code : 'unexpected';
  const detail = error instanceof JournalCorruptError
    ? { ...(storeWide(error) ? {} : { session_id: error.sessionId }), ...(error.seq >= 0 ? { seq: error.seq } : {}), reason: error.reason }
    : {};
  return { ok: false, error: { code, exit_code: exitCodeFor(error), message: describeRaw(error), ...detail } };
}

/**
 * One line (or a few) for stderr: what went wrong, in the operator's terms; journal text in it is made safe. A message
 * that is not the CLI's own names ids as they were given, so it is escaped as the CLI prints ids: every space but the
 * plain one, and a backslash that would read as an escape (`s1` with a no-break space, and `s1\u00A0` typed as ten
 * characters, must not read alike). The CLI's own messages print their ids escaped already.
 */
export function describeError(error: unknown): string {
  const raw = describeRaw(error);
  return error instanceof UsageError ? safeLines(raw) : libraryMessage(raw);
}

/** A message of the library's, which names ids as they were given, escaped as the CLI prints ids (describeError). */
export function libraryMessage(text: string): string {
  return safeLines(text.replace(PRINTED_ESCAPE, '\\u005C'));
}

/** Each line terminal-safe, with every space but the plain one escaped. */
const safeLines = (text: string): string => text.split('\n').map((line) => escapeControl(line).replace(OTHER_SPACES, hex)).join('\n');

const OTHER_SPACES = /(?! )\p{Zs}/gu;
const PRINTED_ESCAPE = /\\(?=u[0-9a-fA-F]{4})/g;

/** Damage to the store's file as a whole (the library names no session for it). */
const storeWide = (error: unknown): boolean => error instanceof JournalCorruptError && error.seq < 0 && error.sessionId === '*';

/** The part of a JournalCorruptError's message after "journal of session … is corrupt at seq … (reason): ". */
const corruptDetail = (error: JournalCorruptError): string => error.message.replace(/^journal of session .* is corrupt at seq -?\d+ \([a-z_]+\): /s, '');

function describeRaw(error: unknown): string {
  // Damage to the store's file itself, found before any one session was read (a truncated or overwritten database).
  if (storeWide(error)) return `the store's file is damaged (reason storage): ${corruptDetail(error as JournalCorruptError)}`;
  // Damage found in a session's rows but at no one event (a malformed stored number).
  if (error instanceof JournalCorruptError && error.seq < 0) return `journal corrupt: session ${error.sessionId}, reason ${error.reason}\n  ${corruptDetail(error)}`;
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
