/**
 * A managed connection to one MCP server (`connectMcpServer`): the connection's state is evidence, and it comes
 * back by itself.
 *
 * - While the connection is known to be down, every call through its tools is refused before its start marker:
 *   recorded as `unavailable` (code `mcp_disconnected`), never sent, so recovery knows it did not run.
 * - When it goes down (the stdio server exits; an HTTP request fails at the transport), the bridge reconnects with
 *   bounded exponential backoff: over stdio by starting the server again, over HTTP with a new session. Each
 *   disconnect, reconnect and failed attempt is reported to `onConnectionEvent` and, with `journal`, journaled as a
 *   custom event (plugin `jingwei/mcp`, kind `connection`).
 * - After a reconnect the tools are listed again: a tool whose revision changed (or that is gone) stays
 *   `unavailable` (code `mcp_tool_changed`) until it is imported again, so no call runs under a stale contract.
 * - A connection lost while a call is in flight leaves that call as it must be: started, outcome unknown.
 * - Over stdio the server runs under a parent-death watch (bridges/mcp-guard.ts): it ends with the host, however
 *   the host ends.
 */
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, type StdioServerParameters } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { InvalidInputError, McpUnavailableError } from '../errors.js';
import { checkId, newTurnId, type TurnId } from '../ids.js';
import type { JsonObject } from '../json/types.js';
import { LIMITS } from '../limits.js';
import type { SessionOwner } from '../store/types.js';
import type { ToolDenial } from '../tool/types.js';
import { checkTrustedOption, importFromSource, listMcpTools, mcpToolRevision, type McpImportOptions, type McpToolImport, type McpToolSource } from './mcp.js';
import { describeSetting, describeValue } from '../text.js';

/**
 * Where the server is: a command to run over stdio, or a Streamable HTTP endpoint. A stdio server does not inherit
 * the host's environment: it gets the MCP SDK's default set (on POSIX HOME, LOGNAME, PATH, SHELL, TERM and USER;
 * the SDK's own list on Windows) plus `stdio.env`: pass what it needs there (`jingwei mcp probe` passes the
 * caller's whole environment).
 */
export type McpServerAddress =
  | { readonly stdio: StdioServerParameters }
  | { readonly url: string | URL; readonly headers?: Readonly<Record<string, string>> };

export type McpConnectionState = 'connected' | 'reconnecting' | 'failed' | 'closed';

/** Bounded backoff: attempt n waits min(initialDelayMs · 2^(n-1), maxDelayMs); after maxAttempts the state is `failed`. */
export interface McpReconnectOptions {
  /** Default 100 ms. */
  readonly initialDelayMs?: number;
  /** Default 5,000 ms. */
  readonly maxDelayMs?: number;
  /** Default 8. */
  readonly maxAttempts?: number;
}

export const MCP_RECONNECT_DEFAULTS = { initialDelayMs: 100, maxDelayMs: 5_000, maxAttempts: 8 } as const;

/** The custom event plugin and kind a connection event is journaled under. */
export const MCP_CONNECTION_EVENT = { plugin: 'jingwei/mcp', kind: 'connection' } as const;

/** What happened to the connection. JSON data: journaled as the custom event's payload. */
export type McpConnectionEvent =
  | { readonly type: 'disconnected'; readonly server: string; readonly reason: string }
  | { readonly type: 'reconnected'; readonly server: string; readonly attempt: number; readonly version: string; readonly changedTools: readonly string[] }
  | { readonly type: 'reconnect_failed'; readonly server: string; readonly attempt: number; readonly error: string; readonly retryInMs: number | null };

export interface McpConnectOptions extends McpImportOptions {
  readonly clientInfo?: { readonly name: string; readonly version: string };
  /** Reconnect with bounded backoff when the connection goes down (default), or `false` to stay down. */
  readonly reconnect?: McpReconnectOptions | false;
  /**
   * Over stdio, run the server under the parent-death watch so it never outlives the host (default true; POSIX
   * only, ignored on Windows).
   */
  readonly orphanGuard?: boolean;
  /** Every connection event, host side. */
  readonly onConnectionEvent?: (event: McpConnectionEvent) => void;
  /** Journal every connection event as a custom event through this owner (a fresh turn id each, unless given). */
  readonly journal?: { readonly owner: SessionOwner; readonly turnId?: string };
}

export interface McpConnection extends McpToolImport {
  /** The current client (a new one after each reconnect). */
  readonly client: Client;
  readonly state: McpConnectionState;
  /** Over stdio, the pid of the process the bridge started (the watch, or the server without it); else null. */
  readonly processId: number | null;
  /** The last failure to journal a connection event, or null. */
  readonly journalError: unknown;
  /** Resolves once connected; rejects with McpUnavailableError when the connection failed or was closed. */
  ready(): Promise<void>;
  /** After `failed`: start a new round of reconnect attempts. */
  reconnect(): void;
  /** Closes the client and stops reconnecting (over stdio, ends the server process). */
  close(): Promise<void>;
}

const GUARD_SCRIPT = fileURLToPath(new URL('./mcp-guard.js', import.meta.url));

function positiveOption(field: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) throw new InvalidInputError(field, `must be a positive integer, got ${describeSetting(value)}`);
  return value;
}

const describe = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * Closes a client. Over HTTP it first ends the server's session with a DELETE, as the protocol asks of a client that
 * no longer needs one, so a host that reconnects or closes leaves no sessions behind on the server; it waits for the
 * answer at most `LIMITS.mcpSessionEndMs`, and a server that refuses or never answers is closed all the same. A
 * session the server forgot (`forgotten`) is not asked: nothing there would end.
 */
async function endClient(client: Client, forgotten = false): Promise<void> {
  const transport = client.transport;
  if (!forgotten && transport instanceof StreamableHTTPClientTransport && transport.sessionId !== undefined) {
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, LIMITS.mcpSessionEndMs);
    });
    await Promise.race([transport.terminateSession().catch(() => undefined), waited]);
    clearTimeout(timer);
  }
  await client.close().catch(() => undefined);
}

class ManagedConnection implements McpToolSource {
  current!: Client;
  transport: StdioClientTransport | StreamableHTTPClientTransport | null = null;
  state: McpConnectionState = 'reconnecting';
  serverLabel = 'the MCP server';
  /** The revision each imported tool had at import, by MCP name. */
  revisions = new Map<string, string>();
  changed = new Set<string>();
  journalError: unknown = null;
  private journalChain: Promise<void> = Promise.resolve();
  private waiters: Array<{ resolve: () => void; reject: (error: unknown) => void }> = [];
  private timer: NodeJS.Timeout | null = null;
  private readonly backoff: Required<McpReconnectOptions> | null;
  /** Requests left to run (not cancelled with their calls) under way, by client. */
  private leftToRun = new Map<Client, number>();
  /** Clients given up with such requests under way: each is closed once they have ended. */
  private retiring = new Set<Client>();

  constructor(private readonly address: McpServerAddress, private readonly options: McpConnectOptions) {
    const r = options.reconnect;
    if (r !== undefined && r !== false && (typeof r !== 'object' || r === null)) {
      throw new InvalidInputError('reconnect', `must be false or an object of delays and attempts, got ${describeValue(r)}`);
    }
    this.backoff = r === false ? null : {
      initialDelayMs: positiveOption('reconnect.initialDelayMs', r?.initialDelayMs, MCP_RECONNECT_DEFAULTS.initialDelayMs),
      maxDelayMs: positiveOption('reconnect.maxDelayMs', r?.maxDelayMs, MCP_RECONNECT_DEFAULTS.maxDelayMs),
      maxAttempts: positiveOption('reconnect.maxAttempts', r?.maxAttempts, MCP_RECONNECT_DEFAULTS.maxAttempts),
    };
  }

  client(): Client {
    return this.current;
  }

  availability(mcpName: string): ToolDenial | null {
    switch (this.state) {
      case 'connected':
        return this.changed.has(mcpName)
          ? { code: 'mcp_tool_changed', message: `${this.serverLabel} changed tool ${JSON.stringify(mcpName)} when it reconnected; import it again before calling it`, retryable: false }
          : null;
      case 'reconnecting':
        return { code: 'mcp_disconnected', message: `${this.serverLabel} is not connected (reconnecting); the call was not sent`, retryable: true };
      case 'failed':
        return { code: 'mcp_disconnected', message: `${this.serverLabel} is not connected (reconnecting gave up); the call was not sent`, retryable: false };
      case 'closed':
        return { code: 'mcp_connection_closed', message: `the connection to ${this.serverLabel} was closed; the call was not sent`, retryable: false };
    }
  }

  /**
   * Over HTTP there is no process to watch: a request that failed at the transport means the session is gone. A 404
   * says the server no longer knows the session (it restarted): the requests left running on it can never be
   * answered, and end with it now.
   */
  requestFailed(client: Client, error: unknown, signal: AbortSignal): void {
    if (signal.aborted || error instanceof McpError || !('url' in this.address)) return;
    const forgotten = (error as { code?: unknown } | null)?.code === 404;
    this.lost(client, `a request failed: ${describe(error)}`, forgotten);
  }

  /** Connects a new client (stdio: starts the server; HTTP: opens a new session). */
  async open(): Promise<Client> {
    const client = new Client(this.options.clientInfo ?? { name: 'jingwei', version: '0.1.0' });
    const transport = 'stdio' in this.address ? this.stdioTransport(this.address.stdio) : this.httpTransport(this.address);
    client.onclose = () => this.lost(client, 'the connection closed');
    try {
      await client.connect(transport);
    } catch (error) {
      delete client.onclose;
      await endClient(client);
      throw error;
    }
    this.current = client;
    this.transport = transport;
    return client;
  }

  private stdioTransport(params: StdioServerParameters): StdioClientTransport {
    const guarded = this.options.orphanGuard !== false && process.platform !== 'win32';
    return new StdioClientTransport(guarded
      ? { ...params, command: process.execPath, args: [GUARD_SCRIPT, params.command, ...(params.args ?? [])] }
      : params);
  }

  private httpTransport(address: Extract<McpServerAddress, { url: unknown }>): StreamableHTTPClientTransport {
    return new StreamableHTTPClientTransport(new URL(address.url), address.headers ? { requestInit: { headers: { ...address.headers } } } : undefined);
  }

  get processId(): number | null {
    return this.transport instanceof StdioClientTransport ? this.transport.pid : null;
  }

  requestLeftToRun(client: Client): () => void {
    this.leftToRun.set(client, (this.leftToRun.get(client) ?? 0) + 1);
    let once = false;
    return () => {
      if (once) return;
      once = true;
      const left = this.leftToRun.get(client)! - 1;
      if (left > 0) {
        this.leftToRun.set(client, left);
        return;
      }
      this.leftToRun.delete(client);
      if (this.retiring.delete(client)) void endClient(client);
    };
  }

  /**
   * Closes a client given up, or, while requests left to run are under way on it, once they have ended: over HTTP
   * another request failing at the transport (a proxy's 502) says little of theirs, and closing it would end their
   * bodies as if the server had stopped, while it may still be making the write. A session the server forgot
   * (`forgotten`: it restarted) is closed at once: nothing there will answer them
   * (docs/bridges-in-production.md#a-stopped-call-runs-until-its-server-answers).
   */
  private retire(client: Client, forgotten: boolean): void {
    if (this.leftToRun.has(client) && !forgotten) this.retiring.add(client);
    else void endClient(client, forgotten);
  }

  /** The current client went down: refuse calls from now on, and start reconnecting. */
  lost(client: Client, reason: string, forgotten = false): void {
    if (client !== this.current || this.state !== 'connected') return;
    this.state = 'reconnecting';
    delete client.onclose;
    this.retire(client, forgotten);
    this.emit({ type: 'disconnected', server: this.serverLabel, reason });
    if (this.backoff === null) {
      this.fail();
      return;
    }
    this.schedule(1);
  }

  private schedule(attempt: number): void {
    const b = this.backoff!;
    const delay = Math.min(b.initialDelayMs * 2 ** (attempt - 1), b.maxDelayMs, LIMITS.maxTimeoutMs);
    // Not unref'd: a bounded reconnect keeps the host up until it ends or close() stops it.
    this.timer = setTimeout(() => void this.attempt(attempt), delay);
  }

  private async attempt(attempt: number): Promise<void> {
    this.timer = null;
    if (this.state !== 'reconnecting') return;
    let client: Client | null = null;
    try {
      client = await this.open();
      let dropped = false;
      const opened = client;
      opened.onclose = () => {
        dropped = true;
      };
      const { server, listed } = await listMcpTools(opened);
      if (this.state !== 'reconnecting') {
        delete opened.onclose;
        await endClient(opened);
        return;
      }
      if (dropped) throw new Error('the connection closed again while reconnecting');
      opened.onclose = () => this.lost(opened, 'the connection closed');
      for (const [mcpName, revision] of this.revisions) {
        const description = listed.find((t) => t.name === mcpName);
        if (description === undefined || mcpToolRevision(server, description) !== revision) this.changed.add(mcpName);
      }
      this.state = 'connected';
      this.emit({ type: 'reconnected', server: this.serverLabel, attempt, version: server.version, changedTools: [...this.changed].sort() });
      this.settle();
    } catch (error) {
      if (client !== null) {
        delete client.onclose;
        await endClient(client);
      }
      if (this.state !== 'reconnecting') return;
      const last = attempt >= this.backoff!.maxAttempts;
      const retryInMs = last ? null : Math.min(this.backoff!.initialDelayMs * 2 ** attempt, this.backoff!.maxDelayMs);
      this.emit({ type: 'reconnect_failed', server: this.serverLabel, attempt, error: describe(error), retryInMs });
      if (last) this.fail();
      else this.schedule(attempt + 1);
    }
  }

  private fail(): void {
    this.state = 'failed';
    this.settle();
  }

  reconnect(): void {
    if (this.state !== 'failed' || this.backoff === null) return;
    this.state = 'reconnecting';
    this.schedule(1);
  }

  ready(): Promise<void> {
    if (this.state === 'connected') return Promise.resolve();
    if (this.state !== 'reconnecting') return Promise.reject(new McpUnavailableError(this.serverLabel, this.state, 'no reconnect is under way'));
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  private settle(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) {
      if (this.state === 'connected') w.resolve();
      else w.reject(new McpUnavailableError(this.serverLabel, this.state === 'closed' ? 'closed' : 'failed', 'reconnecting gave up or the connection was closed'));
    }
  }

  private emit(event: McpConnectionEvent): void {
    try {
      this.options.onConnectionEvent?.(event);
    } catch {
      // a host callback's failure must not stop the reconnect loop
    }
    const journal = this.options.journal;
    if (journal === undefined) return;
    const turnId = (journal.turnId ?? newTurnId()) as TurnId;
    const payload = event as unknown as JsonObject;
    this.journalChain = this.journalChain
      .then(() => journal.owner.append([{ turnId, kind: { type: 'custom', ...MCP_CONNECTION_EVENT, payload } }]))
      .then(() => undefined, (error: unknown) => {
        this.journalError = error;
      });
  }

  /** Waits for the connection events journaled so far. */
  flushJournal(): Promise<void> {
    return this.journalChain;
  }

  async close(): Promise<void> {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const wasOpen = this.state === 'connected';
    this.state = 'closed';
    this.settle();
    delete this.current.onclose;
    const retiring = [...this.retiring];
    this.retiring.clear();
    await Promise.all([...(wasOpen ? [this.current] : []), ...retiring].map((client) => endClient(client)));
    await this.journalChain;
  }
}

/** Checks an address before anything is started or sent, and names it for messages (the command, or the URL). */
function checkAddress(address: unknown): string {
  if (typeof address !== 'object' || address === null) throw new InvalidInputError('address', 'must be { stdio: { command, args? } } or { url }');
  const a = address as { stdio?: { command?: unknown; args?: unknown }; url?: unknown };
  if ('stdio' in a) {
    if (typeof a.stdio !== 'object' || a.stdio === null || typeof a.stdio.command !== 'string' || a.stdio.command === '') {
      throw new InvalidInputError('address.stdio.command', 'must be the command that starts the server');
    }
    if (a.stdio.args !== undefined && (!Array.isArray(a.stdio.args) || !a.stdio.args.every((x) => typeof x === 'string'))) {
      throw new InvalidInputError('address.stdio.args', 'must be an array of strings');
    }
    return a.stdio.command;
  }
  if (typeof a.url !== 'string' && !(a.url instanceof URL)) throw new InvalidInputError('address', 'must be { stdio: { command, args? } } or { url }');
  let url: URL;
  try {
    url = new URL(a.url);
  } catch {
    throw new InvalidInputError('address.url', `is not a URL: ${JSON.stringify(String(a.url))}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidInputError('address.url', `must be http or https, got ${url.protocol}`);
  return `${url.origin}${url.pathname}`;
}

/** Connects the official SDK's client to a server, imports its tools, and keeps the connection managed (see above). */
export async function connectMcpServer(address: McpServerAddress, options: McpConnectOptions = {}): Promise<McpConnection> {
  const label = checkAddress(address);
  if (typeof options !== 'object' || options === null) throw new InvalidInputError('options', 'must be an object');
  if (options.journal?.turnId !== undefined) checkId<TurnId>('journal.turnId', options.journal.turnId);
  checkTrustedOption(options.trusted);
  const managed = new ManagedConnection(address, options);
  let client: Client;
  try {
    client = await managed.open();
  } catch (error) {
    // The server could not be started or reached (a missing command, a refused or unreachable URL): typed, with
    // the transport's own error as the cause.
    throw new McpUnavailableError(label, 'failed', `could not connect: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  let imported: McpToolImport;
  try {
    const listing = await listMcpTools(client);
    imported = importFromSource(managed, listing, options);
    for (const entry of imported.manifest) {
      managed.revisions.set(entry.mcpName, mcpToolRevision(listing.server, listing.listed.find((t) => t.name === entry.mcpName)!));
    }
  } catch (error) {
    delete client.onclose;
    await endClient(client);
    throw error;
  }
  managed.serverLabel = `${imported.server.name}@${imported.server.version}`;
  managed.state = 'connected';
  return {
    ...imported,
    get client() {
      return managed.current;
    },
    get state() {
      return managed.state;
    },
    get processId() {
      return managed.processId;
    },
    get journalError() {
      return managed.journalError;
    },
    ready: () => managed.ready(),
    reconnect: () => managed.reconnect(),
    close: () => managed.close(),
  };
}
