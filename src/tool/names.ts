/** The one rule for tool names: the runtime refuses a name that breaks it, and an MCP import skips such a tool. */
import { hasLoneSurrogate } from '../ids.js';
import { LIMITS } from '../limits.js';
import { utf8Length } from '../text.js';

/** Control characters, bidi and other invisible format overrides: never part of a tool name. */
const NAME_FORBIDDEN = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb]/;

export type ToolNameProblem = { readonly code: 'empty_name' | 'name_too_long' | 'malformed_name'; readonly reason: string };

/** Why `name` is not a tool name (empty, over LIMITS.maxToolNameBytes, malformed UTF-16, a control or format character), or null. */
export function toolNameProblem(name: string): ToolNameProblem | null {
  if (name.length === 0) return { code: 'empty_name', reason: 'is empty' };
  const bytes = utf8Length(name);
  if (bytes > LIMITS.maxToolNameBytes) return { code: 'name_too_long', reason: `is ${bytes} bytes, at most ${LIMITS.maxToolNameBytes} allowed` };
  if (hasLoneSurrogate(name)) return { code: 'malformed_name', reason: 'contains a lone surrogate (malformed UTF-16)' };
  const bad = NAME_FORBIDDEN.exec(name);
  if (bad) {
    return { code: 'malformed_name', reason: `contains the control or format character U+${bad[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}` };
  }
  return null;
}
