/**
 * The checkpoints an owner's anchor kept, read back as the owner acquires a session, and the check of the stored
 * journal against them (docs/design.md#a-restored-journal-is-refused-at-acquire): a journal put back from a backup is
 * refused before anything is written on it, instead of its missing calls being made again.
 */
import { open } from 'node:fs/promises';
import { resolve } from 'node:path';
import { AnchorError, InvalidInputError } from '../errors.js';
import { parseJson } from '../json/parse.js';
import { anchorSinkFile, checkAnchors, decodeCheckpoint, keyIdOf, type Checkpoint, type ChainLink, type HeadAnchor } from './anchors.js';

/** What has been read of one anchor file: the newest checkpoint of each session and key, and where reading stopped. */
interface AnchorLog {
  /** The file's device and inode: another file at the path is read from its start. */
  readonly identity: string;
  offset: number;
  /** The bytes after the last newline read: a line still being appended. */
  carry: Buffer;
  /** Per session, per key id, the newest checkpoint (by seq, then epoch). */
  readonly newest: Map<string, Map<string, Checkpoint>>;
}

const NEWLINE = 0x0a;
/** Anchor files read in this process, by absolute path: each is read from where it was left the time before. */
const logs = new Map<string, AnchorLog>();
/** One read of a file at a time, so that two acquires do not both advance the same log. */
const reading = new Map<string, Promise<unknown>>();

function newer(a: Checkpoint, b: Checkpoint | undefined): boolean {
  return b === undefined || a.seq > b.seq || (a.seq === b.seq && a.epoch > b.epoch);
}

function note(log: AnchorLog, line: Buffer, where: string, warn: (error: unknown) => void): void {
  const text = line.toString('utf8').replace(/\r$/, '');
  if (text.trim() === '') return;
  let checkpoint: Checkpoint;
  try {
    checkpoint = decodeCheckpoint(parseJson(text), where);
  } catch (error) {
    // A line two appends ran into (a sink that died mid-line, then the next append) does not stop every acquire;
    // `jingwei verify --anchors` still refuses the file.
    warn(error instanceof AnchorError ? error : new AnchorError('?', -1, 'malformed', `${where}: ${(error as Error).message}`, { cause: error }));
    return;
  }
  let bySession = log.newest.get(checkpoint.sessionId);
  if (bySession === undefined) {
    bySession = new Map();
    log.newest.set(checkpoint.sessionId, bySession);
  }
  if (newer(checkpoint, bySession.get(checkpoint.keyId))) bySession.set(checkpoint.keyId, checkpoint);
}

async function readLog(path: string, warn: (error: unknown) => void): Promise<AnchorLog | null> {
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    // No file yet: nothing was anchored through it.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    const stat = await handle.stat();
    const identity = `${stat.dev}:${stat.ino}`;
    let log = logs.get(path);
    if (log === undefined || log.identity !== identity || stat.size < log.offset) {
      log = { identity, offset: 0, carry: Buffer.alloc(0), newest: new Map() };
      logs.set(path, log);
    }
    if (stat.size > log.offset) {
      const fresh = Buffer.alloc(stat.size - log.offset);
      const { bytesRead } = await handle.read(fresh, 0, fresh.length, log.offset);
      const bytes = Buffer.concat([log.carry, fresh.subarray(0, bytesRead)]);
      let start = 0;
      for (let end = bytes.indexOf(NEWLINE); end !== -1; end = bytes.indexOf(NEWLINE, start)) {
        note(log, bytes.subarray(start, end), `${path} at byte ${log.offset - log.carry.length + start}`, warn);
        start = end + 1;
      }
      log.carry = Buffer.from(bytes.subarray(start));
      log.offset += bytesRead;
    }
    return log;
  } finally {
    await handle.close();
  }
}

/** The checkpoints of `sessionId` that `anchor` can read back: its `checkpoints`, else its file sink's newest. */
async function checkpointsOf(anchor: HeadAnchor, sessionId: string): Promise<readonly Checkpoint[]> {
  const given = anchor.given.checkpoints;
  if (given !== undefined) {
    const checkpoints: unknown = await given(sessionId);
    if (!Array.isArray(checkpoints)) throw new InvalidInputError('anchor.checkpoints', `must return an array of checkpoints, got ${typeof checkpoints}`);
    return checkpoints as readonly Checkpoint[];
  }
  const file = anchorSinkFile(anchor.given.sink);
  if (file === undefined) return [];
  const path = resolve(file);
  const before = reading.get(path) ?? Promise.resolve();
  const read = before.then(() => readLog(path, (error) => anchor.warn(error)));
  reading.set(path, read.catch(() => undefined));
  const log = await read;
  return [...(log?.newest.get(sessionId)?.values() ?? [])];
}

/**
 * Refuses (AnchorError, nothing written) to acquire a session whose stored journal is not the one the anchor's
 * checkpoints of it vouch for: shorter than an anchored head, another event at an anchored seq, an owner epoch
 * older than an anchored one. A session none of them is of (new, or never anchored with this key) is taken as is.
 */
export async function checkJournalAgainstAnchor(
  sessionId: string,
  anchor: HeadAnchor,
  readChain: () => Promise<{ readonly epoch: number; readonly rows: readonly ChainLink[] }>,
): Promise<void> {
  const publicKey = anchor.publicKey;
  const keyId = keyIdOf(publicKey);
  const mine = (await checkpointsOf(anchor, sessionId)).filter((c) => c.sessionId === sessionId && c.keyId === keyId);
  if (mine.length === 0) return;
  const { epoch, rows } = await readChain();
  try {
    checkAnchors(sessionId, rows.map((r) => ({ epoch: r.epoch, hash: r.hash })), epoch, mine, publicKey);
  } catch (error) {
    if (!(error instanceof AnchorError)) throw error;
    const found = error.message.slice(error.message.indexOf('): ') + 3);
    throw new AnchorError(error.sessionId, error.seq, error.reason,
      `${found}. The stored journal is not the one its signed checkpoints vouch for (a backup restored, a file put back, or an edit), so calls recorded since may be missing from it and would be made again; acquire refused, nothing written (jingwei verify --key --anchors shows where)`,
      { cause: error });
  }
}
