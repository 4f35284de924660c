/**
 * Shared by the console tests: the console as a real child process (its link parsed from stdout), the host child,
 * open approval requests, and Debian's Chromium driven by playwright-core. Importing this file does nothing.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright-core';
import { createToolRuntime, ToolMetadata, type SessionStore } from '../../src/index.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { ChildProcess } from '../support/child.js';
import { MAIN } from '../cli/helpers.js';

export const HOST = fileURLToPath(new URL('./children/host.js', import.meta.url));
export const CHROMIUM = '/usr/bin/chromium';

/** Why the browser tests cannot run here, or null. In CI a missing Chromium is a failure, never a skip. */
export function chromiumMissing(): string | null {
  if (existsSync(CHROMIUM)) return null;
  if (process.env.CI) throw new Error(`${CHROMIUM} is missing and CI is set: the console's browser tests must run (.ci/run installs Debian's chromium)`);
  return `${CHROMIUM} is not installed (apt-get install chromium)`;
}

export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

export interface ConsoleProcess {
  readonly proc: ChildProcessWithoutNullStreams;
  readonly link: string;
  readonly origin: string;
  /** The console's random path, `/<prefix>`: every page is under it (`path` below prepends it). */
  readonly prefix: string;
  /** The origin and the prefix: `base + '/session/…'` is a page. */
  readonly base: string;
  readonly port: number;
  readonly token: string;
  /** A page's path under the console's prefix: `path('/')` is the queue. */
  path(page: string): string;
  stop(): Promise<void>;
}

/** Starts `jingwei console <db> ...args` and reads the link it prints. */
export function startConsoleProcess(db: string, args: readonly string[]): Promise<ConsoleProcess> {
  const proc = spawn(process.execPath, [MAIN, 'console', db, ...args], { stdio: 'pipe', env: { ...process.env, NO_COLOR: '1' } });
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    const onExit = () => reject(new Error(`the console exited before printing its link: ${stderr}`));
    proc.once('exit', onExit);
    createInterface({ input: proc.stdout }).on('line', (line) => {
      const m = /^Open: (http:\/\/127\.0\.0\.1:(\d+))(\/[A-Za-z0-9_-]{16,})\/\?token=([A-Za-z0-9_-]+)$/.exec(line);
      if (!m) return;
      proc.off('exit', onExit);
      const prefix = m[3]!;
      resolve({
        proc,
        link: `${m[1]}${prefix}/?token=${m[4]}`,
        origin: m[1]!,
        prefix,
        base: `${m[1]}${prefix}`,
        port: Number(m[2]),
        token: m[4]!,
        path: (page: string) => `${prefix}${page}`,
        stop: async () => {
          if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
          await exited;
        },
      });
    });
  });
}

/** Runs the host child in `crash` mode: resolves after the body's side effect, with the call id; then SIGKILLs it. */
export async function crashAfterEffect(db: string, effects: string, session: string): Promise<string> {
  const host = new ChildProcess(HOST, ['crash', db, effects, session]);
  const line = await host.next<{ effect?: boolean; callId?: string; error?: string }>();
  if (line.effect !== true || typeof line.callId !== 'string') throw new Error(`the host did not reach its side effect: ${JSON.stringify(line)} ${host.stderr}`);
  host.proc.kill('SIGKILL');
  const exit = await host.exited;
  if (exit.signal !== 'SIGKILL') throw new Error(`the host was not killed: ${JSON.stringify(exit)}`);
  return line.callId;
}

/**
 * Resolves once the lease of the SIGKILLed host on `session` has run out (a review of a call whose host may still
 * be running is refused, call_in_flight); a guard fails the test if it never does.
 */
export async function leaseExpired(db: string, session: string): Promise<void> {
  const store = openSqliteStore(db);
  try {
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
      const summary = (await store.listSessions()).find((s) => s.sessionId === session);
      if (summary?.leaseExpired === true) return;
    }
    throw new Error(`the lease on ${session} did not run out`);
  } finally {
    await store.close();
  }
}

/** Runs the host child in `recover` mode and returns its report. */
export async function recoverHost(db: string, effects: string): Promise<RecoveryReportJson> {
  const host = new ChildProcess(HOST, ['recover', db, effects]);
  const report = await host.next<RecoveryReportJson>();
  await host.exited;
  return report;
}

export interface RecoveryReportJson {
  sessions: { sessionId: string; journaledReviews?: unknown[]; retried: { callId: string; retryCallId: string | null; outcome: string }[]; left: { callId: string }[] }[];
}

/** Sessions whose tool `refund` was answered `pending` by its approver: one open approval request each. */
export async function pendingApprovals(db: string, sessions: readonly string[]): Promise<{ session: string; requestId: string; callId: string }[]> {
  const store = openSqliteStore(db);
  try {
    return await pendingApprovalsIn(store, sessions);
  } finally {
    await store.close();
  }
}

/** The same, in any store (left open). */
export async function pendingApprovalsIn(store: SessionStore, sessions: readonly string[]): Promise<{ session: string; requestId: string; callId: string }[]> {
  const out: { session: string; requestId: string; callId: string }[] = [];
  for (const session of sessions) {
    const owner = await store.acquire(session, { owner: 'host-p' });
    await owner.startTask('refunds');
    const runtime = createToolRuntime({
      tools: [{ name: 'refund', metadata: new ToolMetadata('refunds an order', { type: 'object' }).withEffect('non_idempotent', 'refund-r1').withApproval('finance'), execute: async () => 'refunded' }],
      grants: { agent: '*' },
      approvers: { finance: async () => ({ decision: 'pending' as const, note: 'over 500 EUR: a person decides' }) },
    });
    const outcome = await runtime.bind({ owner, taskId: 'refunds', caller: 'agent' }).call('refund', { order: `${session}-1`, amount: 740 });
    out.push({ session, requestId: outcome.result.approval!.requestId, callId: outcome.result.callId });
    await owner.release();
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Plain HTTP against the console, with any Host, cookie, origin and form

export interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  /** For a POST answered 303 (a decision recorded), followed as a browser does: where it was sent. */
  readonly redirectedTo?: string;
}

/**
 * `rawForm`: a form body sent as given, for what a browser never sends. A POST answered 303 is followed with a GET of
 * its Location, as a browser does (Post/Redirect/Get), and the page it lands on is the reply.
 */
export async function http(port: number, method: 'GET' | 'POST', path: string, options: SendOptions = {}): Promise<Reply> {
  const reply = await send(port, method, path, options);
  const location = reply.headers.location;
  if (method !== 'POST' || reply.status !== 303 || typeof location !== 'string') return reply;
  const landed = await send(port, 'GET', location, { ...(options.host !== undefined ? { host: options.host } : {}), ...(options.cookie !== undefined ? { cookie: options.cookie } : {}) });
  return { ...landed, redirectedTo: location };
}

/** What a request sends: `headers` are sent as given, after the others. */
interface SendOptions { host?: string; cookie?: string; form?: Record<string, string>; rawForm?: string; origin?: string; headers?: Record<string, string> }

function send(port: number, method: 'GET' | 'POST', path: string, options: SendOptions): Promise<Reply> {
  const body = options.rawForm ?? (options.form ? new URLSearchParams(options.form).toString() : undefined);
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port,
      method,
      path,
      headers: {
        Host: options.host ?? `127.0.0.1:${port}`,
        ...(options.cookie ? { Cookie: options.cookie } : {}),
        ...(options.origin ? { Origin: options.origin } : {}),
        ...(body !== undefined ? { 'Content-Type': 'application/x-www-form-urlencoded', 'Content-Length': String(Buffer.byteLength(body)) } : {}),
        ...options.headers,
      },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/** The cookie the printed link obtains (HttpOnly, SameSite=Strict, and sent only under the console's path). */
export async function login(c: ConsoleProcess): Promise<string> {
  const reply = await http(c.port, 'GET', c.path(`/?token=${c.token}`));
  assert.equal(reply.status, 303);
  assert.equal(reply.headers.location, c.path('/'));
  const set = String(reply.headers['set-cookie']);
  assert.match(set, /HttpOnly/);
  assert.match(set, /SameSite=Strict/);
  assert.match(set, new RegExp(`; Path=${c.prefix}(;|$)`));
  return set.split(';')[0]!;
}

/** The text of the page's notice (entities decoded), or the empty string. */
export const said = (reply: Reply): string => {
  const m = /<div class="notice [a-z]+"[^>]*>([\s\S]*?)<\/div>/.exec(reply.body);
  return m ? m[1]!.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&') : '';
};

export const hidden = (body: string, name: string): string => {
  const m = new RegExp(`name="${name}" value="([^"]*)"`).exec(body);
  assert.ok(m, `no hidden ${name} in the page`);
  return m[1]!.replace(/&#39;/g, "'").replace(/&quot;/g, '"').replace(/&amp;/g, '&');
};
