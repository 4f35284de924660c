/**
 * `exportRustJournal` / `jingwei export --format rust`: read back by a decoder written here that follows the
 * original's serde rules exactly (unknown fields denied on the operation, its contract, its audit and the review;
 * the closed set of event kinds and failure categories; `seq` a u64 equal to its position; `retry` and `review`
 * written as null; `provider_call_id` present). And the original loader's rules on our import.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ExportUnrepresentableError, JournalImportError } from '../../src/errors.js';
import { exportJournal, parseJournal } from '../../src/store/jsonl.js';
import { exportRustJournal } from '../../src/store/rust-format.js';
import type { SessionEvent, ToolCall } from '../../src/event/types.js';
import { HistoryBuilder, failed, succeeded } from '../support/history.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { alphaHistory, cli, forgeStore, writeStore } from '../cli/helpers.js';

type Obj = Record<string, unknown>;

const KINDS = new Set(['user_message', 'assistant_delta', 'assistant_message', 'model_request', 'model_result', 'tool_call', 'tool_result',
  'task_run_report', 'stage_progress', 'mode', 'plan_ready', 'done', 'error', 'custom']);
const CATEGORIES = new Set(['unavailable', 'invalid_arguments', 'denied', 'guard_fault', 'approval_unavailable', 'approval_denied',
  'approval_fault', 'timeout', 'cancelled', 'body_failure', 'body_panic', 'output_limit', 'budget']);
const PRE_BODY = new Set(['unavailable', 'invalid_arguments', 'denied', 'guard_fault', 'approval_unavailable', 'approval_denied', 'approval_fault']);

function object(value: unknown, where: string): Obj {
  assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value), `${where}: expected an object`);
  return value as Obj;
}
/** serde(deny_unknown_fields): every key must be one of `allowed`. */
function deny(o: Obj, allowed: readonly string[], where: string): void {
  for (const key of Object.keys(o)) assert.ok(allowed.includes(key), `${where}: unknown field ${key}`);
}
function str(o: Obj, key: string, where: string): string {
  assert.equal(typeof o[key], 'string', `${where}.${key}: expected a string`);
  return o[key] as string;
}

/** The original's strict decode of one line; returns the kind's type and the call or result it holds. */
function decodeOriginal(line: string, index: number): { type: string; call?: Obj; result?: Obj; eventId: string } {
  const e = object(JSON.parse(line), `line ${index + 1}`);
  const eventId = str(e, 'event_id', 'event');
  str(e, 'session_id', 'event');
  str(e, 'turn_id', 'event');
  assert.ok(Number.isInteger(e.seq) && (e.seq as number) >= 0, 'seq is a u64');
  assert.equal(e.seq, index, 'validate_physical_log: seq equals the position');
  assert.match(line, new RegExp(`"seq":${index},`), 'seq is an integer literal');
  const kind = object(e.kind, 'kind');
  const type = str(kind, 'type', 'kind');
  assert.ok(KINDS.has(type), `unknown event kind ${type}`);
  if (type === 'tool_call') {
    const call = object(kind.call, 'call');
    str(call, 'id', 'call');
    str(call, 'name', 'call');
    assert.ok('arguments' in call, 'call.arguments');
    if ('operation' in call) {
      const op = object(call.operation, 'operation');
      deny(op, ['task_id', 'key', 'contract', 'retry'], 'operation');
      str(op, 'task_id', 'operation');
      str(op, 'key', 'operation');
      const contract = object(op.contract, 'contract');
      deny(contract, ['effect', 'revision'], 'contract');
      assert.ok(['unknown', 'read_only', 'idempotent', 'non_idempotent'].includes(str(contract, 'effect', 'contract')));
      str(contract, 'revision', 'contract');
      assert.ok('retry' in op, 'retry is written (as null when absent)');
      if (op.retry !== null) {
        const audit = object(op.retry, 'retry');
        deny(audit, ['call_id', 'event_id', 'review'], 'retry');
        str(audit, 'call_id', 'retry');
        str(audit, 'event_id', 'retry');
        assert.ok('review' in audit, 'review is written (as null when absent)');
        if (audit.review !== null) {
          const review = object(audit.review, 'review');
          deny(review, ['actor', 'evidence', 'outcome'], 'review');
          assert.ok(['not_executed', 'completed', 'uncertain'].includes(str(review, 'outcome', 'review')));
        }
      }
    }
    if ('action' in call) {
      const action = object(call.action, 'action');
      const decision = object(action.decision, 'decision');
      str(decision, 'task_id', 'decision');
      str(decision, 'step_id', 'decision');
      assert.ok(Number.isInteger(action.action_index));
      assert.ok('provider_call_id' in action, 'provider_call_id is written');
      assert.ok(action.provider_call_id === null || typeof action.provider_call_id === 'string');
    }
    return { type, call, eventId };
  }
  if (type === 'tool_result') {
    const result = object(kind.result, 'result');
    str(result, 'call_id', 'result');
    const outcome = object(result.outcome, 'outcome');
    if (outcome.status === 'succeeded') str(outcome, 'output', 'outcome');
    else {
      assert.equal(outcome.status, 'failed');
      assert.ok(CATEGORIES.has(str(outcome, 'category', 'outcome')), `unknown category ${String(outcome.category)}`);
      str(outcome, 'code', 'outcome');
      str(outcome, 'message', 'outcome');
      assert.equal(typeof outcome.retryable, 'boolean');
    }
    return { type, result, eventId };
  }
  return { type, eventId };
}

/** The original's recovery status of each call, from the decoded file alone (no markers). */
function originalStatuses(text: string): Map<string, string> {
  const lines = text.split('\n');
  assert.equal(lines.pop(), '', 'every line ends with a line feed');
  const statuses = new Map<string, string>();
  const eventIds = new Set<string>();
  lines.forEach((line, i) => {
    const d = decodeOriginal(line, i);
    if (d.call) {
      const retry = (d.call.operation as Obj | undefined)?.retry as Obj | null | undefined;
      if (retry) assert.ok(eventIds.has(retry.event_id as string), 'the audit points at an event in the file');
      statuses.set(d.call.id as string, 'outcome_unknown');
    }
    if (d.result) {
      const outcome = d.result.outcome as Obj;
      statuses.set(d.result.call_id as string, outcome.status === 'succeeded' ? 'completed' : PRE_BODY.has(outcome.category as string) ? 'not_executed' : 'outcome_unknown');
    }
    eventIds.add(d.eventId);
  });
  return statuses;
}

function withRetryAndAction(): SessionEvent[] {
  const h = new HistoryBuilder('rusty', 'turn-r');
  h.message('go');
  const first = h.call({ id: 'r-1', name: 'charge', key: 'k-r', effect: 'idempotent', startMarker: true });
  h.started('r-1');
  h.result('r-1', failed('body_failure', true));
  const second = h.retry(first, { id: 'r-2', startMarker: true });
  void second;
  h.started('r-2');
  h.result('r-2', succeeded('{"charged":true}'));
  const call: ToolCall = {
    id: 'a-1' as ToolCall['id'],
    name: 'lookup',
    arguments: { q: 1 },
    action: { decision: { taskId: 'task-1' as never, stepId: 'step-1' }, actionIndex: 0 },
  };
  h.rawCall(call);
  h.result('a-1', failed('denied'));
  return h.build();
}

describe('exportRustJournal', () => {
  it("writes records the original's strict decoder reads, with no marker and no tool_started, seq renumbered", () => {
    const history = [...alphaHistory()];
    const text = exportRustJournal(history);
    assert.doesNotMatch(text, /start_marker|tool_started/);
    const statuses = originalStatuses(text);
    assert.equal(text.split('\n').length - 1, history.filter((e) => e.kind.type !== 'tool_started').length);
    assert.equal(statuses.get('c-ok'), 'completed');
    assert.equal(statuses.get('c-idem'), 'outcome_unknown');
    assert.equal(statuses.get('c-pay'), 'outcome_unknown', 'a started charge with no result stays unknown');
    assert.equal(statuses.get('c-ship'), 'outcome_unknown', 'stricter than our not_executed, never looser');
  });

  it('keeps retry audits pointing at event ids, writes provider_call_id as null, and reads back in our import', () => {
    const history = withRetryAndAction();
    const text = exportRustJournal(history);
    const statuses = originalStatuses(text);
    assert.equal(statuses.get('r-2'), 'completed');
    assert.equal(statuses.get('a-1'), 'not_executed');
    assert.match(text, /"provider_call_id":null/);
    const back = parseJournal(text);
    assert.deepEqual(back.map((e) => e.seq), back.map((_, i) => i));
  });

  it('refuses a flagged call whose marker and result contradict each other, naming the seq', () => {
    const marked = new HistoryBuilder('c', 't');
    marked.call({ id: 'x', key: 'k', effect: 'non_idempotent', startMarker: true });
    marked.started('x');
    marked.result('x', failed('denied'));
    assert.throws(() => exportRustJournal(marked.build()), (error: unknown) => {
      assert.ok(error instanceof ExportUnrepresentableError);
      assert.equal(error.code, 'export_unrepresentable');
      assert.equal(error.seq, 0);
      assert.match(error.message, /start marker but a denied result/);
      return true;
    });
    const unmarked = new HistoryBuilder('c', 't');
    unmarked.message();
    unmarked.call({ id: 'y', key: 'k', effect: 'non_idempotent', startMarker: true });
    unmarked.result('y', succeeded());
    assert.throws(() => exportRustJournal(unmarked.build()), /seq 1: call y has no start marker but a result from its body/);
  });

  it('refuses an event kind the original does not know', () => {
    const h = new HistoryBuilder('c', 't');
    h.push({ type: 'opaque', wireType: 'our_own_kind', fields: { x: 1 } });
    assert.throws(() => exportRustJournal(h.build()), ExportUnrepresentableError);
  });
});

describe("our import keeps the original loader's line rules", () => {
  const good = exportJournal(alphaHistory());

  it('a torn last line (no line ending) is refused', () => {
    assert.throws(() => parseJournal(good.slice(0, -1)), (error: unknown) => {
      assert.ok(error instanceof JournalImportError);
      assert.match(error.message, /torn write/);
      return true;
    });
  });

  it('a seq that is not an integer literal is refused, naming the line', () => {
    for (const literal of ['1.0', '1e0', '10E-1']) {
      const lines = good.split('\n');
      lines[1] = lines[1]!.replace('"seq":1,', `"seq":${literal},`);
      assert.throws(() => parseJournal(lines.join('\n')), new RegExp(`line 2: seq is written as ${literal.replace('.', '\\.')}, not as an integer literal`));
    }
  });
});

describe('jingwei export --format rust', () => {
  const dir = tempDir('jingwei-rust-format-');

  it('writes exactly exportRustJournal of the verified history; the help says what each format is', async () => {
    const path = tempDbPath(dir);
    await writeStore(path, { alpha: alphaHistory() });
    const r = cli(['export', path, 'alpha', '--format', 'rust']);
    assert.equal(r.code, 0, r.stderr);
    originalStatuses(r.stdout);
    const file = join(dir, 'alpha.rust.jsonl');
    writeFileSync(file, r.stdout);
    assert.equal(cli(['import', tempDbPath(dir), file]).code, 0, 'our import reads it too');
    const help = cli(['export', '--help']).stdout;
    assert.match(help, /--format rust writes exactly the records Jingwei for Rust reads/);
    assert.match(help, /--format jsonl \(the default\) writes our records as stored; they carry the start-marker flag/);
    assert.doesNotMatch(help, /in physical order, exactly the records the Rust\s+original's JSONL store writes/);
    assert.equal(cli(['export', path, 'alpha', '--format', 'cobol']).code, 2);
  });

  it('a contradictory call is refused with exit 1 and nothing on stdout', async () => {
    const path = tempDbPath(dir);
    const h = new HistoryBuilder('bad', 't');
    h.call({ id: 'x', key: 'k', effect: 'non_idempotent', startMarker: true });
    h.started('x');
    h.result('x', failed('denied'));
    // Import refuses such evidence, so it is forged as a writer with database access would.
    await forgeStore(path, { bad: h.build() });
    const r = cli(['export', path, 'bad', '--format', 'rust']);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /export_unrepresentable: seq 0/);
  });
});
