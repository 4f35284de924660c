/**
 * The idempotency probe tells a server that honours the `_meta` key (same key → same result; same key, other
 * arguments → refused) from one that ignores it, as a library call and as `jingwei mcp probe <server command…>`.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { probeMcpServer } from '../../src/mcp.js';
import { cli } from '../cli/helpers.js';
import { keyedServer } from './fixtures/registry-server.js';
import { tempDir } from '../support/tmp.js';

const dir = tempDir('jingwei-mcp-probe-');
const keyedScript = fileURLToPath(new URL('./fixtures/mcp-keyed-server.js', import.meta.url));
const applied = (log: string) => readFileSync(log, 'utf8').trim().split('\n').length;
const probe = { tool: 'create_order', arguments: { item: 'tea' }, otherArguments: { item: 'cake' } };

describe('probeMcpServer', () => {
  it('a conforming server: same result for the same key, other arguments refused, applied once: tier idempotent', async () => {
    const log = join(dir, 'conforming.jsonl');
    const report = await probeMcpServer(keyedServer('conforming', log), probe);
    assert.equal(report.sameKeySameResult, true);
    assert.equal(report.otherArgumentsRefused, true);
    assert.equal(report.honoursKey, true);
    assert.equal(report.tier, 'idempotent');
    assert.deepEqual(report.server, { name: 'orders-conforming', version: '1.0.0' });
    assert.match(report.key, /^probe-[0-9a-f-]{36}:operation_[0-9a-f-]{36}$/);
    assert.equal(applied(log), 1, 'three calls, one order');
  });

  it('a server that ignores the key: a second order, other arguments accepted: tier unknown', async () => {
    const log = join(dir, 'ignoring.jsonl');
    const report = await probeMcpServer(keyedServer('ignoring', log), probe);
    assert.equal(report.sameKeySameResult, false);
    assert.equal(report.otherArgumentsRefused, false);
    assert.equal(report.honoursKey, false);
    assert.equal(report.tier, 'unknown');
    assert.match(report.findings.join('\n'), /a different result/);
    assert.equal(applied(log), 3);
  });

  it('refuses a probe whose two argument sets are equal, and reports a first call the tool refuses', async () => {
    await assert.rejects(probeMcpServer(keyedServer('conforming'), { ...probe, otherArguments: { item: 'tea' } }), { code: 'invalid_input' });
    await assert.rejects(probeMcpServer(keyedServer('conforming'), { ...probe, arguments: { wrong: 1 } }), { code: 'mcp_probe_failed' });
  });
});

describe('jingwei mcp probe', () => {
  const args = ['mcp', 'probe', '--tool', 'create_order', '--args', '{"item":"tea"}', '--other-args', '{"item":"cake"}'];
  it('exits 0 for a conforming server and names the tier', () => {
    const run = cli([...args, '--', '/usr/bin/env', 'KEYED_MODE=conforming', process.execPath, keyedScript]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^honours the key {2}orders-conforming@1\.0\.0, tool create_order/);
    assert.match(run.stdout, /tier: idempotent/);
  });

  it('exits 1 for a server that ignores the key; --json gives the report', () => {
    const run = cli([...args, '--json', '--', '/usr/bin/env', 'KEYED_MODE=ignoring', process.execPath, keyedScript]);
    assert.equal(run.code, 1, run.stderr);
    const report = JSON.parse(run.stdout) as Record<string, unknown>;
    assert.equal(report.honours_key, false);
    assert.equal(report.tier, 'unknown');
    assert.equal(report.same_key_same_result, false);
    assert.equal(report.other_arguments_refused, false);
  });

  it('usage errors exit 2', () => {
    assert.equal(cli(['mcp', 'probe', '--tool', 'x', '--args', '{}', '--other-args', '{"a":1}']).code, 2);
    assert.equal(cli(['mcp', 'inspect', 'node']).code, 2);
    assert.equal(cli([...args.slice(0, 6), '--other-args', '[1]', '--', 'node']).code, 2);
    const help = cli(['mcp', '--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /Usage: jingwei mcp <action> <server command…>/);
  });
});
