/**
 * The console's web server (docs/design.md#the-review-console): node:http on 127.0.0.1 only. Every request passes
 * the same gate, in this order: the socket's peer must be a loopback address; the Host header must name this
 * console (a DNS-rebinding page reaches 127.0.0.1 under its own host name); the request must carry the session
 * cookie, which only the token printed at start obtains; a form post is refused in read-only mode and needs the
 * page's CSRF token. A refusal changes nothing and says why, with its status code.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DecisionError, InvalidInputError } from '../../errors.js';
import { TOOL_REVIEW_OUTCOMES, type ToolReviewOutcome } from '../../event/types.js';
import { decisionInbox } from '../../store/inbox.js';
import { watchQueue } from '../../store/queue-watch.js';
import type { SessionStore } from '../../store/types.js';
import { callBasis, queueFilters, readQueue, readSession, reviewRefusal } from './data.js';
import { LIVE_SCRIPT_HASH, notice, page } from './html.js';
import { approvalRows, callPage, queueCount, queuePage, queueRows, sessionPage, type CallNotice } from './views.js';

export interface ConsoleOptions {
  readonly store: SessionStore;
  /** The operator's name, recorded on every decision; null only with readOnly. */
  readonly actor: string | null;
  readonly readOnly: boolean;
  /** 0 (default): any free port. */
  readonly port?: number;
  /** How often the live queue reads the store, in ms (default 1000). */
  readonly pollMs?: number;
}

export interface RunningConsole {
  /** http://127.0.0.1:<port> */
  readonly origin: string;
  /** The link to open: the origin with the token, which the console exchanges for its cookie. */
  readonly link: string;
  close(): Promise<void>;
}

export const COOKIE = 'jingwei_console';
const MAX_FORM_BYTES = 64 * 1024;

/** 127.0.0.0/8, ::1 and IPv4-mapped 127.x. */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (address === undefined) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4) || address === '::1';
}

export interface Refusal {
  readonly status: number;
  readonly message: string;
}

/** The network half of the gate: who is asking (the socket's peer) and which host they think they reach. */
export function networkRefusal(remoteAddress: string | undefined, host: string | undefined, port: number): Refusal | null {
  if (!isLoopbackAddress(remoteAddress)) {
    return { status: 403, message: `Refused: the console answers only this machine (loopback), not ${remoteAddress ?? 'an unknown peer'}. Nothing was changed.` };
  }
  const allowed = [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`];
  if (host === undefined || !allowed.includes(host.toLowerCase())) {
    return {
      status: 421,
      message: `Refused: the Host header ${JSON.stringify(host ?? '')} is not this console (${allowed[0]}); a page from another site may be trying to reach it (DNS rebinding). Nothing was changed.`,
    };
  }
  return null;
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function cookieOf(req: IncomingMessage): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [name, ...rest] = part.trim().split('=');
    if (name === COOKIE) return rest.join('=');
  }
  return undefined;
}

const SECURITY_HEADERS = {
  'Content-Security-Policy': `default-src 'none'; style-src 'unsafe-inline'; script-src ${LIVE_SCRIPT_HASH}; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

class HttpRefusal extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  return new Promise((resolve, reject) => {
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/x-www-form-urlencoded') {
      reject(new HttpRefusal(415, 'Refused: send the form as application/x-www-form-urlencoded. Nothing was changed.'));
      req.resume();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_FORM_BYTES) {
        reject(new HttpRefusal(413, `Refused: the form is larger than ${MAX_FORM_BYTES} bytes. Nothing was changed.`));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(new URLSearchParams(Buffer.concat(chunks).toString('utf8'))));
    req.on('error', reject);
  });
}

/** The console: a request handler over one store, and the live queue's event streams. */
class Console {
  readonly token = randomBytes(32).toString('base64url');
  readonly csrf = randomBytes(32).toString('base64url');
  private readonly streams = new Set<ServerResponse>();
  /** Each live stream's read of the queue, run again when the store announces a change. */
  private readonly refreshers = new Set<() => void>();
  /** Set when the store pushes its changes (watchQueue): the streams then read on a change, and poll only slowly. */
  pushed = false;
  port = 0;

  constructor(private readonly options: ConsoleOptions) {}

  private send(res: ServerResponse, status: number, title: string, body: string, live = false): void {
    const html = page({ title, actor: this.options.actor, readOnly: this.options.readOnly, live }, body);
    res.writeHead(status, { 'Content-Type': 'text/html; charset=utf-8', ...SECURITY_HEADERS });
    res.end(html);
  }

  private refuse(res: ServerResponse, refusal: Refusal): void {
    this.send(res, refusal.status, 'Refused', `<h1>Refused</h1>${notice('error', refusal.message)}`);
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const network = networkRefusal(req.socket.remoteAddress, req.headers.host, this.port);
    if (network) return this.refuse(res, network);
    const url = new URL(req.url ?? '/', `http://127.0.0.1:${this.port}`);
    const offered = url.searchParams.get('token');
    if (offered !== null && req.method === 'GET') {
      if (!same(offered, this.token)) return this.refuse(res, { status: 401, message: 'Refused: this link carries a wrong token. Open the link the console printed when it started. Nothing was changed.' });
      url.searchParams.delete('token');
      res.writeHead(303, { Location: url.pathname + url.search, 'Set-Cookie': `${COOKIE}=${this.token}; HttpOnly; SameSite=Strict; Path=/`, ...SECURITY_HEADERS });
      res.end();
      return;
    }
    const cookie = cookieOf(req);
    if (cookie === undefined || !same(cookie, this.token)) {
      return this.refuse(res, { status: 401, message: 'Refused: no valid console token. Open the link the console printed when it started (it carries the token). Nothing was changed.' });
    }
    let parts: string[];
    try {
      parts = url.pathname.split('/').filter((p) => p.length > 0).map((p) => decodeURIComponent(p));
    } catch {
      return this.refuse(res, { status: 400, message: 'Refused: the address is malformed.' });
    }
    if (req.method === 'POST') return this.post(req, res, parts);
    if (req.method !== 'GET') return this.refuse(res, { status: 405, message: `Refused: ${req.method ?? 'this method'} is not used here. Nothing was changed.` });
    if (parts.length === 0) return this.queue(res, url.searchParams);
    if (parts.length === 1 && parts[0] === 'events') return this.events(req, res, url.searchParams);
    if (parts.length === 2 && parts[0] === 'session') return this.session(res, parts[1]!);
    if (parts.length === 4 && parts[0] === 'session' && parts[2] === 'call') return this.call(res, parts[1]!, parts[3]!, 200, null);
    return this.send(res, 404, 'Not found', `<h1>Not found</h1>${notice('error', 'There is no such page. Start from the queue.')}`);
  }

  private async queue(res: ServerResponse, params: URLSearchParams): Promise<void> {
    const { filters, errors } = queueFilters(params);
    const view = await readQueue(this.options.store, filters);
    this.send(res, errors.length > 0 ? 400 : 200, 'Queue', queuePage(view, filters, errors, new Date().toISOString()), true);
  }

  private async events(req: IncomingMessage, res: ServerResponse, params: URLSearchParams): Promise<void> {
    const { filters } = queueFilters(params);
    res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', Connection: 'keep-alive', 'X-Content-Type-Options': 'nosniff' });
    this.streams.add(res);
    let last = '';
    let lastSent = 0;
    let busy = false;
    let again = false;
    const tick = async (): Promise<void> => {
      if (res.writableEnded) return;
      if (busy) {
        again = true; // a change committed while reading may not be in what is being read
        return;
      }
      busy = true;
      again = false;
      try {
        const view = await readQueue(this.options.store, filters);
        const signature = JSON.stringify([view.items.map((i) => [i.callId, i.status, i.category, i.endedAt]), view.approvals.map((r) => r.id)]);
        if (signature !== last || Date.now() - lastSent > 10_000) {
          last = signature;
          lastSent = Date.now();
          const now = new Date().toISOString();
          res.write(`event: queue\ndata: ${JSON.stringify({ rows: queueRows(view, now), approvals: approvalRows(view.approvals, now), count: queueCount(view) })}\n\n`);
        }
      } catch (error) {
        res.write(`event: failure\ndata: ${JSON.stringify({ message: (error as Error).message })}\n\n`);
      } finally {
        busy = false;
      }
      if (again) await tick();
    };
    const refresh = () => void tick();
    const pollMs = this.options.pollMs ?? 1000;
    const timer = setInterval(refresh, this.pushed ? Math.max(pollMs, 10_000) : pollMs);
    this.refreshers.add(refresh);
    const stop = () => {
      clearInterval(timer);
      this.refreshers.delete(refresh);
      this.streams.delete(res);
    };
    req.on('close', stop);
    res.on('close', stop);
    await tick();
  }

  private async session(res: ServerResponse, sessionId: string): Promise<void> {
    const view = await readSession(this.options.store, sessionId);
    if (view === null) return this.send(res, 404, 'No such session', `<h1>No such session</h1>${notice('error', `The store has no session ${sessionId}.`)}`);
    this.send(res, 200, `Session ${sessionId}`, sessionPage(view));
  }

  private async call(res: ServerResponse, sessionId: string, callId: string, status: number, shown: CallNotice | null, form: { outcome?: string; evidence?: string; reason?: string } = {}): Promise<void> {
    const view = await readSession(this.options.store, sessionId);
    if (view === null || !view.calls.has(callId)) {
      return this.send(res, 404, 'No such call', `<h1>No such call</h1>${notice('error', `${shown ? `${shown.text} ` : ''}Session ${sessionId} has no call ${callId}.`)}`);
    }
    this.send(res, status, `Call ${callId}`, callPage(view, callId, { readOnly: this.options.readOnly, csrf: this.csrf }, shown, form));
  }

  private async post(req: IncomingMessage, res: ServerResponse, parts: string[]): Promise<void> {
    if (this.options.readOnly || this.options.actor === null) {
      req.resume();
      return this.refuse(res, { status: 403, message: 'Refused: this console is read-only (--read-only). Nothing was recorded.' });
    }
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== `http://127.0.0.1:${this.port}` && origin !== `http://localhost:${this.port}`) {
      req.resume();
      return this.refuse(res, { status: 403, message: `Refused: the form was sent from ${origin}, not from this console. Nothing was recorded.` });
    }
    let form: URLSearchParams;
    try {
      form = await readForm(req);
    } catch (error) {
      if (error instanceof HttpRefusal) return this.refuse(res, { status: error.status, message: error.message });
      throw error;
    }
    if (!same(form.get('csrf') ?? '', this.csrf)) {
      return this.refuse(res, { status: 403, message: 'Refused: the form\'s CSRF token is missing or wrong (reload the page and send it again). Nothing was recorded.' });
    }
    if (parts.length === 5 && parts[0] === 'session' && parts[2] === 'call' && parts[4] === 'review') return this.review(res, parts[1]!, parts[3]!, form);
    if (parts.length === 2 && parts[0] === 'approval') return this.decide(res, parts[1]!, form);
    return this.send(res, 404, 'Not found', `<h1>Not found</h1>${notice('error', 'Nothing is decided at this address. Nothing was recorded.')}`);
  }

  private async review(res: ServerResponse, sessionId: string, callId: string, form: URLSearchParams): Promise<void> {
    const actor = this.options.actor!;
    const outcome = form.get('outcome') ?? '';
    const evidence = form.get('evidence') ?? '';
    const kept = { outcome, evidence };
    if (!(TOOL_REVIEW_OUTCOMES as readonly string[]).includes(outcome)) {
      return this.call(res, sessionId, callId, 400, { kind: 'error', text: `Nothing was recorded: choose an outcome (${TOOL_REVIEW_OUTCOMES.join(', ')}).` }, kept);
    }
    if (evidence.trim() === '') {
      return this.call(res, sessionId, callId, 400, { kind: 'error', text: 'Nothing was recorded: say what you checked in the outside system (the evidence).' }, kept);
    }
    const view = await readSession(this.options.store, sessionId);
    if (view === null || !view.calls.has(callId)) return this.call(res, sessionId, callId, 404, { kind: 'error', text: 'Nothing was recorded.' });
    const refusal = reviewRefusal(view, callId);
    if (refusal !== null) return this.call(res, sessionId, callId, 409, { kind: 'error', text: `Refused, nothing was recorded: the decision is stale: ${refusal}.` }, kept);
    if (form.get('basis') !== callBasis(view, callId)) {
      return this.call(res, sessionId, callId, 409, { kind: 'error', text: 'Refused, nothing was recorded: the call changed since you opened this page (a result, a review or a newer attempt). Check it again below and decide anew.' }, kept);
    }
    try {
      const row = await decisionInbox(this.options.store).recordReview({ sessionId, callId, outcome: outcome as ToolReviewOutcome, evidence, actor });
      return this.call(res, sessionId, callId, 200, { kind: 'done', text: `Recorded review ${row.id}: ${outcome} by ${actor}. The session's host journals it when it next uses the decision inbox.` });
    } catch (error) {
      if (error instanceof InvalidInputError) return this.call(res, sessionId, callId, 400, { kind: 'error', text: `Nothing was recorded: ${error.message}` }, kept);
      if (error instanceof DecisionError) return this.call(res, sessionId, callId, error.code === 'decision_not_found' ? 404 : 409, { kind: 'error', text: `Refused, nothing was recorded: ${error.message}` }, kept);
      throw error;
    }
  }

  private async decide(res: ServerResponse, requestId: string, form: URLSearchParams): Promise<void> {
    const actor = this.options.actor!;
    const decision = form.get('decision');
    const reason = form.get('reason')?.trim() ?? '';
    const inbox = decisionInbox(this.options.store);
    let row;
    try {
      row = await inbox.get(requestId);
    } catch (error) {
      if (error instanceof InvalidInputError) return this.send(res, 400, 'Bad request', `<h1>Bad request</h1>${notice('error', `Nothing was recorded: ${error.message}`)}`);
      throw error;
    }
    if (row?.kind !== 'approval') return this.send(res, 404, 'No such request', `<h1>No such request</h1>${notice('error', `Nothing was recorded: there is no approval request ${requestId}.`)}`);
    const back = (status: number, shown: CallNotice) => this.call(res, row.sessionId, row.callId, status, shown, { reason });
    if (decision !== 'approve' && decision !== 'deny') return back(400, { kind: 'error', text: 'Nothing was recorded: choose Approve or Deny.' });
    try {
      const input = { actor, ...(reason !== '' ? { reason } : {}) };
      const decided = decision === 'approve' ? await inbox.approve(requestId, input) : await inbox.deny(requestId, input);
      return back(200, { kind: 'done', text: `${decision === 'approve' ? 'Approved' : 'Denied'} ${decided.id} as ${actor}. The session's host uses it on the next attempt of this operation.` });
    } catch (error) {
      if (error instanceof InvalidInputError) return back(400, { kind: 'error', text: `Nothing was recorded: ${error.message}` });
      if (error instanceof DecisionError) return back(error.code === 'decision_not_found' ? 404 : 409, { kind: 'error', text: `Refused, nothing was recorded: the decision is stale: ${error.message}.` });
      throw error;
    }
  }

  /** The store announced a change: every live stream reads the queue again (a read in progress reads once more). */
  changed(): void {
    for (const refresh of this.refreshers) refresh();
  }

  closeStreams(): void {
    for (const res of this.streams) res.end();
    this.streams.clear();
  }
}

/** Starts the console on 127.0.0.1; the returned link carries the token (print it for the operator). */
export async function startConsole(options: ConsoleOptions): Promise<RunningConsole> {
  if (!options.readOnly && (options.actor === null || options.actor.trim() === '')) {
    throw new InvalidInputError('actor', 'is required unless the console is read-only');
  }
  const app = new Console(options);
  const stopWatching = await watchQueue(options.store, () => app.changed());
  app.pushed = stopWatching !== null;
  const server: Server = createServer((req, res) => {
    app.handle(req, res).catch((error: unknown) => {
      if (res.headersSent) {
        res.end();
        return;
      }
      res.writeHead(500, { 'Content-Type': 'text/html; charset=utf-8', ...SECURITY_HEADERS });
      res.end(page({ title: 'Error', actor: options.actor, readOnly: options.readOnly }, `<h1>The store could not be read</h1>${notice('error', `${(error as Error).message ?? String(error)}. Nothing was recorded.`)}`));
    });
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
    });
  } catch (error) {
    await stopWatching?.();
    throw error;
  }
  app.port = (server.address() as AddressInfo).port;
  const origin = `http://127.0.0.1:${app.port}`;
  return {
    origin,
    link: `${origin}/?token=${app.token}`,
    close: async () => {
      await stopWatching?.();
      await new Promise<void>((resolve) => {
        app.closeStreams();
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
