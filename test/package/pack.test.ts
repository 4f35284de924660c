/**
 * What `npm pack` would publish, built the way `prepack` builds it (a clean dist from the current sources) in a
 * temporary copy, so the repository's own dist/ is never touched: every relative link of the shipped README.md and
 * docs/*.md reaches a file in the tarball, no source map (or sourceMappingURL) points at a file left out, and the
 * build's bookkeeping stays out.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { relativeLinks } from '../support/markdown.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

describe('the packed tarball', () => {
  let dir = '';
  let files = new Set<string>();

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'jingwei-pack-'));
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { files: string[] };
    writeFileSync(join(dir, 'package.json'), readFileSync(join(root, 'package.json')));
    for (const entry of manifest.files) {
      if (entry.startsWith('!') || entry === 'dist' || entry.startsWith('dist/')) continue;
      if (existsSync(join(root, entry))) cpSync(join(root, entry), join(dir, entry), { recursive: true });
    }
    const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.json'), '--outDir', join(dir, 'dist'), '--tsBuildInfoFile', join(dir, 'build.tsbuildinfo')], { stdio: 'pipe' });
    const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const [pack] = JSON.parse(out) as Array<{ files: Array<{ path: string }> }>;
    files = new Set(pack!.files.map((f) => f.path));
  });

  after(() => {
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('holds the entry points, the README, the license, the changelog and the docs', () => {
    for (const path of ['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md', 'dist/index.js', 'dist/index.d.ts', 'dist/cli/main.js', 'docs/guide.md', 'docs/design.md', 'docs/api.md']) {
      assert.ok(files.has(path), `${path} is not in the tarball`);
    }
    assert.ok(![...files].some((f) => f.endsWith('.tsbuildinfo')), 'build bookkeeping is in the tarball');
  });

  it('resolves every relative link of README.md and docs/*.md inside the tarball', () => {
    const docs = [...files].filter((f) => f === 'README.md' || (f.startsWith('docs/') && f.endsWith('.md')));
    assert.ok(docs.length >= 4, `only ${docs.length} documents shipped`);
    const missing: string[] = [];
    for (const doc of docs) {
      for (const link of relativeLinks(readFileSync(join(dir, doc), 'utf8'))) {
        if (link.path === '') continue;
        const target = posix.normalize(posix.join(posix.dirname(doc), decodeURIComponent(link.path)));
        if (!files.has(target)) missing.push(`${doc}:${link.line} -> ${target}`);
      }
    }
    assert.deepEqual(missing, []);
  });

  it('ships no source map that points at a file left out', () => {
    const dangling: string[] = [];
    for (const path of files) {
      if (path.endsWith('.map')) {
        const map = JSON.parse(readFileSync(join(dir, path), 'utf8')) as { sourceRoot?: string; sources?: string[] };
        for (const source of map.sources ?? []) {
          const target = posix.normalize(posix.join(posix.dirname(path), map.sourceRoot ?? '', source));
          if (!files.has(target)) dangling.push(`${path} -> ${target}`);
        }
      } else if (/\.[cm]?js$|\.d\.ts$/.test(path)) {
        const match = /\/\/# sourceMappingURL=(\S+)\s*$/.exec(readFileSync(join(dir, path), 'utf8'));
        if (match && !match[1]!.startsWith('data:')) {
          const target = posix.normalize(posix.join(posix.dirname(path), match[1]!));
          if (!files.has(target)) dangling.push(`${path} -> ${target}`);
        }
      }
    }
    assert.deepEqual(dangling, []);
  });

  it('ships a README of at most 260 lines', () => {
    const lines = readFileSync(join(dir, 'README.md'), 'utf8').split('\n').length;
    assert.ok(lines <= 260, `README.md has ${lines} lines`);
  });
});
