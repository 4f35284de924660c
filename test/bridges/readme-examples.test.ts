/**
 * docs/guide.md "Using Jingwei with your agent framework": each example is printed there verbatim from
 * test/bridges/fixtures/readme/, runs offline through the package's own entry points, and prints what the guide
 * says it prints.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const guide = readFileSync(`${root}docs/guide.md`, 'utf8');
const start = guide.indexOf('## Using Jingwei with your agent framework');
assert.ok(start >= 0, 'docs/guide.md has no section "Using Jingwei with your agent framework"');
const section = guide.slice(start);

for (const name of ['ai-sdk', 'openai-agents', 'mcp', 'run-agent']) {
  describe(`guide framework example ${name}`, () => {
    it('is printed in docs/guide.md exactly as the file', () => {
      const source = readFileSync(`${root}test/bridges/fixtures/readme/${name}.ts`, 'utf8');
      assert.ok(section.includes('```ts\n' + source + '```'), `test/bridges/fixtures/readme/${name}.ts differs from docs/guide.md`);
    });
    it('runs and prints what docs/guide.md says', () => {
      const out = execFileSync(process.execPath, [`${root}build-test/test/bridges/fixtures/readme/${name}.js`], { encoding: 'utf8' });
      assert.ok(section.includes('```\n' + out + '```'), `docs/guide.md does not show this output:\n${out}`);
    });
  });
}
