/**
 * Terminal safety for text that comes from a journal (tool names, arguments, outputs, error messages, ids): every
 * character that could move the cursor, erase or hide text, or reorder what a person reads is shown as a visible
 * `\uXXXX` escape instead. That is C0 controls, DEL, C1 controls, the bidirectional and other invisible format
 * overrides (joiners, which emoji need, stay), the line and paragraph separators and lone surrogates. The same escape is valid inside a JSON string,
 * so JSON output escaped this way still parses to the same value.
 */

/** Characters never written raw. Newline and ESC are handled separately below. */
const UNSAFE =
  /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b\u200e\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

const hex = (c: string): string => `\\u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;

/** Every unsafe character of `text` (newlines included) as a visible `\uXXXX` escape. */
export function escapeControl(text: string): string {
  return text.replace(UNSAFE, hex);
}

/** The colour sequences the CLI itself writes (see makeStyle); no other escape sequence reaches a terminal. */
const OWN_STYLE = /^\u001b\[(?:1|2|22|3[1-6]|39)m/;

/**
 * The last line of defence for a whole line about to be written: newlines and the CLI's own colour sequences stay,
 * everything else unsafe is escaped (journal text is already escaped where it is formatted).
 */
export function escapeOutput(text: string): string {
  return text.replace(UNSAFE, (c, offset: number) => {
    if (c === '\n') return c;
    if (c === '\u001b' && OWN_STYLE.test(text.slice(offset, offset + 5))) return c;
    return hex(c);
  });
}
