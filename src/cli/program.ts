/** The `jingwei` program: finds the command, runs it, and turns every failure into a message and an exit code. */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCommand, type Command } from './command.js';
import { consoleCommand } from './commands/console.js';
import { approveCommand, denyCommand, reviewCommand } from './commands/decide.js';
import { eventsCommand } from './commands/events.js';
import { inspectCommand } from './commands/inspect.js';
import { mcpCommand } from './commands/mcp.js';
import { queueCommand } from './commands/queue.js';
import { recoverCommand } from './commands/recover.js';
import { sessionsCommand } from './commands/sessions.js';
import { exportCommand, importCommand } from './commands/transfer.js';
import { verifyCommand } from './commands/verify.js';
import { demoCommand } from './demo/command.js';
import { describeError, errorDocument, EXIT, EXIT_CODES_HELP, exitCodeFor, UsageError, type ExitCode } from './exit.js';
import { Printer, type Io } from './io.js';

export const COMMANDS: readonly Command[] = [
  demoCommand,
  sessionsCommand,
  eventsCommand,
  inspectCommand,
  queueCommand,
  recoverCommand,
  verifyCommand,
  exportCommand,
  importCommand,
  approveCommand,
  denyCommand,
  reviewCommand,
  consoleCommand,
  mcpCommand,
];

/** The version in the package.json above this file (dist/cli in the package, or a test build's copy of src/cli). */
function version(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'jingwei' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // not here; look one directory up
    }
    dir = dirname(dir);
  }
  return 'unknown';
}

export function programHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    'Usage: jingwei <command> [arguments] [options]',
    '',
    'jingwei: a durable tool runtime for AI agents. A tool with real side effects is never silently run twice',
    'after a crash, and whether a write happened is never lost. These commands show and check the journal.',
    '',
    'Commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Every store argument is a SQLite journal file or a postgres:// URL. Reading commands never write to it (but',
    'any command upgrades a journal an older version wrote, or draws a journal id whose row was removed, and',
    'SQLite folds a write-ahead log into its file on close: keep a damaged file as evidence by copying it with',
    'its -wal first); approve, deny, review and the console write only to its decision inbox, never to a journal.',
    "Run 'jingwei <command> --help' for a command's arguments and options.",
    '',
    'Options:',
    '  -h, --help     show this help',
    '  -V, --version  print the version',
    '',
    'Colour is used only on a terminal, never when NO_COLOR is set.',
    '',
    EXIT_CODES_HELP,
  ].join('\n');
}

export async function main(argv: readonly string[], io: Io): Promise<ExitCode> {
  const out = new Printer(io.stdout, io.env);
  const err = new Printer(io.stderr, io.env);
  const [first, ...rest] = argv;
  if (first === undefined) {
    err.line(programHelp());
    return EXIT.usage;
  }
  if (first === '--help' || first === '-h') {
    out.line(programHelp());
    return EXIT.ok;
  }
  if (first === '--version' || first === '-V') {
    out.line(version());
    return EXIT.ok;
  }
  if (first === 'help') {
    const named = COMMANDS.find((c) => c.name === rest[0]);
    if (rest[0] !== undefined && !named) {
      err.line(`jingwei: unknown command ${JSON.stringify(rest[0])}`);
      return EXIT.usage;
    }
    if (named) return runCommand(named, ['--help'], io);
    out.line(programHelp());
    return EXIT.ok;
  }
  const command = COMMANDS.find((c) => c.name === first);
  try {
    if (!command) {
      throw new UsageError(
        first.startsWith('-') ? `jingwei: unknown option ${first}` : `jingwei: unknown command ${JSON.stringify(first)}`,
        `Commands: ${COMMANDS.map((c) => c.name).join(', ')}. Run 'jingwei --help' for more.`,
      );
    }
    return await runCommand(command, rest, io);
  } catch (error) {
    const prefix = command ? `jingwei ${command.name}: ` : '';
    const message = describeError(error);
    err.line(`${err.style.red('error:')} ${message.startsWith('jingwei') ? message : prefix + message}`);
    if (io.env.JINGWEI_DEBUG && error instanceof Error && error.stack) err.line(err.style.dim(error.stack));
    // A script reading --json gets a document for a failure too, rather than an empty stdout it cannot tell from one;
    // on one line, so a reader of `events --json`, one record a line, can take it as well.
    if (command && rest.includes('--json')) out.line(JSON.stringify(errorDocument(error)));
    return exitCodeFor(error);
  }
}

