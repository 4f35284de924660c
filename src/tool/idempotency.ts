import { InvalidInputError } from '../errors.js';
import { checkId } from '../ids.js';
import { jsonDigest } from '../json/canonical.js';
import type { JsonValue } from '../json/types.js';
import type { ToolReconcileAnswer } from './types.js';

/** Which logical action a write belongs to: the body request's operation scope and its arguments. */
export interface IdempotencyScope {
  readonly taskId: string;
  readonly key: string;
  readonly argumentsDigest: string;
}

/** What `run` returns: the write's result, and whether it was replayed from an earlier attempt's record. */
export interface IdempotentOutcome<T> {
  readonly result: T;
  readonly replayed: boolean;
}

/** A ToolBodyRequest satisfies this: what deduplication needs of it. */
export interface IdempotencyRequest {
  readonly operation: { readonly taskId: string; readonly key: string };
  readonly arguments: JsonValue;
}

/** Derives the dedup scope from a body request: its (taskId, key) and the digest of its canonical arguments. */
export function idempotencyScope(request: IdempotencyRequest): IdempotencyScope {
  if (!request?.operation) throw new InvalidInputError('request.operation', 'is required: deduplicate on (taskId, key), never on the call id');
  return {
    taskId: checkId<string>('operation.taskId', request.operation.taskId),
    key: checkId<string>('operation.key', request.operation.key),
    argumentsDigest: jsonDigest(request.arguments),
  };
}

/** The key to hand an external API that deduplicates by its own idempotency key (Stripe and the like). */
export function externalIdempotencyKey(request: { readonly operation: { readonly taskId: string; readonly key: string } }): string {
  return `${request.operation.taskId}:${request.operation.key}`;
}

/** What a dedup record says about one operation: the idempotency helpers' reconcilers answer from it alone. */
export function reconcileAnswer(
  taskId: string,
  key: string,
  argumentsDigest: string,
  record: { readonly digest: string; readonly result: JsonValue } | null,
): ToolReconcileAnswer {
  const where = `dedup record for task ${taskId}, key ${key}`;
  if (record === null) return { outcome: 'not_executed', evidence: `no ${where}: the write and its record commit together, so it never committed` };
  if (record.digest !== argumentsDigest) return { outcome: 'unknown', evidence: `the ${where} holds other arguments` };
  return { outcome: 'completed', evidence: `the ${where} holds the committed result`, output: record.result };
}
