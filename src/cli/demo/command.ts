/**
 * The `jingwei demo` command: its description here, its story in ./story.ts, loaded only when the demo runs (it
 * brings the tool runtime and the shop, which no other command needs).
 */
import type { Command } from '../command.js';

export const demoCommand: Command = {
  name: 'demo',
  summary: 'crash an agent five times at real crash points, then recover it as a host would (what `npm start` runs)',
  arguments: [{ name: 'journal', required: false, help: 'the SQLite journal file to use (default: a fresh one in a new temporary directory)' }],
  options: {},
  description: `
Shows jingwei's promise end to end, with real processes: a tool with real side effects is never silently run
twice after a crash, and whether a write happened is never lost.

An agent fulfils one order with five tools, one per kind of side effect (read_only, idempotent, non_idempotent,
unknown, and a non_idempotent tool that needs approval). Each step runs in its own worker process, which is killed
with SIGKILL at a chosen point on the real code path. Then the demo acts as the recovering host: it takes the
session over, loads and assesses the journal, retries what the rules allow, shows needs_review for the rest,
records an operator's review for one call and retries it, and checks the invariants. The shop's own database is
a SQLite file next to the journal (<journal>.business.db); both files are kept so you can look at them with the
other commands afterwards.`,
  exitCodes: 'This command exits 1 when an invariant does not hold at the end.',
  examples: ['jingwei demo', 'jingwei demo /tmp/shop.db'],
  async run(ctx) {
    const { runDemo } = await import('./story.js');
    return runDemo(ctx);
  },
};
