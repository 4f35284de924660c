/**
 * The documents stand on their own: every relative link in README.md, CHANGELOG.md, CONTRIBUTING.md and docs/*.md
 * reaches a file of the repository (and a heading, when it names one), every `docs/design.md#…` that code, tests and
 * scripts cite is a heading of docs/design.md, and the README stays short.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { headingAnchors, relativeLinks } from '../support/markdown.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const documents = ['README.md', 'CHANGELOG.md', 'CONTRIBUTING.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

describe('documentation links', () => {
  for (const doc of documents) {
    it(`${doc}: every relative link resolves`, () => {
      const problems: string[] = [];
      for (const link of relativeLinks(read(doc))) {
        const target = link.path === '' ? doc : normalize(join(dirname(doc), decodeURIComponent(link.path)));
        if (target.startsWith('..') || !existsSync(join(root, target))) {
          problems.push(`line ${link.line}: ${link.path} does not exist`);
          continue;
        }
        if (link.anchor !== null && target.endsWith('.md') && !headingAnchors(read(target)).has(link.anchor)) {
          problems.push(`line ${link.line}: ${target} has no heading #${link.anchor}`);
        }
      }
      assert.deepEqual(problems, []);
    });
  }

  it('README.md is at most 260 lines', () => {
    const lines = read('README.md').split('\n').length;
    assert.ok(lines <= 260, `README.md has ${lines} lines`);
  });

  it('docs/errors.md keeps the error table between its markers, and the README links to it from its Errors section', () => {
    const errors = read('docs/errors.md');
    const start = errors.indexOf('<!-- error-codes:start -->');
    const end = errors.indexOf('<!-- error-codes:end -->');
    assert.ok(start >= 0 && end > start, 'the error-codes markers are missing or out of order');
    const readme = read('README.md');
    const section = readme.slice(readme.indexOf('\n## Errors\n'));
    assert.ok(readme.includes('\n## Errors\n') && section.slice(0, section.indexOf('\n## ', 1)).includes('(docs/errors.md)'), 'the README Errors section does not link docs/errors.md');
  });
});

/** Source, test and script files that may cite the design document. */
function sourceFiles(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) return name === 'node_modules' ? [] : sourceFiles(path);
    return /\.(ts|mjs|js)$/.test(name) ? [path] : [];
  });
}

describe('citations of docs/design.md', () => {
  it('name headings that exist', () => {
    const anchors = headingAnchors(read('docs/design.md'));
    const files = ['src', 'test', 'scripts', 'examples', 'bench/lib', 'bench/jingwei', 'bench/peers'].flatMap(sourceFiles).concat(['bench/run.mjs', 'bench/profile.mjs']);
    const problems: string[] = [];
    let citations = 0;
    for (const file of files) {
      for (const match of read(file).matchAll(/docs\/design\.md#([a-z0-9-]+)/g)) {
        citations += 1;
        if (!anchors.has(match[1]!)) problems.push(`${relative('.', file)}: #${match[1]}`);
      }
    }
    assert.deepEqual(problems, []);
    assert.ok(citations > 10, `only ${citations} citations found: is the search looking in the right place?`);
  });
});

describe('documents a user has no copy of', () => {
  it('are never cited in code, tests, scripts or CLI output (say the thing itself, or cite docs/design.md)', () => {
    const self = 'test/docs/links.test.ts';
    const files = ['src', 'test', 'scripts', 'examples', 'bench/lib', 'bench/jingwei', 'bench/peers']
      .flatMap(sourceFiles)
      .concat(['bench/run.mjs', 'bench/profile.mjs'])
      .filter((file) => file !== self);
    const citations: string[] = [];
    for (const file of files) {
      read(file).split('\n').forEach((line, index) => {
        if (/SPEC|anchor §|seed row|Rust original/.test(line)) citations.push(`${file}:${index + 1}: ${line.trim()}`);
      });
    }
    assert.deepEqual(citations, []);
  });
});
