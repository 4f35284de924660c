/** UTF-8 byte length of a string, without allocating a buffer. */
export function utf8Length(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

/** The five characters HTML gives a meaning to, as entities: nothing else of `text` changes. */
export function htmlEntities(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

/** Cuts a string to at most `maxBytes` UTF-8 bytes, never splitting a character. */
export function truncateUtf8(s: string, maxBytes: number): string {
  if (utf8Length(s) <= maxBytes) return s;
  let bytes = 0;
  let end = 0;
  for (const ch of s) {
    const size = utf8Length(ch);
    if (bytes + size > maxBytes) break;
    bytes += size;
    end += ch.length;
  }
  return s.slice(0, end);
}

const ANY_SURROGATE = /[\ud800-\udfff]/;

/** The string with every lone surrogate replaced by U+FFFD, so it can be journaled (String#toWellFormed). */
export function toWellFormed(s: string): string {
  if (!ANY_SURROGATE.test(s)) return s;
  return s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd');
}

/** How a value is named in an error message: "undefined", "null", "an array", "an object", "a string", ... */
export function describeValue(v: unknown): string {
  if (v === undefined) return 'undefined';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  // A number or a boolean says which: "got a number (0)" tells what to change; text and objects stay undescribed.
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return `a ${typeof v} (${String(v)})`;
  return typeof v === 'object' ? 'an object' : `a ${typeof v}`;
}

/**
 * A setting that should have been a number, as an error message shows it: a number as itself, text quoted (so "100"
 * does not read as the valid 100), anything else described (describeValue).
 */
export function describeSetting(v: unknown): string {
  if (typeof v === 'number') return String(v);
  if (typeof v === 'string') return JSON.stringify(v.length > 64 ? `${truncateUtf8(v, 64)}…` : v);
  return describeValue(v);
}

/**
 * What a thrown value says, for the journal: an Error's message when it is text, else a description of the value.
 * Never throws, whatever was thrown (an Error whose message is an object, a Proxy, a getter that throws).
 */
export function thrownMessage(error: unknown): string {
  try {
    if (error instanceof Error) {
      const message: unknown = error.message;
      return typeof message === 'string' ? message : `an error whose message is ${describeValue(message)}`;
    }
    return String(error);
  } catch {
    return `a thrown ${typeof error} that cannot be described`;
  }
}

/**
 * Characters that say nothing to a reader on their own: white space, control and format characters (zero-width
 * spaces, joiners, the soft hyphen, tags), unassigned code points and noncharacters, combining marks, the fillers that
 * render as nothing, private-use characters (a glyph only some font gives them), lone surrogates, and the object
 * replacement character (a placeholder for something not there).
 */
const UNSEEN = /[\p{White_Space}\p{Cc}\p{Cf}\p{Cn}\p{Co}\p{Cs}\p{Mn}\p{Me}\u115F\u1160\u3164\uFFA0\u2800\uFFFC\u{1D159}]/gu;

/**
 * Whether `s` holds a character a reader sees. A person's name or evidence made of white space and invisible
 * characters alone says nothing, though `trim()` leaves it non-empty.
 */
export function hasVisibleText(s: string): boolean {
  return s.replace(UNSEEN, '').length > 0;
}
