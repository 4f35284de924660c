/**
 * A resumable OpenAI Agents SDK run (`jingwei/openai-agents`): `openAiAgentsRun` opens a run by its id and gives
 * `run(agent, …)` the input items rebuilt from the journal, function tools keyed by position and a model wrapper
 * that journals each model response before its calls run (docs/design.md#bridges-resume-from-the-journal).
 */
import { tool, type AgentInputItem, type FunctionTool, type Model, type ModelRequest } from '@openai/agents';
import { InvalidInputError, ToolCallFailedError, ToolRuntimeHaltedError } from '../errors.js';
import type { ChatResponse, ChatToolCall } from '../agent/model.js';
import type { AgentToolCall } from '../agent/run-calls.js';
import { exposedSchemas, withSiblingCancellationMarked } from './openai-agents.js';
import { BridgeRun, checkBridgeOptions, saysNotRun, type BridgeRunOptions, type BridgeRunStatus, type PromptView } from './run.js';
import { withJournaledIds } from './call-ids.js';
import { readRunOptions } from '../agent/run-options.js';
import { checkModelObject, objectSchema } from './schema.js';

export interface OpenAiAgentsRunOptions extends BridgeRunOptions {
  /** Only these tools (each must be granted to the gateway's caller). Default: every tool the caller may use. */
  readonly tools?: readonly string[];
}

export interface OpenAiAgentsRun {
  readonly runId: string;
  /** Run the agent only while `running`; see BridgeRunStatus. It changes as the run goes on. */
  readonly status: BridgeRunStatus;
  /** The last assistant text journaled (the final output, once `finished`). */
  readonly text: string | null;
  /** Model responses journaled so far: bound the run by what is left, `maxTurns: limit - run.steps`. */
  readonly steps: number;
  /** With `needs_review` and `awaiting_approval`: the call ids the run waits on. */
  readonly pendingCallIds: readonly string[];
  /** Every call settled so far, host side (`execution.replayed` for those read back from the journal). */
  readonly toolCalls: readonly AgentToolCall[];
  /**
   * The run's items rebuilt from the journal (the prompt, each step's messages, calls and results), as they are when
   * read: `run(agent, run.input)`, read again for each `run` of a loop driven a turn at a time.
   */
  readonly input: AgentInputItem[];
  /** The gateway's tools as function tools, each call keyed by its position in the run. Use them only with `model(...)`. */
  readonly tools: FunctionTool[];
  /** Wraps the agent's model so each response is journaled as the run's next step before any of its calls runs. */
  model(model: Model): Model;
}

interface OutputItemLike {
  readonly type?: string;
  readonly role?: string;
  readonly content?: unknown;
  readonly callId?: string;
  readonly name?: string;
  readonly arguments?: string;
}

/** A call of one of the run's tools (a handoff or another tool is the SDK's own business). */
function isRunCall(item: OutputItemLike, toJingwei: ReadonlyMap<string, string>): boolean {
  return item.type === 'function_call' && toJingwei.has(String(item.name));
}

/**
 * The model's answer as the run journals it: its text and its calls of the run's tools, under their Jingwei names;
 * `foreign` when it also made calls that are not the run's (a handoff, another tool, an unknown name).
 */
function responseOf(output: readonly OutputItemLike[], toJingwei: ReadonlyMap<string, string>): { response: ChatResponse; foreign: boolean } {
  let text: string | null = null;
  let foreign = false;
  const toolCalls: ChatToolCall[] = [];
  for (const item of output) {
    if (item.type === 'message' && item.role === 'assistant' && Array.isArray(item.content)) {
      for (const part of item.content as Array<{ type?: string; text?: unknown }>) {
        if (part.type === 'output_text' && typeof part.text === 'string') text = (text ?? '') + part.text;
      }
    } else if (isRunCall(item, toJingwei)) {
      // A call without an id gets one when it is journaled (distinctCallIds).
      toolCalls.push({ id: typeof item.callId === 'string' ? item.callId : '', name: toJingwei.get(String(item.name))!, arguments: String(item.arguments ?? '') });
    } else if (item.type === 'function_call' || item.type === 'computer_call') {
      // Run by the SDK on this side, or refused by it: not an answer. A hosted tool's call runs at the provider's, in the response.
      foreign = true;
    }
  }
  // No message and no call of the run's (a reasoning item alone, an empty output): the SDK asks the model again, so
  // this is not the run's answer either, and journaled as one it dropped the user's request for good.
  if (text === null && toolCalls.length === 0) foreign = true;
  return { response: { text, toolCalls }, foreign };
}

function inputOf(run: BridgeRun, toExposed: (name: string) => string): AgentInputItem[] {
  const items: AgentInputItem[] = [{ role: 'user', content: run.prompt }];
  for (const { response, calls } of run.readBack()) {
    if (response.text) {
      items.push({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: response.text }] });
    }
    for (const c of response.toolCalls) {
      items.push({ type: 'function_call', callId: c.id, name: toExposed(c.name), arguments: c.arguments, status: 'completed' });
    }
    for (const c of calls) {
      const text = c.outcome.ok ? c.outcome.output : c.outcome.text;
      items.push({ type: 'function_call_result', callId: c.providerCallId, name: toExposed(c.name), status: 'completed', output: { type: 'text', text } });
    }
  }
  return items;
}

/** What a request's input holds of the run: its function calls, and the results that say one did not run. */
function inputView(input: unknown): PromptView {
  const callIds = new Set<string>();
  const notRun = new Set<string>();
  if (Array.isArray(input)) {
    for (const item of input as readonly (OutputItemLike & { readonly output?: unknown })[]) {
      if (typeof item.callId !== 'string') continue;
      if (item.type === 'function_call') callIds.add(item.callId);
      const output = item.output;
      const text = typeof output === 'string' ? output : (output as { readonly text?: unknown } | undefined)?.text;
      if (item.type === 'function_call_result' && saysNotRun(text)) notRun.add(item.callId);
    }
  }
  // The SDK answers a call it refused (input it could not parse) with a result of plain text, as a tool's: which
  // results a tool gave cannot be told here, so none is taken as one (a call a tool outside the run made is read
  // back from its attempt when the run is opened again, outsideCalls).
  return { field: 'input', callIds, notRun, answered: new Set() };
}

/**
 * The run's model wrapper for the Agents SDK. A request must hold the run's last step (BridgeRun.checkPromptCurrent),
 * unless the provider keeps the conversation (`previousResponseId`, `conversationId`), when its input holds only what
 * is new: then a `previousResponseId` must be the response of the run's last step this wrapper saw, not an older one
 * (a request retried after its turn had run, whose model would not see that turn).
 */
function journaling(run: BridgeRun, inner: Model, toJingwei: ReadonlyMap<string, string>): Model {
  let lastResponseId: string | undefined;
  const promptOf = (request: ModelRequest): PromptView | undefined => {
    if (request.previousResponseId === undefined && request.conversationId === undefined) return inputView(request.input);
    if (request.previousResponseId !== undefined && lastResponseId !== undefined && request.previousResponseId !== lastResponseId) {
      throw new InvalidInputError('previousResponseId', `is not the response of the last step of run ${run.runId}: the model would not see ` +
        'what the steps since did, and ask for them again');
    }
    return undefined;
  };
  /** Journals the response's calls, and gives back its output with each run call under the id it was journaled with. */
  const record = async <T>(output: T[], prompt: PromptView | undefined, responseId: string | undefined): Promise<T[]> => {
    const items = output as readonly OutputItemLike[];
    const { response, foreign } = responseOf(items, toJingwei);
    const others = items.flatMap((item) => (!isRunCall(item, toJingwei) && typeof item.callId === 'string' ? [item.callId] : []));
    const ids = await run.record(response, foreign, others, prompt);
    if (responseId !== undefined) lastResponseId = responseId;
    return withJournaledIds(output, ids, 'callId', (item) => isRunCall(item as OutputItemLike, toJingwei));
  };
  const wrapped: Model = {
    async getResponse(request) {
      const prompt = promptOf(request);
      if (prompt !== undefined) run.checkPromptCurrent(prompt);
      const response = await inner.getResponse(request);
      return { ...response, output: await record(response.output, prompt, response.responseId) };
    },
    async *getStreamedResponse(request) {
      const prompt = promptOf(request);
      if (prompt !== undefined) run.checkPromptCurrent(prompt);
      // The SDK runs the calls once the response is done: journal it before passing that event on.
      for await (const event of inner.getStreamedResponse(request)) {
        yield event.type === 'response_done'
          ? { ...event, response: { ...event.response, output: await record(event.response.output, prompt, event.response.id) } }
          : event;
      }
    },
  };
  if (inner.getRetryAdvice) wrapped.getRetryAdvice = (args) => inner.getRetryAdvice!(args);
  return wrapped;
}

/**
 * Opens the run `options.runId` for the OpenAI Agents SDK: a new id starts it with `prompt`; a journaled one is
 * resumed from its journaled state, its completed calls replayed and its open calls sent through `recovery` (see
 * BridgeRunOptions). While `status` is `running`, build the agent with `tools` and `model(yourModel)` and call
 * `run(agent, input)`. A call that waits on a person fails the SDK's run with ToolRuntimeHaltedError, once the step's
 * other calls have finished (a body already running is never aborted for it); `run()` rejects with the SDK's
 * ToolCallError, whose `error` is the halt. Killed anywhere, open it again with the same id.
 */
export async function openAiAgentsRun(given: OpenAiAgentsRunOptions): Promise<OpenAiAgentsRun> {
  const options = readRunOptions(given);
  // Checked before anything is journaled: a bad `tools` option must not leave a started run behind.
  checkBridgeOptions(options);
  const exposed = exposedSchemas(options.gateway, options.tools);
  const run = await BridgeRun.open(options, new Set(exposed.map(({ schema }) => schema.name)));
  const toJingwei = new Map(exposed.map(({ schema, exposed: e }) => [e, schema.name]));
  const toExposed = new Map(exposed.map(({ schema, exposed: e }) => [schema.name, e]));
  const tools = exposed.map(({ schema, exposed: name }) => tool({
    name,
    description: schema.description,
    parameters: { type: 'object', ...objectSchema(schema.inputSchema) } as never,
    strict: false,
    needsApproval: false,
    async execute(input: unknown, _context, details) {
      // The arguments the model wrote are the ones journaled with its step; the call runs with exactly those (its input is
      // only checked against them).
      const callId = details?.toolCall?.callId;
      const call = await withSiblingCancellationMarked(details?.signal, () => run.call(schema.name, typeof callId === 'string' ? callId : '', details?.signal, input));
      if (!call.outcome.ok) throw new ToolCallFailedError(schema.name, call.outcome);
      return call.outcome.output;
    },
    errorFunction(_context, error) {
      if (error instanceof ToolCallFailedError) return error.message;
      if (error instanceof ToolRuntimeHaltedError) throw error;
      const message = error instanceof Error ? error.message : String(error);
      return `Tool ${JSON.stringify(schema.name)} could not be called: ${message}. The tool did not run.`;
    },
  }) as FunctionTool);
  return {
    runId: run.runId,
    get status() { return run.status; },
    get text() { return run.text; },
    get steps() { return run.stepCount; },
    pendingCallIds: run.pendingCallIds,
    toolCalls: run.toolCalls,
    get input() { return inputOf(run, (name) => toExposed.get(name) ?? name); },
    tools,
    model: (model) => {
      checkModelObject(model, 'getResponse');
      return journaling(run, model, toJingwei);
    },
  };
}
