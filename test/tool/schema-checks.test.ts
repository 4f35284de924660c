/**
 * A schema's `required` and `dependentRequired` are met only by the arguments' own properties: Object.prototype's
 * `constructor`, `toString` or `valueOf` do not make a missing property present. A schema that describes a property
 * named `__proto__`, or uses a `format` the validator does not know, is refused, since the validator would leave
 * that part unchecked.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { importFromSource } from '../../src/bridges/mcp.js';
import { ToolConfigError } from '../../src/errors.js';
import { parseJson } from '../../src/json/parse.js';
import type { JsonObject } from '../../src/json/types.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { tool } from '../support/runtime.js';

it('required and dependentRequired are not met by inherited members', async () => {
  const cases: [JsonObject, JsonObject][] = [
    [{ type: 'object', required: ['constructor', 'amount'], properties: { amount: { type: 'number' } } }, { amount: 1 }],
    [{ type: 'object', required: ['toString'] }, {}],
    [{ type: 'object', dependentRequired: { a: ['valueOf'] } }, { a: 1 }],
  ];
  for (const [schema, args] of cases) {
    let ran = 0;
    const t = tool('t', async () => { ran += 1; return 'ran'; }, new ToolMetadata('t', schema).withEffect('non_idempotent', 'v1'));
    const store = createMemoryStore();
    const owner = await store.acquire('s', { owner: 'host' });
    await owner.startTask('t');
    const gateway = createToolRuntime({ tools: [t], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
    const refused = await gateway.call('t', args);
    assert.equal(refused.result.outcome.status === 'failed' && refused.result.outcome.code, 'tool_arguments_invalid', JSON.stringify(schema));
    const own = await gateway.call('t', { ...args, constructor: 1, toString: 2, valueOf: 3 });
    assert.equal(own.result.outcome.status, 'succeeded', 'an own property of that name meets it');
    assert.equal(ran, 1);
    await store.close();
  }
});

it('a schema describing a property named __proto__ is refused when the runtime is built', () => {
  const schema = parseJson('{"type":"object","properties":{"inner":{"type":"object","properties":{"__proto__":{"type":"string"}}}}}') as JsonObject;
  const t = tool('t', async () => 'ran', new ToolMetadata('t', schema));
  assert.throws(() => createToolRuntime({ tools: [t], grants: { agent: '*' } }), (error: unknown) => {
    assert.ok(error instanceof ToolConfigError);
    assert.match(error.message, /input schema of t is invalid: it has an entry named __proto__ \(at #\/properties\/inner\/properties\)/);
    return true;
  });
  const patterned = parseJson('{"type":"object","patternProperties":{"__proto__":{"type":"number","maximum":10}}}') as JsonObject;
  const p = tool('p', async () => 'ran', new ToolMetadata('p', patterned));
  assert.throws(() => createToolRuntime({ tools: [p], grants: { agent: '*' } }), /input schema of p is invalid: it has an entry named __proto__ \(at #\/patternProperties\)/);
});

it('a schema with a format the validator does not know is refused, by the runtime and by an MCP import, printing nothing', () => {
  const schema: JsonObject = { type: 'object', properties: { amount: { type: 'string', format: 'currency' }, to: { type: 'string', format: 'email' } } };
  const warnings: unknown[] = [];
  const warn = console.warn;
  console.warn = (...args: unknown[]) => { warnings.push(args); };
  try {
    const t = tool('t', async () => 'ran', new ToolMetadata('t', schema));
    assert.throws(() => createToolRuntime({ tools: [t], grants: { agent: '*' } }), (error: unknown) => {
      assert.ok(error instanceof ToolConfigError);
      assert.match(error.message, /input schema of t is invalid: unknown format "currency" in schema at path "#\/properties\/amount"/);
      return true;
    });
    const listed = [{ name: 'pay', description: 'pays', inputSchema: schema }, { name: 'lookup', description: 'reads', inputSchema: { type: 'object' } }];
    const imported = importFromSource({ client: () => { throw new Error('not called'); } }, { server: { name: 's', version: '1' }, listed: listed as never }, {});
    assert.deepEqual(imported.tools.map((x) => x.name), ['lookup']);
    assert.match(imported.skipped[0]!.reason, /unknown format "currency"/);
  } finally {
    console.warn = warn;
  }
  assert.deepEqual(warnings, [], 'nothing printed');
});
