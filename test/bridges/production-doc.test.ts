/**
 * docs/bridges-in-production.md: its custom event example is printed verbatim from
 * test/bridges/fixtures/production/custom-event.ts, runs through the package entry point and prints what the page
 * says; the defaults, the model's fixed sentence and the invalid_options message it shows are the code's.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { INTERNAL_FAILURE_MESSAGE } from '../../src/bridges/outcome.js';
import { MCP_RECONNECT_DEFAULTS } from '../../src/mcp.js';
import { RUNTIME_DEFAULTS } from '../../src/limits.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const doc = readFileSync(`${root}docs/bridges-in-production.md`, 'utf8');
const n = (value: number) => value.toLocaleString('en-US');

describe('docs/bridges-in-production.md', () => {
  it('prints the custom event example exactly as the file, and the output it gives', () => {
    const source = readFileSync(`${root}test/bridges/fixtures/production/custom-event.ts`, 'utf8');
    assert.ok(doc.includes('```ts\n' + source + '```'), 'the example differs from test/bridges/fixtures/production/custom-event.ts');
    const out = execFileSync(process.execPath, [`${root}build-test/test/bridges/fixtures/production/custom-event.js`], { encoding: 'utf8' });
    assert.ok(doc.includes('It prints:\n\n```\n' + out + '```'), `the page does not show this output:\n${out}`);
    assert.match(out, /events\[0\]\.turnId/);
  });

  it('lists the defaults the code uses', () => {
    assert.ok(doc.includes(`| \`defaultTimeoutMs\` | ${n(RUNTIME_DEFAULTS.timeoutMs)} |`));
    assert.ok(doc.includes(`| \`maxOutputBytes\` | ${n(RUNTIME_DEFAULTS.maxOutputBytes)} |`));
    assert.ok(doc.includes(`| \`maxInFlight\` | ${n(RUNTIME_DEFAULTS.maxInFlight)} |`));
    assert.ok(doc.includes(`| \`reconnect.initialDelayMs\` | ${n(MCP_RECONNECT_DEFAULTS.initialDelayMs)} |`));
    assert.ok(doc.includes(`| \`reconnect.maxDelayMs\` | ${n(MCP_RECONNECT_DEFAULTS.maxDelayMs)} |`));
    assert.ok(doc.includes(`| \`reconnect.maxAttempts\` | ${n(MCP_RECONNECT_DEFAULTS.maxAttempts)} |`));
  });

  it("shows the model's fixed sentence and the invalid_options message as the code writes them", async () => {
    assert.ok(doc.includes(`\`${INTERNAL_FAILURE_MESSAGE}\``));
    const store = createMemoryStore();
    const owner = await store.acquire('s', { owner: 'h' });
    await owner.startTask('t');
    const gateway = createToolRuntime({
      tools: [{ name: 'slow', metadata: new ToolMetadata('slow', { type: 'object' }), execute: async () => 'x' }],
      grants: { a: '*' },
    }).bind({ owner, taskId: 't', caller: 'a' });
    const error = await gateway.callWithOptions('slow', {}, { timeoutMs: 60_000 }).then(() => null, (e: Error) => e);
    assert.ok(error !== null && doc.includes('```\n' + error.message + '\n```'), String(error?.message));
  });
});
