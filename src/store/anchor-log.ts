/**
 * The checkpoints an owner's anchor kept, read back as the owner acquires a session, and the check of the stored
 * journal against them (docs/design.md#a-restored-journal-is-refused-at-acquire): a journal put back from a backup is
 * refused before anything is written on it, instead of its missing calls being made again.
 */
import type { KeyObject } from 'node:crypto';
import { open } from 'node:fs/promises';
import { resolve } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { AnchorError, InvalidInputError, JsonParseError } from '../errors.js';
import { parseJson } from '../json/parse.js';
import type { JsonValue } from '../json/types.js';
import { anchorSinkFile, checkAnchors, decodeCheckpoint, encodeCheckpoint, keyIdOf, type Checkpoint, type ChainLink, type HeadAnchor } from './anchors.js';

/** What has been read of one anchor file: the newest checkpoint of each session, key and journal, and where reading stopped. */
interface AnchorLog {
  /** The file's device and inode when it was last read. */
  identity: string;
  offset: number;
  /** The bytes after the last newline read: a line still being appended. */
  carry: Buffer;
  /** Per session, per key id and journal id, the newest checkpoint (by seq, then epoch). */
  readonly newest: Map<string, Map<string, Checkpoint>>;
}

const NEWLINE = 0x0a;
/** How much of an anchor file is read and parsed at a time, the event loop let go between: a big file stalls no heartbeat. */
const CHUNK_BYTES = 1 << 20;
/** Anchor files read in this process, by absolute path: each is read from where it was left the time before. */
const logs = new Map<string, AnchorLog>();
/** One read of a file at a time, so that two acquires do not both advance the same log. */
const reading = new Map<string, Promise<unknown>>();

function newer(a: Checkpoint, b: Checkpoint | undefined): boolean {
  return b === undefined || a.seq > b.seq || (a.seq === b.seq && a.epoch > b.epoch);
}

function keep(log: AnchorLog, checkpoint: Checkpoint): void {
  let bySession = log.newest.get(checkpoint.sessionId);
  if (bySession === undefined) {
    bySession = new Map();
    log.newest.set(checkpoint.sessionId, bySession);
  }
  const key = `${checkpoint.keyId}\n${checkpoint.journalId ?? ''}`;
  if (newer(checkpoint, bySession.get(key))) bySession.set(key, checkpoint);
}

function note(log: AnchorLog, line: Buffer, where: string, warn: (error: unknown) => void): void {
  const text = line.toString('utf8').replace(/\r$/, '');
  if (text.trim() === '') return;
  let value: JsonValue;
  try {
    value = parseJson(text);
  } catch (error) {
    // A line cut short by a sink that died mid-append is skipped quietly, as parseCheckpoints skips it.
    if (error instanceof JsonParseError && /unexpected end of input/.test(error.message)) return;
    warn(new AnchorError('?', -1, 'malformed', `${where}: ${(error as Error).message}`, { cause: error }));
    return;
  }
  try {
    keep(log, decodeCheckpoint(value, where));
  } catch (error) {
    // A damaged line does not stop every acquire; `jingwei verify --anchors` still refuses the file.
    warn(error);
  }
}

async function readLog(path: string, warn: (error: unknown) => void): Promise<AnchorLog | null> {
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    // No file (yet, or any more): what was read of it in this process still counts.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return logs.get(path) ?? null;
    throw error;
  }
  try {
    const stat = await handle.stat();
    const identity = `${stat.dev}:${stat.ino}`;
    let log = logs.get(path);
    if (log === undefined) {
      log = { identity, offset: 0, carry: Buffer.alloc(0), newest: new Map() };
      logs.set(path, log);
    } else if (log.identity !== identity || stat.size < log.offset) {
      // Another file at the path, or this one cut: read from its start, keeping the checkpoints already read (a
      // rotated or truncated anchor file does not make the heads it vouched for unchecked in this process).
      log.identity = identity;
      log.offset = 0;
      log.carry = Buffer.alloc(0);
    }
    while (log.offset < stat.size) {
      const chunk = Buffer.alloc(Math.min(CHUNK_BYTES, stat.size - log.offset));
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, log.offset);
      if (bytesRead === 0) break;
      const bytes = log.carry.length === 0 ? chunk.subarray(0, bytesRead) : Buffer.concat([log.carry, chunk.subarray(0, bytesRead)]);
      const base = log.offset - log.carry.length;
      let start = 0;
      for (let end = bytes.indexOf(NEWLINE); end !== -1; end = bytes.indexOf(NEWLINE, start)) {
        note(log, bytes.subarray(start, end), `${path} at byte ${base + start}`, warn);
        start = end + 1;
      }
      log.carry = Buffer.from(bytes.subarray(start));
      log.offset += bytesRead;
      if (log.offset < stat.size) await nextTurn();
    }
    return log;
  } finally {
    await handle.close();
  }
}

/**
 * `anchor.checkpoints`'s answer as checkpoints: each a Checkpoint, or its wire form (a parsed anchor file line). A
 * Checkpoint is checked through its wire form, so both meet the rules decodeCheckpoint keeps for the anchor file.
 */
function givenCheckpoints(answer: unknown): Checkpoint[] {
  if (!Array.isArray(answer)) throw new InvalidInputError('anchor.checkpoints', `must return an array of checkpoints, got ${answer === null ? 'null' : typeof answer}`);
  return answer.map((item: unknown, i) => {
    const where = `anchor.checkpoints(…)[${i}]`;
    if (typeof item !== 'object' || item === null) {
      throw new InvalidInputError('anchor.checkpoints', `${where} is not a checkpoint (a Checkpoint, as the sink was given, or its wire form, as the anchor file holds it)`);
    }
    const wire = 'session_id' in item ? item : encodeCheckpoint(item as Checkpoint);
    try {
      return decodeCheckpoint(wire as JsonValue, where);
    } catch (error) {
      throw new InvalidInputError('anchor.checkpoints', (error as Error).message, { cause: error });
    }
  });
}

/** Sinks already warned of: each says once that acquire cannot read its checkpoints back. */
const unreadable = new WeakSet<object>();

/** The checkpoints of `sessionId` that `anchor` can read back: its `checkpoints`, else its file sink's newest. */
async function checkpointsOf(anchor: HeadAnchor, sessionId: string): Promise<readonly Checkpoint[]> {
  const given = anchor.given.checkpoints;
  if (given !== undefined) return givenCheckpoints(await given(sessionId));
  const file = anchorSinkFile(anchor.given.sink);
  if (file === undefined) {
    // A sink of the host's own (a wrapper around fileAnchorSink included) keeps its checkpoints where this cannot look.
    if (!unreadable.has(anchor.given.sink)) {
      unreadable.add(anchor.given.sink);
      process.emitWarning(
        'jingwei: this anchor\'s sink is not a fileAnchorSink and no anchor.checkpoints was given, so acquire cannot check a journal against its checkpoints: a journal restored from a backup is taken as it is. Give anchor.checkpoints (docs/design.md#a-restored-journal-is-refused-at-acquire).',
        { code: 'JINGWEI_ANCHOR_UNCHECKED' },
      );
    }
    return [];
  }
  const path = resolve(file);
  const before = reading.get(path) ?? Promise.resolve();
  const read = before.then(() => readLog(path, (error) => anchor.warn(error)));
  reading.set(path, read.catch(() => undefined));
  const log = await read;
  return [...(log?.newest.get(sessionId)?.values() ?? [])];
}

/** The id of the journal a backend writes (its file's or schema's, `journal:<id>` as its scope key), if it has one. */
export function journalIdOf(backend: { readonly scopeKey?: string | undefined }): string | undefined {
  const key = backend.scopeKey;
  return typeof key === 'string' && key.startsWith('journal:') ? key.slice('journal:'.length) : undefined;
}

/**
 * Refuses (AnchorError, nothing written) to acquire a session whose stored journal is not the one the anchor's
 * checkpoints of it vouch for: shorter than an anchored head, another event at an anchored seq, an owner epoch
 * older than an anchored one. Only checkpoints of this journal signed with this key count; a session with none
 * (new, never anchored so, or of another store) is taken as it is.
 */
export async function checkJournalAgainstAnchor(
  sessionId: string,
  anchor: HeadAnchor,
  readChain: () => Promise<{ readonly epoch: number; readonly rows: readonly ChainLink[] }>,
): Promise<void> {
  if (anchor.journalId === undefined) return;
  await checkJournalAgainstCheckpoints(sessionId, await checkpointsOf(anchor, sessionId), anchor.publicKey, anchor.journalId, readChain);
}

/**
 * The check of checkJournalAgainstAnchor on checkpoints already read (`jingwei recover --key --anchors` runs it as
 * the routine's acquire would): those of this session signed with `publicKey` in journal `journalId` count.
 */
export async function checkJournalAgainstCheckpoints(
  sessionId: string,
  checkpoints: readonly Checkpoint[],
  publicKey: KeyObject,
  journalId: string | undefined,
  readChain: () => Promise<{ readonly epoch: number; readonly rows: readonly ChainLink[] }>,
): Promise<void> {
  // Only a checkpoint of this very journal says what it held: a session of the same id in another store (a plain
  // import, a second store sharing the anchor file, a memory store after a restart) is another journal.
  if (journalId === undefined) return;
  const keyId = keyIdOf(publicKey);
  const mine = checkpoints.filter((c) => c.sessionId === sessionId && c.keyId === keyId && c.journalId === journalId);
  if (mine.length === 0) return;
  const { epoch, rows } = await readChain();
  try {
    checkAnchors(sessionId, rows.map((r) => ({ epoch: r.epoch, hash: r.hash })), epoch, mine, publicKey);
  } catch (error) {
    if (!(error instanceof AnchorError)) throw error;
    const found = error.message.slice(error.message.indexOf('): ') + 3);
    const why = error.code === 'anchor_invalid'
      ? 'A checkpoint of it read back from the anchor does not verify with this owner\'s key (edited or forged), so nothing vouches for the journal; acquire refused, nothing written'
      : 'The stored journal is not the one its signed checkpoints vouch for (a backup restored, a file put back, or an edit), so calls recorded since may be missing from it and would be made again; acquire refused, nothing written (jingwei verify --key --anchors shows where)';
    throw new AnchorError(error.sessionId, error.seq, error.reason, `${found}. ${why}`, { cause: error });
  }
}
