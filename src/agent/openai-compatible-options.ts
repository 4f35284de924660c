/**
 * The options of openAiCompatibleModel, checked and read once when the model is made (a mistake in them is the host's
 * configuration error, never a `model_unreachable` at the first step), and where its requests go: the URL, and how
 * messages show it without the query, which may carry a key.
 */
import { InvalidInputError } from '../errors.js';
import { isHttpHeaderName } from '../bridges/idempotency-fetch.js';
import { isTimeoutMs, LIMITS } from '../limits.js';
import type { JsonObject } from '../json/types.js';
import { describeValue, thrownMessage } from '../text.js';
import type { OpenAiCompatibleOptions } from './openai-compatible.js';

/** Where requests go, and how messages show it. */
export interface Target {
  readonly url: string;
  /** The URL as messages show it: without its query, which may carry a key (`?key=`), or its fragment. */
  readonly shownUrl: string;
  /** Whether the URL's query may carry a key (a part of eight characters or more). */
  readonly queryMayCarryKey: boolean;
  /**
   * `text` with the URL's query taken out wherever it appears, whole or in part (a fetch's message may quote the URL,
   * a server's may echo it cut short, wrapped or escaped as HTML).
   */
  withoutQuery(text: string): string;
}

/** Whether `value` can be sent as a header value (RFC 9110's field-value: tab, visible Latin-1 and spaces; fetch refuses the rest). */
const isHeaderValue = (value: string): boolean => /^[\t\x20-\x7e\x80-\xff]*$/.test(value);

/** What a header name that is not one may hold, never quoting it. */
const NOT_A_HEADER_NAME = 'not text, empty, or with a space, a colon, `=` or another character a name cannot carry: a whole header line pasted as its name?';

/** Why a header value cannot be sent, never quoting it (it may be a key). */
const BAD_HEADER_VALUE = 'holds a character a header value cannot carry: a control character (a line break, a NUL, DEL), or one above U+00FF (a typographic quote pasted with a key, say)';

/**
 * The texts of a URL's query that may carry a key, in every form a server's or a fetch's message may quote them: the
 * whole query, and each part of it (a parameter's value, its name, a bare token; `&` or `;` between them) as sent,
 * percent-decoded, form-decoded (`+` a space), percent-encoded again (`/` kept as Python's `quote` keeps it) and
 * escaped as JSON (`\/`, `\u0026`); HTML's escapes are undone in the text instead (withoutSecrets). A part shorter
 * than eight characters is taken for a setting (`json`, `false`), not a key, and left: taking it out would garble the
 * messages.
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
      for (const form of [raw, value, encoded, encoded.replace(/%2F/g, '/'),
        new URLSearchParams({ v: value }).toString().slice(2), json, json.replace(/\//g, '\\/'),
        json.replace(/[&<>=]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)]) {
        if (form.length >= SECRET_MIN_LENGTH) forms.add(form);
      }
    }
  }
  return [...forms];
}

/** HTML's names for the characters of a URL a server may escape (HTML5 names them all; these are the URL's). */
const HTML_NAMED: Record<string, string> = {
  amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", plus: '+', sol: '/', equals: '=', quest: '?', num: '#', percnt: '%',
  colon: ':', semi: ';', period: '.', comma: ',', lowbar: '_', excl: '!', dollar: '$', ast: '*', commat: '@', grave: '`',
  lpar: '(', rpar: ')', lsqb: '[', rsqb: ']', lcub: '{', rcub: '}', verbar: '|', bsol: '\\', hat: '^',
};

/** The character references of HTML (`&#x5f;`, `&#43;`, `&amp;`, `&plus;`) a server may write a URL with, undone. */
function withoutHtmlEscapes(text: string): string {
  return text.replace(/&(?:#x([0-9a-f]{1,6})|#([0-9]{1,7})|([a-z]{2,6}));/gi, (whole, hex: string | undefined, dec: string | undefined, name: string | undefined) => {
    const code = hex !== undefined ? Number.parseInt(hex, 16) : dec !== undefined ? Number(dec) : -1;
    if (name !== undefined) return Object.hasOwn(HTML_NAMED, name) ? HTML_NAMED[name]! : whole;
    return code >= 0x20 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff) ? String.fromCodePoint(code) : whole;
  });
}

/** ASCII letters in lower case, every other character as it is (so positions stay those of the text). */
const asciiLower = (text: string): string => text.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());

/**
 * `text` with every run of eight characters or more that any of `secrets` holds, in either case of ASCII letters,
 * replaced by `…`: a server may echo a key whole, cut short at a length limit, wrapped over lines or in capitals, and
 * a fetch may quote part of it.
 */
function withoutSecrets(secrets: readonly string[], text: string): string {
  if (secrets.length === 0) return text;
  const windows = new Set<string>();
  for (const secret of secrets.map(asciiLower)) for (let i = 0; i + SECRET_MIN_LENGTH <= secret.length; i += 1) windows.add(secret.slice(i, i + SECRET_MIN_LENGTH));
  const plain = withoutHtmlEscapes(text);
  const lower = asciiLower(plain);
  const hidden = new Uint8Array(plain.length);
  for (let i = 0; i + SECRET_MIN_LENGTH <= plain.length; i += 1) {
    if (windows.has(lower.slice(i, i + SECRET_MIN_LENGTH))) hidden.fill(1, i, i + SECRET_MIN_LENGTH);
  }
  // A run that ends or starts inside a surrogate pair takes the whole pair: half a character is not text.
  for (let i = 1; i < plain.length; i += 1) {
    if (hidden[i - 1] !== hidden[i] && /[\ud800-\udbff]/.test(plain[i - 1]!) && /[\udc00-\udfff]/.test(plain[i]!)) hidden.fill(1, i - 1, i + 1);
  }
  let out = '';
  for (let i = 0; i < plain.length; i += 1) {
    if (hidden[i] === 0) out += plain[i];
    else if (i === 0 || hidden[i - 1] === 0) out += '…';
  }
  return out;
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
    let position = 0;
    for (const [name, value] of headerEntries(headers)) {
      position += 1;
      // Never the name itself either: a header line pasted as a name ("Authorization: Bearer sk-…") carries the key.
      if (!isHttpHeaderName(name)) throw new InvalidInputError('headers', `header ${position} (in the order given) has a name that is not an HTTP header name (${NOT_A_HEADER_NAME})`);
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
      withoutQuery: (text) => withoutSecrets(secrets, text),
    },
    model,
    headers: sent,
    body: extra,
    maxBytes,
    timeoutMs: deadline,
    fetch: given ?? fetch,
  };
}
