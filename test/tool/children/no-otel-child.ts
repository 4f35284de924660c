/**
 * Loads the runtime with every `@opentelemetry` import blocked, runs calls without any telemetry configured, and
 * prints what it found: the outcomes, the CommonJS modules loaded from `@opentelemetry`, and whether the block is
 * live (an import of `@opentelemetry/api` must fail). Used by test/tool/telemetry-absent.test.ts.
 */
import { createRequire, register } from 'node:module';

register('./otel-blocker.js', import.meta.url);
const { createMemoryStore, createToolRuntime, ToolMetadata } = await import('../../../src/index.js');

const store = createMemoryStore();
const owner = await store.acquire('s', { owner: 'host' });
await owner.startTask('t');
const runtime = createToolRuntime({
  tools: [
    { name: 'echo', metadata: new ToolMetadata('echoes', { type: 'object' }).withEffect('read_only', 'v1'), execute: async (r) => r.arguments },
    { name: 'gated', metadata: new ToolMetadata('gated', { type: 'object' }).withApproval('ops'), execute: async () => 'ran' },
  ],
  grants: { agent: '*' },
  approvers: { ops: async () => ({ decision: 'denied', code: 'no', message: 'no' }) },
});
const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent' });
const outcomes = [
  (await gateway.call('echo', { a: 1 })).result.outcome.status,
  (await gateway.call('gated', {})).result.outcome.status,
];
const cjsLoaded = Object.keys(createRequire(import.meta.url).cache).filter((path) => path.includes('@opentelemetry'));
let blockLive = false;
try {
  await import('@opentelemetry/api');
} catch (error) {
  blockLive = /blocked OpenTelemetry import/.test((error as Error).message);
}
process.stdout.write(`${JSON.stringify({ outcomes, cjsLoaded, blockLive })}\n`);
