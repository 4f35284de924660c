/**
 * The options of a run (`runAgent`, `resumeAgent`, and the bridges' runs), checked before anything is read or
 * journaled: a host's mistake (a missing model, history that is not a list of messages) is an InvalidInputError
 * naming the option, never a TypeError half-way through a run whose start is already journaled.
 */
import { InvalidInputError } from '../errors.js';
import { describeValue } from '../text.js';
import { isTimeoutMs, LIMITS } from '../limits.js';
import { boundOwnerOf } from '../tool/runtime.js';
import type { SessionOwner } from '../store/types.js';
import type { ToolGateway } from '../tool/types.js';
import type { AiSdkRunOptions } from '../bridges/ai-sdk-run.js';
import type { OpenAiAgentsRunOptions } from '../bridges/openai-agents-run.js';
import type { RunAgentOptions } from './run-agent.js';

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function need(ok: boolean, option: string, expected: string, got: unknown): void {
  if (!ok) throw new InvalidInputError(option, `must be ${expected}, got ${describeValue(got)}`);
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);

function checkHistory(history: unknown): void {
  need(Array.isArray(history), 'history', 'an array of chat messages', history);
  (history as unknown[]).forEach((message, i) => {
    const at = `history[${i}]`;
    need(isObject(message) && ROLES.has(message.role as string), at, "a chat message (role 'system', 'user', 'assistant' or 'tool')", message);
    const m = message as Record<string, unknown>;
    need(typeof m.content === 'string' || (m.role === 'assistant' && m.content === null), `${at}.content`, m.role === 'assistant' ? 'a string or null' : 'a string', m.content);
    if (m.role === 'tool') need(typeof m.toolCallId === 'string', `${at}.toolCallId`, 'a string', m.toolCallId);
    if (m.role === 'assistant' && m.toolCalls !== undefined) {
      need(Array.isArray(m.toolCalls), `${at}.toolCalls`, 'an array', m.toolCalls);
      (m.toolCalls as unknown[]).forEach((call, j) => {
        const ok = isObject(call) && typeof call.id === 'string' && typeof call.name === 'string' && typeof call.arguments === 'string';
        need(ok, `${at}.toolCalls[${j}]`, 'an object { id, name, arguments } of strings', call);
      });
    }
  });
}

/**
 * The host's run options read once, into a plain copy that every check and the loop then use: a getter or a Proxy
 * that answers one read `r1` and the next another could otherwise show a check one run id and the loop another, and
 * start a run twice. Something that is not an object is returned as it is, for checkRunHost to refuse.
 */
export function readRunOptions<T>(options: T): T {
  if (!isObject(options)) return options;
  const read: Record<string, unknown> = {};
  for (const key of RUN_OPTION_KEYS) {
    let value: unknown;
    try {
      value = options[key];
    } catch (error) {
      throw new InvalidInputError(key, `could not be read: ${describeValue(error)}`, { cause: error });
    }
    if (value !== undefined) read[key] = value;
  }
  return read as T;
}

/** Every option a run takes (runAgent, resumeAgent, aiSdkRun, openAiAgentsRun): what readRunOptions reads. */
const RUN_OPTIONS: Record<keyof RunAgentOptions | keyof AiSdkRunOptions | keyof OpenAiAgentsRunOptions, true> = {
  owner: true, gateway: true, store: true, model: true, input: true, prompt: true, runId: true, recovery: true, reconcilers: true,
  system: true, history: true, maxSteps: true, tools: true, stopOnUncertainOutcome: true, signal: true,
};
const RUN_OPTION_KEYS = Object.keys(RUN_OPTIONS);

/**
 * What every run takes, whichever loop drives it: the options object, the session's owner and a gateway bound to
 * it, the recovery policy, reconcilers, a signal, and the store when given. Returns the options as a record for the
 * loop's own checks.
 */
export function checkRunHost(options: unknown): Record<string, unknown> {
  need(isObject(options), 'options', 'an object', options);
  const o = options as Record<string, unknown>;
  need(isObject(o.owner) && typeof o.owner.sessionId === 'string' && typeof o.owner.append === 'function', 'owner', 'the session owner a store returned (acquire)', o.owner);
  need(isObject(o.gateway) && typeof o.gateway.callWithOptions === 'function' && typeof o.gateway.schemas === 'function', 'gateway', 'a ToolGateway (runtime.bind)', o.gateway);
  const { owner, gateway } = o as { owner: SessionOwner; gateway: ToolGateway };
  if (owner.sessionId !== gateway.sessionId) {
    throw new InvalidInputError('gateway', `is bound to session ${gateway.sessionId}, not the owner's ${owner.sessionId}`);
  }
  // The run's steps go through `owner` and its calls through the gateway's owner: two owners (another store's session
  // of the same id, a tenant's copy) would journal them in two journals, and neither read back the run.
  const bound = boundOwnerOf(gateway);
  if (bound !== null && bound !== owner) {
    throw new InvalidInputError('gateway', `is bound to another owner of session ${owner.sessionId} (another store, or another acquire): bind it to the run's owner`);
  }
  // The reconcilers of a runtime's tools are found through a gateway it made; through a wrapper they cannot be, and a
  // person's not_executed review would then be used unchecked.
  if (bound === null && o.reconcilers === undefined) {
    throw new InvalidInputError('reconcilers', 'is required with a gateway this package did not make (a wrapper of runtime.bind; a Proxy of the gateway needs none): pass every tool of the runtime that declares a reconciler, the same objects; a tool left out is not asked, and a person\'s not_executed review of its call is then used unchecked ([] asks none)');
  }
  if (o.reconcilers !== undefined) {
    need(Array.isArray(o.reconcilers), 'reconcilers', 'an array of tools', o.reconcilers);
    (o.reconcilers as unknown[]).forEach((t, i) => {
      if (isObject(t) && t.reconcileTimeoutMs !== undefined) {
        need(isTimeoutMs(t.reconcileTimeoutMs), `reconcilers[${i}].reconcileTimeoutMs`, `a positive integer of milliseconds of at most ${LIMITS.maxTimeoutMs}`, t.reconcileTimeoutMs);
      }
    });
  }
  if (o.recovery !== undefined) need(o.recovery === 'suspend' || o.recovery === 'retry_safe', 'recovery', "'suspend' or 'retry_safe'", o.recovery);
  if (o.signal !== undefined) need(o.signal instanceof AbortSignal, 'signal', 'an AbortSignal', o.signal);
  if (o.store !== undefined) need(isObject(o.store) && typeof o.store.loadHistory === 'function', 'store', 'the store the owner belongs to', o.store);
  return o;
}

/** Throws InvalidInputError for the first option that is not what `runAgent` and `resumeAgent` take. */
export function checkRunOptions(options: unknown): void {
  const o = checkRunHost(options);
  need(isObject(o.model) && typeof o.model.complete === 'function', 'model', 'a ChatModel (an object with complete())', o.model);
  need(Number.isSafeInteger(o.maxSteps) && (o.maxSteps as number) > 0, 'maxSteps', 'a positive integer', o.maxSteps);
  if (o.system !== undefined) need(typeof o.system === 'string', 'system', 'a string', o.system);
  if (o.history !== undefined) checkHistory(o.history);
  if (o.tools !== undefined) need(Array.isArray(o.tools) && o.tools.every((t) => typeof t === 'string'), 'tools', 'an array of tool names', o.tools);
  if (o.stopOnUncertainOutcome !== undefined) need(typeof o.stopOnUncertainOutcome === 'boolean', 'stopOnUncertainOutcome', 'a boolean', o.stopOnUncertainOutcome);
}
