import { InvalidInputError } from '../errors.js';
import type { JsonObject } from '../json/types.js';
import type { JsonSchema } from '../tool/metadata.js';
import { checkLimitOption } from '../tool/call-inputs.js';
import { checkCallLimits } from '../tool/runtime.js';
import { describeValue } from '../text.js';
import type { ToolGateway, ToolSchema } from '../tool/types.js';

/**
 * A tool's argument schema as an object schema, for frameworks that only take objects: `true` (anything) becomes
 * the empty schema, `false` a schema nothing satisfies. The runtime still validates against the tool's own schema.
 */
export function objectSchema(schema: JsonSchema): JsonObject {
  if (schema === true) return {};
  if (schema === false) return { not: {} };
  return schema;
}

/** The gateway's tools, restricted to `only` when given; a name in `only` that the caller may not use is an error. */
export function selectSchemas(gateway: ToolGateway, only?: readonly string[]): ToolSchema[] {
  if (typeof (gateway as Partial<ToolGateway> | null | undefined)?.schemas !== 'function') throw new InvalidInputError('gateway', 'must be a ToolGateway (runtime.bind)');
  const schemas = gateway.schemas();
  if (only === undefined) return schemas;
  if (!Array.isArray(only) || !only.every((name) => typeof name === 'string')) {
    throw new InvalidInputError('tools', `must be an array of tool names, got ${Array.isArray(only) ? 'an array with a non-string' : typeof only}`);
  }
  const twice = only.find((name, i) => only.indexOf(name) !== i);
  if (twice !== undefined) throw new InvalidInputError('tools', `lists ${JSON.stringify(twice)} twice`);
  const byName = new Map(schemas.map((s) => [s.name, s]));
  return only.map((name) => {
    const schema = byName.get(name);
    if (schema === undefined) throw new InvalidInputError('tools', `${JSON.stringify(name)} is not available to this gateway's caller`);
    return schema;
  });
}

/**
 * A bridge's options object and its `onExecution` hook, checked when it is built: a hook that is not a function would
 * fail only after a call's write was made, halting the loop over a call that ran.
 */
export function checkToolsOptions(options: unknown): void {
  if (typeof options !== 'object' || options === null) throw new InvalidInputError('options', `must be an object, got ${describeValue(options)}`);
  const hook = (options as { readonly onExecution?: unknown }).onExecution;
  if (hook !== undefined && typeof hook !== 'function') throw new InvalidInputError('onExecution', `must be a function, got ${describeValue(hook)}`);
}

/**
 * The host's model for a run's wrapper: an object with the method a framework calls on it (`method`), checked when it
 * is wrapped rather than when the framework first asks it.
 */
export function checkModelObject(model: unknown, method: string): void {
  if (typeof model !== 'object' || model === null || typeof (model as Record<string, unknown>)[method] !== 'function') {
    throw new InvalidInputError('model', `must be a model object with a ${method}() method, got ${describeValue(model)}`);
  }
}

/**
 * A bridge's `timeoutMs` and `maxOutputBytes`, checked when it is built as each call of its tools would check them (the
 * same ToolPreflightError `invalid_options`: a positive integer, at most each tool's ceiling): refused only at call
 * time, every call would reach the model as a refusal instead of the host as a configuration error. Returns them as
 * call options.
 */
export function bridgeCallLimits(gateway: ToolGateway, tools: readonly ToolSchema[], options: { readonly timeoutMs?: number; readonly maxOutputBytes?: number }): { timeoutMs?: number; maxOutputBytes?: number } {
  const timeoutMs = checkLimitOption('timeoutMs', options.timeoutMs);
  const maxOutputBytes = checkLimitOption('maxOutputBytes', options.maxOutputBytes);
  const limits = { ...(timeoutMs !== undefined ? { timeoutMs } : {}), ...(maxOutputBytes !== undefined ? { maxOutputBytes } : {}) };
  for (const tool of tools) checkCallLimits(gateway, tool.name, limits);
  return limits;
}
