/**
 * The console's web server (docs/design.md#the-review-console): node:http on 127.0.0.1 only. Every request passes
 * the same gate (gate.ts), in this order: the socket's peer must be a loopback address; the Host header must name
 * this console (a DNS-rebinding page reaches 127.0.0.1 under its own host name); the path must start with the
 * console's random prefix, the only path its cookie is sent to; the request must carry that cookie, which only the
 * token printed at start obtains; a form post is refused in read-only mode and needs the page's CSRF token. A
 * refusal changes nothing and says why, with its status code. A failure says whether a decision was recorded.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type OutgoingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DecisionError, InvalidInputError, JournalCorruptError } from '../../errors.js';
import { TOOL_REVIEW_OUTCOMES, type ToolReviewOutcome } from '../../event/types.js';
import { decisionInbox } from '../../store/inbox.js';
import { watchQueue } from '../../store/queue-watch.js';
import type { SessionStore } from '../../store/types.js';
import { APPROVER_FIRST } from '../assessment.js';
import { LatestUpdate } from './live-stream.js';
import { callBasis, queueFilters, readQueue, readSession, reviewRefusal } from './data.js';
import { checkActor, cookieValues, HttpRefusal, networkRefusal, readForm, same, SECURITY_HEADERS, sessionCookie, type Refusal } from './gate.js';
import { safeId } from '../format.js';
import { hasVisibleText } from '../../text.js';
import { callHref, h, notice, page, segValue } from './html.js';
import { queuePage, queueParts } from './queue-page.js';
import { callPage, sessionPage, type CallNotice, type TypedForm } from './views.js';

export { checkActor, COOKIE, isLoopbackAddress, networkRefusal, type Refusal } from './gate.js';

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
  /** The origin and the console's random path, `http://127.0.0.1:<port>/<prefix>`: every page is under it. */
  readonly base: string;
  /** The link to open: the queue's address with the token, which the console exchanges for its cookie. */
  readonly link: string;
  close(): Promise<void>;
}

/** A textarea's text as the operator typed it: browsers send its line breaks as CRLF. */
function typed(form: URLSearchParams, name: string): string {
  return (form.get(name) ?? '').replace(/\r\n?/g, '\n');
}

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** The console: a request handler over one store, and the live queue's event streams. */
class Console {
  readonly token = randomBytes(32).toString('base64url');
  readonly csrf = randomBytes(32).toString('base64url');
  /** The console's random path: every page is under `/<prefix>/`, and the cookie is sent there only. */
  readonly prefix = randomBytes(18).toString('base64url');
  readonly base = `/${this.prefix}`;
  private readonly streams = new Set<ServerResponse>();
  /** Each live stream's read of the queue, run again when the store announces a change. */
  private readonly refreshers = new Set<() => void>();
  /** Set when the store pushes its changes (watchQueue): the streams then read on a change, and poll only slowly. */
  pushed = false;
  port = 0;

  constructor(private readonly options: ConsoleOptions) {}

  /**
   * A page. `outside`: a refusal of the gate, answered to a request that may not know the console's path (a page of
   * another site reading a DNS-rebound answer, another server's guess), so the page must not name it: no links.
   */
  send(res: ServerResponse, status: number, title: string, body: string, how: { live?: boolean; outside?: boolean; headers?: OutgoingHttpHeaders } = {}): void {
    const html = page({ title, base: how.outside === true ? null : this.base, actor: this.options.actor, readOnly: this.options.readOnly, live: how.live === true }, body);
    res.writeHead(status, { 'Content-Type': 'text/html; charset=utf-8', ...SECURITY_HEADERS, ...how.headers });
    res.end(html);
  }

  private refuse(res: ServerResponse, refusal: Refusal, how: { outside?: boolean; headers?: OutgoingHttpHeaders } = {}): void {
    this.send(res, refusal.status, 'Refused', `<h1>Refused</h1>${notice('error', refusal.message)}`, how);
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const network = networkRefusal(req.socket.remoteAddress, req.headers.host, this.port);
    if (network) return this.refuse(res, network, { outside: true });
    const url = new URL(req.url ?? '/', `http://127.0.0.1:${this.port}`);
    const raw = url.pathname.split('/').filter((p) => p.length > 0);
    if (!same(raw[0] ?? '', this.prefix)) {
      req.resume();
      return this.refuse(res, {
        status: 404,
        message: 'Refused: there is no page at this address. The console\'s pages are under the random path of the link it printed when it started: open that link. Nothing was changed.',
      }, { outside: true });
    }
    const offered = url.searchParams.get('token');
    if (offered !== null && req.method === 'GET') {
      if (!same(offered, this.token)) return this.refuse(res, { status: 401, message: 'Refused: this link carries a wrong token. Open the link the console printed when it started. Nothing was changed.' }, { outside: true });
      url.searchParams.delete('token');
      res.writeHead(303, { Location: url.pathname + url.search, 'Set-Cookie': sessionCookie(this.prefix, this.token), ...SECURITY_HEADERS });
      res.end();
      return;
    }
    if (!cookieValues(req).some((value) => same(value, this.token))) {
      req.resume();
      return this.refuse(res, { status: 401, message: 'Refused: no valid console token. Open the link the console printed when it started (it carries the token). Nothing was changed.' }, { outside: true });
    }
    let parts: string[];
    try {
      parts = raw.slice(1).map(segValue);
    } catch {
      return this.refuse(res, { status: 400, message: 'Refused: the address is malformed.' });
    }
    if (req.method === 'POST') return this.post(req, res, parts);
    if (req.method !== 'GET') return this.refuse(res, { status: 405, message: `Refused: ${req.method ?? 'this method'} is not used here. Nothing was changed.` });
    if (parts.length === 0) return this.queue(res, url.searchParams);
    if (parts.length === 1 && parts[0] === 'events') return this.events(req, res, url.searchParams);
    if (parts.length === 2 && parts[0] === 'session') return this.session(res, parts[1]!);
    if (parts.length === 4 && parts[0] === 'session' && parts[2] === 'call') {
      const recorded = url.searchParams.get('recorded');
      if (recorded !== null) return this.recordedPage(res, parts[1]!, parts[3]!, recorded);
      return this.call(res, parts[1]!, parts[3]!, 200, null);
    }
    return this.send(res, 404, 'Not found', `<h1>Not found</h1>${notice('error', 'There is no such page. Start from the queue.')}`);
  }

  private async queue(res: ServerResponse, params: URLSearchParams): Promise<void> {
    const { filters, paging, errors } = queueFilters(params);
    let view;
    try {
      view = await readQueue(this.options.store, filters, paging);
    } catch (error) {
      if (!(error instanceof InvalidInputError)) throw error;
      return this.send(res, 400, 'Queue', `<h1>Needs attention</h1>${notice('error', `This page of the queue cannot be listed: ${error.message}.`)}<p><a href="${h(this.base)}/">Start again from the first page</a></p>`);
    }
    this.send(res, errors.length > 0 ? 400 : 200, 'Queue', queuePage(view, filters, paging, errors, new Date().toISOString(), this.base), { live: true });
  }

  private async events(req: IncomingMessage, res: ServerResponse, params: URLSearchParams): Promise<void> {
    const { filters, paging } = queueFilters(params);
    res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', Connection: 'keep-alive', 'X-Content-Type-Options': 'nosniff' });
    this.streams.add(res);
    const live = new LatestUpdate(res);
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
        const view = await readQueue(this.options.store, filters, paging);
        const ids = (list: { items: readonly { id: string }[]; next: string | null }) => [list.items.map((r) => r.id), list.next];
        const signature = JSON.stringify([view.items.items.map((i) => [i.callId, i.status, i.category, i.endedAt, view.bodyEnds.get(i.callId) ?? null]), view.items.next, ids(view.approvals), ids(view.decided), ids(view.reviews)]);
        if (signature !== last || Date.now() - lastSent > 10_000) {
          last = signature;
          lastSent = Date.now();
          live.send(`event: queue\ndata: ${JSON.stringify({ parts: queueParts(view, filters, paging, new Date().toISOString(), this.base) })}\n\n`);
        }
      } catch (error) {
        live.send(`event: failure\ndata: ${JSON.stringify({ message: message(error) })}\n\n`);
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
    if (view === null) return this.send(res, 404, 'No such session', `<h1>No such session</h1>${notice('error', `The store has no session ${safeId(sessionId)}.`)}`);
    this.send(res, 200, `Session ${safeId(sessionId)}`, sessionPage(view, this.base));
  }

  private async call(res: ServerResponse, sessionId: string, callId: string, status: number, shown: CallNotice | null, form: TypedForm = {}): Promise<void> {
    const view = await readSession(this.options.store, sessionId, [callId]);
    if (view === null || !view.calls.has(callId)) {
      return this.send(res, 404, 'No such call', `<h1>No such call</h1>${notice('error', `${shown ? `${shown.text} ` : ''}Session ${safeId(sessionId)} has no call ${safeId(callId)}.`)}`);
    }
    this.send(res, status, `Call ${safeId(callId)}`, callPage(view, callId, { base: this.base, readOnly: this.options.readOnly, csrf: this.csrf }, shown, form));
  }

  /**
   * A decision is recorded: the browser is sent to the call's page (303, Post/Redirect/Get), naming the decision, so
   * that reloading the page it lands on reads the call again instead of sending the decision a second time (which
   * was refused as stale, right after the operator's own decision had been recorded).
   */
  private recorded(res: ServerResponse, sessionId: string, callId: string, decisionId: string): void {
    res.writeHead(303, { Location: `${callHref(this.base, sessionId, callId)}?recorded=${encodeURIComponent(decisionId)}`, ...SECURITY_HEADERS });
    res.end();
  }

  /** What a recorded decision of this call says, read from the inbox; null for an id that names none of this call's. */
  private async recordedNotice(sessionId: string, callId: string, decisionId: string): Promise<CallNotice | null> {
    let row;
    try {
      row = await decisionInbox(this.options.store).get(decisionId);
    } catch (error) {
      if (error instanceof InvalidInputError) return null;
      throw error;
    }
    if (row === null || row === undefined || row.sessionId !== sessionId || row.callId !== callId || row.decision === null) return null;
    if (row.kind === 'review') {
      return { kind: 'done', text: `Recorded review ${row.id}: ${row.decision} by ${row.actor}. The session's host journals it when it next uses the decision inbox.` };
    }
    const approved = row.decision === 'approved';
    return { kind: 'done', text: `${approved ? 'Approved' : 'Denied'} ${row.id} as ${row.actor}. The session's host uses it on the next attempt of this operation${approved ? APPROVER_FIRST : ''}.` };
  }

  /** The call's page after a decision was recorded; if the call cannot be read, the page still says it was recorded. */
  private async recordedPage(res: ServerResponse, sessionId: string, callId: string, decisionId: string): Promise<void> {
    let done: CallNotice | null = null;
    try {
      done = await this.recordedNotice(sessionId, callId, decisionId);
      await this.call(res, sessionId, callId, 200, done);
    } catch (error) {
      if (res.headersSent) {
        res.end();
        return;
      }
      this.send(res, 200, 'Recorded', `<h1>Recorded</h1>${notice('done', done?.text ?? `Recorded decision ${decisionId}.`)}${notice('error', `The call's page could not be read again to show it: ${message(error)}. The decision is recorded all the same; do not send it again.`)}<p><a href="${h(this.base)}/">Back to the queue</a></p>`);
    }
  }

  /** Writing a decision to the inbox failed for a reason other than the decision itself (the store refused the write). */
  private writeFailed(res: ServerResponse, sessionId: string, callId: string, error: unknown): void {
    this.send(res, 500, 'Not recorded', `<h1>The decision could not be written</h1>${notice('error', `Writing it to the store's decision inbox failed: ${message(error)}. Open the call's page again to see what is recorded before you decide again.`)}<p><a href="${h(callHref(this.base, sessionId, callId))}">The call's page</a></p>`);
  }

  /**
   * Where a form came from, when that is not this console: its `Origin`, or, for a client that sends none, its
   * `Sec-Fetch-Site` (anything but same-origin) or the origin of its `Referer`. Null when nothing names another.
   */
  private foreignSender(req: IncomingMessage): string | null {
    const ours = (origin: string) => origin === `http://127.0.0.1:${this.port}` || origin === `http://localhost:${this.port}`;
    const origin = req.headers.origin;
    if (origin !== undefined) return ours(origin) ? null : origin;
    const site = req.headers['sec-fetch-site'];
    if (typeof site === 'string' && site !== 'same-origin' && site !== 'none') return `a ${site} page`;
    const referer = req.headers.referer;
    if (referer === undefined) return null;
    let from: string;
    try {
      from = new URL(referer).origin;
    } catch {
      return JSON.stringify(referer);
    }
    return ours(from) ? null : from;
  }

  private async post(req: IncomingMessage, res: ServerResponse, parts: string[]): Promise<void> {
    if (this.options.readOnly || this.options.actor === null) {
      req.resume();
      return this.refuse(res, { status: 403, message: 'Refused: this console is read-only (--read-only). Nothing was recorded.' });
    }
    const foreign = this.foreignSender(req);
    if (foreign !== null) {
      req.resume();
      return this.refuse(res, { status: 403, message: `Refused: the form was sent from ${foreign}, not from this console. Nothing was recorded.` });
    }
    let form: URLSearchParams;
    try {
      form = await readForm(req);
    } catch (error) {
      if (error instanceof HttpRefusal) return this.refuse(res, { status: error.status, message: error.message }, error.close ? { headers: { Connection: 'close' } } : {});
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
    const evidence = typed(form, 'evidence');
    const kept = { outcome, evidence };
    if (!(TOOL_REVIEW_OUTCOMES as readonly string[]).includes(outcome)) {
      return this.call(res, sessionId, callId, 400, { kind: 'error', text: `Nothing was recorded: choose an outcome (${TOOL_REVIEW_OUTCOMES.join(', ')}).` }, kept);
    }
    if (!hasVisibleText(evidence)) {
      return this.call(res, sessionId, callId, 400, { kind: 'error', text: 'Nothing was recorded: say what you checked in the outside system (the evidence).' }, kept);
    }
    const view = await readSession(this.options.store, sessionId, [callId]);
    if (view === null || !view.calls.has(callId)) return this.call(res, sessionId, callId, 404, { kind: 'error', text: 'Nothing was recorded.' });
    const refusal = reviewRefusal(view, callId);
    if (refusal !== null) return this.call(res, sessionId, callId, 409, { kind: 'error', text: `Refused, nothing was recorded: the decision is stale: ${refusal}.` }, kept);
    if (form.get('basis') !== callBasis(view, callId)) {
      return this.call(res, sessionId, callId, 409, { kind: 'error', text: 'Refused, nothing was recorded: the call changed since you opened this page (a result, a review or a newer attempt). Check it again below and decide anew.' }, kept);
    }
    let row;
    try {
      // The basis matched, so the operator saw the review waiting now (if any): replacing exactly that one is atomic.
      const replaces = view.inboxReviews.get(callId)?.id;
      row = await decisionInbox(this.options.store).recordReview({
        sessionId, callId, outcome: outcome as ToolReviewOutcome, evidence, actor, ...(replaces !== undefined ? { replaces } : {}),
        ...(form.get('despite_late_return') === 'yes' ? { despiteLateReturn: true } : {}),
      });
    } catch (error) {
      if (error instanceof InvalidInputError) return this.call(res, sessionId, callId, 400, { kind: 'error', text: `Nothing was recorded: ${error.message}` }, kept);
      if (error instanceof DecisionError) return this.call(res, sessionId, callId, error.code === 'decision_not_found' ? 404 : 409, { kind: 'error', text: `Refused, nothing was recorded: ${error.message.replace(/^nothing was recorded: /, '')}` }, kept);
      return this.writeFailed(res, sessionId, callId, error);
    }
    return this.recorded(res, sessionId, callId, row.id);
  }

  private async decide(res: ServerResponse, requestId: string, form: URLSearchParams): Promise<void> {
    const actor = this.options.actor!;
    const decision = form.get('decision');
    const reasonTyped = typed(form, 'reason');
    const reason = reasonTyped.trim();
    const inbox = decisionInbox(this.options.store);
    let row;
    try {
      row = await inbox.get(requestId);
    } catch (error) {
      if (error instanceof InvalidInputError) return this.send(res, 400, 'Bad request', `<h1>Bad request</h1>${notice('error', `Nothing was recorded: ${error.message}`)}`);
      throw error;
    }
    if (row?.kind !== 'approval') return this.send(res, 404, 'No such request', `<h1>No such request</h1>${notice('error', `Nothing was recorded: there is no approval request ${requestId}.`)}`);
    const back = (status: number, shown: CallNotice) => this.call(res, row.sessionId, row.callId, status, shown, { reason: reasonTyped });
    if (decision !== 'approve' && decision !== 'deny') return back(400, { kind: 'error', text: 'Nothing was recorded: choose Approve or Deny.' });
    let decided;
    try {
      const input = { actor, ...(reason !== '' ? { reason } : {}) };
      const identical = form.get('allow-identical') === 'yes';
      decided = decision === 'approve' ? await inbox.approve(requestId, { ...input, ...(identical ? { allowIdentical: true } : {}) }) : await inbox.deny(requestId, input);
    } catch (error) {
      if (error instanceof InvalidInputError) return back(400, { kind: 'error', text: `Nothing was recorded: ${error.message}` });
      if (error instanceof DecisionError && error.code === 'decision_identical') {
        return back(409, { kind: 'error', text: `Refused: ${error.message.replace('allowIdentical (jingwei approve --allow-identical)', 'the box "a second identical write is meant" ticked')}.` });
      }
      if (error instanceof DecisionError) return back(error.code === 'decision_not_found' ? 404 : 409, { kind: 'error', text: `Refused, nothing was recorded: the decision is stale: ${error.message}.` });
      return this.writeFailed(res, row.sessionId, row.callId, error);
    }
    return this.recorded(res, row.sessionId, row.callId, decided.id);
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
  if (!options.readOnly) {
    if (options.actor === null || !hasVisibleText(options.actor)) throw new InvalidInputError('actor', 'is required unless the console is read-only');
    checkActor(options.actor);
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
      // Every write handles its own failure (review, decide): what fails here failed reading.
      if (error instanceof InvalidInputError) {
        app.send(res, 400, 'Bad request', `<h1>Bad request</h1>${notice('error', `This address names nothing the store could hold: ${message(error)}. Nothing was recorded.`)}`);
      } else if (error instanceof JournalCorruptError) {
        app.send(res, 500, 'Damaged journal', `<h1>A damaged journal</h1>${notice('error', `${message(error)}. Nothing was recorded. ` +
          'Decide nothing about this session from the console or the queue: its evidence cannot be trusted. Run `jingwei verify` on the store, ' +
          'then restore the session from a backup or an export (docs/operator-guide.md).')}`);
      } else {
        app.send(res, 500, 'Error', `<h1>The store could not be read</h1>${notice('error', `${message(error)}. Nothing was recorded.`)}`);
      }
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
    base: `${origin}${app.base}`,
    link: `${origin}${app.base}/?token=${app.token}`,
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
