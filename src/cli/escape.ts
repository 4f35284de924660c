/**
 * Terminal safety for text that comes from a journal (tool names, arguments, outputs, error messages, ids): every
 * character that could move the cursor, erase or hide text, or reorder what a person reads is shown as a visible
 * `\uXXXX` escape instead. That is C0 controls, DEL, C1 controls, the bidirectional and other invisible format
 * characters (a joiner or variation selector only where an emoji or a script needs it stays), the line and paragraph
 * separators and lone surrogates. The same escape is valid inside a JSON string, so JSON output escaped this way
 * still parses to the same value.
 */

/**
 * Characters never written raw. Newline and ESC are handled separately below. Beyond the controls, every character
 * that renders as nothing by default (so `victim\u200D-1` reads as `victim-1`, and tag characters carry text nobody
 * sees): soft hyphen, combining grapheme joiner, Hangul fillers, Khmer and Mongolian invisibles, the zero-width and
 * bidi marks, the invisible operators, braille blank, variation selectors, interlinear annotations and the unassigned
 * specials beside them, shorthand, hieroglyph and musical format controls, and all of U+E0000–E0FFF (the tag
 * characters, the variation selectors supplement, and the unassigned rest, which renders as nothing). Astral ones
 * are matched as their surrogate pairs.
 */
const UNSAFE =
  /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u115f\u1160\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\u2800\u3164\ufeff\uffa0\ufff0-\ufffb]|\u034f|\u17b4|\u17b5|[\u180b-\u180d]|\u180f|[\ufe00-\ufe0f]|\ud804[\udcbd\udccd]|\ud82f[\udca0-\udca3]|\ud80d[\udc30-\udc3f]|\ud834[\udd73-\udd7a]|[\udb40-\udb43][\udc00-\udfff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** Every UTF-16 unit of `c` as a `\uXXXX` escape: valid inside a JSON string, and visible. */
export const hex = (c: string): string => {
  let out = '';
  for (let i = 0; i < c.length; i++) out += `\\u${c.charCodeAt(i).toString(16).toUpperCase().padStart(4, '0')}`;
  return out;
};

const EMOJI_BEFORE = /\p{Extended_Pictographic}(?:\uFE0F|\uD83C[\uDFFB-\uDFFF])?$/u;
const EMOJI_AFTER = /^\p{Extended_Pictographic}/u;
/** Letters of scripts that join or break ligatures with ZWJ and ZWNJ (Arabic, Persian, the Indic scripts...). */
const JOINING_LETTER_BEFORE = /(?![\p{Script=Latin}\p{Script=Greek}\p{Script=Cyrillic}])\p{L}\p{M}*$/u;
const JOINING_LETTER_AFTER = /^(?![\p{Script=Latin}\p{Script=Greek}\p{Script=Cyrillic}])\p{L}/u;

/**
 * Whether the joiner or variation selector at `offset` does the work it exists for, and so stays: ZWJ inside an emoji
 * sequence, ZWJ and ZWNJ between two letters of a script that uses them, the text and emoji variation selectors after
 * an emoji, or a keycap's digit before its enclosing keycap. Anywhere else (an id, between Latin letters, after a
 * hyphen) it only hides something.
 */
function doesItsWork(c: string, offset: number, text: string): boolean {
  const before = text.slice(Math.max(0, offset - 8), offset);
  const after = text.slice(offset + 1, offset + 3);
  if (c === '\u200d') return (EMOJI_BEFORE.test(before) && EMOJI_AFTER.test(after)) || (JOINING_LETTER_BEFORE.test(before) && JOINING_LETTER_AFTER.test(after));
  if (c === '\u200c') return JOINING_LETTER_BEFORE.test(before) && JOINING_LETTER_AFTER.test(after);
  if (c === '\ufe0e' || c === '\ufe0f') return /\p{Extended_Pictographic}$/u.test(before) || (/[0-9#*]$/.test(before) && text[offset + 1] === '\u20e3');
  return false;
}

/** Every unsafe character of `text` (newlines included) as a visible `\uXXXX` escape. */
export function escapeControl(text: string): string {
  return text.replace(UNSAFE, (c, offset: number) => (doesItsWork(c, offset, text) ? c : hex(c)));
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
    return doesItsWork(c, offset, text) ? c : hex(c);
  });
}
