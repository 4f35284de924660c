/**
 * docs/api.md is the reference for every public name: each value that an entry point of package.json exports is
 * named there as code (`name`, `name(…)`, `new name(…)`, `name.member` or `name<T>`), and each entry point has its section.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, it } from 'node:test';
import { headingAnchors } from '../support/markdown.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const api = readFileSync(`${root}docs/api.md`, 'utf8');
const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { exports: Record<string, string | { default: string }> };

/**
 * Helpers the root entry still exports that are internal (text and id checks of the journal's rules). They are not
 * part of the documented API; the exports snapshot decides when they stop being exported.
 */
const INTERNAL = new Set(['rustTrim', 'isValidText', 'hasLoneSurrogate', 'checkId']);

describe('docs/api.md', () => {
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    if (typeof target === 'string') continue; // ./package.json
    const entry = subpath === '.' ? 'jingwei' : `jingwei/${subpath.slice(2)}`;
    it(`documents ${entry} and every value it exports`, async () => {
      assert.ok(headingAnchors(api).has(entry.replace(/[^a-z0-9 _-]/g, '')), `docs/api.md has no section for ${entry}`);
      const module = (await import(pathToFileURL(`${root}${target.default}`).href)) as Record<string, unknown>;
      const missing = Object.keys(module).filter((name) => !INTERNAL.has(name) && !new RegExp('`(new )?' + name + '[`(.<]').test(api));
      assert.deepEqual(missing, [], `exported by ${entry} but not in docs/api.md`);
    });
  }
});
