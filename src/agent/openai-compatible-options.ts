/**
 * The options of openAiCompatibleModel, checked and read once when the model is made (a mistake in them is the host's
 * configuration error, never a `model_unreachable` at the first step), and where its requests go: the URL, and how
 * messages show it without the query, which may carry a key.
 */
import { InvalidInputError } from '../errors.js';
import { isHttpHeaderName } from '../bridges/idempotency-fetch.js';
import { isTimeoutMs, LIMITS } from '../limits.js';
import type { JsonObject } from '../json/types.js';
import { describeValue, htmlEntities, thrownMessage } from '../text.js';
import type { OpenAiCompatibleOptions } from './openai-compatible.js';

/** Where requests go, and how messages show it. */
export interface Target {
  readonly url: string;
  /** The URL as messages show it: without its query, which may carry a key (`?key=`), or its fragment. */
  readonly shownUrl: string;
  /** Whether the URL's query may carry a key (a part of eight characters or more). */
  readonly queryMayCarryKey: boolean;
  /** `text` with the URL's query taken out wherever it appears (a fetch's message may quote the URL). */
  withoutQuery(text: string): string;
}

/** Whether `value` can be sent as a header value (RFC 9110's field-value: tab, visible Latin-1 and spaces; fetch refuses the rest). */
const isHeaderValue = (value: string): boolean => /^[\t\x20-\x7e\x80-\xff]*$/.test(value);

/** Why a header value cannot be sent, never quoting it (it may be a key). */
const BAD_HEADER_VALUE = 'holds a character a header value cannot carry: a control character (a line break, a NUL, DEL), or one above U+00FF (a typographic quote pasted with a key, say)';

/**
 * The texts of a URL's query that may carry a key, in every form a server's or a fetch's message may quote them: the
 * whole query, and each part of it (a parameter's value, its name, a bare token; `&` or `;` between them) as sent,
 * percent-decoded, form-decoded (`+` a space), percent-encoded again (either case of escapes, `/` kept as Python's
 * `quote` keeps it), escaped as JSON (`\/`, `\u0026`) and as HTML writes it, longest first. A part shorter than eight
 * characters is taken for a setting (`json`, `false`), not a key, and left: taking it out would garble the messages.
 */
function querySecrets(query: string): string[] {
  const forms = new Set<string>();
  const whole = query.replace(/^\?/, '');
  const parts = [whole, ...whole.split(/[&;]/).flatMap((pair) => pair.split('='))].filter((raw) => raw.length >= SECRET_MIN_LENGTH);
  for (const raw of new Set(parts)) {
    const decoded = decodeURIComponentSafe(raw);
    for (const value of new Set([decoded, decodeURIComponentSafe(raw.replace(/\+/g, ' ')), decoded.replace(/\+/g, ' ')])) {
      const json = JSON.stringify(value).slice(1, -1);
      const encoded = encodeURIComponent(value);
      for (const form of [raw, value, encoded, encoded.replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()), encoded.replace(/%2F/g, '/'),
        new URLSearchParams({ v: value }).toString().slice(2), json, json.replace(/\//g, '\\/'),
        json.replace(/[&<>=]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`), htmlEntities(value)]) {
        if (form.length >= SECRET_MIN_LENGTH) forms.add(form);
      }
    }
  }
  return [...forms].sort((a, b) => b.length - a.length);
}

/** The shortest query part querySecrets takes for a key. */
const SECRET_MIN_LENGTH = 8;

/** `decodeURIComponent`, or the text as it is when it is not a valid escape sequence. */
function decodeURIComponentSafe(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * The name-value pairs of `headers` as fetch takes them (HeadersInit): a plain object, an iterable of pairs (an array,
 * a Map), or a Headers (of this platform, or a library's such as undici's).
 */
function headerEntries(headers: unknown): Iterable<readonly [unknown, unknown]> {
  if (Array.isArray(headers)) {
    if (!headers.every((pair) => Array.isArray(pair) && pair.length === 2)) throw new InvalidInputError('headers', 'as an array, must hold [name, value] pairs');
    return headers as [unknown, unknown][];
  }
  if (typeof headers !== 'object' || headers === null) throw new InvalidInputError('headers', `must be an object of header names and text values, got ${describeValue(headers)}`);
  const like = headers as { entries?: unknown; get?: unknown; [Symbol.iterator]?: unknown };
  if (typeof like.entries === 'function' && typeof like.get === 'function') return [...(headers as Headers).entries()];
  // Any other iterable of pairs fetch takes (a Map, a generator); its pairs are checked as an array's.
  if (typeof like[Symbol.iterator] === 'function') return headerEntries([...(headers as Iterable<unknown>)]);
  return Object.entries(headers);
}

/** The options as the client uses them, each field read once and checked. */
interface CheckedOptions {
  readonly target: Target;
  readonly model: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Readonly<JsonObject> | undefined;
  readonly maxBytes: number;
  readonly timeoutMs: number;
  readonly fetch: typeof fetch;
}

/**
 * Checks the options when the model is made: a mistake in them is the host's configuration error (InvalidInputError
 * naming the option), never a `model_unreachable` at the first step, which a host retrying on it would retry for ever.
 */
export function checkOptions(options: OpenAiCompatibleOptions): CheckedOptions {
  if (typeof options !== 'object' || options === null) throw new InvalidInputError('options', `must be an object, got ${describeValue(options)}`);
  const { baseUrl, model, apiKey, headers, body, maxResponseBytes, timeoutMs, fetch: given } = options;
  let root: URL;
  try {
    if (typeof baseUrl !== 'string' && !(baseUrl instanceof URL)) throw new TypeError('not text');
    root = new URL(String(baseUrl));
  } catch {
    // Never the text itself: a URL may carry a password.
    throw new InvalidInputError('baseUrl', 'must be an absolute http:// or https:// URL');
  }
  if (root.protocol !== 'http:' && root.protocol !== 'https:') throw new InvalidInputError('baseUrl', `must be an http:// or https:// URL, got a ${root.protocol} one`);
  // fetch refuses them, and every error message would show them.
  if (root.username !== '' || root.password !== '') throw new InvalidInputError('baseUrl', 'must not carry a user name or password: pass the key as apiKey, or in headers');
  if (typeof model !== 'string' || model.length === 0) throw new InvalidInputError('model', `must be the model's name, non-empty text, got ${describeValue(model)}`);
  const sent: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (headers !== undefined) {
    // Repeated names are joined, as fetch joins them; a name given here replaces this client's own default for it.
    const given = new Map<string, string>();
    for (const [name, value] of headerEntries(headers)) {
      if (!isHttpHeaderName(name)) throw new InvalidInputError('headers', `${JSON.stringify(name)} is not an HTTP header name`);
      // Never the value in a message: it may be a key (a number, once a config parser read it).
      if (typeof value !== 'string') throw new InvalidInputError(`headers.${name}`, `must be text, got a ${typeof value}`);
      if (!isHeaderValue(value)) throw new InvalidInputError(`headers.${name}`, BAD_HEADER_VALUE);
      const lower = name.toLowerCase();
      const before = given.get(lower);
      given.set(lower, before === undefined ? value : `${before}, ${value}`);
    }
    for (const [name, value] of given) sent[name] = value;
  }
  // Replaces an Authorization header given in `headers`.
  if (apiKey !== undefined) {
    if (typeof apiKey !== 'string') throw new InvalidInputError('apiKey', `must be text, got a ${typeof apiKey}`);
    if (!isHeaderValue(apiKey)) throw new InvalidInputError('apiKey', BAD_HEADER_VALUE);
    // An empty key (a local server's `process.env.KEY ?? ''`) sends none.
    if (apiKey.trim() !== '') sent.authorization = `Bearer ${apiKey}`;
  }
  let extra: JsonObject | undefined;
  if (body !== undefined) {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new InvalidInputError('body', `must be a JSON object, got ${describeValue(body)}`);
    // Sent as JSON.stringify sends it (a field left undefined is left out), so whatever it cannot send is refused here.
    try {
      extra = JSON.parse(JSON.stringify(body)) as JsonObject;
    } catch (error) {
      throw new InvalidInputError('body', `cannot be sent as JSON: ${thrownMessage(error)}`, { cause: error });
    }
  }
  const maxBytes = maxResponseBytes ?? 8 * 1024 * 1024;
  if (!Number.isSafeInteger(maxBytes) || maxBytes <= 0) {
    throw new InvalidInputError('maxResponseBytes', `must be a positive integer, got ${describeValue(maxBytes)}`);
  }
  const deadline = timeoutMs ?? 600_000;
  if (!isTimeoutMs(deadline)) {
    throw new InvalidInputError('timeoutMs', `must be a positive integer of milliseconds up to ${LIMITS.maxTimeoutMs}, got ${describeValue(deadline)}`);
  }
  if (given !== undefined && typeof given !== 'function') throw new InvalidInputError('fetch', `must be a function, got ${describeValue(given)}`);
  // The path appended to the URL's path, so a query (an Azure `?api-version=`) stays a query.
  root.pathname = `${root.pathname.replace(/\/+$/, '')}/chat/completions`;
  const secrets = querySecrets(root.search);
  return {
    target: {
      url: root.href,
      shownUrl: `${root.origin}${root.pathname}`,
      queryMayCarryKey: secrets.length > 0,
      withoutQuery: (text) => secrets.reduce((t, secret) => t.split(secret).join('…'), text),
    },
    model,
    headers: sent,
    body: extra,
    maxBytes,
    timeoutMs: deadline,
    fetch: given ?? fetch,
  };
}
