/**
 * Does an MCP server honour the idempotency key the bridge sends in `_meta` (`jingwei/idempotency-key`)? The probe
 * calls one tool three times with the same key: twice with the same arguments (a server that honours the key
 * answers the second from its record: the same result, applied once), then with other arguments (it must refuse:
 * a key names one logical action). Only a server that passes both earns the `idempotent` tier for that tool: the
 * host may then declare it idempotent (recovery retries an uncertain call under the same key). Anything else stays
 * `unknown` (a review before any retry). The probe sees answers, not effects: a server that applies every call and
 * answers the same fixed text passes too, so the report says to check the instance probed for a single effect.
 *
 * The probe really calls the tool: point it at a test instance, or at arguments whose effect is harmless.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { InvalidInputError, McpProbeError } from '../errors.js';
import type { ToolEffect } from '../event/types.js';
import { newOperationKey, uuidv7 } from '../ids.js';
import { jsonEquals } from '../json/canonical.js';
import type { JsonObject, JsonValue } from '../json/types.js';
import { externalIdempotencyKey } from '../tool/idempotency.js';
import { connectMcpServer, type McpServerAddress } from './mcp-connection.js';
import { MCP_IDEMPOTENCY_META_KEY } from './mcp.js';

export interface McpProbeOptions {
  /** The MCP tool to call (its MCP name). */
  readonly tool: string;
  /** Arguments for the first two calls. */
  readonly arguments: JsonObject;
  /** Different arguments for the third call, under the same key. */
  readonly otherArguments: JsonObject;
  /** Per call. Default 10,000 ms. */
  readonly timeoutMs?: number;
}

export interface McpProbeReport {
  readonly server: { readonly name: string; readonly version: string };
  readonly tool: string;
  /** The key the three calls carried (the bridge's format, `<taskId>:<operation key>`). */
  readonly key: string;
  /** The second call (same key, same arguments) gave the first call's result. */
  readonly sameKeySameResult: boolean;
  /** The third call (same key, other arguments) was refused. */
  readonly otherArgumentsRefused: boolean;
  readonly honoursKey: boolean;
  /** The effect the host may declare for this tool on this evidence: `idempotent`, or `unknown`. */
  readonly tier: Extract<ToolEffect, 'idempotent' | 'unknown'>;
  /** One sentence per check, for people. */
  readonly findings: readonly string[];
}

type Answer = { readonly refused: true; readonly reason: string } | { readonly refused: false; readonly result: JsonValue };

async function call(client: Client, tool: string, args: JsonObject, key: string, timeoutMs: number): Promise<Answer> {
  try {
    const result = await client.callTool({ name: tool, arguments: args, _meta: { [MCP_IDEMPOTENCY_META_KEY]: key } }, undefined, { timeout: timeoutMs });
    if (result.isError === true) return { refused: true, reason: 'the tool answered with an error result' };
    return { refused: false, result: { content: (result.content ?? null) as JsonValue, structuredContent: (result.structuredContent ?? null) as JsonValue } };
  } catch (error) {
    if (error instanceof McpError) return { refused: true, reason: `the server answered with error ${error.code}` };
    throw new McpProbeError(`the probe could not call ${tool}: ${(error as Error).message}`, { cause: error });
  }
}

/** Runs the probe through a connected client. Throws McpProbeError when the first call is refused. */
export async function probeMcpIdempotency(client: Client, options: McpProbeOptions): Promise<McpProbeReport> {
  if (typeof options?.tool !== 'string' || options.tool.length === 0) throw new InvalidInputError('tool', 'must name the MCP tool to probe');
  for (const field of ['arguments', 'otherArguments'] as const) {
    const v = options[field];
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new InvalidInputError(field, 'must be a JSON object');
  }
  if (jsonEquals(options.arguments, options.otherArguments)) throw new InvalidInputError('otherArguments', 'must differ from arguments');
  const timeoutMs = options.timeoutMs ?? 10_000;
  const identity = client.getServerVersion();
  if (identity === undefined) throw new InvalidInputError('client', 'is not connected');
  const key = externalIdempotencyKey({ sessionId: `probe-${uuidv7()}`, operation: { taskId: 'probe', key: newOperationKey() } });

  const first = await call(client, options.tool, options.arguments, key, timeoutMs);
  if (first.refused) throw new McpProbeError(`the first call of ${options.tool} was refused (${first.reason}): choose arguments the tool accepts`);
  const second = await call(client, options.tool, options.arguments, key, timeoutMs);
  const third = await call(client, options.tool, options.otherArguments, key, timeoutMs);

  const sameKeySameResult = !second.refused && jsonEquals(first.result, second.result);
  const otherArgumentsRefused = third.refused;
  const honoursKey = sameKeySameResult && otherArgumentsRefused;
  const findings = [
    sameKeySameResult
      ? 'same key, same arguments: the same result (as a server answering from its record gives; the answers cannot show whether the effect was applied twice)'
      : `same key, same arguments: ${second.refused ? `refused (${second.reason})` : 'a different result (the key was not used to deduplicate)'}`,
    otherArgumentsRefused
      ? `same key, other arguments: refused (${(third as { reason: string }).reason})`
      : 'same key, other arguments: accepted (the key does not bind the arguments)',
    honoursKey
      ? `tier: idempotent, as far as the answers show. Check in the instance probed that the first two calls took effect once (a server that applies every call and answers the same fixed text also passes); then the host may declare ${options.tool} idempotent for this server version (ToolMetadata.withEffect through the import's configure option).`
      : `tier: unknown. Keep ${options.tool} unknown: an uncertain call needs a review before any retry.`,
  ];
  return {
    server: { name: identity.name, version: identity.version },
    tool: options.tool,
    key,
    sameKeySameResult,
    otherArgumentsRefused,
    honoursKey,
    tier: honoursKey ? 'idempotent' : 'unknown',
    findings,
  };
}

/** Connects to a server (without reconnecting), probes one tool, and closes the connection. */
export async function probeMcpServer(address: McpServerAddress, options: McpProbeOptions): Promise<McpProbeReport> {
  const connection = await connectMcpServer(address, { reconnect: false, tools: [options.tool] });
  try {
    return await probeMcpIdempotency(connection.client, options);
  } finally {
    await connection.close();
  }
}
