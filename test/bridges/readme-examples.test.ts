/**
 * README "Using Jingwei with your agent framework": each example is printed there verbatim from
 * test/bridges/fixtures/readme/, runs offline through the package's own entry points, and prints what the README
 * says it prints.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const readme = readFileSync(`${root}README.md`, 'utf8');
const section = readme.slice(readme.indexOf('## Using Jingwei with your agent framework'));

for (const name of ['ai-sdk', 'openai-agents', 'mcp', 'run-agent']) {
  describe(`README framework example ${name}`, () => {
    it('is printed in the README exactly as the file', () => {
      const source = readFileSync(`${root}test/bridges/fixtures/readme/${name}.ts`, 'utf8');
      assert.ok(section.includes('```ts\n' + source + '```'), `test/bridges/fixtures/readme/${name}.ts differs from the README`);
    });
    it('runs and prints what the README says', () => {
      const out = execFileSync(process.execPath, [`${root}build-test/test/bridges/fixtures/readme/${name}.js`], { encoding: 'utf8' });
      assert.ok(section.includes('```\n' + out + '```'), `the README does not show this output:\n${out}`);
    });
  });
}
