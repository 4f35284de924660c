/** The program as a whole: help, version, usage errors, and --help on every command. */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { COMMANDS } from '../../src/cli/program.js';
import { cli, MAIN } from './helpers.js';

/** The package root: the nearest directory above this file whose package.json is jingwei's. */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(dir, 'package.json');
    if (existsSync(candidate) && (JSON.parse(readFileSync(candidate, 'utf8')) as { name?: string }).name === 'jingwei') return `${dir}/`;
    const up = dirname(dir);
    if (up === dir) throw new Error('no jingwei package.json above the test');
    dir = up;
  }
}
const root = packageRoot();
const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { version: string; bin: Record<string, string>; scripts: Record<string, string> };

describe('jingwei (the program)', () => {
  it('is the package bin, with a shebang, and npm start runs its demo', () => {
    assert.equal(pkg.bin.jingwei, './dist/cli/main.js');
    assert.match(readFileSync(`${root}src/cli/main.ts`, 'utf8'), /^#!\/usr\/bin\/env node\n/);
    assert.match(readFileSync(MAIN, 'utf8'), /^#!\/usr\/bin\/env node\n/, 'tsc keeps the shebang in the compiled file');
    assert.equal(pkg.scripts.start, 'node dist/cli/main.js demo');
  });

  it('without arguments prints the help on stderr and exits 2', () => {
    const r = cli([]);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /Usage: jingwei <command>/);
  });

  it('--help lists every command and the exit codes, on stdout, exit 0', () => {
    const r = cli(['--help']);
    assert.equal(r.code, 0, r.stderr);
    for (const name of ['demo', 'sessions', 'events', 'inspect', 'verify', 'export', 'import']) assert.match(r.stdout, new RegExp(`^  ${name} `, 'm'));
    assert.match(r.stdout, /Exit codes:\n {2}0 {2}ok\n {2}1 {2}findings/);
    assert.match(r.stdout, /NO_COLOR/);
  });

  it('--version prints the package version', () => {
    const r = cli(['--version']);
    assert.equal(r.code, 0);
    assert.equal(r.stdout.trim(), pkg.version);
  });

  for (const command of COMMANDS) {
    it(`${command.name} --help (and -h, and help ${command.name}) describe it, exit 0`, () => {
      for (const args of [[command.name, '--help'], [command.name, '-h'], ['help', command.name], [command.name, 'x', '--help']]) {
        const r = cli(args);
        assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
        assert.match(r.stdout, new RegExp(`^Usage: jingwei ${command.name}`));
        assert.match(r.stdout, /Options:\n/);
        assert.match(r.stdout, /-h, --help/);
        assert.match(r.stdout, /Exit codes:/);
        assert.equal(r.stderr, '');
      }
    });
  }

  it('usage errors exit 2 and say what to do: unknown command, unknown option, missing and extra arguments', () => {
    const cases: Array<[string[], RegExp]> = [
      [['frobnicate'], /unknown command "frobnicate"[\s\S]*Commands: demo, sessions/],
      [['--frob'], /unknown option --frob/],
      [['sessions'], /missing <store>/],
      [['events', 'x.db'], /missing <session>/],
      [['sessions', 'a.db', 'b.db'], /unexpected argument "b.db"/],
      [['sessions', 'a.db', '--frob'], /Unknown option '--frob'[\s\S]*jingwei sessions --help/],
      [['events', 'a.db', 's', '--limit', 'ten'], /--limit must be a non-negative integer/],
      [['sessions', 'mysql://localhost/x'], /unsupported store URL/],
      [['help', 'frobnicate'], /unknown command "frobnicate"/],
    ];
    for (const [args, message] of cases) {
      const r = cli(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message, args.join(' '));
      assert.equal(r.stdout, '');
    }
  });
});
