/**
 * Every runtime value each entry point exports is a decision: this test imports every entry of package.json's
 * `exports` from the built package (through its own name, as a user would) and compares the sorted names with
 * test/package/exports.snapshot.json. A new, renamed or removed export fails it until the snapshot is updated:
 *
 *   UPDATE_SNAPSHOT=1 npm test -- build-test/test/package/exports.test.js
 *
 * then review the diff of the snapshot file like any other change to the public API.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { bareImports } from '../support/bare-imports.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const snapshotPath = `${root}test/package/exports.snapshot.json`;
const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as {
  name: string;
  exports: Record<string, string | { types?: string; default?: string }>;
};

/** The most values the root entry may export: the runtime, metadata, memory store, recovery, assessment, errors. */
const ROOT_VALUE_LIMIT = 40;
/** Packages the core entries must never reach: the framework peers, the store drivers and OpenTelemetry. */
const PEERS = ['ai', '@openai/agents', '@modelcontextprotocol/sdk', 'zod', 'pg', 'better-sqlite3', '@opentelemetry/api'];
const CORE_ENTRIES = ['.', './wire', './agent'];

const entries = Object.keys(pkg.exports).filter((key) => key !== './package.json').sort();
const specifier = (entry: string) => (entry === '.' ? pkg.name : `${pkg.name}/${entry.slice(2)}`);

async function currentExports(): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const entry of entries) {
    const module = (await import(specifier(entry))) as Record<string, unknown>;
    out[entry] = Object.keys(module).sort();
  }
  return out;
}

describe('package exports', () => {
  it('every entry exports exactly the values in the snapshot', async () => {
    const actual = await currentExports();
    if (process.env.UPDATE_SNAPSHOT === '1') writeFileSync(snapshotPath, `${JSON.stringify(actual, null, 2)}\n`);
    const expected = JSON.parse(readFileSync(snapshotPath, 'utf8')) as Record<string, string[]>;
    assert.deepEqual(
      actual,
      expected,
      'the exports differ from test/package/exports.snapshot.json; if intended, run UPDATE_SNAPSHOT=1 npm test -- build-test/test/package/exports.test.js and review the diff',
    );
  });

  it(`the root entry exports at most ${ROOT_VALUE_LIMIT} values`, async () => {
    const names = Object.keys((await import(pkg.name)) as Record<string, unknown>);
    assert.ok(names.length <= ROOT_VALUE_LIMIT, `the root exports ${names.length} values: ${names.sort().join(', ')}`);
  });

  it('no test hook or internal helper is exported by the root', async () => {
    const names = new Set(Object.keys((await import(pkg.name)) as Record<string, unknown>));
    for (const internal of ['setFaultHook', 'FAULT_POINTS', 'rustTrim', 'checkId', 'isValidText', 'hasLoneSurrogate', 'uuidv7', 'newSessionId', 'compactJsonBytes']) {
      assert.ok(!names.has(internal), `the root exports ${internal}`);
    }
  });

  it('every entry declares its types, and the files exist in dist', () => {
    for (const entry of entries) {
      const target = pkg.exports[entry]!;
      assert.equal(typeof target, 'object', `${entry} has no conditions`);
      const { types, default: main } = target as { types?: string; default?: string };
      assert.ok(types && main, `${entry} lacks types or default`);
      assert.equal(Object.keys(target)[0], 'types', `${entry}: the types condition must come first`);
      assert.doesNotThrow(() => readFileSync(`${root}${types}`), `${entry}: ${types} is missing`);
      assert.doesNotThrow(() => readFileSync(`${root}${main}`), `${entry}: ${main} is missing`);
    }
  });

  it('the root, wire and agent entries reach no framework and no store driver', () => {
    for (const entry of CORE_ENTRIES) {
      const target = pkg.exports[entry] as { default: string };
      const reached = bareImports(`${root}${target.default}`);
      for (const peer of PEERS) assert.ok(!reached.has(peer), `${entry} reaches ${peer}`);
    }
  });
});
