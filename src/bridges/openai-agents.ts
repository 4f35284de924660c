/**
 * OpenAI Agents SDK bridge (`jingwei/openai-agents`, peer dependency `@openai/agents`): a ToolGateway's tools as
 * function tools whose `execute` goes through `gateway.call`. Approval stays with Jingwei's approvers, asked on
 * every attempt and journaled; the SDK's own `needsApproval` is never set, so it cannot bypass or replay them.
 */
import { tool, type FunctionTool } from '@openai/agents';
import { InvalidInputError, ToolCallFailedError, ToolRuntimeHaltedError } from '../errors.js';
import type { JsonValue } from '../json/types.js';
import { stopsOnlyBeforeBody } from '../tool/control.js';
import type { ToolExecution, ToolGateway, ToolSchema } from '../tool/types.js';
import { runForModel } from './outcome.js';
import { frameworkAction } from './call-ids.js';
import { bridgeCallLimits, checkToolsOptions, objectSchema, selectSchemas } from './schema.js';

export interface OpenAiAgentsToolsOptions {
  /** Only these tools (each must be granted to the gateway's caller). Default: every tool the caller may use. */
  readonly tools?: readonly string[];
  /** Tighten the runtime's timeout for every call through these tools. */
  readonly timeoutMs?: number;
  /** Tighten the runtime's output limit for every call through these tools. */
  readonly maxOutputBytes?: number;
  /** Host side only: every recorded execution, with the SDK's call id when it has one. Never shown to the model. */
  readonly onExecution?: (execution: ToolExecution, context: { readonly toolCallId: string | null }) => void;
}

/**
 * Runs `call` with the SDK's sibling cancellation of its signal, when it comes, marked as a reason that stops the call
 * only until its body starts (stopsOnlyBeforeBody). When another call of the step fails the run (a halt of ours, or a
 * host's own tool that throws), the SDK aborts the step's other calls and waits for them before it fails the run: a
 * call not yet at its body is cancelled, with nothing run; a body already running finishes, since one cut off
 * mid-write is left in doubt for nothing. Any other abort (the host's `run(…, { signal })`) stops the call wherever it
 * is. The mark's listener is registered before the call's own, so the mark is there when they run.
 */
export async function withSiblingCancellationMarked<T>(signal: AbortSignal | undefined, call: () => Promise<T>): Promise<T> {
  if (signal === undefined) return call();
  const onAbort = () => {
    if (isSiblingCancellation(signal.reason)) stopsOnlyBeforeBody(signal.reason);
  };
  if (signal.aborted) {
    onAbort();
    return call();
  }
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await call();
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/** The SDK's reason for aborting a call because a sibling failed (not exported by it: matched by name and text). */
function isSiblingCancellation(reason: unknown): boolean {
  return reason instanceof Error && (reason.constructor.name === 'SiblingCancellationError' || reason.message === 'Cancelled because a sibling task failed.');
}

/** The SDK's function tool names allow only [A-Za-z0-9_]; others are replaced by `_` (as the SDK itself does). */
function functionToolName(name: string): string {
  return name.replace(/[^a-zA-Z0-9]/g, '_');
}

/** The selected tools with the function tool name each is exposed as; two names that would collide are refused. */
export function exposedSchemas(gateway: ToolGateway, only: readonly string[] | undefined): Array<{ schema: ToolSchema; exposed: string }> {
  const seen = new Map<string, string>();
  return selectSchemas(gateway, only).map((schema) => {
    const exposed = functionToolName(schema.name);
    const clash = seen.get(exposed);
    if (clash !== undefined) {
      throw new InvalidInputError('tools', `${JSON.stringify(clash)} and ${JSON.stringify(schema.name)} both become the function tool name ${exposed}`);
    }
    seen.set(exposed, schema.name);
    return { schema, exposed };
  });
}

/**
 * The gateway's tools as OpenAI Agents SDK function tools (non-strict JSON Schema parameters; the runtime
 * validates). A success returns the recorded output text. A recorded failure becomes the tool's output, read by
 * the model as "category (code): message" and whether the tool ran. A call the runtime refused to admit or record
 * (budget, stopped task, stale owner, storage) fails the run with ToolRuntimeHaltedError (the SDK's `run()` rejects
 * with its own ToolCallError, whose `error` is that halt), once the step's other calls have finished: a body already
 * running is never aborted because a sibling failed (withSiblingCancellationMarked).
 */
export function openAiAgentsTools(gateway: ToolGateway, options: OpenAiAgentsToolsOptions = {}): FunctionTool[] {
  checkToolsOptions(options);
  const exposedTools = exposedSchemas(gateway, options.tools);
  const limits = bridgeCallLimits(gateway, exposedTools.map((t) => t.schema), options);
  return exposedTools.map(({ schema, exposed }) => {
    const name = schema.name;
    const parameters = { type: 'object', ...objectSchema(schema.inputSchema) };
    return tool({
      name: exposed,
      description: schema.description,
      parameters: parameters as never,
      strict: false,
      needsApproval: false,
      async execute(input: unknown, _context, details) {
        const outcome = await withSiblingCancellationMarked(details?.signal, () => runForModel(
          name,
          () => gateway.callWithOptions(name, input as JsonValue, {
            ...(details?.signal ? { signal: details.signal } : {}),
            ...frameworkAction(gateway, details?.toolCall?.callId),
            ...limits,
          }),
          options.onExecution ? (execution) => options.onExecution!(execution, { toolCallId: details?.toolCall?.callId ?? null }) : undefined,
        ));
        if (!outcome.ok) throw new ToolCallFailedError(name, outcome);
        return outcome.output;
      },
      // A recorded failure is model-facing text; a halted runtime fails the run; an SDK-side refusal before the
      // call (say, arguments that are not JSON) is reported to the model as the SDK reports it.
      errorFunction(_context, error) {
        if (error instanceof ToolCallFailedError) return error.message;
        if (error instanceof ToolRuntimeHaltedError) throw error;
        const message = error instanceof Error ? error.message : String(error);
        return `Tool ${JSON.stringify(name)} could not be called: ${message}. The tool did not run.`;
      },
    }) as FunctionTool;
  });
}
