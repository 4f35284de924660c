/**
 * An `$async` input schema: ajv compiles it into a validator that answers with a promise. Read synchronously, the
 * promise is truthy, so every argument passed (the body got `{"amount":"a million"}`), and the rejection nobody
 * handled ended the host's process. Such a schema is now refused where schemas are compiled: a ToolConfigError for
 * the runtime, a skipped tool for an MCP import (an untrusted server could otherwise crash the host at will).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { importFromSource } from '../../src/bridges/mcp.js';
import { ToolConfigError } from '../../src/errors.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { tool } from '../support/runtime.js';

const ASYNC_SCHEMA = { $async: true, type: 'object', properties: { amount: { type: 'number', maximum: 100 } }, required: ['amount'] };

describe('an $async input schema', () => {
  it('is refused when the runtime is built, naming the tool', () => {
    let ran = 0;
    const pay = tool('pay', async () => { ran += 1; return 'paid'; }, new ToolMetadata('pays', ASYNC_SCHEMA as never));
    assert.throws(() => createToolRuntime({ tools: [pay], grants: { agent: '*' } }), (error: unknown) => {
      assert.ok(error instanceof ToolConfigError);
      assert.match(error.message, /input schema of pay is invalid: .*\$async/);
      return true;
    });
    assert.equal(ran, 0);
  });

  it('is skipped by an MCP import, with the reason, and the other tools are imported', () => {
    const listed = [
      { name: 'pay', description: 'pays', inputSchema: ASYNC_SCHEMA },
      { name: 'lookup', description: 'reads', inputSchema: { type: 'object', properties: { city: { type: 'string' } } } },
    ];
    const imported = importFromSource({ client: () => { throw new Error('not called'); } }, { server: { name: 's', version: '1' }, listed: listed as never }, {});
    assert.deepEqual(imported.tools.map((t) => t.name), ['lookup']);
    assert.equal(imported.skipped.length, 1);
    assert.equal(imported.skipped[0]!.mcpName, 'pay');
    assert.match(imported.skipped[0]!.reason, /\$async/);
    // The runtime takes what the import kept.
    createToolRuntime({ tools: imported.tools, grants: { agent: '*' } });
  });
});
