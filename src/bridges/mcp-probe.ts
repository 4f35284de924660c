/**
 * Does an MCP server honour the idempotency key the bridge sends in `_meta` (`jingwei/idempotency-key`)? The probe
 * calls one tool three times with the same key: twice with the same arguments (a server that honours the key
 * answers the second from its record: the same result, applied once), then with other arguments (it must refuse:
 * a key names one logical action). Only a server that passes both earns the `idempotent` tier for that tool: the
 * host may then declare it idempotent (recovery retries an uncertain call under the same key). Anything else stays
 * `unknown` (a review before any retry). The probe sees answers, not effects: a server that applies every call and
 * answers the same fixed text passes too, so the report says to check the instance probed for a single effect.
 *
 * Only an answer counts: a tool result with `isError`, or a JSON-RPC error the server sent for the request, is a
 * refusal. A call that gets no answer in time, or whose connection is lost, gives no verdict at all (McpProbeError):
 * its effect may still be applying, and a silence is not a refusal.
 *
 * The probe really calls the tool: point it at a test instance, or at arguments whose effect is harmless.
 */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { InvalidInputError, McpProbeError } from '../errors.js';
import type { ToolEffect } from '../event/types.js';
import { newEventId, newOperationKey, uuidv7 } from '../ids.js';
import { jsonEquals } from '../json/canonical.js';
import type { JsonObject, JsonValue } from '../json/types.js';
import { LIMITS } from '../limits.js';
import { externalIdempotencyKey } from '../tool/idempotency.js';
import { connectMcpServer, type McpServerAddress } from './mcp-connection.js';
import { MCP_IDEMPOTENCY_META_KEY } from './mcp.js';
import { describeSetting } from '../text.js';

export interface McpProbeOptions {
  /** The MCP tool to call (its MCP name). */
  readonly tool: string;
  /** Arguments for the first two calls. */
  readonly arguments: JsonObject;
  /** Different arguments for the third call, under the same key. */
  readonly otherArguments: JsonObject;
  /**
   * Per call: a call without an answer by then gives no verdict. A positive integer of at most LIMITS.maxTimeoutMs
   * (2^31 − 1, what Node's timers hold). Default 10,000 ms.
   */
  readonly timeoutMs?: number;
}

export interface McpProbeReport {
  readonly server: { readonly name: string; readonly version: string };
  readonly tool: string;
  /** The key the three calls carried (the bridge's format, `externalIdempotencyKey` of a fresh probe operation). */
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

const ORDINAL = ['first', 'second', 'third'] as const;

/**
 * One `tools/call` under the key. A refusal is an answer the server gave: a result with `isError`, or a JSON-RPC
 * error for the request. No answer within `timeoutMs`, or a connection lost before one came, is McpProbeError: the
 * call may still be applying, so it says nothing about the key. The request goes through `client.request`, not
 * `callTool`, so that the SDK's own checks of an answer (output schema) are not mistaken for the server's refusal.
 */
async function call(client: Client, tool: string, args: JsonObject, key: string, timeoutMs: number, n: 0 | 1 | 2): Promise<Answer> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  try {
    const result = await client.request(
      { method: 'tools/call', params: { name: tool, arguments: args, _meta: { [MCP_IDEMPOTENCY_META_KEY]: key } } },
      CallToolResultSchema,
      { signal: deadline.signal, timeout: LIMITS.maxTimeoutMs },
    );
    if (result.isError === true) return { refused: true, reason: 'the tool answered with an error result' };
    return { refused: false, result: { content: (result.content ?? null) as JsonValue, structuredContent: (result.structuredContent ?? null) as JsonValue } };
  } catch (error) {
    const which = `the ${ORDINAL[n]} call of ${tool}`;
    if (deadline.signal.aborted) {
      throw new McpProbeError(`${which} got no answer within ${timeoutMs} ms: its effect may still be applying, and a silence is not a refusal`, { cause: error });
    }
    // The SDK drops a client's transport when its connection closes, before it fails the requests in flight.
    if (client.transport === undefined) {
      throw new McpProbeError(`the connection to the server was lost during ${which}: its effect may have been applied, and a lost connection is not a refusal`, { cause: error });
    }
    if (error instanceof McpError) return { refused: true, reason: `the server answered with JSON-RPC error ${error.code}` };
    throw new McpProbeError(`the probe could not call ${tool}: ${(error as Error)?.message ?? String(error)}`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs the probe through a connected client. Throws McpProbeError (no verdict, no tier) when the first call is
 * refused, or when any call gets no answer in time or loses the connection.
 */
export async function probeMcpIdempotency(client: Client, options: McpProbeOptions): Promise<McpProbeReport> {
  if (typeof options?.tool !== 'string' || options.tool.length === 0) throw new InvalidInputError('tool', 'must name the MCP tool to probe');
  for (const field of ['arguments', 'otherArguments'] as const) {
    const v = options[field];
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new InvalidInputError(field, 'must be a JSON object');
  }
  if (jsonEquals(options.arguments, options.otherArguments)) throw new InvalidInputError('otherArguments', 'must differ from arguments');
  const timeoutMs = options.timeoutMs ?? 10_000;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0 || timeoutMs > LIMITS.maxTimeoutMs) {
    throw new InvalidInputError('timeoutMs', `must be a positive integer of at most ${LIMITS.maxTimeoutMs} (LIMITS.maxTimeoutMs), got ${describeSetting(timeoutMs)}`);
  }
  const identity = client.getServerVersion();
  if (identity === undefined) throw new InvalidInputError('client', 'is not connected');
  const key = externalIdempotencyKey({ sessionId: `probe-${uuidv7()}`, operationOrigin: newEventId(), operation: { taskId: 'probe', key: newOperationKey() } });

  const first = await call(client, options.tool, options.arguments, key, timeoutMs, 0);
  if (first.refused) throw new McpProbeError(`the first call of ${options.tool} was refused (${first.reason}): choose arguments the tool accepts`);
  const second = await call(client, options.tool, options.arguments, key, timeoutMs, 1);
  const third = await call(client, options.tool, options.otherArguments, key, timeoutMs, 2);

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
