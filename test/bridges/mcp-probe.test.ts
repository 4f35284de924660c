/**
 * The idempotency probe tells a server that honours the `_meta` key (same key → same result; same key, other
 * arguments → refused) from one that ignores it, as a library call and as `jingwei mcp probe <server command…>`.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { connectMcpServer, probeMcpServer, type McpServerAddress } from '../../src/mcp.js';
import { LIMITS } from '../../src/limits.js';
import { cli } from '../cli/helpers.js';
import { keyedServer } from './fixtures/registry-server.js';
import { tempDir } from '../support/tmp.js';

const dir = tempDir('jingwei-mcp-probe-');
const keyedScript = fileURLToPath(new URL('./fixtures/mcp-keyed-server.js', import.meta.url));
const applied = (log: string) => readFileSync(log, 'utf8').trim().split('\n').length;
const probe = { tool: 'create_order', arguments: { item: 'tea' }, otherArguments: { item: 'cake' } };

/** The keyed fixture, honouring the key, whose third create_order call ends the server or never answers. */
function failingThird(third: 'exit' | 'hang', log: string): McpServerAddress {
  return { stdio: { command: process.execPath, args: [keyedScript], env: { KEYED_MODE: 'conforming', KEYED_THIRD: third, KEYED_LOG: log }, stderr: 'ignore' } };
}

describe('probeMcpServer', () => {
  it('a conforming server: same result for the same key, other arguments refused, applied once: tier idempotent', async () => {
    const log = join(dir, 'conforming.jsonl');
    const report = await probeMcpServer(keyedServer('conforming', log), probe);
    assert.equal(report.sameKeySameResult, true);
    assert.equal(report.otherArgumentsRefused, true);
    assert.equal(report.honoursKey, true);
    assert.equal(report.tier, 'idempotent');
    assert.deepEqual(report.server, { name: 'orders-conforming', version: '1.0.0' });
    assert.match(report.key, /^jw-[A-Za-z0-9_-]{43}$/, "the bridge's key format, externalIdempotencyKey");
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

  // A lost connection and a timeout are the SDK's own McpErrors (-32000, -32001): not the server refusing the key.
  it('a server that exits during the third call: no verdict (a lost connection is not a refusal)', async () => {
    const log = join(dir, 'exit-third.jsonl');
    await assert.rejects(probeMcpServer(failingThird('exit', log), probe), (error: Error & { code?: string }) => {
      assert.equal(error.code, 'mcp_probe_failed');
      assert.match(error.message, /the connection to the server was lost during the third call of create_order/);
      return true;
    });
  });

  it('a third call without an answer within timeoutMs: no verdict (the effect may still be applying)', async () => {
    const log = join(dir, 'hang-third.jsonl');
    await assert.rejects(probeMcpServer(failingThird('hang', log), { ...probe, timeoutMs: 500 }), (error: Error & { code?: string }) => {
      assert.equal(error.code, 'mcp_probe_failed');
      assert.match(error.message, /the third call of create_order got no answer within 500 ms/);
      return true;
    });
  });

  it('a timeout Node timers cannot hold is refused before anything is started', async () => {
    for (const timeoutMs of [LIMITS.maxTimeoutMs + 1, 3_000_000_000, 0, 1.5]) {
      await assert.rejects(probeMcpServer(keyedServer('conforming'), { ...probe, timeoutMs }), { code: 'invalid_input', message: /timeoutMs/ });
    }
  });

  it("connectMcpServer over stdio passes the SDK's default environment plus stdio.env, not the host's", async () => {
    process.env.KEYED_MODE = 'ignoring';
    try {
      const plain = await connectMcpServer({ stdio: { command: process.execPath, args: [keyedScript], stderr: 'ignore' } }, { reconnect: false });
      const given = await connectMcpServer({ stdio: { command: process.execPath, args: [keyedScript], env: { KEYED_MODE: 'ignoring' }, stderr: 'ignore' } }, { reconnect: false });
      assert.equal(plain.server.name, 'orders-conforming', 'KEYED_MODE from the host did not reach the server');
      assert.equal(given.server.name, 'orders-ignoring');
      await Promise.all([plain.close(), given.close()]);
    } finally {
      delete process.env.KEYED_MODE;
    }
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

  it("starts the server with the caller's environment", () => {
    const run = cli([...args, '--json', '--', process.execPath, keyedScript], { env: { KEYED_MODE: 'ignoring' } });
    assert.equal(run.code, 1, run.stderr);
    const report = JSON.parse(run.stdout) as { server: { name: string }; tier: string };
    assert.deepEqual([report.server.name, report.tier], ['orders-ignoring', 'unknown']);
  });

  it('a server that exits during the third call: no verdict, no tier, exit 1', () => {
    const run = cli([...args, '--json', '--', '/usr/bin/env', 'KEYED_THIRD=exit', process.execPath, keyedScript]);
    assert.equal(run.code, 1, run.stderr);
    const report = JSON.parse(run.stdout) as { verdict: null; tier: null; error: { code: string; message: string } };
    assert.deepEqual([report.verdict, report.tier, report.error.code], [null, null, 'mcp_probe_failed']);
    assert.match(report.error.message, /connection to the server was lost during the third call/);
    const text = cli([...args, '--timeout-ms', '500', '--', '/usr/bin/env', 'KEYED_THIRD=hang', process.execPath, keyedScript]);
    assert.equal(text.code, 1, text.stderr);
    assert.match(text.stdout, /^no verdict: the third call of create_order got no answer within 500 ms/);
    assert.doesNotMatch(text.stdout, /tier/);
  });

  it('--timeout-ms above what Node timers hold (or 0) is a usage error', () => {
    for (const ms of ['3000000000', String(LIMITS.maxTimeoutMs + 1), '0']) {
      const run = cli([...args, '--timeout-ms', ms, '--', process.execPath, keyedScript]);
      assert.equal(run.code, 2, `${ms}: ${run.stdout}`);
      assert.match(run.stderr, /--timeout-ms must be 1 to 2147483647/);
    }
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
