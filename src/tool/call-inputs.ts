/** What a caller hands the runtime, checked before anything is reserved or recorded: names, arguments, keys, limits. */
import { JsonParseError, ToolConfigError, ToolPreflightError } from '../errors.js';
import type { OperationKey } from '../ids.js';
import { checkCanonicalJson } from '../json/canonical.js';
import { parseStringifiedJson } from '../json/parse.js';
import type { JsonValue } from '../json/types.js';
import { LIMITS, OPERATION_KEY_LIMITS } from '../limits.js';
import { utf8Length } from '../text.js';
import { toolNameProblem } from './names.js';

export function positiveSetting(field: string, value: number | undefined, fallback: number, max = Number.MAX_SAFE_INTEGER): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0 || value > max) {
    throw new ToolConfigError(`${field} must be a positive integer${max < Number.MAX_SAFE_INTEGER ? ` of at most ${max}` : ''}, got ${String(value)}`);
  }
  return value;
}

/**
 * Checks names and arguments before anything is reserved or recorded. Returns the arguments' JSON text and the
 * value parsed back from it under the journal's bounds (plain JSON, detached from the caller's object).
 */
export function preflight(name: unknown, args: unknown): { text: string; value: JsonValue; bytes: number } {
  if (typeof name !== 'string') throw new ToolPreflightError('empty_name', 'the tool name is empty');
  const problem = toolNameProblem(name);
  if (problem !== null) {
    throw new ToolPreflightError(problem.code, `the tool name ${problem.reason}${problem.code === 'malformed_name' ? '; use plain text' : ''}`);
  }
  try {
    checkCanonicalJson(args);
  } catch (error) {
    throw new ToolPreflightError('arguments_not_serializable', `the arguments are not JSON: ${(error as Error).message}`, { cause: error });
  }
  const text = JSON.stringify(args);
  const bytes = utf8Length(text);
  if (bytes > LIMITS.maxArgumentsBytes) {
    throw new ToolPreflightError('arguments_too_large', `the arguments are ${bytes} bytes, at most ${LIMITS.maxArgumentsBytes} allowed`);
  }
  try {
    return { text, value: parseStringifiedJson(text, { maxDepth: LIMITS.maxArgumentsDepth }), bytes };
  } catch (error) {
    if (error instanceof JsonParseError && error.reason === 'unsafe_integer') {
      throw new ToolPreflightError('unsafe_integer', `the arguments cannot be journaled exactly: ${error.message}`, { cause: error });
    }
    throw new ToolPreflightError('arguments_not_serializable', `the arguments cannot be journaled: ${(error as Error).message}`, { cause: error });
  }
}

/** A caller's operation key: plain, bounded text (docs/design.md#caller-keys-and-replay). */
export function checkOperationKey(key: unknown): OperationKey {
  if (typeof key !== 'string') throw new ToolPreflightError('invalid_options', `operationKey must be a string, got ${typeof key}`);
  if (key.length === 0 || key.length > OPERATION_KEY_LIMITS.maxBytes) {
    throw new ToolPreflightError('invalid_options', `operationKey must be 1 to ${OPERATION_KEY_LIMITS.maxBytes} characters, got ${key.length}`);
  }
  if (!OPERATION_KEY_LIMITS.pattern.test(key)) {
    throw new ToolPreflightError('invalid_options', 'operationKey may hold letters, digits and ._:/@- only, starting with a letter or digit');
  }
  return key as OperationKey;
}

/**
 * The effective limit of a call: its option, which may only tighten the ceiling (a positive integer at most the
 * ceiling; above it the call is refused, never silently cut, naming the setting that raises it), or the ceiling.
 * The ceiling is the lower of the runtime's limit and the tool's; the tool's setting is named only in a refusal.
 */
export function effectiveLimit(
  field: string,
  option: number | undefined,
  runtimeValue: number,
  runtimeSetting: string,
  toolValue: number | null | undefined,
  toolSetting: () => string,
): number {
  const byTool = typeof toolValue === 'number' && toolValue < runtimeValue;
  const ceiling = byTool ? toolValue : runtimeValue;
  if (option === undefined) return ceiling;
  if (typeof option !== 'number' || !Number.isSafeInteger(option) || option <= 0) {
    throw new ToolPreflightError('invalid_options', `${field} must be a positive integer, got ${String(option)}`);
  }
  if (option > ceiling) {
    throw new ToolPreflightError('invalid_options', `${field} ${option} is above its ceiling of ${ceiling}; to allow more, raise ${byTool ? toolSetting() : runtimeSetting}`);
  }
  return option;
}
