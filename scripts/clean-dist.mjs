#!/usr/bin/env node
/**
 * Removes dist/ before the published build (`npm run prepack`), so a tarball holds exactly what the current sources
 * compile to: no output of a deleted or moved source file, and no source map left over from an earlier build.
 */
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

rmSync(fileURLToPath(new URL('../dist', import.meta.url)), { recursive: true, force: true });
