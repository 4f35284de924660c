/**
 * `jingwei console <store>`: the review console, a local web page for operators (docs/design.md#the-review-console).
 * It shows the queue, sessions and calls, and records decisions through the decision inbox, like approve, deny and
 * review; it never writes a journal.
 */
import { InvalidInputError } from '../../errors.js';
import { integerOption, STORE_ARGUMENT, type Command } from '../command.js';
import { EXIT, UsageError } from '../exit.js';
import { safe } from '../format.js';
import { hasVisibleText } from '../../text.js';
import { openStoreFromTarget, describeTarget } from '../target.js';

/** Resolves on the first SIGINT or SIGTERM. */
function stopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (signal: NodeJS.Signals) => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
      resolve(signal);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}

export const consoleCommand: Command = {
  name: 'console',
  summary: 'serve the review console on 127.0.0.1: the queue, session timelines, and forms to review, approve or deny',
  arguments: [STORE_ARGUMENT],
  options: {
    actor: { type: 'string', value: 'name', help: 'who decides: recorded on every decision made in the console (required unless --read-only; at most 1,024 bytes)' },
    'read-only': { type: 'boolean', help: 'only look: every form is refused' },
    port: { type: 'string', value: 'n', help: 'the port on 127.0.0.1 (default: any free port)' },
  },
  description: `
Serves a web page on 127.0.0.1 only, for the people who decide about uncertain calls: the queue of operations that
need attention across sessions, newest first, filterable by tool, effect, status and age and updated live, with the
approval requests waiting for a person and those decided whose decision no attempt has used yet (as 'jingwei queue'
lists them); each list shows at most 500 rows after filtering, with a link to the next 500; a page per session with
its timeline drawn to scale (calls, attempts of one operation, body start, approval waits, reviews, results,
durations), its tasks' budgets and its lease; a page per call with its evidence, the rule that decided its status,
a reconciler's answer, an approval decided but not yet used, and forms to record a review or to approve or deny a
pending approval. Decisions go to the store's decision inbox exactly as 'jingwei review', 'approve' and 'deny'
record them, with --actor as the actor (checked at start as the inbox checks it: non-empty, at most 1,024 bytes);
the session's host journals them. A decision on a call that was resolved meanwhile is refused. A form that comes
back with an error keeps what was typed, exactly; a failure after a decision was written says it was recorded.

It prints a link to open in a browser on this machine: a random path, under which every page of this console
lives, and a random token. The token is exchanged for a cookie (HttpOnly, SameSite=Strict) scoped to that path, so
the browser sends it to this console only: not to another server on 127.0.0.1 (cookies ignore ports), not to
another console. Every form carries a CSRF token; a request from another address, for another Host name, outside
the console's path, without the token, or a form sent to a --read-only console is refused and changes nothing.
Stop it with Ctrl-C.`,
  exitCodes: `This command runs until it is stopped (SIGINT or SIGTERM), then exits 0. It exits 2 without serving when
--actor is missing or one the decision inbox would refuse, or --port is bad or busy.`,
  examples: [
    'jingwei console journal.db --actor alice',
    'jingwei console postgres://ops@db/agents --read-only --port 8740',
  ],
  async run({ out, args, options }) {
    const readOnly = options['read-only'] === true;
    const actor = typeof options.actor === 'string' && hasVisibleText(options.actor) ? options.actor : null;
    if (!readOnly && actor === null) {
      throw new UsageError('jingwei console: --actor is required (the name recorded on every decision), or give --read-only', "Run 'jingwei console --help' for usage.");
    }
    const port = integerOption('console', 'port', options.port, 0);
    if (port > 65535) throw new UsageError(`jingwei console: --port must be at most 65535, got ${port}`);
    // The console's server and pages are loaded only by this command, not by every run of the CLI.
    const { checkActor, startConsole } = await import('../console/server.js');
    if (!readOnly) {
      try {
        checkActor(actor);
      } catch (error) {
        if (!(error instanceof InvalidInputError)) throw error;
        throw new UsageError(
          `jingwei console: --actor ${error.message.replace(/^actor: /, '')}: the decision inbox would refuse every decision made with it`,
          "Run 'jingwei console --help' for usage.",
        );
      }
    }
    const store = await openStoreFromTarget(args.store!);
    let running;
    try {
      running = await startConsole({ store, actor, readOnly, port });
    } catch (error) {
      await store.close();
      if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') {
        throw new UsageError(`jingwei console: port ${port} on 127.0.0.1 is in use; choose another with --port, or leave --port out for any free one`);
      }
      throw error;
    }
    out.line(`jingwei console: ${safe(describeTarget(args.store!))} on ${running.origin} (this machine only)`);
    out.line(`Open: ${running.link}`);
    out.line(readOnly ? 'Read-only: nothing can be decided.' : `Decisions are recorded as ${safe(actor!)}. Stop with Ctrl-C.`);
    await stopSignal();
    await running.close();
    await store.close();
    return EXIT.ok;
  },
};
