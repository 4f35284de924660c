/**
 * The README is the front door and docs/guide.md the tutorial: their examples are these files, verbatim, and they
 * run and print what the documents say.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

const root = fileURLToPath(new URL('../../', import.meta.url));

const examples: ReadonlyArray<{ doc: string; name: string }> = [
  { doc: 'README.md', name: 'quickstart' },
  { doc: 'docs/guide.md', name: 'define-tools' },
  { doc: 'docs/guide.md', name: 'recover-after-crash' },
];

for (const { doc, name } of examples) {
  const text = readFileSync(`${root}${doc}`, 'utf8');
  describe(`${doc} example ${name}`, () => {
    it(`is printed in ${doc} exactly as the file`, () => {
      const source = readFileSync(`${root}examples/${name}.ts`, 'utf8');
      assert.ok(text.includes('```ts\n' + source + '```'), `examples/${name}.ts differs from ${doc}`);
    });
    it(`runs and prints what ${doc} says`, () => {
      const out = execFileSync(process.execPath, [`${root}build-test/examples/${name}.js`], { encoding: 'utf8' });
      assert.ok(text.includes('```\n' + out + '```'), `${doc} does not show this output:\n${out}`);
    });
  });
}
