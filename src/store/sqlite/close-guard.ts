/**
 * A connection whose `-wal` or `-shm` was replaced under it (docs/design.md#a-store-notices-its-file-was-replaced)
 * still maps the deleted index and takes itself for the file's last connection: when it closes (a store's close, or
 * better-sqlite3 closing every connection as the process ends), SQLite would checkpoint its stale view of the log into
 * the file and delete the log another process writes. SQLite checkpoints at close only when it gets the file's
 * exclusive lock, so a guard, a small process that opens the file afresh (its own, current view of the index) and holds
 * a read lock until it is let go or this process ends, keeps that from happening; the guard's own close then merges
 * the log correctly if it is the last.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';

/** How long a guard may take to open the file and take its read lock. */
const READY_MS = 10_000;

// Let go ("close" on its input), it closes at once. Left (its input ends because this process is ending), it waits
// until this process is gone, so that the stale connection has been closed while the guard still held its lock.
const GUARD = `
const Database = require(process.argv[1]);
const parent = Number(process.argv[3]);
const db = new Database(process.argv[2], { fileMustExist: true, timeout: 5000 });
db.prepare("SELECT count(*) FROM sqlite_schema").get();
process.stdout.write("ready\\n");
const done = () => { db.close(); process.exit(0); };
const alive = () => { try { process.kill(parent, 0); return true; } catch { return false; } };
process.stdin.setEncoding("utf8");
process.stdin.on("data", (text) => { if (text.includes("close")) done(); });
process.stdin.on("end", () => { const wait = () => (alive() ? setTimeout(wait, 50) : done()); wait(); });
process.stdin.resume();
`;

/** A guard held over a file: `release()` lets it close its connection and end. */
export interface Guard {
  release(): Promise<void>;
}

/** Guards held in this process, by the file's real path. */
const held = new Map<string, Promise<Guard | null>>();

/**
 * The guard over the journal at `path` (started on first ask, held until released or this process ends), or null when
 * it could not be started or did not take its lock in time.
 */
export function guardFile(path: string): Promise<Guard | null> {
  let guard = held.get(path);
  if (guard === undefined) {
    guard = startGuard(path);
    held.set(path, guard);
    void guard.then((g) => {
      if (g === null) held.delete(path);
    });
  }
  return guard;
}

async function startGuard(path: string): Promise<Guard | null> {
  let child: ChildProcess;
  try {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    // Its own options: a host's NODE_OPTIONS (a default module type, say) must not change how the guard's code runs.
    const env = { ...process.env };
    delete env.NODE_OPTIONS;
    child = spawn(process.execPath, ['--input-type=commonjs', '-e', GUARD, driver, path, String(process.pid)], { stdio: ['pipe', 'pipe', 'ignore'], env });
  } catch {
    return null;
  }
  const failed = new Promise<false>((resolve) => {
    child.once('error', () => resolve(false));
    child.once('exit', () => resolve(false));
  });
  const stdout = child.stdout;
  const stdin = child.stdin;
  if (!stdout || !stdin) {
    child.kill();
    return null;
  }
  const ready = await Promise.race([
    new Promise<true>((resolve) => {
      let seen = '';
      stdout.setEncoding('utf8');
      stdout.on('data', (text: string) => {
        seen += text;
        if (seen.includes('ready\n')) resolve(true);
      });
    }),
    failed,
    new Promise<false>((resolve) => setTimeout(() => resolve(false), READY_MS).unref()),
  ]);
  if (!ready) {
    child.kill();
    return null;
  }
  // Held until released, or until this process ends (its end closes the pipe, and the guard closes after it): it does
  // not keep this process alive.
  child.unref();
  (stdout as unknown as { unref?: () => void }).unref?.();
  (stdin as unknown as { unref?: () => void }).unref?.();
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  return {
    release: async () => {
      held.delete(path);
      // Waited for now: held again, so that this process stays up until the guard has closed.
      child.ref();
      stdin.end('close\n');
      await exited;
    },
  };
}
