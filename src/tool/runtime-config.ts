/**
 * The shape of a runtime's configuration and of a binding, checked when they are given: a tool without a body, a
 * grant that is not a list, or a guard that is not a function is a ToolConfigError (InvalidInputError for a binding)
 * naming it, instead of a TypeError from inside the runtime or a failure journaled on the first call.
 */
import { InvalidInputError, ToolConfigError } from '../errors.js';
import { describeValue } from '../text.js';
import { isTimeoutMs, LIMITS } from '../limits.js';
import { ToolMetadata } from './metadata.js';
import { isAbortSignal } from './call-inputs.js';

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function need(ok: boolean, what: string, expected: string, got: unknown): void {
  if (!ok) throw new ToolConfigError(`${what} must be ${expected}, got ${describeValue(got)}`);
}

function optionalFunction(value: unknown, what: string): void {
  if (value !== undefined) need(typeof value === 'function', what, 'a function', value);
}

/** Throws ToolConfigError for the first part of `config` that createToolRuntime cannot take. */
export function checkRuntimeConfig(config: unknown): void {
  need(isRecord(config), 'the runtime configuration', 'an object { tools, grants, ... }', config);
  const c = config as Record<string, unknown>;
  need(Array.isArray(c.tools), 'tools', 'an array of tools', c.tools);
  (c.tools as unknown[]).forEach((tool, i) => {
    need(isRecord(tool), `tools[${i}]`, 'a tool { name, metadata, execute }', tool);
    const t = tool as Record<string, unknown>;
    const label = typeof t.name === 'string' ? `tool ${JSON.stringify(t.name)}` : `tools[${i}]`;
    need(typeof t.name === 'string', `${label}.name`, 'a string', t.name);
    need(t.metadata instanceof ToolMetadata, `${label}.metadata`, 'a ToolMetadata (new ToolMetadata(description, schema))', t.metadata);
    need(typeof t.execute === 'function', `${label}.execute`, 'a function (the tool body)', t.execute);
    optionalFunction(t.reconcile, `${label}.reconcile`);
    if (t.reconcileTimeoutMs !== undefined) need(isTimeoutMs(t.reconcileTimeoutMs), `${label}.reconcileTimeoutMs`, `a positive integer of milliseconds of at most ${LIMITS.maxTimeoutMs}`, t.reconcileTimeoutMs);
  });
  need(isRecord(c.grants), 'grants', "an object mapping each caller to '*' or a list of tool names", c.grants);
  for (const [caller, grant] of Object.entries(c.grants as Record<string, unknown>)) {
    const ok = grant === '*' || (Array.isArray(grant) && grant.every((name) => typeof name === 'string'));
    need(ok, `the grant of caller ${JSON.stringify(caller)}`, "'*' or an array of tool names", grant);
  }
  if (c.guards !== undefined) {
    need(Array.isArray(c.guards), 'guards', 'an array of functions', c.guards);
    (c.guards as unknown[]).forEach((guard, i) => {
      need(typeof guard === 'function', `guards[${i}]`, 'a function', guard);
    });
  }
  if (c.approvers !== undefined) {
    need(isRecord(c.approvers), 'approvers', 'an object mapping each approval key to a function', c.approvers);
    for (const [key, approver] of Object.entries(c.approvers as Record<string, unknown>)) need(typeof approver === 'function', `approver ${JSON.stringify(key)}`, 'a function', approver);
  }
  optionalFunction(c.describePanic, 'describePanic');
  optionalFunction(c.onEvent, 'onEvent');
}

/** Throws InvalidInputError when a binding's or a call's `signal` is given and is not an AbortSignal. */
export function checkSignal(signal: unknown, field: string): void {
  if (signal !== undefined && !isAbortSignal(signal)) throw new InvalidInputError(field, `must be an AbortSignal, got ${describeValue(signal)}`);
}
