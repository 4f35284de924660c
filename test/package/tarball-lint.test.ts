/**
 * The packed tarball, linted as a registry would see it: publint (package.json fields, `exports` conditions and the
 * files they point at) and @arethetypeswrong/cli (every entry's types resolve, in the right module format, for
 * Node 16+ ESM and bundlers: the package is ESM only, hence the `esm-only` profile). Packing skips `prepack`: the
 * test run has just built dist.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const bin = (name: string) => join(root, 'node_modules', '.bin', name);

let dir = '';
let tarball = '';

function run(command: string, args: readonly string[]): { status: number | null; output: string } {
  const result = spawnSync(command, args, { cwd: root, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } });
  if (result.error) throw result.error;
  return { status: result.status, output: `${result.stdout}\n${result.stderr}` };
}

describe('the packed tarball', () => {
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'jingwei-pack-'));
    const packed = JSON.parse(execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], { cwd: root, encoding: 'utf8' })) as { filename: string }[];
    tarball = join(dir, packed[0]!.filename);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('passes publint, warnings included', () => {
    const { status, output } = run(bin('publint'), ['run', tarball, '--strict']);
    assert.equal(status, 0, output);
    assert.match(output, /All good!/, output);
  });

  it('passes @arethetypeswrong/cli for every entry (esm-only profile)', () => {
    const { status, output } = run(bin('attw'), [tarball, '--profile', 'esm-only', '--format', 'ascii', '--no-emoji', '--no-color']);
    assert.equal(status, 0, output);
  });
});
