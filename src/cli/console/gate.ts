/**
 * The console's gate (docs/design.md#the-review-console): the checks every request passes before it reaches a page
 * or a form, and the one way a form is read. Pure functions and constants; the server applies them in order.
 */
import { inboxActor } from '../../store/inbox.js';
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { LIMITS } from '../../limits.js';
import { LIVE_SCRIPT_HASH } from './html.js';

/**
 * The cookie's name. Its value is the console's token; its Path is the console's random path, so a browser sends it
 * to that path only, and no other server on 127.0.0.1 (any port: cookies ignore ports) receives it.
 */
export const COOKIE = 'jingwei_console';
/** The largest form read: the evidence and the reason hold at most LIMITS.maxDiagnosticBytes each. */
export const MAX_FORM_BYTES = 64 * 1024;
/** A larger form is read to its end and dropped, so the browser reads the 413 page; past this, the connection is cut. */
const MAX_DROPPED_BYTES = 16 * 1024 * 1024;

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

export function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Every value the request's Cookie header gives the console's cookie (another server on the host may toss one more). */
export function cookieValues(req: IncomingMessage): string[] {
  const values: string[] = [];
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [name, ...rest] = part.trim().split('=');
    if (name === COOKIE) values.push(rest.join('='));
  }
  return values;
}

/** The Set-Cookie header that the token obtains: scoped to the console's path (`/<prefix>`), never to `/`. */
export function sessionCookie(prefix: string, token: string): string {
  return `${COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/${prefix}`;
}

export const SECURITY_HEADERS = {
  'Content-Security-Policy': `default-src 'none'; style-src 'unsafe-inline'; script-src ${LIVE_SCRIPT_HASH}; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

export class HttpRefusal extends Error {
  constructor(readonly status: number, message: string, readonly close = false) {
    super(message);
  }
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A form body decoded without loss or refused: `URLSearchParams` alone turns a malformed escape or bytes that are not
 * UTF-8 into replacement characters, which would be recorded as an operator's evidence.
 */
function strictForm(body: Buffer): URLSearchParams {
  try {
    const text = UTF8.decode(body);
    for (const pair of text.split('&')) for (const part of pair.split('=')) decodeURIComponent(part.replace(/\+/g, ' '));
    return new URLSearchParams(text);
  } catch {
    throw new HttpRefusal(400, 'Refused: the form is not valid application/x-www-form-urlencoded (a malformed %-escape, or text that is not UTF-8). Nothing was recorded.');
  }
}

/**
 * The form of a POST. A form over MAX_FORM_BYTES is refused (413), but only once the browser has sent all of it:
 * a server that closes the connection while the browser still sends shows the operator an empty response instead
 * of the reason.
 */
export function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  return new Promise((resolve, reject) => {
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/x-www-form-urlencoded') {
      reject(new HttpRefusal(415, 'Refused: send the form as application/x-www-form-urlencoded. Nothing was changed.'));
      req.resume();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const tooLarge = () => new HttpRefusal(
      413,
      `Refused: the form is larger than ${MAX_FORM_BYTES} bytes, so it was not read (the evidence and the reason hold at most ${LIMITS.maxDiagnosticBytes} bytes each). Nothing was recorded. Go back, shorten the text and send it again.`,
      true,
    );
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_DROPPED_BYTES) {
        reject(tooLarge());
        req.destroy();
        return;
      }
      if (size <= MAX_FORM_BYTES) chunks.push(chunk);
    });
    req.on('end', () => {
      if (size > MAX_FORM_BYTES) reject(tooLarge());
      else {
        try {
          resolve(strictForm(Buffer.concat(chunks)));
        } catch (error) {
          reject(error);
        }
      }
    });
    req.on('error', reject);
  });
}

/**
 * The decision inbox's own check of a decision's actor. The console makes it at start, so an actor the inbox would
 * refuse never serves a page whose every decision fails.
 */
export function checkActor(actor: unknown): string {
  return inboxActor(actor);
}
