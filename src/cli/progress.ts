/**
 * A one-line progress indicator on stderr, for loads that take long. It appears only when stderr is a terminal
 * and the work is big enough to notice; it never touches stdout, and it erases itself before results are printed.
 *
 * Loading a SQLite journal is synchronous, so between two updates the spinner may stand still; each phase still
 * says what is being done and how much. On PostgreSQL the event loop is free while rows arrive and the spinner turns.
 */
import { colourAllowed, makeStyle, type Io, type OutStream, type Style } from './io.js';

/** Sessions with at least this many events get a progress line (about a tenth of a second to load and check). */
export const PROGRESS_THRESHOLD_EVENTS = 10_000;

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export class Progress {
  private text = '';
  private frame = 0;
  private shown = false;
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly started = Date.now();
  private readonly style: Style;

  private constructor(private readonly stream: OutStream, readonly enabled: boolean, env: Io['env']) {
    this.style = makeStyle(colourAllowed(stream, env));
  }

  /** Enabled when stderr is a terminal and `size` (events to handle) reaches the threshold. */
  static for(io: Io, size: number): Progress {
    return new Progress(io.stderr, io.stderr.isTTY === true && size >= PROGRESS_THRESHOLD_EVENTS, io.env);
  }

  static disabled(io: Io): Progress {
    return new Progress(io.stderr, false, io.env);
  }

  update(text: string): void {
    if (!this.enabled) return;
    this.text = text;
    this.render();
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.render(), 120);
      this.timer.unref();
    }
  }

  private render(): void {
    const seconds = ((Date.now() - this.started) / 1000).toFixed(1);
    this.frame = (this.frame + 1) % FRAMES.length;
    this.stream.write(`\r\u001b[2K${this.style.cyan(FRAMES[this.frame]!)} ${this.text} ${this.style.dim(`${seconds}s`)}`);
    this.shown = true;
  }

  /** Erases the line; call before printing results. */
  done(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    if (this.shown) this.stream.write('\r\u001b[2K');
    this.shown = false;
  }
}
