/**
 * The reference agent loop: bounded, journaled, and with no automatic retry anywhere. It shows the smallest
 * correct way to drive a model with a ToolGateway; frameworks get the same behaviour through the bridges.
 *
 * One run: the user's message is journaled; then at most `maxSteps` times the model is asked for the next
 * assistant message, its text is journaled, and its tool calls go one by one through the gateway (which journals
 * each call and result). The model reads each outcome as text: the output, or the failure's category, code and
 * message and whether the tool ran. It never sees call ids, operation keys, retry plans or reviews. A failed tool
 * is never called again by the loop; after a crash, the host recovers from the journal as for any other session.
 */
import { InvalidInputError, JsonParseError, ToolPreflightError } from '../errors.js';
import { isValidText, uuidv7, type TurnId } from '../ids.js';
import type { ActionContext } from '../event/types.js';
import { parseJson } from '../json/parse.js';
import type { JsonValue } from '../json/types.js';
import { LIMITS } from '../limits.js';
import type { SessionOwner } from '../store/types.js';
import type { ToolExecution, ToolGateway } from '../tool/types.js';
import { modelFacingOutcome, preflightFailure, type ModelFacingOutcome } from '../bridges/outcome.js';
import { objectSchema, selectSchemas } from '../bridges/schema.js';
import type { ChatMessage, ChatModel, ChatToolCall, ChatToolDefinition } from './model.js';

export interface RunAgentOptions {
  readonly model: ChatModel;
  /** The session's fenced owner: user and assistant messages are journaled through it. */
  readonly owner: SessionOwner;
  /** A gateway bound to the same owner; its turn id is the run's. */
  readonly gateway: ToolGateway;
  /** The user's message for this run (journaled as `user_message`). */
  readonly input: string;
  /** A system prompt, sent first and not journaled (it is configuration, not conversation). */
  readonly system?: string;
  /** Earlier conversation to send before the input (not journaled again). */
  readonly history?: readonly ChatMessage[];
  /** The most model requests this run makes. Required: the loop is always bounded. */
  readonly maxSteps: number;
  /** Only these tools are offered (each must be granted to the gateway's caller). Default: every granted tool. */
  readonly tools?: readonly string[];
  /**
   * Stop the run as soon as a tool fails after its body started (its effects may have happened), rather than let
   * the model decide what to do next. Default false: the model reads that the tool may have taken effect.
   */
  readonly stopOnUncertainOutcome?: boolean;
  /** Cancels the model request in flight and the tool call in flight (recorded as `cancelled`). */
  readonly signal?: AbortSignal;
}

/** One tool call of a run, host side. */
export interface AgentToolCall {
  /** The model's id for the call. */
  readonly providerCallId: string;
  readonly name: string;
  /** What the model read. */
  readonly outcome: ModelFacingOutcome;
  /** The journaled execution; null when preflight refused the call before anything was recorded. */
  readonly execution: ToolExecution | null;
}

export type AgentStopReason =
  /** The model answered without tool calls. */
  | 'completed'
  /** `maxSteps` model requests were made and the last still asked for tools (their results are in `messages`). */
  | 'max_steps'
  /** `stopOnUncertainOutcome` was set and a tool failed after it started; later calls of that step were not run. */
  | 'uncertain_outcome';

export interface AgentRunResult {
  readonly stopReason: AgentStopReason;
  /** The last assistant text, or null. */
  readonly text: string | null;
  /** Model requests made. */
  readonly steps: number;
  readonly toolCalls: readonly AgentToolCall[];
  /** The conversation as the model saw it, this run's answers included. */
  readonly messages: readonly ChatMessage[];
}

function definitions(gateway: ToolGateway, only: readonly string[] | undefined): ChatToolDefinition[] {
  return selectSchemas(gateway, only).map((schema) => ({
    name: schema.name,
    description: schema.description,
    parameters: objectSchema(schema.inputSchema),
  }));
}

/**
 * The model's argument text as JSON. Text that is not JSON is passed on as a string: the call is still journaled,
 * and the schema check records it as `invalid_arguments` for the model to read. An integer the journal cannot hold
 * exactly (beyond ±(2^53 − 1)) is refused before anything is recorded (ToolPreflightError `unsafe_integer`, which
 * the model reads with its JSON path and the advice to send it as a string): rounding it would run the tool with a
 * value the model never sent.
 */
function parseArguments(text: string): JsonValue {
  if (text.trim() === '') return {};
  try {
    return parseJson(text, { maxBytes: LIMITS.maxArgumentsBytes, maxDepth: LIMITS.maxArgumentsDepth });
  } catch (error) {
    if (error instanceof JsonParseError && error.reason === 'unsafe_integer') {
      throw new ToolPreflightError('unsafe_integer', error.message, { cause: error });
    }
    return text;
  }
}

/** Runs the bounded loop; see the module comment. Throws what the gateway throws for budget, task, owner and storage. */
export async function runAgent(options: RunAgentOptions): Promise<AgentRunResult> {
  const { model, owner, gateway, signal } = options;
  if (!Number.isSafeInteger(options.maxSteps) || options.maxSteps <= 0) {
    throw new InvalidInputError('maxSteps', `must be a positive integer, got ${String(options.maxSteps)}`);
  }
  if (typeof options.input !== 'string') throw new InvalidInputError('input', 'must be a string');
  if (owner.sessionId !== gateway.sessionId) {
    throw new InvalidInputError('gateway', `is bound to session ${gateway.sessionId}, not the owner's ${owner.sessionId}`);
  }
  const tools = definitions(gateway, options.tools);
  const turnId = gateway.turnId as TurnId;
  const runId = `run_${uuidv7()}`;
  const messages: ChatMessage[] = [
    ...(options.system !== undefined ? [{ role: 'system', content: options.system } as const] : []),
    ...(options.history ?? []),
    { role: 'user', content: options.input },
  ];
  const toolCalls: AgentToolCall[] = [];
  await owner.append([{ turnId, kind: { type: 'user_message', text: options.input } }]);

  let text: string | null = null;
  for (let step = 1; step <= options.maxSteps; step += 1) {
    signal?.throwIfAborted();
    const response = await model.complete({ messages: [...messages], tools }, signal);
    text = response.text;
    if (response.text !== null && response.text.length > 0) {
      await owner.append([{ turnId, kind: { type: 'assistant_message', text: response.text } }]);
    }
    messages.push({ role: 'assistant', content: response.text, ...(response.toolCalls.length > 0 ? { toolCalls: [...response.toolCalls] } : {}) });
    if (response.toolCalls.length === 0) return { stopReason: 'completed', text, steps: step, toolCalls, messages };

    for (const [index, requested] of response.toolCalls.entries()) {
      // A cancelled run starts no further call (each would be journaled as an attempt).
      signal?.throwIfAborted();
      const call = await callTool(gateway, requested, { decision: { taskId: gateway.taskId as ActionContext['decision']['taskId'], stepId: `${runId}/${step}` }, actionIndex: index }, signal);
      toolCalls.push(call);
      messages.push({ role: 'tool', toolCallId: requested.id, content: call.outcome.ok ? call.outcome.output : call.outcome.text });
      if (options.stopOnUncertainOutcome === true && !call.outcome.ok && call.outcome.started) {
        return { stopReason: 'uncertain_outcome', text, steps: step, toolCalls, messages };
      }
    }
  }
  return { stopReason: 'max_steps', text, steps: options.maxSteps, toolCalls, messages };
}

async function callTool(gateway: ToolGateway, requested: ChatToolCall, action: ActionContext, signal: AbortSignal | undefined): Promise<AgentToolCall> {
  const providerCallId = requested.id;
  const withProvider: ActionContext = isValidText(providerCallId) ? { ...action, providerCallId } : action;
  let execution: ToolExecution;
  try {
    execution = await gateway.callWithOptions(requested.name, parseArguments(requested.arguments), {
      action: withProvider,
      ...(signal ? { signal } : {}),
    });
  } catch (error) {
    // Refused before anything was recorded (an empty or over-long name, arguments too large): the model may fix it.
    if (error instanceof ToolPreflightError) {
      return { providerCallId, name: requested.name, outcome: preflightFailure(requested.name, error), execution: null };
    }
    throw error;
  }
  return { providerCallId, name: requested.name, outcome: modelFacingOutcome(execution), execution };
}
