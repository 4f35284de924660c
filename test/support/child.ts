import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { after } from 'node:test';

/** Children still running. A test that fails midway leaves its children waiting on stdin; they would keep the test
 * file's process alive forever, so whatever is left when the file's tests end is killed. */
const running = new Set<ChildProcessWithoutNullStreams>();
after(() => {
  for (const proc of running) proc.kill('SIGKILL');
});

/** A child node process speaking JSON lines on stdout; lines from the parent go to its stdin. */
export class ChildProcess {
  readonly proc: ChildProcessWithoutNullStreams;
  private readonly lines: unknown[] = [];
  private waiters: Array<(line: unknown) => void> = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr = '';

  constructor(script: string, args: string[], env: Record<string, string> = {}) {
    this.proc = spawn(process.execPath, [script, ...args], { env: { ...process.env, ...env }, stdio: 'pipe' });
    running.add(this.proc);
    this.proc.on('exit', () => running.delete(this.proc));
    this.proc.stderr.on('data', (d: Buffer) => { this.stderr += d.toString(); });
    createInterface({ input: this.proc.stdout }).on('line', (line) => {
      const parsed: unknown = JSON.parse(line);
      const waiter = this.waiters.shift();
      if (waiter) waiter(parsed);
      else this.lines.push(parsed);
    });
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, signal) => resolve({ code, signal })));
  }

  /** The next JSON line the child prints; rejects if the child exits first. */
  next<T = Record<string, unknown>>(): Promise<T> {
    if (this.lines.length > 0) return Promise.resolve(this.lines.shift() as T);
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
      return Promise.reject(new Error(`child exited before answering; stderr: ${this.stderr}`));
    }
    return new Promise<T>((resolve, reject) => {
      const onExit = () => reject(new Error(`child exited before answering; stderr: ${this.stderr}`));
      this.proc.once('exit', onExit);
      this.waiters.push((line) => { this.proc.off('exit', onExit); resolve(line as T); });
    });
  }

  send(line: string): void {
    this.proc.stdin.write(line + '\n');
  }
}
