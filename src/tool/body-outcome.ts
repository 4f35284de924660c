/** What a tool body is shown and what its ending is recorded as: the hooks' frozen view, its output's JSON, its failure or panic. */
import type { ToolCall, ToolOperation } from '../event/types.js';
import { deepFreeze } from '../json/freeze.js';
import type { JsonValue } from '../json/types.js';
import { failure, hostFailure, type Failure, type ThrownDescriber } from './admission-checks.js';
import type { PanicContext, PanicDescriber } from './types.js';

/**
 * An attempt's operation, frozen in place as it is made (its contract and retry audit too), so the hooks and the
 * body can be handed it: whatever they do to it cannot change the key the journal, the late-body tracking and a
 * retry's checks read. In place, since a copy frozen for every call cost a durable call's CPU path about 7%.
 */
export function frozenOperation(op: ToolOperation): ToolOperation {
  Object.freeze(op.contract);
  if (op.retry !== null) deepFreeze(op.retry);
  return Object.freeze(op);
}

/** A deep-frozen copy of `call` for the hooks, its arguments parsed again from their checked text. */
export function hookView(call: ToolCall, argsText: string): ToolCall {
  return deepFreeze({
    ...call,
    arguments: JSON.parse(argsText) as JsonValue,
    ...(call.action ? { action: structuredClone(call.action) } : {}),
  });
}

export function serializeOutput(value: unknown, describe: ThrownDescriber): string | Failure {
  try {
    const text = JSON.stringify(value);
    if (typeof text !== 'string') return failure('body_failure', 'tool_output_not_json', 'the tool returned a value with no JSON form');
    return text;
  } catch (error) {
    // Thrown by the output's own code (a toJSON, a getter, a proxy) or by the serializer (a cycle, a bigint): an
    // unexpected throw like a body's, so its text is the host's to redact and the model reads a fixed sentence.
    return failure('body_panic', 'tool_output_panicked', `the tool's output cannot be serialized: ${describe(error)}`);
  }
}

/**
 * The tool's own failure: an Error carrying a string code and a string message that is not a Node system error (nor
 * a TypeError, RangeError or ReferenceError). Read once, here; anything that throws while being read is not one.
 */
function toolFailure(error: unknown): Failure | null {
  try {
    if (!(error instanceof Error) || error instanceof TypeError || error instanceof RangeError || error instanceof ReferenceError) return null;
    const e = error as Error & { code?: unknown; retryable?: unknown; syscall?: unknown; errno?: unknown };
    const { code, message, retryable } = e;
    if (e.syscall !== undefined || typeof e.errno === 'number') return null;
    if (isDriverError(error)) return null;
    if (typeof code !== 'string' || typeof message !== 'string') return null;
    return hostFailure('body_failure', code, message, retryable === true);
  } catch {
    return null;
  }
}

/**
 * A database driver's error (pg's, whose SQLSTATE is its `code`, or better-sqlite3's `SQLITE_…` ones): the
 * server's or the library's words, which may quote the data (a key, a token) the statement carried, not the tool's.
 */
function isDriverError(error: Error): boolean {
  const e = error as Error & { severity?: unknown; routine?: unknown; file?: unknown };
  if (error.name === 'SqliteError' || error.constructor?.name === 'SqliteError') return true;
  return error.constructor?.name === 'DatabaseError' || (typeof e.severity === 'string' && (typeof e.routine === 'string' || typeof e.file === 'string'));
}

/**
 * A ToolBodyError (or any error carrying a string code and message that is not a Node system error nor a driver's) is the tool's own failure,
 * its message written for the model. Anything else is a panic: its detail (through the host's `describePanic`)
 * goes to the journal for operators, and the model reads only a fixed sentence (see bridges/outcome.ts).
 */
export function bodyFailure(error: unknown, describe: ThrownDescriber): Failure {
  const own = toolFailure(error);
  if (own !== null) return own;
  return failure('body_panic', 'tool_body_panicked', describe(error));
}

/** An unexpected throw as the host's `describePanic` describes it for the journal. */
export function panicDetail(error: unknown, describe: PanicDescriber, context: PanicContext): string {
  try {
    const detail = describe(error, context);
    return typeof detail === 'string' ? detail : 'describePanic returned no text';
  } catch (hookError) {
    return `describePanic threw: ${hookError instanceof Error ? hookError.name : typeof hookError}`;
  }
}
