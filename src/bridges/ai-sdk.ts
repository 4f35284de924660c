/**
 * Vercel AI SDK bridge (`jingwei/ai-sdk`, peer dependency `ai` 6.x): a ToolGateway's tools as AI SDK tools whose
 * `execute` goes through `gateway.call`, so every call is admitted, journaled and recoverable like any other.
 */
import { jsonSchema, tool, type JSONSchema7, type ToolSet } from 'ai';
import type { JsonValue } from '../json/types.js';
import type { ToolExecution, ToolGateway } from '../tool/types.js';
import { ToolCallFailedError, ToolRuntimeHaltedError } from '../errors.js';
import { runForModel } from './outcome.js';
import { frameworkAction } from './call-ids.js';
import { bridgeCallLimits, checkToolsOptions, objectSchema, selectSchemas } from './schema.js';

export interface AiSdkToolsOptions {
  /** Only these tools (each must be granted to the gateway's caller). Default: every tool the caller may use. */
  readonly tools?: readonly string[];
  /** Tighten the runtime's timeout for every call through these tools. */
  readonly timeoutMs?: number;
  /** Tighten the runtime's output limit for every call through these tools. */
  readonly maxOutputBytes?: number;
  /** Host side only: every recorded execution, with the AI SDK's tool call id. Never shown to the model. */
  readonly onExecution?: (execution: ToolExecution, context: { readonly toolCallId: string }) => void;
}

/**
 * The gateway's tools as an AI SDK ToolSet. A success returns the recorded output text. A recorded failure throws
 * ToolCallFailedError, which the AI SDK reports to the model as a tool error reading "category (code): message"
 * and whether the tool ran. A call the runtime refused to admit or record (budget, stopped task, stale owner,
 * storage) throws ToolRuntimeHaltedError; add `jingweiHalted` to `stopWhen` so the run ends there.
 *
 * Approval stays with the runtime's approvers: these tools never set the AI SDK's `needsApproval`.
 */
export function aiSdkTools(gateway: ToolGateway, options: AiSdkToolsOptions = {}): ToolSet {
  checkToolsOptions(options);
  const schemas = selectSchemas(gateway, options.tools);
  const limits = bridgeCallLimits(gateway, schemas, options);
  const tools: ToolSet = {};
  for (const schema of schemas) {
    const name = schema.name;
    tools[name] = tool<JsonValue, string>({
      description: schema.description,
      inputSchema: jsonSchema<JsonValue>(objectSchema(schema.inputSchema) as JSONSchema7),
      async execute(input, { toolCallId, abortSignal }) {
        const outcome = await runForModel(
          name,
          () => gateway.callWithOptions(name, input, {
            ...(abortSignal ? { signal: abortSignal } : {}),
            ...frameworkAction(gateway, toolCallId),
            ...limits,
          }),
          options.onExecution ? (execution) => options.onExecution!(execution, { toolCallId }) : undefined,
        );
        if (!outcome.ok) throw new ToolCallFailedError(name, outcome);
        return outcome.output;
      },
    });
  }
  return tools;
}

interface StepLike {
  readonly content: ReadonlyArray<{ readonly type: string; readonly error?: unknown }>;
}

/**
 * A `stopWhen` condition: true once a step holds a call the runtime refused to admit or record
 * (ToolRuntimeHaltedError). Use it beside a step limit: `stopWhen: [stepCountIs(8), jingweiHalted]`.
 */
export function jingweiHalted({ steps }: { readonly steps: ReadonlyArray<StepLike> }): boolean {
  return steps.some((step) => step.content.some((part) => part.type === 'tool-error' && part.error instanceof ToolRuntimeHaltedError));
}
