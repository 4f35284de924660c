/**
 * The live queue's stream to one browser (docs/design.md#the-review-console). Every update replaces the last one
 * whole, so a client that stops reading needs only the newest: while what was sent has not been read (the socket's
 * buffer is full), newer updates replace each other here instead of piling up in the console's memory, and the
 * newest is sent once the client has read the rest.
 */
import type { Writable } from 'node:stream';

export class LatestUpdate {
  private held: string | null = null;

  constructor(private readonly out: Writable) {
    out.on('drain', () => {
      const next = this.held;
      this.held = null;
      if (next !== null) this.send(next);
    });
  }

  send(text: string): void {
    if (this.out.writableEnded || this.out.destroyed) return;
    if (this.out.writableNeedDrain) {
      this.held = text;
      return;
    }
    this.out.write(text);
  }
}
