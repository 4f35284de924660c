import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';

/** A fresh directory removed when the test file ends. */
export function tempDir(prefix = 'jingwei-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

let counter = 0;
/** A fresh SQLite path inside a temp directory. */
export function tempDbPath(dir: string, name = 'journal'): string {
  counter += 1;
  return join(dir, `${name}-${process.pid}-${counter}.db`);
}
