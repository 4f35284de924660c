import { InvalidInputError } from '../errors.js';
import { TOOL_EFFECTS, type ToolEffect, type ToolEffectContract } from '../event/types.js';
import { checkId } from '../ids.js';
import type { JsonObject } from '../json/types.js';
import { LIMITS } from '../limits.js';
import { describeSetting } from '../text.js';

/** A JSON Schema (draft 2020-12) object describing a tool's arguments. */
export type JsonSchema = JsonObject | boolean;

/** What a tool promises when nothing is declared: an unknown effect, which recovery treats as non-idempotent. */
export const DEFAULT_CONTRACT: ToolEffectContract = Object.freeze({ effect: 'unknown', revision: 'unspecified' });

function positiveInteger(field: string, value: unknown, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0 || value > max) {
    throw new InvalidInputError(field, `must be a positive integer${max < Number.MAX_SAFE_INTEGER ? ` of at most ${max}` : ''}, got ${describeSetting(value)}`);
  }
  return value;
}

/**
 * A tool's description, argument schema and contracts. Immutable: every `with…` returns a new value, so one
 * metadata object can be shared safely.
 */
export class ToolMetadata {
  readonly description: string;
  readonly inputSchema: JsonSchema;
  /** The declared side-effect contract; `{ unknown, 'unspecified' }` unless `withEffect` was used. */
  readonly effect: ToolEffectContract;
  /** The approver key this tool requires on every attempt, or null. */
  readonly approval: string | null;
  readonly timeoutCeilingMs: number | null;
  readonly outputCeilingBytes: number | null;

  constructor(description: string, inputSchema: JsonSchema, fields?: Partial<Omit<ToolMetadata, 'description' | 'inputSchema'>>) {
    if (typeof description !== 'string') throw new InvalidInputError('description', 'must be a string');
    if (typeof inputSchema !== 'boolean' && (typeof inputSchema !== 'object' || inputSchema === null || Array.isArray(inputSchema))) {
      throw new InvalidInputError('inputSchema', 'must be a JSON Schema object or boolean');
    }
    this.description = description;
    this.inputSchema = inputSchema;
    this.effect = fields?.effect ?? DEFAULT_CONTRACT;
    this.approval = fields?.approval ?? null;
    this.timeoutCeilingMs = fields?.timeoutCeilingMs ?? null;
    this.outputCeilingBytes = fields?.outputCeilingBytes ?? null;
    Object.freeze(this);
  }

  private with(fields: Partial<Omit<ToolMetadata, 'description' | 'inputSchema'>>): ToolMetadata {
    return new ToolMetadata(this.description, this.inputSchema, {
      effect: this.effect,
      approval: this.approval,
      timeoutCeilingMs: this.timeoutCeilingMs,
      outputCeilingBytes: this.outputCeilingBytes,
      ...fields,
    });
  }

  /** Declares the side effect and its revision; bump the revision whenever inputs, results or effects change. */
  withEffect(effect: ToolEffect, revision: string): ToolMetadata {
    if (!TOOL_EFFECTS.includes(effect)) throw new InvalidInputError('effect', `must be one of ${TOOL_EFFECTS.join(', ')}`);
    return this.with({ effect: Object.freeze({ effect, revision: checkId<string>('revision', revision) }) });
  }

  /** Requires the approver registered under `key` to approve every attempt, retries included. */
  withApproval(key: string): ToolMetadata {
    return this.with({ approval: checkId<string>('approval', key) });
  }

  withTimeoutCeiling(ms: number): ToolMetadata {
    return this.with({ timeoutCeilingMs: positiveInteger('timeoutCeilingMs', ms, LIMITS.maxTimeoutMs) });
  }

  withOutputCeiling(bytes: number): ToolMetadata {
    return this.with({ outputCeilingBytes: positiveInteger('outputCeilingBytes', bytes) });
  }
}
