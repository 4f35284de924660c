/**
 * Signed checkpoints of a session's chain head, kept outside the database (docs/design.md#anchored-signed-heads).
 * A checkpoint says: session S had its head at seq N with chain hash H while epoch E owned it, at time T. It is
 * signed with the owner's Ed25519 key (node:crypto), so whoever can rewrite the database still cannot forge one;
 * checking a journal against the checkpoints detects a rewritten, truncated or rolled-back journal.
 */
import { createHash, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { open } from 'node:fs/promises';
import { AnchorError, InvalidInputError, JsonParseError } from '../errors.js';
import { canonicalJson } from '../json/canonical.js';
import { parseJson } from '../json/parse.js';
import type { JsonObject, JsonValue } from '../json/types.js';
import type { SessionId } from '../ids.js';
import { GENESIS_HASH } from './chain.js';

/** One signed checkpoint of a chain head. */
export interface Checkpoint {
  readonly sessionId: SessionId;
  /** seq of the head event; -1 for a session with no events yet. */
  readonly seq: number;
  /** The chain hash of that event (the genesis hash while the journal is empty). */
  readonly headHash: string;
  /** The epoch of the owner that signed it. */
  readonly epoch: number;
  /** When it was signed (ISO 8601); information for people only. */
  readonly time: string;
  /** SHA-256 (hex, first 16 characters) of the signing public key (SPKI DER), to pick the right key. */
  readonly keyId: string;
  /** Ed25519 signature (base64) over the canonical JSON of the other fields. */
  readonly signature: string;
  /**
   * The id of the journal (the store's file or schema) whose head it is, when the store has one: what acquire checks
   * a checkpoint against only in that journal (docs/design.md#a-restored-journal-is-refused-at-acquire). Absent in
   * checkpoints of earlier releases and of stores without an id (a memory store).
   */
  readonly journalId?: string;
}

/** Receives each checkpoint; a file sink appends it to a JSONL file, a host callback sends it wherever it likes. */
export type AnchorSink = (checkpoint: Checkpoint) => void | Promise<void>;

/** What `acquire(sessionId, { owner, anchor })` takes to sign the owner's chain heads. */
export interface AnchorOptions {
  /** The Ed25519 private key: a KeyObject or a PEM string. */
  readonly privateKey: KeyObject | string;
  readonly sink: AnchorSink;
  /** Sign once at least this many events were appended since the last checkpoint. Default 1 (after every commit). */
  readonly every?: number;
  /**
   * Called when signing or the sink fails. The commit that preceded it is durable either way; the next
   * checkpoint covers its events. Default: a process warning.
   */
  readonly onError?: (error: unknown) => void;
  /**
   * The checkpoints the sink kept of a session, which acquire checks the stored journal against before it takes the
   * session (docs/design.md#a-restored-journal-is-refused-at-acquire). For `fileAnchorSink`, its file is read when
   * this is not given; for another sink, give it to have the check.
   */
  readonly checkpoints?: (sessionId: string) => readonly Checkpoint[] | Promise<readonly Checkpoint[]>;
}

/** The file each sink made by fileAnchorSink appends to: what acquire reads its checkpoints back from. */
const sinkFiles = new WeakMap<AnchorSink, string>();

/** The file `sink` appends to, when fileAnchorSink made it. */
export function anchorSinkFile(sink: AnchorSink): string | undefined {
  return sinkFiles.get(sink);
}

/** A private or public key from a KeyObject or PEM text; must be Ed25519. */
function ed25519(key: KeyObject | string, kind: 'private' | 'public', field: string): KeyObject {
  let object: KeyObject;
  try {
    object = typeof key === 'string' ? (kind === 'private' ? createPrivateKey(key) : createPublicKey(key)) : key;
  } catch (error) {
    throw new InvalidInputError(field, `not a readable ${kind} key: ${(error as Error).message}`, { cause: error });
  }
  if (typeof object !== 'object' || object === null || typeof (object as KeyObject).asymmetricKeyType !== 'string') {
    throw new InvalidInputError(field, `must be a KeyObject or PEM text`);
  }
  if (object.asymmetricKeyType !== 'ed25519') throw new InvalidInputError(field, `must be an Ed25519 key, not ${object.asymmetricKeyType}`);
  if (kind === 'private' && object.type !== 'private') throw new InvalidInputError(field, 'must be a private key');
  return object;
}

/** The public key of an Ed25519 private or public key (KeyObject or PEM). */
export function anchorPublicKey(key: KeyObject | string): KeyObject {
  if (typeof key === 'string') {
    try {
      return ed25519(createPublicKey(key), 'public', 'publicKey');
    } catch (error) {
      if (error instanceof InvalidInputError) throw error;
      throw new InvalidInputError('publicKey', `not a readable key: ${(error as Error).message}`, { cause: error });
    }
  }
  return ed25519(key.type === 'private' ? createPublicKey(key) : key, 'public', 'publicKey');
}

export function keyIdOf(publicKey: KeyObject): string {
  return createHash('sha256').update(publicKey.export({ type: 'spki', format: 'der' })).digest('hex').slice(0, 16);
}

function signedPart(c: Omit<Checkpoint, 'signature'>): string {
  const fields: JsonObject = { session_id: c.sessionId, seq: c.seq, head_hash: c.headHash, epoch: c.epoch, time: c.time, key_id: c.keyId };
  // Signed when present, so a checkpoint cannot be moved to another journal; absent, a checkpoint of an earlier release.
  if (c.journalId !== undefined) fields.journal_id = c.journalId;
  return canonicalJson(fields);
}

/** Signs a checkpoint of a chain head. */
export function signCheckpoint(
  privateKey: KeyObject | string,
  head: { readonly sessionId: string; readonly seq: number; readonly headHash: string; readonly epoch: number; readonly time?: string; readonly journalId?: string },
): Checkpoint {
  const key = ed25519(privateKey, 'private', 'privateKey');
  const unsigned = {
    sessionId: head.sessionId as SessionId,
    seq: head.seq,
    headHash: head.headHash,
    epoch: head.epoch,
    time: head.time ?? new Date().toISOString(),
    keyId: keyIdOf(createPublicKey(key)),
    ...(head.journalId !== undefined ? { journalId: head.journalId } : {}),
  };
  return { ...unsigned, signature: sign(null, Buffer.from(signedPart(unsigned), 'utf8'), key).toString('base64') };
}

/** Throws AnchorError('bad_signature') unless `checkpoint` was signed by the private half of `publicKey`. */
export function verifyCheckpoint(publicKey: KeyObject | string, checkpoint: Checkpoint): void {
  const key = anchorPublicKey(publicKey);
  const ok = (() => {
    try {
      return verify(null, Buffer.from(signedPart(checkpoint), 'utf8'), key, Buffer.from(checkpoint.signature, 'base64'));
    } catch {
      return false;
    }
  })();
  if (!ok) {
    throw new AnchorError(checkpoint.sessionId, checkpoint.seq, 'bad_signature', `the checkpoint signed at ${checkpoint.time} does not verify with key ${keyIdOf(key)}`);
  }
}

/** The wire form of a checkpoint (one JSON object; snake_case keys). */
export function encodeCheckpoint(c: Checkpoint): JsonObject {
  const wire: JsonObject = { checkpoint: 1, session_id: c.sessionId, seq: c.seq, head_hash: c.headHash, epoch: c.epoch, time: c.time, key_id: c.keyId, signature: c.signature };
  if (c.journalId !== undefined) wire.journal_id = c.journalId;
  return wire;
}

const CHECKPOINT_KEYS = ['checkpoint', 'session_id', 'seq', 'head_hash', 'epoch', 'time', 'key_id', 'signature', 'journal_id'];

/** Decodes one wire checkpoint; anything else fails with AnchorError('malformed'). */
export function decodeCheckpoint(wire: JsonValue, where = 'checkpoint'): Checkpoint {
  const bad = (detail: string): never => {
    throw new AnchorError('?', -1, 'malformed', `${where}: ${detail}`);
  };
  if (typeof wire !== 'object' || wire === null || Array.isArray(wire)) return bad('must be a JSON object');
  const o = wire as JsonObject;
  for (const key of Object.keys(o)) if (!CHECKPOINT_KEYS.includes(key)) bad(`unknown field ${JSON.stringify(key)}`);
  if (o.checkpoint !== 1) bad('field "checkpoint" must be 1');
  const text = (key: string): string => (typeof o[key] === 'string' && (o[key] as string).length > 0 ? (o[key] as string) : bad(`field "${key}" must be a non-empty string`));
  const int = (key: string, min: number): number =>
    (Number.isSafeInteger(o[key]) && (o[key] as number) >= min ? (o[key] as number) : bad(`field "${key}" must be an integer >= ${min}`));
  const headHash = text('head_hash');
  if (!/^[0-9a-f]{64}$/.test(headHash)) bad('field "head_hash" must be 64 lowercase hex digits');
  return {
    sessionId: text('session_id') as SessionId,
    seq: int('seq', -1),
    headHash,
    epoch: int('epoch', 1),
    time: text('time'),
    keyId: text('key_id'),
    signature: text('signature'),
    ...(o.journal_id !== undefined ? { journalId: text('journal_id') } : {}),
  };
}

/**
 * Parses an anchor file: one checkpoint per line (blank lines ignored). A line cut short (the JSON text ends early)
 * was torn by a sink that died while appending it: the last line without its newline, or an earlier one that the next
 * append (which starts a new line after such a tail) left behind. The checkpoints around it still count, and the torn
 * line is passed to `onTorn` (default: a process warning). Any other bad line fails with AnchorError('malformed').
 */
export function parseCheckpoints(text: string, onTorn?: (line: number, detail: string) => void): Checkpoint[] {
  const out: Checkpoint[] = [];
  const lines = text.split('\n');
  lines.forEach((raw, i) => {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.trim() === '') return;
    let value: JsonValue;
    try {
      value = parseJson(line);
    } catch (error) {
      const detail = `line ${i + 1}: ${(error as Error).message}`;
      const last = i === lines.length - 1;
      if (last || (error instanceof JsonParseError && /unexpected end of input/.test(error.message))) {
        const torn = last
          ? `line ${i + 1} has no newline and is not a whole checkpoint (torn by an interrupted append), so it was skipped`
          : `line ${i + 1} ends before its checkpoint does (torn by an interrupted append), so it was skipped`;
        if (onTorn) onTorn(i + 1, torn);
        else process.emitWarning(`jingwei: anchor file ${torn}`, { code: 'JINGWEI_ANCHOR' });
        return;
      }
      throw new AnchorError('?', -1, 'malformed', detail, { cause: error });
    }
    out.push(decodeCheckpoint(value, `line ${i + 1}`));
  });
  return out;
}

/**
 * A sink that appends each checkpoint as one JSON line to `path` and flushes it to disk before the commit's
 * caller continues. Keep the file somewhere the database's writers cannot rewrite.
 */
export function fileAnchorSink(path: string): AnchorSink {
  if (typeof path !== 'string' || path === '') throw new InvalidInputError('path', 'must be a file name');
  const sink: AnchorSink = async (checkpoint) => {
    const handle = await open(path, 'a+');
    try {
      // After a line an interrupted append left without its newline, a new line: the tail stays a torn line of its
      // own (skipped and reported), instead of making this checkpoint's line unreadable too.
      const { size } = await handle.stat();
      const last = Buffer.alloc(1);
      const tornTail = size > 0 && (await handle.read(last, 0, 1, size - 1)).bytesRead === 1 && last[0] !== 0x0a;
      await handle.write(`${tornTail ? '\n' : ''}${JSON.stringify(encodeCheckpoint(checkpoint))}\n`);
      await handle.datasync();
    } finally {
      await handle.close();
    }
  };
  sinkFiles.set(sink, path);
  return sink;
}

/** One link of a session's chain, as stored or as carried by an export: its epoch and chain hash. */
export interface ChainLink {
  readonly epoch: number;
  readonly hash: string;
}

/** What `checkAnchors` found when everything agreed. */
export interface AnchorReport {
  /** Checkpoints of this session that were checked. */
  readonly checkpoints: number;
  /** seq of the newest anchored head (-1 when only the empty journal was anchored, at acquire). */
  readonly anchoredSeq: number;
  /** Events after the newest checkpoint (appended since, not yet anchored). */
  readonly unanchoredEvents: number;
}

/**
 * Why `checkpoints` vouch for none of `sessionId`, for a message: the sessions they are of, each id quoted (a
 * trailing space or a look-alike then shows beside the real one), at most five.
 */
export function noCheckpointOf(sessionId: string, checkpoints: readonly Checkpoint[], given = 'given'): string {
  const ids = [...new Set(checkpoints.map((c) => c.sessionId))];
  const id = JSON.stringify(sessionId);
  if (ids.length === 0) return `no signed checkpoint is of this id, ${id}; no checkpoints were ${given}`;
  const shown = ids.slice(0, 5).map((other) => JSON.stringify(other)).join(', ') + (ids.length > 5 ? ` and ${ids.length - 5} more` : '');
  return `no signed checkpoint is of this id, ${id}; the ${checkpoints.length === 1 ? 'checkpoint' : `${checkpoints.length} checkpoints`} ${given} ${checkpoints.length === 1 ? 'is' : 'are'} of ${shown}`;
}

/**
 * Checks a session's chain (`links[i]` for seq i; `ownerEpoch` from its owner row, or the newest epoch an export
 * carries) against signed checkpoints. Checkpoints of other sessions are ignored, but at least one must be of this
 * session: with none, nothing vouches for it (a journal copied under another id, a look-alike of an anchored one,
 * is not anchored by the original's checkpoints), and it fails as `unanchored`, naming the sessions the
 * checkpoints are of. Throws AnchorError on the first disagreement: `bad_signature` for a checkpoint the key did not
 * sign, `rolled_back` when the owner epoch is lower than an anchored one, `rewritten` when the chain at an anchored
 * seq has another hash (the first bad seq lies after the previous checkpoint that still matches), `truncated` when
 * anchored events are missing.
 */
export function checkAnchors(
  sessionId: string,
  links: readonly ChainLink[],
  ownerEpoch: number,
  checkpoints: readonly Checkpoint[],
  publicKey: KeyObject | string,
): AnchorReport {
  const key = anchorPublicKey(publicKey);
  if (!Array.isArray(links)) throw new InvalidInputError('links', 'must be an array of chain links { epoch, hash }');
  // An index loop, not forEach: a hole in a sparse array must be seen.
  for (let i = 0; i < links.length; i++) {
    const link: unknown = links[i];
    if (typeof link !== 'object' || link === null || typeof (link as ChainLink).hash !== 'string') {
      throw new InvalidInputError(`links[${i}]`, `must be a chain link { epoch, hash }${i in links ? '' : ' (the array has a hole there)'}`);
    }
  }
  const mine = checkpoints.filter((c) => c.sessionId === sessionId);
  if (mine.length === 0) {
    throw new AnchorError(sessionId, -1, 'unanchored', noCheckpointOf(sessionId, checkpoints));
  }
  for (const c of mine) verifyCheckpoint(key, c);
  const ordered = [...mine].sort((a, b) => a.seq - b.seq || a.epoch - b.epoch);
  const newestEpoch = ordered.reduce((max, c) => Math.max(max, c.epoch), 0);
  if (ordered.length > 0 && ownerEpoch === 0 && links.length === 0) {
    const last = ordered[ordered.length - 1]!;
    throw new AnchorError(sessionId, 0, 'truncated', `the session is missing, but its head was anchored at seq ${last.seq} (epoch ${last.epoch}) at ${last.time}`);
  }
  if (ordered.length > 0 && ownerEpoch < newestEpoch) {
    const first = ordered.find((c) => c.epoch === newestEpoch)!;
    throw new AnchorError(sessionId, Math.max(first.seq, 0), 'rolled_back', `the journal's epoch is ${ownerEpoch}, but epoch ${newestEpoch} was anchored at ${first.time}`);
  }
  let lastGood = -1;
  for (const c of ordered) {
    if (c.seq >= links.length) {
      const last = ordered[ordered.length - 1]!;
      throw new AnchorError(sessionId, links.length, 'truncated',
        `anchored events seq ${links.length}..${last.seq} are missing (the journal ends at seq ${links.length - 1}; anchored at ${last.time})`);
    }
    const hash = c.seq < 0 ? GENESIS_HASH : links[c.seq]!.hash;
    if (hash !== c.headHash) {
      const first = Math.min(lastGood + 1, Math.max(c.seq, 0));
      throw new AnchorError(sessionId, first, 'rewritten',
        first === c.seq ? `event seq ${c.seq} differs from the one anchored at ${c.time}` : `an event in seq ${first}..${c.seq} differs from the chain anchored at ${c.time}`);
    }
    lastGood = Math.max(lastGood, c.seq);
  }
  const anchoredSeq = ordered.length > 0 ? ordered[ordered.length - 1]!.seq : -1;
  return { checkpoints: ordered.length, anchoredSeq, unanchoredEvents: links.length - 1 - anchoredSeq };
}

/**
 * Signs an owner's heads as its writes commit: at acquire, then once `every` events have been appended since the
 * last checkpoint, and at release when events are still unanchored. It reads nothing: the head comes from the owner
 * row each transaction writes.
 */
export class HeadAnchor {
  private readonly key: KeyObject;
  private readonly every: number;
  private signed: { seq: number; epoch: number } | null = null;
  private seen = -1;

  /** `journalId`: the id of the journal the owner writes (its store's), signed into each checkpoint when there is one. */
  constructor(private readonly options: AnchorOptions, readonly journalId?: string) {
    if (typeof options !== 'object' || options === null) throw new InvalidInputError('anchor', 'must be an object');
    if (typeof options.sink !== 'function') throw new InvalidInputError('anchor.sink', 'must be a function (fileAnchorSink(path), or your own)');
    if (options.checkpoints !== undefined && typeof options.checkpoints !== 'function') {
      throw new InvalidInputError('anchor.checkpoints', 'must be a function of a session id returning its checkpoints');
    }
    this.key = ed25519(options.privateKey, 'private', 'anchor.privateKey');
    const every = options.every ?? 1;
    if (!Number.isSafeInteger(every) || every < 1) throw new InvalidInputError('anchor.every', 'must be a positive integer');
    this.every = every;
  }

  /** After a committed write: the owner row it wrote; `force` anchors it now (acquire, release) if not yet anchored. */
  async observe(head: { sessionId: string; lastSeq: number; headHash: string; epoch: number }, force: boolean): Promise<void> {
    this.seen = head.lastSeq;
    const signed = this.signed;
    if (signed && signed.seq === head.lastSeq && signed.epoch === head.epoch) return;
    if (!force && signed && head.lastSeq - signed.seq < this.every) return;
    try {
      const checkpoint = signCheckpoint(this.key, {
        sessionId: head.sessionId, seq: head.lastSeq, headHash: head.headHash, epoch: head.epoch,
        ...(this.journalId !== undefined ? { journalId: this.journalId } : {}),
      });
      await this.options.sink(checkpoint);
      this.signed = { seq: head.lastSeq, epoch: head.epoch };
    } catch (error) {
      this.report(error);
    }
  }

  /** The public half of the signing key: what the checkpoints read back at acquire are checked with. */
  get publicKey(): KeyObject {
    return createPublicKey(this.key);
  }

  /** The options given, for the checkpoints to read back at acquire (anchor-log.ts). */
  get given(): AnchorOptions {
    return this.options;
  }

  /** Tells `onError` (default: a process warning) of a failure that does not fail the write or acquire it came with. */
  warn(error: unknown): void {
    this.report(error);
  }

  /** Whether events were appended since the last checkpoint. */
  get unanchored(): boolean {
    return this.signed === null || this.seen > this.signed.seq;
  }

  private report(error: unknown): void {
    try {
      if (this.options.onError) this.options.onError(error);
      else process.emitWarning(`jingwei: anchoring a checkpoint failed: ${(error as Error)?.message ?? String(error)}`, { code: 'JINGWEI_ANCHOR' });
    } catch {
      // A failing error callback must not turn a durable commit into a failed one.
    }
  }
}
