#!/usr/bin/env node
/**
 * Cleans dist/ before the published build (`npm run prepack`): removes every file the current sources do not
 * compile to (the output of a deleted or moved source, and any source map, since the published build writes none),
 * then empty directories, so a tarball holds exactly what `tsc -p tsconfig.json` makes of src/. Files the build does
 * produce are left in place rather than deleting dist/ as a whole, so a test run that packs the package while
 * other tests import dist/ never finds it missing.
 */
import { existsSync, readdirSync, rmdirSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = join(root, 'dist');
const src = join(root, 'src');

/** The source file an output of the build comes from, or null for a file the build never writes. */
function sourceOf(path) {
  const rel = relative(dist, path);
  if (rel === '.tsbuildinfo') return path; // the build's own bookkeeping: kept
  const match = /^(.*)\.(d\.ts|js)$/.exec(rel);
  return match ? join(src, `${match[1]}.ts`) : null;
}

/** Prunes `dir`; returns true when it is left empty. */
function prune(dir) {
  let empty = true;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (prune(path)) rmdirSync(path);
      else empty = false;
      continue;
    }
    const source = sourceOf(path);
    if (source !== null && existsSync(source)) empty = false;
    else rmSync(path, { force: true });
  }
  return empty;
}

if (existsSync(dist)) prune(dist);
