/** What a caller hands the runtime, checked before anything is reserved or recorded: names, arguments, keys, limits. */
import { InvalidInputError, JsonParseError, ToolConfigError, ToolPreflightError } from '../errors.js';
import type { ActionContext } from '../event/types.js';
import { hasLoneSurrogate, type OperationKey, type TaskId } from '../ids.js';
import { checkCanonicalJson } from '../json/canonical.js';
import { parseStringifiedJson } from '../json/parse.js';
import type { JsonValue } from '../json/types.js';
import { LIMITS, OPERATION_KEY_LIMITS } from '../limits.js';
import { describeSetting, describeValue, thrownMessage, utf8Length } from '../text.js';
import type { ToolRetryPlan } from './retry-plan.js';
import { toolNameProblem } from './names.js';

export function positiveSetting(field: string, value: number | undefined, fallback: number, max = Number.MAX_SAFE_INTEGER): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0 || value > max) {
    throw new ToolConfigError(`${field} must be a positive integer${max < Number.MAX_SAFE_INTEGER ? ` of at most ${max}` : ''}, got ${describeSetting(value)}`);
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
  // A second read of the caller's object: a getter may answer it otherwise than the check (a cycle, a bigint, a
  // throw). What it gives is what is journaled and run, parsed back below; a failure here is the same refusal.
  let text: string | undefined;
  try {
    text = JSON.stringify(args) as string | undefined;
  } catch (error) {
    throw new ToolPreflightError('arguments_not_serializable', `the arguments are not JSON: ${thrownMessage(error)}`, { cause: error });
  }
  if (typeof text !== 'string') throw new ToolPreflightError('arguments_not_serializable', 'the arguments are not JSON: they have no JSON form');
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
 * A call's `timeoutMs` or `maxOutputBytes` as given, before any ceiling applies: a positive integer, or undefined
 * (the ceiling). Anything else is refused (`invalid_options`); a bridge checks its own such option with it when built.
 */
export function checkLimitOption(field: string, option: unknown): number | undefined {
  if (option === undefined) return undefined;
  if (typeof option !== 'number' || !Number.isSafeInteger(option) || option <= 0) {
    throw new ToolPreflightError('invalid_options', `${field} must be a positive integer, got ${describeSetting(option)}`);
  }
  return option;
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
  const checked = checkLimitOption(field, option);
  if (checked === undefined) return ceiling;
  if (checked > ceiling) {
    throw new ToolPreflightError('invalid_options', `${field} ${checked} is above its ceiling of ${ceiling}; to allow more, raise ${byTool ? toolSetting() : runtimeSetting}`);
  }
  return checked;
}

/**
 * A call's options read once, each field exactly one time, into plain values: a getter or a Proxy in the host's
 * options cannot show one check a value and the attempt another.
 */
export interface CallOptionsRead {
  readonly retry: ToolRetryPlan | undefined;
  readonly timeoutMs: number | undefined;
  readonly maxOutputBytes: number | undefined;
  readonly signal: AbortSignal | undefined;
  /** As given: checked and copied by `checkAction` when an attempt is made (a caller key's replay uses none). */
  readonly action: unknown;
  readonly operationKey: string | undefined;
}

/** Reads a call's options once (see CallOptionsRead); a field that cannot be read, or is not of its type, is refused. */
export function readCallOptions(options: unknown): CallOptionsRead {
  if (typeof options !== 'object' || options === null) throw new ToolPreflightError('invalid_options', `options must be an object, got ${describeValue(options)}`);
  let read: Record<keyof CallOptionsRead, unknown>;
  try {
    const { retry, timeoutMs, maxOutputBytes, signal, action, operationKey } = options as Record<string, unknown>;
    read = { retry, timeoutMs, maxOutputBytes, signal, action, operationKey };
  } catch (error) {
    throw new ToolPreflightError('invalid_options', `the options could not be read: ${describeValue(error)}`, { cause: error });
  }
  if (read.signal !== undefined && !isAbortSignal(read.signal)) {
    throw new ToolPreflightError('invalid_options', `signal must be an AbortSignal, got ${describeValue(read.signal)}`);
  }
  return {
    retry: read.retry as ToolRetryPlan | undefined,
    timeoutMs: read.timeoutMs as number | undefined,
    maxOutputBytes: read.maxOutputBytes as number | undefined,
    signal: read.signal as AbortSignal | undefined,
    action: read.action,
    operationKey: read.operationKey as string | undefined,
  };
}

const abortedGetter = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted')!.get!;

/** A real AbortSignal: its own `aborted` getter accepts it (an object made from its prototype is refused by it). */
export function isAbortSignal(value: unknown): value is AbortSignal {
  if (!(value instanceof AbortSignal)) return false;
  try {
    abortedGetter.call(value);
    return true;
  } catch {
    return false;
  }
}

/**
 * A call's origin, read once into a detached copy by the journal's rules for it (a decision of this gateway's task,
 * a step id, a non-negative action index, an optional provider call id; text without lone surrogates), so what is
 * checked is what is journaled.
 */
export function checkAction(action: unknown, taskId: TaskId): ActionContext | undefined {
  if (action === undefined || action === null) return undefined;
  const bad = (field: string, why: string): never => {
    throw new InvalidInputError(field, why);
  };
  if (typeof action !== 'object') bad('action', `must be an object, got ${describeValue(action)}`);
  let decision: unknown;
  let actionIndex: unknown;
  let providerCallId: unknown;
  let decisionTask: unknown;
  let stepId: unknown;
  try {
    ({ decision, actionIndex, providerCallId } = action as Record<string, unknown>);
    if (typeof decision === 'object' && decision !== null) ({ taskId: decisionTask, stepId } = decision as Record<string, unknown>);
  } catch (error) {
    return bad('action', `could not be read: ${describeValue(error)}`);
  }
  if (typeof decision !== 'object' || decision === null) bad('action.decision', `must be an object, got ${describeValue(decision)}`);
  if (decisionTask !== taskId) bad('action.decision.taskId', `must be the gateway's task ${taskId}`);
  const text = (field: string, v: unknown): string => {
    if (typeof v !== 'string') return bad(field, `must be a string, got ${describeValue(v)}`);
    if (hasLoneSurrogate(v)) bad(field, 'contains a lone surrogate');
    return v;
  };
  const step = text('action.decision.stepId', stepId);
  if (typeof actionIndex !== 'number' || !Number.isSafeInteger(actionIndex) || actionIndex < 0) {
    bad('action.actionIndex', `must be a non-negative integer, got ${describeValue(actionIndex)}`);
  }
  const index = (actionIndex as number) === 0 ? 0 : (actionIndex as number);
  const copy = { decision: { taskId, stepId: step }, actionIndex: index };
  return providerCallId === undefined ? copy : { ...copy, providerCallId: text('action.providerCallId', providerCallId) };
}
