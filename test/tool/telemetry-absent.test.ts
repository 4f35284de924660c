/**
 * Without a tracer, a meter or a hook, the runtime imports no OpenTelemetry package: a child process blocks every
 * `@opentelemetry` import with a resolution hook, loads the runtime, runs calls, and reports (see
 * children/no-otel-child.ts).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import { ChildProcess } from '../support/child.js';

it('the runtime loads and runs calls with every @opentelemetry import blocked, and loads none', async () => {
  const child = new ChildProcess(fileURLToPath(new URL('./children/no-otel-child.js', import.meta.url)), []);
  const report = await child.next<{ outcomes: string[]; cjsLoaded: string[]; blockLive: boolean }>();
  assert.deepEqual(await child.exited, { code: 0, signal: null }, child.stderr);
  assert.deepEqual(report.outcomes, ['succeeded', 'failed']);
  assert.deepEqual(report.cjsLoaded, [], 'no CommonJS module from @opentelemetry was required');
  assert.equal(report.blockLive, true, 'the block is live: importing @opentelemetry/api in the child fails');
});

it('@opentelemetry/api is an optional peer and no dependency', () => {
  const pkg = JSON.parse(readFileSync(fileURLToPath(new URL('../../../package.json', import.meta.url)), 'utf8')) as {
    dependencies: Record<string, string>;
    peerDependencies: Record<string, string>;
    peerDependenciesMeta: Record<string, { optional?: boolean }>;
  };
  assert.ok(pkg.peerDependencies['@opentelemetry/api']);
  assert.equal(pkg.peerDependenciesMeta['@opentelemetry/api']?.optional, true);
  assert.deepEqual(Object.keys(pkg.dependencies).filter((name) => name.startsWith('@opentelemetry')), []);
});
