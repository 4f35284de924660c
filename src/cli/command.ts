/**
 * What a command is (its arguments, options and help) and the one place arguments are parsed: node:util parseArgs,
 * strict, with every mistake turned into a UsageError (exit 2) that names the command's --help.
 */
import { parseArgs } from 'node:util';
import { EXIT_CODES_HELP, UsageError, type ExitCode } from './exit.js';
import { Printer, type Io } from './io.js';

export interface OptionSpec {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  /** The value's placeholder in the help, for string options. */
  readonly value?: string;
  readonly help: string;
}

export interface ArgumentSpec {
  readonly name: string;
  readonly required: boolean;
  readonly help: string;
  /** The last argument only: takes every remaining positional (see CommandContext.rest). */
  readonly variadic?: boolean;
}

export interface CommandContext {
  readonly io: Io;
  readonly out: Printer;
  readonly err: Printer;
  readonly args: Readonly<Record<string, string>>;
  /** Every positional from a variadic last argument on (empty otherwise). */
  readonly rest: readonly string[];
  readonly options: Readonly<Record<string, string | boolean | undefined>>;
}

export interface Command {
  readonly name: string;
  /** One line for `jingwei --help`. */
  readonly summary: string;
  readonly arguments: readonly ArgumentSpec[];
  readonly options: Readonly<Record<string, OptionSpec>>;
  /** Paragraphs after the usage line. */
  readonly description: string;
  /** Exit codes specific to this command; the shared list follows. */
  readonly exitCodes?: string;
  readonly examples?: readonly string[];
  run(ctx: CommandContext): Promise<ExitCode>;
}

export const STORE_ARGUMENT: ArgumentSpec = {
  name: 'store',
  required: true,
  help: 'a SQLite journal file, or a postgres:// URL',
};

const HELP_OPTION: OptionSpec = { type: 'boolean', short: 'h', help: 'show this help and exit' };

export function usageLine(command: Command): string {
  const args = command.arguments.map((a) => {
    const name = a.variadic ? `${a.name}…` : a.name;
    return a.required ? `<${name}>` : `[<${name}>]`;
  }).join(' ');
  const options = Object.keys(command.options).length > 0 ? ' [options]' : '';
  return `jingwei ${command.name} ${args}${options}`.replace(/\s+/g, ' ').trim();
}

export function helpText(command: Command): string {
  const lines: string[] = [`Usage: ${usageLine(command)}`, '', command.description.trim(), ''];
  if (command.arguments.length > 0) {
    lines.push('Arguments:');
    const width = Math.max(...command.arguments.map((a) => a.name.length + 2));
    for (const a of command.arguments) lines.push(`  ${`<${a.name}>`.padEnd(width)}  ${a.help}`);
    lines.push('');
  }
  const options = { ...command.options, help: HELP_OPTION };
  const labels = Object.entries(options).map(([name, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : '    '}--${name}${o.type === 'string' ? ` <${o.value ?? 'value'}>` : ''}`;
    return [flag, o.help] as const;
  });
  const width = Math.max(...labels.map(([flag]) => flag.length));
  lines.push('Options:');
  for (const [flag, help] of labels) lines.push(`  ${flag.padEnd(width)}  ${help}`);
  lines.push('');
  if (command.examples && command.examples.length > 0) {
    lines.push('Examples:');
    for (const e of command.examples) lines.push(`  ${e}`);
    lines.push('');
  }
  if (command.exitCodes) lines.push(command.exitCodes.trim(), '');
  lines.push(EXIT_CODES_HELP);
  return lines.join('\n');
}

function wantsHelp(argv: readonly string[]): boolean {
  for (const a of argv) {
    if (a === '--') return false;
    if (a === '--help' || a === '-h') return true;
  }
  return false;
}

/** Parses argv for one command; prints its help for --help (exit 0). */
export async function runCommand(command: Command, argv: readonly string[], io: Io): Promise<ExitCode> {
  const out = new Printer(io.stdout, io.env);
  const err = new Printer(io.stderr, io.env);
  if (wantsHelp(argv)) {
    out.line(helpText(command));
    return 0;
  }
  const config: Record<string, { type: 'string' | 'boolean'; short?: string }> = {};
  for (const [name, o] of Object.entries(command.options)) config[name] = o.short ? { type: o.type, short: o.short } : { type: o.type };
  let parsed: { values: Record<string, string | boolean | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...argv], options: config, allowPositionals: true, strict: true }) as typeof parsed;
  } catch (error) {
    throw new UsageError(`jingwei ${command.name}: ${(error as Error).message}`, `Run 'jingwei ${command.name} --help' for usage.`);
  }
  const required = command.arguments.filter((a) => a.required).length;
  const { positionals } = parsed;
  if (positionals.length < required) {
    const missing = command.arguments.slice(positionals.length).filter((a) => a.required).map((a) => `<${a.name}>`);
    throw new UsageError(`jingwei ${command.name}: missing ${missing.join(' ')}`, `Usage: ${usageLine(command)}\nRun 'jingwei ${command.name} --help' for more.`);
  }
  const variadic = command.arguments[command.arguments.length - 1]?.variadic === true;
  if (!variadic && positionals.length > command.arguments.length) {
    throw new UsageError(
      `jingwei ${command.name}: unexpected argument ${JSON.stringify(positionals[command.arguments.length])}`,
      `Usage: ${usageLine(command)}\nRun 'jingwei ${command.name} --help' for more.`,
    );
  }
  const args: Record<string, string> = {};
  command.arguments.forEach((a, i) => {
    if (positionals[i] !== undefined) args[a.name] = positionals[i]!;
  });
  const rest = variadic ? positionals.slice(command.arguments.length - 1) : [];
  return command.run({ io, out, err, args, rest, options: parsed.values });
}

/** A string option as a non-negative integer (from `range.min` to `range.max` when given), or a UsageError. */
export function integerOption(command: string, name: string, value: string | boolean | undefined, fallback: number, range?: { min: number; max: number }): number {
  if (value === undefined) return fallback;
  const n = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(n) || (range !== undefined && (n < range.min || n > range.max))) {
    const want = range === undefined ? 'a non-negative integer' : `an integer from ${range.min} to ${range.max}`;
    throw new UsageError(`jingwei ${command}: --${name} must be ${want}, got ${JSON.stringify(value)}`);
  }
  return n;
}
