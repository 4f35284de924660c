/**
 * A resumable AI SDK tool loop (`jingwei/ai-sdk`): `aiSdkRun` opens a run by its id, gives `generateText` or
 * `streamText` the messages rebuilt from the journal, tools keyed by position and a model wrapper that journals
 * each model response before its calls run (docs/design.md#bridges-resume-from-the-journal).
 */
import { jsonSchema, tool, wrapLanguageModel, type JSONSchema7, type LanguageModelMiddleware, type ModelMessage, type ToolSet } from 'ai';
import { ToolCallFailedError } from '../errors.js';
import type { JsonValue } from '../json/types.js';
import type { ChatResponse, ChatToolCall } from '../agent/model.js';
import type { AgentToolCall } from '../agent/run-calls.js';
import { BridgeRun, checkBridgeOptions, saysNotRun, saysToolDidNotRun, type BridgeRunOptions, type BridgeRunStatus, type PromptView } from './run.js';
import { withJournaledIds } from './call-ids.js';
import { readRunOptions } from '../agent/run-options.js';
import { checkModelObject, objectSchema, selectSchemas } from './schema.js';

/** The model `generateText` and `streamText` take as an object (a provider's model, or the AI SDK's mock). */
export type AiSdkLanguageModel = Parameters<typeof wrapLanguageModel>[0]['model'];

export interface AiSdkRunOptions extends BridgeRunOptions {
  /** Only these tools (each must be granted to the gateway's caller). Default: every tool the caller may use. */
  readonly tools?: readonly string[];
}

export interface AiSdkRun {
  readonly runId: string;
  /** Run the loop only while `running`; see BridgeRunStatus. It changes as the loop runs. */
  readonly status: BridgeRunStatus;
  /** The last assistant text journaled (the answer, once `finished`). */
  readonly text: string | null;
  /** Model responses journaled so far: bound the loop by what is left, `stepCountIs(limit - run.steps)`. */
  readonly steps: number;
  /** With `needs_review` and `awaiting_approval`: the call ids the run waits on. */
  readonly pendingCallIds: readonly string[];
  /** Every call settled so far, host side (`execution.replayed` for those read back from the journal). */
  readonly toolCalls: readonly AgentToolCall[];
  /**
   * The conversation rebuilt from the journal (the prompt, then each step's assistant message and tool results), as it
   * is when read: read it again for each `generateText` of a loop driven a step at a time.
   */
  readonly messages: ModelMessage[];
  /** The gateway's tools, each call keyed by its position in the run. Use them only with `model(...)`. */
  readonly tools: ToolSet;
  /** Wraps the host's model so each response is journaled as the run's next step before any of its calls runs. */
  model(model: AiSdkLanguageModel): AiSdkLanguageModel;
}

function parsedInput(text: string): unknown {
  try {
    return text.trim() === '' ? {} : JSON.parse(text);
  } catch {
    return text;
  }
}

function messagesOf(run: BridgeRun): ModelMessage[] {
  const messages: ModelMessage[] = [{ role: 'user', content: run.prompt }];
  for (const { response, calls } of run.readBack()) {
    const parts = response.toolCalls.map((c) => ({ type: 'tool-call' as const, toolCallId: c.id, toolName: c.name, input: parsedInput(c.arguments) }));
    messages.push({ role: 'assistant', content: [...(response.text ? [{ type: 'text' as const, text: response.text }] : []), ...parts] });
    if (calls.length === 0) continue;
    messages.push({
      role: 'tool',
      content: calls.map((c) => ({
        type: 'tool-result' as const,
        toolCallId: c.providerCallId,
        toolName: c.name,
        output: c.outcome.ok ? { type: 'text' as const, value: c.outcome.output } : { type: 'error-text' as const, value: c.outcome.text },
      })),
    });
  }
  return messages;
}

interface ContentLike {
  readonly type: string;
  readonly text?: string;
  readonly toolCallId?: string;
  readonly toolName?: string;
  readonly input?: string;
  readonly providerExecuted?: boolean;
}

/** The model's answer as the run journals it: its text and the calls it asked our tools for (not provider-run ones). */
function responseOf(content: readonly ContentLike[], streamedText: string | null): ChatResponse {
  const toolCalls: ChatToolCall[] = [];
  let text = streamedText;
  for (const part of content) {
    if (part.type === 'text' && typeof part.text === 'string') text = (text ?? '') + part.text;
    if (isRunCall(part)) {
      // A call without an id (some OpenAI-compatible servers send none) gets one when it is journaled (distinctCallIds).
      toolCalls.push({ id: typeof part.toolCallId === 'string' ? part.toolCallId : '', name: String(part.toolName), arguments: typeof part.input === 'string' ? part.input : JSON.stringify(part.input ?? {}) });
    }
  }
  return { text, toolCalls };
}

/** A call of one of the run's tools (a provider-run tool's call is the provider's). */
function isRunCall(part: ContentLike): boolean {
  return part.type === 'tool-call' && part.providerExecuted !== true;
}

/** The call ids of the parts that are not the run's calls: a tool the provider ran, and its result. */
function otherCallIds(content: readonly ContentLike[]): string[] {
  return content.flatMap((part) => ((part.type === 'tool-call' || part.type === 'tool-result') && !isRunCall(part) && typeof part.toolCallId === 'string' ? [part.toolCallId] : []));
}

/**
 * `content` with each run call under the id it was journaled with. The parts announcing a streamed call's input
 * (`tool-input-start`, …) keep the provider's id: they are passed on as they come, before it is journaled.
 */
const withCallIds = <T>(content: readonly T[], ids: readonly string[]): T[] => withJournaledIds(content, ids, 'toolCallId', (part) => isRunCall(part as ContentLike));

/** The tool result outputs that say a tool ran and answered (any other is an error or a denial). */
const ANSWERS: ReadonlySet<string> = new Set(['text', 'json', 'content']);

/** What the prompt holds of the run: its assistant messages' tool calls, and the results that say one did or did not run. */
function promptView(prompt: readonly { readonly role: string; readonly content: unknown }[]): PromptView {
  const callIds = new Set<string>();
  const notRun = new Set<string>();
  const answered = new Set<string>();
  for (const message of prompt) {
    if (!Array.isArray(message.content)) continue;
    for (const part of message.content as readonly (ContentLike & { readonly output?: { readonly type?: unknown; readonly value?: unknown } })[]) {
      if (typeof part.toolCallId !== 'string') continue;
      if (message.role === 'assistant' && part.type === 'tool-call') {
        // What the results say is about the latest call under this id (a host's earlier turns may hold one too).
        callIds.add(part.toolCallId);
        notRun.delete(part.toolCallId);
        answered.delete(part.toolCallId);
      }
      if (message.role !== 'tool' || part.type !== 'tool-result') continue;
      if (saysNotRun(part.output?.value)) notRun.add(part.toolCallId);
      // The framework's own refusals (a tool it was not given, input it could not parse) are error results.
      else if (ANSWERS.has(String(part.output?.type)) && !saysToolDidNotRun(part.output?.value)) answered.add(part.toolCallId);
    }
  }
  return { field: 'messages', callIds, notRun, answered };
}

function journalingMiddleware(run: BridgeRun): LanguageModelMiddleware {
  return {
    specificationVersion: 'v3',
    async transformParams({ params }) {
      run.checkPromptCurrent(promptView(params.prompt));
      return params;
    },
    async wrapGenerate({ doGenerate, params }) {
      const result = await doGenerate();
      const ids = await run.record(responseOf(result.content as readonly ContentLike[], null), false, otherCallIds(result.content as readonly ContentLike[]), promptView(params.prompt));
      return { ...result, content: withCallIds(result.content, ids) };
    },
    async wrapStream({ doStream, params }) {
      const { stream, ...rest } = await doStream();
      type Part = typeof stream extends ReadableStream<infer P> ? P : never;
      // Tool calls are held back until the response is complete and journaled: the SDK runs a streamed call as soon
      // as it sees it, and a call must never run before the step that asked for it is durable.
      const held: Part[] = [];
      const others: string[] = [];
      let text: string | null = null;
      let recorded = false;
      const release = async (controller: TransformStreamDefaultController<Part>) => {
        if (recorded) return;
        recorded = true;
        const ids = await run.record(responseOf(held as unknown as readonly ContentLike[], text), false, others, promptView(params.prompt));
        for (const part of withCallIds(held, ids)) controller.enqueue(part);
      };
      const transform = new TransformStream<Part, Part>({
        async transform(part, controller) {
          if (part.type === 'text-delta') text = (text ?? '') + part.delta;
          if (part.type === 'tool-call' && part.providerExecuted !== true) {
            held.push(part);
            return;
          }
          others.push(...otherCallIds([part as unknown as ContentLike]));
          if (part.type === 'finish') await release(controller);
          controller.enqueue(part);
        },
        async flush(controller) {
          await release(controller);
        },
      });
      return { stream: stream.pipeThrough(transform), ...rest };
    },
  };
}

/**
 * Opens the run `options.runId` for the AI SDK: a new id starts it with `prompt`; a journaled one is resumed, its
 * completed calls replayed and its open calls sent through `recovery` (see BridgeRunOptions). While `status` is
 * `running`, pass `messages`, `tools` and `model(yourModel)` to `generateText` or `streamText` (with `jingweiHalted`
 * in `stopWhen`: a call that waits on a person halts the loop). Killed anywhere, open it again with the same id.
 */
export async function aiSdkRun(given: AiSdkRunOptions): Promise<AiSdkRun> {
  const options = readRunOptions(given);
  // Checked before anything is journaled: a bad `tools` option must not leave a started run behind.
  checkBridgeOptions(options);
  const offered = selectSchemas(options.gateway, options.tools);
  const run = await BridgeRun.open(options, new Set(offered.map((s) => s.name)));
  const tools: ToolSet = {};
  for (const schema of offered) {
    const name = schema.name;
    tools[name] = tool<JsonValue, string>({
      description: schema.description,
      inputSchema: jsonSchema<JsonValue>(objectSchema(schema.inputSchema) as JSONSchema7),
      async execute(input, { toolCallId, abortSignal }) {
        // The input the model wrote is the one journaled with its step; the call runs with exactly that (its input is
        // only checked against them).
        const call = await run.call(name, typeof toolCallId === 'string' ? toolCallId : '', abortSignal, input);
        if (!call.outcome.ok) throw new ToolCallFailedError(name, call.outcome);
        return call.outcome.output;
      },
    });
  }
  const middleware = journalingMiddleware(run);
  return {
    runId: run.runId,
    get status() { return run.status; },
    get text() { return run.text; },
    get steps() { return run.stepCount; },
    pendingCallIds: run.pendingCallIds,
    toolCalls: run.toolCalls,
    get messages() { return messagesOf(run); },
    tools,
    model: (model) => {
      checkModelObject(model, 'doGenerate');
      return wrapLanguageModel({ model, middleware });
    },
  };
}
