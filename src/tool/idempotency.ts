import { InvalidInputError } from '../errors.js';
import { checkId } from '../ids.js';
import { checkCanonicalJson, jsonDigest } from '../json/canonical.js';
import { LIMITS } from '../limits.js';
import { utf8Length } from '../text.js';
import type { JsonValue } from '../json/types.js';
import type { ToolReconcileAnswer } from './types.js';
import type { SessionEvent } from '../event/types.js';

/**
 * Which logical action a write belongs to: the body request's session, its operation (taskId, key) and the digest of
 * its arguments. An operation is the session's own (docs/design.md#identity-is-per-session): two sessions may each
 * run a task `checkout` with a key `cart/1`, and their writes are two.
 */
export interface IdempotencyScope {
  readonly sessionId: string;
  readonly taskId: string;
  readonly key: string;
  readonly argumentsDigest: string;
}

/** What `run` returns: the write's result, and whether it was replayed from an earlier attempt's record. */
export interface IdempotentOutcome<T> {
  readonly result: T;
  readonly replayed: boolean;
}

/** A ToolBodyRequest and a ToolReconcileRequest satisfy this: what deduplication needs of them. */
export interface IdempotencyRequest {
  readonly sessionId: string;
  readonly operation: { readonly taskId: string; readonly key: string };
  readonly arguments: JsonValue;
}

/** The operation a request names, checked: (sessionId, taskId, key). */
function operationOf(request: { readonly sessionId: string; readonly operation: { readonly taskId: string; readonly key: string } }) {
  if (typeof request !== 'object' || request === null || !request.operation) {
    throw new InvalidInputError('request.operation', 'is required: deduplicate on (sessionId, taskId, key), never on the call id');
  }
  return {
    sessionId: checkId<string>('request.sessionId', request.sessionId),
    taskId: checkId<string>('operation.taskId', request.operation.taskId),
    key: checkId<string>('operation.key', request.operation.key),
  };
}

/** Derives the dedup scope from a body request: its (sessionId, taskId, key) and the digest of its canonical arguments. */
export function idempotencyScope(request: IdempotencyRequest): IdempotencyScope {
  const operation = operationOf(request);
  const bytes = utf8Length(operation.sessionId) + utf8Length(operation.taskId) + utf8Length(operation.key);
  if (bytes > LIMITS.maxIdempotencyIdBytes) {
    throw new InvalidInputError(
      'request',
      `its session id, task id and operation key take ${bytes} bytes together, over the ${LIMITS.maxIdempotencyIdBytes} a dedup record is keyed on; nothing was run or recorded`,
    );
  }
  return { ...operation, argumentsDigest: jsonDigest(request.arguments) };
}

/** What externalIdempotencyKey names an operation by: its ids and its origin (ToolBodyRequest.operationOrigin). */
export interface ExternalKeyRequest {
  readonly sessionId: string;
  readonly operationOrigin: string;
  readonly operation: { readonly taskId: string; readonly key: string };
}

/**
 * The key to hand an external API that deduplicates by its own idempotency key (Stripe and the like): `jw-` and the
 * base64url SHA-256 of the canonical JSON `[operationOrigin, sessionId, taskId, key]`, 46 characters of
 * `[A-Za-z0-9_-]`. The same on every attempt of one operation, different for every other operation: in any session,
 * and in another journal holding a session of the same id (the origin, the event id minted for the operation's first
 * attempt, tells them apart); within every provider's length limit whatever the ids' length.
 */
export function externalIdempotencyKey(request: ExternalKeyRequest): string {
  const { sessionId, taskId, key } = operationOf(request);
  const origin = checkId<string>('request.operationOrigin', (request as { operationOrigin?: unknown }).operationOrigin);
  return `jw-${Buffer.from(jsonDigest([origin, sessionId, taskId, key]), 'hex').toString('base64url')}`;
}

/**
 * The origin of operation (taskId, key) in `history`: the event id of its first attempt's call, or undefined when the
 * history holds no attempt of it. What the runtime hands the operation's bodies and reconcilers as `operationOrigin`.
 */
export function operationOriginIn(history: readonly SessionEvent[], operation: { readonly taskId: string; readonly key: string }): string | undefined {
  for (const e of history) {
    if (e.kind.type === 'tool_call' && e.kind.call.operation?.taskId === operation.taskId && e.kind.call.operation.key === operation.key) return e.eventId;
  }
  return undefined;
}

/**
 * A stored dedup record. `legacy`: written before records named their session (an older version of the helpers),
 * so it answers for its (taskId, key) in every session, as it did then: a write committed before an upgrade is
 * replayed after it, never repeated.
 */
export interface IdempotencyRecord {
  readonly digest: string;
  readonly result: JsonValue;
  readonly legacy: boolean;
}

/**
 * The digest column's prefix on the row of an attempt its helper has not finished. Each attempt writes the row so
 * marked in its transaction before the write runs, and replaces the mark with the record once the write has
 * returned; so the mark is seen outside that transaction only when the write ended the transaction itself: its own
 * `COMMIT` commits the mark with what it wrote, even if the process dies at once or another writer comes next.
 * Whether everything the write meant to write committed can then no longer be told.
 */
const UNFINISHED = 'ended-by-write:';

/** The digest column of the row an attempt writes before its write runs (UNFINISHED). */
export const unfinishedDigest = (scope: IdempotencyScope): string => `${UNFINISHED}${scope.argumentsDigest}`;

/** Whether a record's digest is an attempt's mark: its write ended the helper's transaction itself. */
export const endedByWrite = (digest: string): boolean => digest.startsWith(UNFINISHED);

/** What a person has to do about an operation whose write ended the helper's transaction itself. */
export function endedByWriteText(scope: IdempotencyScope, table: string): string {
  return `The operation is marked so in ${table} (session ${scope.sessionId}, task ${scope.taskId}, key ${scope.key}): every attempt of it is refused ` +
    'and its reconciler answers unknown until a person has checked the business data and deleted that row';
}

/** Refuses a write that calls its helper again for the operation it is writing: the inner call runs nothing. */
export function refuseReentry(scope: IdempotencyScope): never {
  throw new InvalidInputError('write', `calls the helper again for the operation it is writing (session ${scope.sessionId}, task ${scope.taskId}, key ${scope.key}); the inner call ran nothing`);
}

/** Refuses an attempt of an operation an earlier attempt's write left marked (endedByWrite): nothing runs. */
export function refuseEndedByWrite(scope: IdempotencyScope, table: string): never {
  throw new InvalidInputError('request', `an earlier attempt's write ended the helper's transaction itself, so whether it committed is unknown; nothing was run. ${endedByWriteText(scope, table)}`);
}

/** What a dedup record says about one operation: the idempotency helpers' reconcilers answer from it alone. */
export function reconcileAnswer(
  scope: IdempotencyScope,
  record: IdempotencyRecord | null,
  table: string,
): ToolReconcileAnswer {
  const where = record?.legacy
    ? `dedup record for task ${scope.taskId}, key ${scope.key} (written before records named their session)`
    : `dedup record for session ${scope.sessionId}, task ${scope.taskId}, key ${scope.key}`;
  if (record === null) return { outcome: 'not_executed', evidence: `no ${where}: the write and its record commit together, so it never committed` };
  if (endedByWrite(record.digest)) {
    return { outcome: 'unknown', evidence: `an attempt's write ended the helper's transaction itself: whether it committed is unknown (${endedByWriteText(scope, table)})` };
  }
  if (record.digest !== scope.argumentsDigest) return { outcome: 'unknown', evidence: `the ${where} holds other arguments` };
  return { outcome: 'completed', evidence: `the ${where} holds the committed result`, output: record.result };
}

/**
 * The JSON text of a write's result, for the dedup record. Only JSON data is recorded, checked as arguments are (the
 * canonical-JSON rule): JSON.stringify would record a Map as `{}`, NaN as null, a Date as its text, and drop
 * undefined fields, so every replay would return something other than the first attempt did. Anything else is
 * InvalidInputError, thrown inside the helper's transaction so that nothing of the write commits.
 */
export function recordedResultText(result: unknown): string {
  try {
    checkCanonicalJson(result);
  } catch (error) {
    throw new InvalidInputError('result', `the write must return JSON data, which every replay returns as it was: ${error instanceof Error ? error.message : String(error)}; nothing was recorded`);
  }
  return JSON.stringify(result);
}

/** Refuses a `write` that is not a function before anything is opened. */
export function checkWrite(write: unknown): void {
  if (typeof write !== 'function') throw new InvalidInputError('write', `must be a function, got ${write === null ? 'null' : typeof write}`);
}

/**
 * Refuses an `async function` as a synchronous helper's write before anything is opened: what it writes after its
 * first `await` would run after the transaction, without the dedup record. (A plain function that returns a promise
 * is caught after it returns.)
 */
export function checkSynchronousWrite(write: unknown): void {
  checkWrite(write);
  if ((write as { constructor?: { name?: unknown } }).constructor?.name === 'AsyncFunction') {
    throw new InvalidInputError('write', 'must be synchronous, not an async function: what it wrote after an await would commit without the dedup record; nothing was run or recorded');
  }
}
