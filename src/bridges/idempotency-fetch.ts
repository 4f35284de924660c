/**
 * The operation's idempotency key over HTTP: every attempt of one logical action (the first call and any retry
 * recovery plans for it) carries the same `Idempotency-Key` header, so an API that deduplicates on it applies the
 * action once. The key is `externalIdempotencyKey(request)`, a digest of the operation (its origin, sessionId,
 * taskId, key):
 * the same value the MCP bridge sends in `_meta` (see docs/bridges-in-production.md).
 */
import { InvalidInputError } from '../errors.js';
import { externalIdempotencyKey } from '../tool/idempotency.js';
import { setNewest } from '../bounded-map.js';
import { sha256Hex } from '../sha256.js';

/** The header name the IETF draft and most payment APIs use. */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';

/** What the helpers need of a tool body request: its session, its operation and the operation's origin (a ToolBodyRequest satisfies this). */
export interface IdempotencyKeyed {
  readonly sessionId: string;
  readonly operationOrigin: string;
  readonly operation: { readonly taskId: string; readonly key: string };
}

/** Whether `name` is an HTTP header name (a token, RFC 9110). */
export function isHttpHeaderName(name: unknown): name is string {
  return typeof name === 'string' && /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name);
}

/** `{ 'Idempotency-Key': externalIdempotencyKey(request) }` for this request, to spread into any client's headers. */
export function idempotencyHeaders(request: IdempotencyKeyed, header: string = IDEMPOTENCY_KEY_HEADER): Record<string, string> {
  if (!isHttpHeaderName(header)) {
    throw new InvalidInputError('header', `must be an HTTP header name, got ${JSON.stringify(header)}`);
  }
  return { [header]: externalIdempotencyKey(request) };
}

export interface JingweiFetchOptions {
  /** The header to send the key in. Default `Idempotency-Key`. */
  readonly header?: string;
  /** The fetch to wrap. Default the global `fetch`. */
  readonly fetch?: typeof fetch;
}

/**
 * A `fetch` bound to one tool body request: every request it sends carries the operation's key in the
 * `Idempotency-Key` header, or the one `header` names (replacing any such header the caller set, and with another
 * `header` any `Idempotency-Key` too, so no attempt can send another key). The other headers are fetch's own:
 * `init.headers` when given, else those of a `Request` passed as `input`.
 * Use it inside `execute(request, signal)`, passing `signal` on as usual.
 */
export function jingweiFetch(request: IdempotencyKeyed, options: JingweiFetchOptions = {}): typeof fetch {
  const [header, key] = Object.entries(idempotencyHeaders(request, options.header))[0]!;
  const inner = options.fetch ?? globalThis.fetch;
  if (typeof inner !== 'function') throw new InvalidInputError('fetch', 'no fetch is available: pass options.fetch');
  const wrapped = (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
    const another = anotherWrite(key, input, init);
    if (another !== null) return Promise.reject(another);
    // As fetch itself does: headers given with init replace a Request's own, rather than add to them.
    const headers = new Headers(init?.headers !== undefined ? init.headers : input instanceof Request ? input.headers : undefined);
    headers.delete(IDEMPOTENCY_KEY_HEADER);
    headers.set(header, key);
    return inner(input, { ...init, headers });
  };
  return wrapped as typeof fetch;
}

/** Methods a server never takes as a write: the key they carry asks nothing of it. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The first write a key went with: its method, its URL (without a fragment), a digest of its body when it is text. */
interface KeyedWrite {
  readonly method: string;
  readonly url: string;
  readonly body: string | undefined;
}

/** The first write of each key sent in this process, by key (every attempt of an operation sends its one key). */
const keyedWrites = new Map<string, KeyedWrite>();
const KEYED_WRITES_KEPT = 10_000;

/**
 * A write to another method, URL (query included) or text body than the first this key went with, refused before
 * it is sent: the key names one operation's one request, so a server that deduplicates on it would answer the second
 * write with the first's record (or refuse it), and the call would be recorded as having made both. The same write
 * again (a body retrying its request, or the operation's retry) is let through. A body that is not text (a stream, a
 * Blob, a Request's own) is not compared.
 */
function anotherWrite(key: string, input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]): InvalidInputError | null {
  const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
  if (SAFE_METHODS.has(method)) return null;
  const write: KeyedWrite = { method, url: withoutFragment(input instanceof Request ? input.url : String(input)), body: bodyDigest(init?.body) };
  const first = keyedWrites.get(key);
  if (first === undefined) {
    setNewest(keyedWrites, key, write, KEYED_WRITES_KEPT);
    return null;
  }
  const sameBody = first.body === undefined || write.body === undefined || first.body === write.body;
  if (first.method === write.method && first.url === write.url && sameBody) return null;
  const shown = (w: KeyedWrite) => `${w.method} ${withoutQuery(w.url)}`;
  const differs = shown(first) === shown(write) ? (first.url === write.url ? ' (another body)' : ' (another query)') : '';
  return new InvalidInputError('input',
    `${shown(write)}${differs} would be sent under the idempotency key that ${shown(first)} was sent with: one call makes one keyed write ` +
      "(a server deduplicating on the key would answer it with the first's record); make each write a call of its own, or one request");
}

/** A digest of a text body (a string or URLSearchParams); undefined for any other. */
function bodyDigest(body: unknown): string | undefined {
  if (typeof body === 'string') return sha256Hex(body);
  if (body instanceof URLSearchParams) return sha256Hex(body.toString());
  return undefined;
}

/** The URL as fetch sends it (scheme and host in lower case, the path normalized), without its fragment. */
function withoutFragment(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.hash = '';
    return parsed.href;
  } catch {
    return url.replace(/#.*$/s, '');
  }
}

/** A URL as the refusal names it: its query and fragment left out (they may carry credentials). */
function withoutQuery(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return url.replace(/[?#].*$/s, '');
  }
}
