/**
 * Closing a connection whose `-wal` or `-shm` was replaced under it (docs/design.md#a-store-notices-its-file-was-replaced).
 * Such a connection still maps the deleted index and takes itself for the file's last connection: SQLite would then
 * checkpoint its stale view of the log into the file and delete the log another process writes. SQLite checkpoints at
 * close only when it gets the file's exclusive lock, so a short-lived process that opens the file afresh (its own,
 * current view of the index) and holds a read lock keeps that from happening; once the stale connection is closed,
 * the guard closes its own, which merges the log correctly if it is the last.
 */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';

/** How long the guard may take to open the file and take its read lock. */
const READY_MS = 10_000;

const GUARD = `
const Database = require(process.argv[1]);
const db = new Database(process.argv[2], { fileMustExist: true, timeout: 5000 });
db.prepare("SELECT count(*) FROM sqlite_schema").get();
process.stdout.write("ready\\n");
process.stdin.on("end", () => { db.close(); process.exit(0); });
process.stdin.resume();
`;

/**
 * Closes `close`'s connection to the journal at `path` under the guard of another process holding a read lock on it.
 * Returns false, closing nothing, when the guard could not be started or did not take its lock in time.
 */
export async function closeUnderGuard(path: string, close: () => void): Promise<boolean> {
  let driver: string;
  try {
    driver = createRequire(import.meta.url).resolve('better-sqlite3');
  } catch {
    return false;
  }
  const child = spawn(process.execPath, ['-e', GUARD, driver, path], { stdio: ['pipe', 'pipe', 'ignore'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), READY_MS);
    let seen = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (text: string) => {
      seen += text;
      if (seen.includes('ready\n')) {
        clearTimeout(timer);
        resolve(true);
      }
    });
    child.once('error', () => {
      clearTimeout(timer);
      resolve(false);
    });
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
  if (!ready) {
    child.kill();
    return false;
  }
  try {
    close();
  } finally {
    child.stdin.end();
    await exited;
  }
  return true;
}
