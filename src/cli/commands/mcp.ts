import { McpProbeError } from '../../errors.js';
import { parseJson } from '../../json/parse.js';
import type { JsonObject } from '../../json/types.js';
import { LIMITS } from '../../limits.js';
// The MCP SDK is an optional peer dependency: loaded only when this command runs.
import type { McpProbeReport } from '../../bridges/mcp-probe.js';
import { integerOption, type Command } from '../command.js';
import { EXIT, UsageError } from '../exit.js';

function objectOption(name: string, value: string | boolean | undefined): JsonObject {
  if (typeof value !== 'string') throw new UsageError(`jingwei mcp probe: --${name} is required (a JSON object)`, "Run 'jingwei mcp --help' for usage.");
  let parsed;
  try {
    parsed = parseJson(value);
  } catch (error) {
    throw new UsageError(`jingwei mcp probe: --${name} is not JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new UsageError(`jingwei mcp probe: --${name} must be a JSON object`);
  return parsed;
}

/** The caller's whole environment, for the server the probe starts (the SDK would pass only HOME, PATH, USER…). */
function callerEnvironment(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined) env[name] = value;
  return env;
}

function reportJson(r: McpProbeReport) {
  return {
    server: r.server,
    tool: r.tool,
    key: r.key,
    same_key_same_result: r.sameKeySameResult,
    other_arguments_refused: r.otherArgumentsRefused,
    honours_key: r.honoursKey,
    tier: r.tier,
    findings: r.findings,
  };
}

export const mcpCommand: Command = {
  name: 'mcp',
  summary: 'probe whether a stdio MCP server honours the idempotency key (the tier a tool would earn)',
  arguments: [
    { name: 'action', required: true, help: 'probe' },
    { name: 'server command', required: true, variadic: true, help: 'the command that starts the server over stdio, after --' },
  ],
  options: {
    tool: { type: 'string', value: 'name', help: 'the MCP tool to call' },
    args: { type: 'string', value: 'json', help: 'arguments for the first two calls (a JSON object)' },
    'other-args': { type: 'string', value: 'json', help: 'different arguments for the third call (a JSON object)' },
    'timeout-ms': { type: 'string', value: 'ms', help: `per call, 1 to ${LIMITS.maxTimeoutMs} (default 10000); a call without an answer by then gives no verdict` },
    json: { type: 'boolean', help: 'print one JSON document instead of text' },
  },
  description: `
Starts the server, then calls one tool three times under one idempotency key (sent in _meta as
"jingwei/idempotency-key", the key the MCP bridge sends on every attempt of an operation): twice with the same
arguments, which must give the same result (answered from the server's record, applied once), and once with
other arguments, which must be refused. A tool that passes both earns the idempotent tier: the host may declare
it idempotent for this server version. Anything else stays unknown (a review before any retry).

Only an answer is a refusal: a tool result with isError, or a JSON-RPC error the server sent. A call that gets no
answer within --timeout-ms, or whose connection is lost (the server exited), gives no verdict and no tier: its
effect may still be applying. The first call must succeed.

The server is started with the caller's whole environment (ORDERS_DB=test.db jingwei mcp probe -- node server.js
probes the instance ORDERS_DB names), in the current directory; its stderr is discarded.

The probe really calls the tool: run it against a test instance, or with arguments whose effect is harmless.`,
  exitCodes: 'This command exits 1 when the server does not honour the key, or the probe could not reach a verdict (no tier).',
  examples: [
    `jingwei mcp probe --tool create_order --args '{"item":"tea"}' --other-args '{"item":"cake"}' -- node orders-server.js`,
  ],
  async run({ out, args, rest, options }) {
    if (args.action !== 'probe') {
      throw new UsageError(`jingwei mcp: unknown action ${JSON.stringify(args.action)}`, "The only action is probe. Run 'jingwei mcp --help' for usage.");
    }
    if (typeof options.tool !== 'string' || options.tool.length === 0) throw new UsageError('jingwei mcp probe: --tool is required');
    const [command, ...commandArgs] = rest;
    if (command === undefined) throw new UsageError('jingwei mcp probe: missing <server command…>');
    const timeoutMs = integerOption('mcp probe', 'timeout-ms', options['timeout-ms'], 10_000);
    if (timeoutMs < 1 || timeoutMs > LIMITS.maxTimeoutMs) {
      throw new UsageError(`jingwei mcp probe: --timeout-ms must be 1 to ${LIMITS.maxTimeoutMs} (what Node's timers hold), got ${timeoutMs}`);
    }
    let report: McpProbeReport;
    let probeMcpServer: typeof import('../../bridges/mcp-probe.js').probeMcpServer;
    try {
      ({ probeMcpServer } = await import('../../bridges/mcp-probe.js'));
    } catch (error) {
      throw new UsageError(`jingwei mcp probe: the MCP SDK is not installed (${(error as Error).message})`, 'Install it: npm install @modelcontextprotocol/sdk');
    }
    try {
      report = await probeMcpServer({ stdio: { command, args: commandArgs, env: callerEnvironment(), stderr: 'ignore' } }, {
        tool: options.tool,
        arguments: objectOption('args', options.args),
        otherArguments: objectOption('other-args', options['other-args']),
        timeoutMs,
      });
    } catch (error) {
      if (!(error instanceof McpProbeError)) throw error;
      if (options.json === true) out.line(JSON.stringify({ verdict: null, tier: null, error: { code: error.code, message: error.message } }, null, 2));
      else out.line(`no verdict: ${error.message}`);
      return EXIT.findings;
    }
    if (options.json === true) {
      out.line(JSON.stringify(reportJson(report), null, 2));
    } else {
      const s = out.style;
      out.line(`${report.honoursKey ? s.green('honours the key') : s.red('does not honour the key')}  ${report.server.name}@${report.server.version}, tool ${report.tool}`);
      for (const finding of report.findings) out.line(`  ${finding}`);
    }
    return report.honoursKey ? EXIT.ok : EXIT.findings;
  },
};
