import { realpathSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { StoreReplacedError } from '../../errors.js';

/**
 * How long ago the journal's directory must have last changed before its change times are trusted to stand for its
 * entries, in ms. A file time is a clock reading rounded down to the file system's granularity (a tick of the
 * kernel's coarse clock, a few ms; a second on ext3 or HFS+, two on FAT), so a change made within one granule of the
 * one before it can leave the times as they were. Once the recorded times are older than a granule, no later change
 * can give the same times again, short of the clock being set back. Times with no sub-second part are taken to come
 * from a file system that keeps whole seconds.
 */
const SETTLED_MS = { subSecond: 50, wholeSeconds: 2500 } as const;
const NS_PER_SECOND = 1_000_000_000n;

/** The files SQLite keeps beside a journal in WAL mode: the log, and the shared-memory index of the log. */
const SIDE_FILES = [
  { suffix: '-wal', name: 'write-ahead log' },
  { suffix: '-shm', name: 'shared-memory index (-shm)' },
] as const;

/**
 * The device and inode of the journal file and of its write-ahead log and its shared-memory index, taken when the
 * store opened (each side file's when it first exists). Checked before every write transaction: a file deleted or
 * replaced under an open store would let another host start the session over on a fresh file while this one's
 * acknowledged writes vanish, and a second process opening the journal after its `-shm` was deleted builds an index
 * of its own and writes the log beside this one, which damages the file (docs/design.md#a-store-notices-its-file-was-replaced).
 *
 * The log is the file every commit has just fsynced, and a `stat` of it right after makes the writing thread wait
 * (one more context switch a commit, about a seventh of a durable call on a fast disk). Deleting, renaming or
 * creating a file changes its directory's change times, so while the directory is the one it was and its times are
 * what they were when both files last passed the check (and had settled then), both names still name the same files
 * and one `stat` of the directory stands for theirs.
 */
export class FileIdentity {
  /** Absolute: SQLite keeps the file it opened whatever the process's working directory becomes later. */
  private readonly path: string;
  /**
   * The file's real path: SQLite resolves symbolic links and keeps its `-wal` and `-shm` beside the file they name,
   * so the side files are looked for there, and its directory is the one whose times stand for them.
   */
  private readonly real: string;
  /** Whether the store was opened through another name than the real one (a link): its name is then stat'ed every time. */
  private readonly aliased: boolean;
  private readonly main: string;
  private readonly directory: string;
  /** Each side file's identity once it existed, in SIDE_FILES order. */
  private readonly sides: (string | null)[] = SIDE_FILES.map(() => null);
  /** The directory's identity and change times when the log last passed the check, if they had settled by then. */
  private unchangedSince: string | null = null;

  constructor(path: string) {
    this.path = resolve(path);
    this.real = FileIdentity.realPath(this.path);
    this.aliased = this.real !== this.path;
    this.directory = dirname(this.real);
    this.main = FileIdentity.of(this.path) ?? '';
    this.noteSideFiles();
    this.register();
  }

  /** The journal file's device and inode when the store opened it. */
  get file(): string {
    return this.main;
  }

  /** The journal file's real path (symbolic links resolved). */
  get realPath(): string {
    return this.real;
  }

  /**
   * How the file, its log or its index was replaced under this store, or null: the check's error, and whether the
   * journal file itself is still the one opened (only a side file was replaced).
   */
  replacement(): { readonly error: StoreReplacedError; readonly sideFile: boolean } | null {
    try {
      this.check();
      return null;
    } catch (error) {
      if (!(error instanceof StoreReplacedError)) throw error;
      return { error, sideFile: FileIdentity.of(this.path) === this.main };
    }
  }

  /** The open stores of this process, by the journal file's device and inode. */
  private static readonly open = new Map<string, Set<FileIdentity>>();

  /** Registers this store as having its file open, until forget(). */
  private register(): void {
    if (this.main === '') return;
    let stores = FileIdentity.open.get(this.main);
    if (stores === undefined) {
      stores = new Set();
      FileIdentity.open.set(this.main, stores);
    }
    stores.add(this);
  }

  /** The store closed its connection. */
  forget(): void {
    const stores = FileIdentity.open.get(this.main);
    stores?.delete(this);
    if (stores?.size === 0) FileIdentity.open.delete(this.main);
  }

  /** The real paths of files this process's stores hold open whose `-wal` or `-shm` was replaced, the file intact. */
  static sideFilesReplaced(): string[] {
    const paths: string[] = [];
    for (const stores of FileIdentity.open.values()) {
      for (const store of stores) if (store.replacement()?.sideFile === true) paths.push(store.real);
    }
    return paths;
  }

  /** Refuses (StoreReplacedError) to open `path` again while a store of this process has it open with a side file replaced. */
  static checkOthers(file: string, path: string): void {
    for (const other of FileIdentity.open.get(file) ?? []) {
      const replaced = other.replacement();
      if (replaced !== null) {
        throw new StoreReplacedError(path, `a store of this process has the file open, and its write-ahead log or index was replaced under it (${replaced.error.message}); SQLite would share that store's stale view with a new connection: close it first`, { cause: replaced.error });
      }
    }
  }

  /** The device and inode of the file at `path` now, or null when there is none. */
  static current(path: string): string | null {
    return FileIdentity.of(resolve(path));
  }

  private static realPath(path: string): string {
    try {
      return realpathSync(path);
    } catch {
      return path;
    }
  }

  private static of(path: string): string | null {
    const st = statSync(path, { throwIfNoEntry: false });
    return st ? `${st.dev}:${st.ino}` : null;
  }

  /** The directory's device, inode and change times, and whether they have settled (SETTLED_MS). */
  private directoryState(): { readonly state: string; readonly settled: boolean } | null {
    const st = statSync(this.directory, { bigint: true, throwIfNoEntry: false });
    if (!st) return null;
    const wholeSeconds = st.mtimeNs % NS_PER_SECOND === 0n || st.ctimeNs % NS_PER_SECOND === 0n;
    const settledBeforeNs = BigInt(Date.now() - (wholeSeconds ? SETTLED_MS.wholeSeconds : SETTLED_MS.subSecond)) * 1_000_000n;
    const settled = st.mtimeNs < settledBeforeNs && st.ctimeNs < settledBeforeNs;
    return { state: `${st.dev}:${st.ino}:${st.mtimeNs}:${st.ctimeNs}`, settled };
  }

  /** Records each side file's identity the first time it exists. */
  noteSideFiles(): void {
    for (let i = 0; i < SIDE_FILES.length; i++) this.sides[i] ??= FileIdentity.of(`${this.real}${SIDE_FILES[i]!.suffix}`);
  }

  check(): void {
    // The directory is read before the files: a change made in between shows as changed times next time.
    const directory = this.directoryState();
    if (directory !== null && directory.state === this.unchangedSince && !this.aliased) return;
    const main = FileIdentity.of(this.path);
    if (main === null) throw new StoreReplacedError(this.path, 'the journal file was deleted');
    if (main !== this.main) throw new StoreReplacedError(this.path, 'the journal file was replaced by another file');
    for (let i = 0; i < SIDE_FILES.length; i++) {
      const noted = this.sides[i];
      if (noted === null || noted === undefined) continue;
      const { suffix, name } = SIDE_FILES[i]!;
      const now = FileIdentity.of(`${this.real}${suffix}`);
      if (now === null) throw new StoreReplacedError(this.path, `its ${name} was deleted`);
      if (now !== noted) throw new StoreReplacedError(this.path, `its ${name} was replaced by another file`);
    }
    this.unchangedSince = directory?.settled ? directory.state : null;
  }
}
