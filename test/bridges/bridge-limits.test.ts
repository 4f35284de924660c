/**
 * The plain bridges' `timeoutMs` and `maxOutputBytes` are checked when the bridge is built, as the gateway checks a
 * call's: a bad one is the host's configuration error (ToolPreflightError `invalid_options`, the gateway's own
 * message), not a refusal every later call hands the model.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { aiSdkTools } from '../../src/ai-sdk.js';
import { openAiAgentsTools } from '../../src/openai-agents.js';
import { InvalidInputError, ToolPreflightError } from '../../src/errors.js';
import { RUNTIME_DEFAULTS } from '../../src/limits.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { ToolGateway } from '../../src/tool/types.js';

async function gatewayWithOneTool() {
  let bodies = 0;
  const store = createMemoryStore();
  const owner = await store.acquire('s', { owner: 'host' });
  await owner.startTask('task');
  const gateway = createToolRuntime({
    tools: [{ name: 'w', metadata: new ToolMetadata('writes', { type: 'object' }).withEffect('non_idempotent', 'w-v1'), execute: async () => { bodies += 1; return 'ok'; } }],
    grants: { agent: '*' },
  }).bind({ owner, taskId: 'task', caller: 'agent' });
  return { store, gateway, bodies: () => bodies };
}

const factories: Record<string, (gateway: ToolGateway, options: Record<string, unknown>) => unknown> = {
  aiSdkTools: (gateway, options) => aiSdkTools(gateway, options),
  openAiAgentsTools: (gateway, options) => openAiAgentsTools(gateway, options),
};

const bad: unknown[] = [-1, 0, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '100', null];

for (const [factory, build] of Object.entries(factories)) {
  it(`${factory} refuses a bad timeoutMs or maxOutputBytes when built, with the error the gateway gives a call`, async () => {
    const { store, gateway, bodies } = await gatewayWithOneTool();
    for (const field of ['timeoutMs', 'maxOutputBytes']) {
      for (const value of bad) {
        const fromGateway = await gateway.callWithOptions('w', {}, { [field]: value }).then(
          () => assert.fail(`the gateway ran a call with ${field} ${String(value)}`),
          (error: unknown) => error,
        );
        assert.ok(fromGateway instanceof ToolPreflightError && fromGateway.code === 'invalid_options', `the gateway refuses ${field} ${String(value)}`);
        assert.throws(() => build(gateway, { [field]: value }), (error: unknown) => {
          assert.ok(error instanceof ToolPreflightError, `${factory} { ${field}: ${String(value)} }: ${String(error)}`);
          assert.equal(error.code, 'invalid_options');
          assert.equal(error.message, fromGateway.message);
          return true;
        });
      }
    }
    // Good ones build, as does a bridge without them.
    assert.ok(build(gateway, { timeoutMs: 1_000, maxOutputBytes: 1_000 }));
    assert.ok(build(gateway, {}));
    assert.equal(bodies(), 0);
    await store.close();
  });
}

for (const [factory, build] of Object.entries(factories)) {
  it(`${factory} refuses, when built, a timeoutMs or maxOutputBytes above a tool's ceiling, with the error the gateway gives a call (r78 B F1)`, async () => {
    // Refused only at call time, every call reached the model as host configuration advice, and no tool ever ran.
    const { store, gateway, bodies } = await gatewayWithOneTool();
    for (const [field, value] of [['timeoutMs', RUNTIME_DEFAULTS.timeoutMs + 1], ['maxOutputBytes', RUNTIME_DEFAULTS.maxOutputBytes + 1]] as const) {
      const fromGateway = await gateway.callWithOptions('w', {}, { [field]: value }).then(
        () => assert.fail(`the gateway ran a call with ${field} ${value}`),
        (error: unknown) => error,
      );
      assert.ok(fromGateway instanceof ToolPreflightError && fromGateway.code === 'invalid_options', `the gateway refuses ${field} ${value}`);
      assert.match(fromGateway.message, /above its ceiling/);
      assert.throws(() => build(gateway, { [field]: value }), (error: unknown) => {
        assert.ok(error instanceof ToolPreflightError, `${factory} { ${field}: ${value} }: ${String(error)}`);
        assert.equal(error.code, 'invalid_options');
        assert.equal(error.message, fromGateway.message);
        return true;
      });
    }
    assert.ok(build(gateway, { timeoutMs: RUNTIME_DEFAULTS.timeoutMs, maxOutputBytes: RUNTIME_DEFAULTS.maxOutputBytes }), 'at the ceiling builds');
    assert.equal(bodies(), 0);
    await store.close();
  });

  it(`${factory} refuses a tool named twice in \`tools\``, async () => {
    const { store, gateway } = await gatewayWithOneTool();
    assert.throws(() => build(gateway, { tools: ['w', 'w'] }), (error: unknown) => error instanceof InvalidInputError && /lists "w" twice/.test(error.message));
    await store.close();
  });
}
