/**
 * One catalogue of error codes: every error class lives in src/errors.ts, JINGWEI_ERROR_CODES names the class of
 * every code, the entries export every class, and the error table of docs/errors.md (between the error-codes markers) lists
 * exactly the catalogue, and the recorded failure codes exactly RECORDED_FAILURE_CODES.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import * as errors from '../../src/errors.js';
import { JINGWEI_ERROR_CODES, JingweiError, RECORDED_FAILURE_CODES, ToolBodyError } from '../../src/errors.js';
import { TOOL_FAILURE_CATEGORIES, type ToolResult } from '../../src/event/types.js';
import type { CallId } from '../../src/ids.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { name: string; exports: Record<string, unknown> };

type Row = readonly string[];
/** The markdown tables between the error-codes markers, keyed by their first header cell. */
function readmeTables(): Map<string, Row[]> {
  const readme = readFileSync(`${root}docs/errors.md`, 'utf8');
  const start = readme.indexOf('<!-- error-codes:start -->');
  const end = readme.indexOf('<!-- error-codes:end -->');
  assert.ok(start >= 0 && end > start, 'docs/errors.md has no error-codes block');
  const tables = new Map<string, Row[]>();
  let current: Row[] | null = null;
  for (const line of readme.slice(start, end).split('\n')) {
    if (!line.startsWith('|')) {
      current = null;
      continue;
    }
    const cells = line.slice(1, -1).split('|').map((cell) => cell.trim());
    if (current === null) {
      current = [];
      tables.set(cells[0]!, current);
    } else if (!cells.every((cell) => /^-+$/.test(cell))) current.push(cells.map((cell) => cell.replace(/^`(.*)`$/, '$1')));
  }
  return tables;
}

const errorClasses = (module: Record<string, unknown>) =>
  Object.entries(module).filter((entry): entry is [string, new (...args: never[]) => Error] => typeof entry[1] === 'function' && entry[1].prototype instanceof Error);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

describe('the error catalogue', () => {
  it('the docs/errors.md table lists exactly the catalogue: one row per code, with its class and a meaning', () => {
    const rows = readmeTables().get('code');
    assert.ok(rows, 'no | code | class | meaning | table in the error-codes block');
    const codes = rows.map((row) => row[0]!);
    assert.equal(new Set(codes).size, codes.length, `a code is listed twice: ${codes.join(', ')}`);
    assert.deepEqual(Object.fromEntries(rows.map((row) => [row[0], row[1]])), { ...JINGWEI_ERROR_CODES });
    for (const row of rows) assert.ok(row.length === 3 && row[2]!.length > 0, `no meaning for ${row[0]}`);
  });

  it('docs/errors.md lists exactly the recorded failure codes, each with a real category', () => {
    const rows = readmeTables().get('recorded code');
    assert.ok(rows, 'no | recorded code | category | meaning | table in the error-codes block');
    assert.deepEqual(rows.map((row) => row[0]).sort(), [...RECORDED_FAILURE_CODES].sort());
    for (const row of rows) {
      assert.ok((TOOL_FAILURE_CATEGORIES as readonly string[]).includes(row[1]!), `${row[0]}: unknown category ${row[1]}`);
      assert.ok(row[2]!.length > 0, `no meaning for ${row[0]}`);
    }
    assert.equal(new Set(RECORDED_FAILURE_CODES).size, RECORDED_FAILURE_CODES.length);
    assert.ok(Object.isFrozen(RECORDED_FAILURE_CODES));
  });

  it('every error class of src/errors.ts is a JingweiError in the catalogue, except ToolBodyError', () => {
    const cataloguedClasses = new Set<string>(Object.values(JINGWEI_ERROR_CODES));
    const found = errorClasses(errors as Record<string, unknown>);
    const classes = found.map(([name]) => name);
    for (const [name, value] of found) {
      if (name === 'JingweiError' || name === 'ToolBodyError') continue;
      assert.ok(cataloguedClasses.has(name), `${name} has no code in JINGWEI_ERROR_CODES`);
      assert.ok(value.prototype instanceof JingweiError, `${name} is not a JingweiError`);
    }
    for (const name of cataloguedClasses) assert.ok(classes.includes(name), `JINGWEI_ERROR_CODES names ${name}, which src/errors.ts does not export`);
    assert.ok(!(ToolBodyError.prototype instanceof JingweiError), 'ToolBodyError carries the tool\'s own code');
    assert.ok(readFileSync(`${root}docs/errors.md`, 'utf8').includes('`ToolBodyError` is not in this table'));
  });

  // u145 F2: `instanceof SessionBusyError` left `code` the whole catalogue's union.
  it('every class narrows code to its own codes, so instanceof narrows it (ToolRuntimeHaltedError carries its cause\'s)', () => {
    const source = readFileSync(`${root}src/errors.ts`, 'utf8');
    for (const [name] of errorClasses(errors as Record<string, unknown>)) {
      if (name === 'JingweiError' || name === 'ToolBodyError' || name === 'ToolRuntimeHaltedError') continue;
      const body = new RegExp(`export class ${name} extends \\w+ \\{\\n([\\s\\S]*?)\\n\\}\\n`).exec(source)?.[1] ?? '';
      assert.match(body, /declare readonly code: /, `${name} does not declare its code`);
    }
    const busy: unknown = new errors.SessionBusyError('s1', 'host-1', 1, 0, 'host-2');
    if (busy instanceof errors.SessionBusyError) {
      const code: 'session_busy' = busy.code;
      assert.equal(code, 'session_busy');
    }
  });

  it('no error class is defined outside src/errors.ts (the CLI\'s own usage errors aside)', () => {
    const src = join(root, 'src');
    for (const file of sourceFiles(src)) {
      const path = relative(src, file);
      if (path === 'errors.ts' || path.startsWith('cli/')) continue;
      const match = /class\s+(\w+)\s+extends\s+(\w*Error)\b/.exec(readFileSync(file, 'utf8'));
      assert.equal(match, null, `src/${path} defines ${match?.[1]} extends ${match?.[2]}`);
    }
  });

  it('every catalogued class is exported by a package entry, as the same class', async () => {
    const exported = new Map<string, unknown>();
    for (const entry of Object.keys(pkg.exports).filter((key) => key !== './package.json')) {
      const module = (await import(entry === '.' ? pkg.name : `${pkg.name}/${entry.slice(2)}`)) as Record<string, unknown>;
      for (const [name, value] of errorClasses(module)) {
        const seen = exported.get(name);
        assert.ok(seen === undefined || seen === value, `${name} is exported as two different classes`);
        exported.set(name, value);
      }
    }
    for (const name of [...new Set(Object.values(JINGWEI_ERROR_CODES)), 'JingweiError', 'ToolBodyError']) {
      assert.ok(exported.has(name), `no entry exports ${name}`);
    }
    for (const name of exported.keys()) {
      assert.ok(name === 'JingweiError' || name === 'ToolBodyError' || Object.values(JINGWEI_ERROR_CODES).includes(name as never), `${name} is exported but not catalogued`);
    }
  });

  it('a code names its class: a sample of each class carries a catalogued code of its own', () => {
    const call = { id: 'toolcall_1', name: 't', arguments: null } as never;
    const samples: JingweiError[] = [
      new errors.InvalidInputError('f', 'bad'),
      new errors.JsonParseError('syntax', 0, 'bad'),
      new errors.CanonicalJsonError('bad'),
      new errors.WireDecodeError('kind', 'bad'),
      new errors.PhysicalLogError('wrong_sequence', 0, 'bad'),
      new errors.JournalImportError(1, 'bad'),
      new errors.SessionBusyError('s', 'h', 1),
      new errors.StaleOwnerError('s', 1, 'x'),
      new errors.JournalCorruptError('s', 1, 'order', 'x'),
      new errors.JournalFullError('s', 'x'),
      new errors.StoreBusyError('x'),
      new errors.StoreUnavailableError('schema_too_new', 'x'),
      new errors.StoreClosedError('sqlite', '/tmp/x.db'),
      new errors.StorePathError('store_not_sqlite', '/tmp/x.db', 'not SQLite'),
      new errors.DriverMissingError('better-sqlite3', 'jingwei/sqlite'),
      new errors.StoreConflictError('session_exists', 'x'),
      new errors.TaskNotFoundError('t', 's'),
      new errors.TaskNotRunningError('t', 'stopped'),
      new errors.BudgetExhaustedError('t', 'tool_calls', 'x'),
      new errors.IdempotencyConflictError('t', 'k'),
      new errors.ToolConfigError('x'),
      new errors.ToolPreflightError('empty_name', 'x'),
      new errors.ToolOverloadedError(1),
      new errors.ToolTurnClosedError(),
      new errors.ToolRecordingError('call', call, null, new Error('x')),
      new errors.ToolRetryError('consumed', 'x'),
      new errors.ToolRetryPlanNotSerializableError(),
      new errors.ChatModelError('model_unreachable', 'x'),
      new errors.ToolCallFailedError('t', { text: 'x', category: 'denied', code: 'no', started: false }),
      new errors.ToolRuntimeHaltedError('t', new Error('no code')),
      new errors.McpUnavailableError('srv', 'closed', 'x'),
      new errors.McpProbeError('x'),
      new errors.AnchorError('s', 3, 'rewritten', 'x'),
      new errors.AnchorError('s', -1, 'bad_signature', 'x'),
      new errors.StoreReplacedError('/tmp/x.db', 'deleted'),
      new errors.ExportUnrepresentableError(3, 'x'),
      new errors.DecisionError('decision_stale', 'approval_1', 'x'),
      new errors.DecisionError('inbox_unsupported', null, 'x'),
      new errors.OperationInDoubtError('task', 'key', 'call', 'x'),
      new errors.OperationConfirmedError('task', 'key', 'call', 'ops@example.com', 'in the ledger'),
      new errors.OperationMadeByIdenticalError('task', 'key', 'call', 'other'),
      new errors.AgentRunBusyError('session', 'run'),
    ];
    const sampled = new Set(samples.map((e) => e.constructor.name));
    for (const name of Object.values(JINGWEI_ERROR_CODES)) assert.ok(sampled.has(name), `no sample of ${name}`);
    for (const error of samples) {
      assert.equal(JINGWEI_ERROR_CODES[error.code], error.constructor.name, `${error.constructor.name} carries ${error.code}`);
      assert.equal(error.name, error.constructor.name);
    }
    const halted = new errors.ToolRuntimeHaltedError('t', new errors.TaskNotRunningError('t', 'stopped'));
    assert.equal(halted.code, 'task_not_running', 'a halted call carries the refusal\'s own code');
    assert.match(halted.message, /^Tool "t" could not be run: the tool runtime refused the call \(task_not_running\)\. Do not call tools again\.$/);
    // What the model reads is true to what ran: a result lost after the body started, and a host hook that failed.
    for (const stage of ['call', 'started'] as const) {
      assert.match(new errors.ToolRuntimeHaltedError('t', new errors.ToolRecordingError(stage, call, null, new Error('x'))).message, /could not be run/);
    }
    assert.equal(new errors.ToolRuntimeHaltedError('t', new errors.ToolRecordingError('result', call, null, new Error('fenced'))).message,
      'Tool "t" started, but its result could not be recorded (recording_failed): it may have taken effect; check before doing it again. Do not call tools again.');
    assert.equal(new errors.ToolRuntimeHaltedError('t', new Error('metrics backend unreachable'), 'succeeded').message,
      'The call of tool "t" was recorded (succeeded), but the host failed to handle its outcome (runtime_error). Do not call tools again.');
  });

  it('a recording failure names the write it lost in words, and says when the body was never called (r108 F2, F6)', () => {
    const call = { id: 'toolcall_1', name: 'pay', arguments: {} } as errors.ToolRecordingError['call'];
    const fenced = new Error('owner of session s at epoch 1 is stale: fenced by epoch 2');
    assert.match(new errors.ToolRecordingError('started', call, null, fenced).message, /^could not record the start marker of pay \(toolcall_1\): owner of session/);
    const stopped: ToolResult = { callId: 'toolcall_1' as CallId, outcome: { status: 'failed', category: 'cancelled', code: 'tool_stopped_before_body', message: 'lost its hold', retryable: false } };
    const lost = new errors.ToolRecordingError('result', call, stopped, fenced, false, true).message;
    assert.match(lost, /^could not record the result of pay \(toolcall_1\): owner of session s at epoch 1 is stale: fenced by epoch 2\. The body was not called: /);
    assert.match(lost, /a review may record not_executed on this evidence$/);
    const ran: ToolResult = { callId: 'toolcall_1' as CallId, outcome: { status: 'failed', category: 'cancelled', code: 'tool_cancelled', message: 'cancelled', retryable: false } };
    assert.doesNotMatch(new errors.ToolRecordingError('result', call, ran, fenced).message, /not called/, 'a body that was called is not said not to be');
    assert.doesNotMatch(new errors.ToolRecordingError('result', call, stopped, fenced).message, /not called/, 'the runtime says when; the code alone does not');
  });

  it('an acquire refused by a holder whose lease ran out says so, and how to take the session over (r108 F4)', () => {
    const at = Date.parse('2026-12-07T03:46:05.814Z');
    assert.match(new errors.SessionBusyError('s1', 'host-1', 1, at, 'host-2', true).message,
      /^session s1 is held by host-1 \(epoch 1\); its lease ran out at 2026-12-07T03:46:05\.814Z \(a holder that stopped without releasing it\): acquire with takeover 'expired' to take the session over$/);
    assert.equal(new errors.SessionBusyError('s1', 'host-1', 1, at, 'host-2').message, 'session s1 is held by host-1 (epoch 1); its lease runs until 2026-12-07T03:46:05.814Z');
  });
});
