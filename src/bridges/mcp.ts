/**
 * MCP bridge (`jingwei/mcp`, peer dependency `@modelcontextprotocol/sdk` 1.x): the tools of an MCP server, over
 * stdio or Streamable HTTP with the official SDK's client, as Jingwei tools.
 *
 * Trust is the host's decision about a server it configured, never the server's claim about itself. The tools of
 * an untrusted server are all `unknown` (recovery then needs a review before retrying an uncertain call), whatever
 * their annotations say; the MCP specification itself says annotations from untrusted servers are hints only. For
 * a server the host marks trusted, the annotations become the contract: `readOnlyHint` → `read_only`,
 * `idempotentHint` → `idempotent`, any other explicit hint → `non_idempotent`, no hints → `unknown`.
 *
 * The revision names the server and version and carries a digest of the tool's name, schemas and annotations, so
 * a changed tool (or a new server version) gets a new revision and a retry plan made for the old one never runs:
 * it throws `binding_changed`, or is recorded as not run (`tool_contract_changed`) when the journal shows the
 * retried attempt never ran (docs/design.md#a-redeploy-while-a-call-waits).
 */
import type { Ajv2020 } from 'ajv/dist/2020.js';
import { compileInputSchema, createSchemaAjv } from '../tool/schema-ajv.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InvalidInputError, McpUnavailableError, ToolBodyError } from '../errors.js';
import type { ToolEffect, ToolEffectContract } from '../event/types.js';
import { jsonDigest } from '../json/canonical.js';
import type { JsonObject, JsonValue } from '../json/types.js';
import { LIMITS } from '../limits.js';
import { describeValue, truncateUtf8 } from '../text.js';
import { externalIdempotencyKey } from '../tool/idempotency.js';
import { ToolMetadata } from '../tool/metadata.js';
import { toolNameProblem } from '../tool/names.js';
import type { Tool, ToolDenial } from '../tool/types.js';

/** The `_meta` key under which each `tools/call` carries `externalIdempotencyKey(request)`, the same on every attempt. */
export const MCP_IDEMPOTENCY_META_KEY = 'jingwei/idempotency-key';

/** MCP tool annotations (hints). */
export interface McpToolAnnotations {
  readonly title?: string;
  readonly readOnlyHint?: boolean;
  readonly destructiveHint?: boolean;
  readonly idempotentHint?: boolean;
  readonly openWorldHint?: boolean;
}

/** What `tools/list` says about one tool (the fields this bridge reads). */
export interface McpToolDescription {
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
  readonly inputSchema: { readonly type: 'object'; readonly [key: string]: unknown };
  readonly outputSchema?: { readonly [key: string]: unknown };
  readonly annotations?: McpToolAnnotations;
}

export interface McpImportOptions {
  /**
   * The host marks this server trusted: its annotations become effect contracts. Default false: every tool is
   * `unknown`, whatever it claims.
   */
  readonly trusted?: boolean;
  /** Prefix for the Jingwei tool names (say `weather.`), to keep servers apart. Default none. */
  readonly prefix?: string;
  /** Import only these MCP tools (by their MCP name). Default: every tool the server lists. */
  readonly tools?: readonly string[];
  /**
   * Adjusts each tool's metadata before it is used: require an approver, set ceilings, or override the contract
   * (the host's own declaration). Receives the metadata the import derived.
   */
  readonly configure?: (metadata: ToolMetadata, tool: McpToolDescription) => ToolMetadata;
}

/** One imported tool, as recorded in the import's manifest. */
export interface McpImportedTool {
  /** The Jingwei tool name. */
  readonly name: string;
  readonly mcpName: string;
  readonly contract: ToolEffectContract;
  /** The annotations as the server sent them (null when none). */
  readonly annotations: McpToolAnnotations | null;
}

export interface McpToolImport {
  /** The server's self-reported identity (`initialize`), as used in the revisions. */
  readonly server: { readonly name: string; readonly version: string };
  readonly trusted: boolean;
  readonly tools: Tool[];
  /** JSON data: what was imported and the contract each tool got. Hosts can journal it as a custom event. */
  readonly manifest: readonly McpImportedTool[];
  /**
   * Tools left out, each with the reason: an input schema that cannot be validated here, a name the runtime would
   * refuse (createToolRuntime would then throw for every tool), or a name the server lists more than once.
   */
  readonly skipped: ReadonlyArray<{ readonly mcpName: string; readonly reason: string }>;
}

/**
 * The effect a tool's annotations yield. Untrusted: always `unknown`. Trusted: `readOnlyHint: true` →
 * `read_only`; `idempotentHint: true` → `idempotent`; any other explicit hint → `non_idempotent` (the
 * specification's defaults: not read-only, not idempotent); no hint at all → `unknown`.
 */
export function mcpToolEffect(annotations: McpToolAnnotations | null | undefined, trusted: boolean): ToolEffect {
  if (!trusted || annotations === null || annotations === undefined) return 'unknown';
  if (annotations.readOnlyHint === true) return 'read_only';
  if (annotations.idempotentHint === true) return 'idempotent';
  const declared = [annotations.readOnlyHint, annotations.idempotentHint, annotations.destructiveHint].some((hint) => typeof hint === 'boolean');
  return declared ? 'non_idempotent' : 'unknown';
}

/**
 * The contract revision of a tool of a server: `mcp:<server>@<version>:<sha-256 of the canonical JSON of the
 * tool's name, input schema, output schema and annotations>`. Server name and version are cut to 256 bytes each.
 */
export function mcpToolRevision(server: { name: string; version: string }, tool: McpToolDescription): string {
  const digest = jsonDigest({
    name: tool.name,
    inputSchema: tool.inputSchema,
    outputSchema: tool.outputSchema ?? null,
    annotations: tool.annotations ?? null,
  } as unknown as JsonValue);
  const revision = `mcp:${truncateUtf8(server.name, 256)}@${truncateUtf8(server.version, 256)}:${digest}`;
  return truncateUtf8(revision, LIMITS.maxTextBytes);
}

const OLDER_DRAFTS = /^https?:\/\/json-schema\.org\/(draft-0[4-7]\/)?schema#?$/;

/**
 * The input schema the runtime validates with (draft 2020-12). A `$schema` naming draft 4 to 7, which most
 * servers send, is dropped: for the object schemas MCP tools use the drafts agree. A schema that still does not
 * compile is reported, and its tool skipped.
 */
function runtimeSchema(ajv: Ajv2020, schema: McpToolDescription['inputSchema']): JsonObject | string {
  const copy = { ...schema } as Record<string, unknown>;
  if (typeof copy.$schema === 'string' && OLDER_DRAFTS.test(copy.$schema)) delete copy.$schema;
  try {
    compileInputSchema(ajv, copy);
  } catch (error) {
    return `its input schema does not compile as JSON Schema 2020-12: ${(error as Error).message}`;
  }
  return copy as JsonObject;
}

interface McpContent {
  readonly type: string;
  readonly text?: string;
}

function contentText(content: unknown): string {
  if (!Array.isArray(content)) return '';
  return (content as McpContent[])
    .filter((part) => part?.type === 'text' && typeof part.text === 'string')
    .map((part) => part.text)
    .join('\n');
}

function mcpFailure(error: unknown): ToolBodyError {
  const e = error as { code?: unknown; message?: unknown };
  const message = typeof e?.message === 'string' ? e.message : String(error);
  const code = typeof e?.code === 'number' ? `mcp_error_${e.code}` : 'mcp_request_failed';
  return new ToolBodyError(code, message, { cause: error });
}

/** A request timeout far beyond any runtime deadline: the call's own signal is what stops it. */
const NO_CLIENT_TIMEOUT_MS = 2_147_483_647;

/**
 * Where an imported tool gets its client: a fixed one (`importMcpTools`), or a managed connection that reconnects
 * (`connectMcpServer`), which also says when the tool cannot run and hears about failed requests.
 */
export interface McpToolSource {
  client(): Client;
  /** Asked before the call's start marker: a denial records the call as `unavailable`, never sent. */
  availability?(mcpName: string): ToolDenial | null;
  /** A request through `client` failed (after the marker: the call stays uncertain); the source may mark itself down. */
  requestFailed?(client: Client, error: unknown, signal: AbortSignal): void;
  /**
   * A request that is not cancelled with its call (any tool but a read-only one) is sent through `client`; the
   * function returned is called once it has ended. A source that gives `client` up meanwhile keeps it open for it.
   */
  requestLeftToRun?(client: Client): () => void;
}

/**
 * A Jingwei tool running one MCP tool through its source's client. The call's signal cancels the request of a
 * read-only tool only: a server told a request is cancelled never answers it (the protocol says so), so a call of
 * any other tool stopped by its deadline or a cancellation waits for the server's answer, or for the connection's
 * end, and only then ends as a body that went on (docs/bridges-in-production.md#a-stopped-call-runs-until-its-server-answers).
 * Ended at once, it was journaled as ended while the server still ran it, and a `not_executed` review was taken
 * before the server made its write.
 */
function mcpTool(source: McpToolSource, name: string, description: McpToolDescription, metadata: ToolMetadata): Tool {
  const cancellable = metadata.effect.effect === 'read_only';
  const tool: Tool = {
    name,
    metadata,
    async execute(request, signal) {
      const client = source.client();
      const ended = cancellable ? undefined : source.requestLeftToRun?.(client);
      let result: Awaited<ReturnType<Client['callTool']>>;
      try {
        result = await client.callTool(
          {
            name: description.name,
            arguments: request.arguments as Record<string, unknown>,
            _meta: { [MCP_IDEMPOTENCY_META_KEY]: externalIdempotencyKey(request) },
          },
          undefined,
          cancellable ? { signal, timeout: NO_CLIENT_TIMEOUT_MS } : { timeout: NO_CLIENT_TIMEOUT_MS },
        );
      } catch (error) {
        source.requestFailed?.(client, error, signal);
        throw mcpFailure(error);
      } finally {
        ended?.();
      }
      if (result.isError === true) {
        throw new ToolBodyError('mcp_tool_error', contentText(result.content) || 'the MCP tool reported an error');
      }
      if (result.structuredContent !== undefined && result.structuredContent !== null) return result.structuredContent as JsonValue;
      const content = Array.isArray(result.content) ? (result.content as McpContent[]) : [];
      if (content.every((part) => part?.type === 'text')) return contentText(content);
      return { content: content as unknown as JsonValue };
    },
  };
  if (source.availability) {
    const ask = source.availability.bind(source);
    return { ...tool, availability: () => ask(description.name) };
  }
  return tool;
}

/**
 * The server's identity and every tool it lists, following pagination for at most LIMITS.maxMcpToolListPages pages.
 * A cursor the server already sent, or a listing still going on after the last page allowed, is McpUnavailableError
 * (state `failed`): such a listing would never end.
 */
export async function listMcpTools(client: Client): Promise<{ server: { name: string; version: string }; listed: McpToolDescription[] }> {
  if (typeof (client as Partial<Client> | null | undefined)?.getServerVersion !== 'function') throw new InvalidInputError('client', 'must be a connected MCP SDK Client');
  const identity = client.getServerVersion();
  if (identity === undefined) throw new InvalidInputError('client', 'is not connected: the server has not said who it is');
  const server = { name: identity.name, version: identity.version };
  const label = `${truncateUtf8(server.name, 256)}@${truncateUtf8(server.version, 256)}`;
  const listed: McpToolDescription[] = [];
  const cursors = new Set<string>();
  let cursor: string | undefined;
  for (let pages = 0; ; pages += 1) {
    if (cursor !== undefined) {
      if (cursors.has(cursor)) throw new McpUnavailableError(label, 'failed', `its tools/list sent a cursor a second time (after page ${pages}): the listing would never end`);
      if (pages >= LIMITS.maxMcpToolListPages) throw new McpUnavailableError(label, 'failed', `its tools/list goes on after ${LIMITS.maxMcpToolListPages} pages (LIMITS.maxMcpToolListPages)`);
      cursors.add(cursor);
    }
    const page = await client.listTools(cursor === undefined ? undefined : { cursor });
    listed.push(...(page.tools as unknown as McpToolDescription[]));
    cursor = page.nextCursor;
    if (cursor === undefined) return { server, listed };
  }
}

/**
 * A fixed client's availability: a client the host closed (or whose connection was lost) has no transport, and a
 * call through it is refused before its start marker, never sent.
 */
function fixedClient(client: Client): McpToolSource {
  return {
    client: () => client,
    availability: () => client.transport === undefined
      ? { code: 'mcp_disconnected', message: 'the MCP client is not connected (it was closed, or its connection was lost); the call was not sent', retryable: false }
      : null,
  };
}

/** Lists every tool of a connected client (following pagination) and makes Jingwei tools of them. */
export async function importMcpTools(client: Client, options: McpImportOptions = {}): Promise<McpToolImport> {
  const listing = await listMcpTools(client);
  return importFromSource(fixedClient(client), listing, options);
}

/** `trusted` that is not a boolean (`'yes'`, say): refused, not read as untrusted, which would make every contract `unknown`. */
export function checkTrustedOption(trusted: unknown): void {
  if (trusted !== undefined && typeof trusted !== 'boolean') throw new InvalidInputError('trusted', `must be true or false, got ${describeValue(trusted)}`);
}

/** Makes Jingwei tools of a listing, each calling through `source`. */
export function importFromSource(
  source: McpToolSource,
  { server, listed }: { server: { name: string; version: string }; listed: readonly McpToolDescription[] },
  options: McpImportOptions,
): McpToolImport {
  checkTrustedOption(options.trusted);
  const trusted = options.trusted === true;
  const wanted = options.tools === undefined ? null : new Set(options.tools);
  if (wanted !== null) {
    for (const name of wanted) {
      if (!listed.some((t) => t.name === name)) throw new InvalidInputError('tools', `the server lists no tool named ${JSON.stringify(name)}`);
    }
  }
  const ajv = createSchemaAjv();
  const tools: Tool[] = [];
  const manifest: McpImportedTool[] = [];
  const skipped: Array<{ mcpName: string; reason: string }> = [];
  const listings = new Map<string, number>();
  for (const description of listed) listings.set(description.name, (listings.get(description.name) ?? 0) + 1);
  const duplicates = new Set<string>();
  for (const description of listed) {
    if (wanted !== null && !wanted.has(description.name)) continue;
    const name = `${options.prefix ?? ''}${description.name}`;
    const times = listings.get(description.name)!;
    if (times > 1) {
      // One entry for the name: a call by that name cannot say which of the listed tools it means.
      if (!duplicates.has(description.name)) skipped.push({ mcpName: description.name, reason: `the server lists ${times} tools with this name: a call cannot say which one it means` });
      duplicates.add(description.name);
      continue;
    }
    const nameProblem = toolNameProblem(name);
    if (nameProblem !== null) {
      skipped.push({ mcpName: description.name, reason: `its tool name${name === description.name ? '' : ' (with the prefix)'} ${nameProblem.reason}: createToolRuntime would refuse it` });
      continue;
    }
    const schema = runtimeSchema(ajv, description.inputSchema);
    if (typeof schema === 'string') {
      skipped.push({ mcpName: description.name, reason: schema });
      continue;
    }
    let revision: string;
    try {
      revision = mcpToolRevision(server, description);
    } catch (error) {
      // Its schemas or annotations are not JSON the journal can hold (a lone surrogate, say): no revision for them.
      skipped.push({ mcpName: description.name, reason: `its schemas or annotations cannot be digested: ${(error as Error).message}` });
      continue;
    }
    const derived = new ToolMetadata(description.description ?? description.title ?? '', schema)
      .withEffect(mcpToolEffect(description.annotations, trusted), revision);
    const metadata = options.configure ? options.configure(derived, description) : derived;
    tools.push(mcpTool(source, name, description, metadata));
    manifest.push({ name, mcpName: description.name, contract: metadata.effect, annotations: description.annotations ?? null });
  }
  return { server, trusted, tools, manifest, skipped };
}
