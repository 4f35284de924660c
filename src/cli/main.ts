#!/usr/bin/env node
/**
 * The `jingwei` command (package.json "bin"). Exit codes: 0 ok, 1 findings, 2 usage error, 3 store or IO error;
 * see src/cli/exit.ts and docs/operator-guide.md.
 */
import { main } from './program.js';

// `jingwei events ... | head`: a reader that goes away early is not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});

process.exitCode = await main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env });
