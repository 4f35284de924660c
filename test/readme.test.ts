/** The README is the front door: its examples are these files, verbatim, and they run. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

const root = fileURLToPath(new URL('../../', import.meta.url));
const readme = readFileSync(`${root}README.md`, 'utf8');

for (const name of ['define-tools', 'recover-after-crash']) {
  describe(`README example ${name}`, () => {
    it('is printed in the README exactly as the file', () => {
      const source = readFileSync(`${root}examples/${name}.ts`, 'utf8');
      assert.ok(readme.includes('```ts\n' + source + '```'), `examples/${name}.ts differs from the README`);
    });
    it('runs and prints what the README says', () => {
      const out = execFileSync(process.execPath, [`${root}build-test/examples/${name}.js`], { encoding: 'utf8' });
      assert.ok(readme.includes('```\n' + out + '```'), `the README does not show this output:\n${out}`);
    });
  });
}
