/** Each framework sits behind its own entry point as an optional peer; the core entry loads none of them. */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { bareImports } from '../support/bare-imports.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as {
  exports: Record<string, { types: string; default: string }>;
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
};
const frameworks = ['ai', '@openai/agents', '@modelcontextprotocol/sdk'];

describe('entry points', () => {
  it('the core entry reaches no framework', () => {
    const reached = bareImports(`${root}build-test/src/index.js`);
    for (const framework of [...frameworks, 'zod']) assert.ok(!reached.has(framework), `the core imports ${framework}`);
  });

  it('each bridge reaches its own framework only', () => {
    const own: Record<string, string> = { 'ai-sdk': 'ai', 'openai-agents': '@openai/agents', mcp: '@modelcontextprotocol/sdk' };
    for (const [entry, framework] of Object.entries(own)) {
      const reached = bareImports(`${root}build-test/src/${entry}.js`);
      assert.ok(reached.has(framework), `${entry} does not import ${framework}`);
      for (const other of frameworks.filter((f) => f !== framework)) assert.ok(!reached.has(other), `${entry} imports ${other}`);
    }
  });

  it('package.json exports each bridge, and declares each framework an optional peer, not a dependency', () => {
    for (const entry of ['ai-sdk', 'openai-agents', 'mcp']) {
      assert.deepEqual(pkg.exports[`./${entry}`], { types: `./dist/${entry}.d.ts`, default: `./dist/${entry}.js` });
      assert.ok(existsSync(`${root}src/${entry}.ts`));
    }
    for (const framework of frameworks) {
      assert.ok(pkg.peerDependencies[framework], `${framework} is not a peer`);
      assert.equal(pkg.peerDependenciesMeta[framework]?.optional, true);
      assert.equal(pkg.dependencies[framework], undefined);
    }
  });
});
