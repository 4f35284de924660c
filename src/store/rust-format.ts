/**
 * The original implementation's exact JSONL records (docs/design.md#exporting-for-the-original), and the two rules of
 * its loader our import keeps: every line ends with a line feed, and `seq` is an integer literal.
 */
import { ExportUnrepresentableError, JournalImportError } from '../errors.js';
import { encodeEvent } from '../event/codec.js';
import type { SessionEvent, ToolResult } from '../event/types.js';
import type { JsonObject } from '../json/types.js';

/** The event kinds the original decodes; any other kind fails its loader. */
export const ORIGINAL_EVENT_KINDS: ReadonlySet<string> = new Set([
  'user_message', 'assistant_delta', 'assistant_message', 'model_request', 'model_result', 'tool_call', 'tool_result',
  'task_run_report', 'stage_progress', 'mode', 'plan_ready', 'done', 'error', 'custom',
]);

/** The failure categories the original decodes. */
const ORIGINAL_CATEGORIES: ReadonlySet<string> = new Set([
  'unavailable', 'invalid_arguments', 'denied', 'guard_fault', 'approval_unavailable', 'approval_denied', 'approval_fault',
  'timeout', 'cancelled', 'body_failure', 'body_panic', 'output_limit', 'budget',
]);
/** Recorded only before a body starts: the original reads them as "not executed". */
const ORIGINAL_PRE_BODY: ReadonlySet<string> = new Set([
  'unavailable', 'invalid_arguments', 'denied', 'guard_fault', 'approval_unavailable', 'approval_denied', 'approval_fault',
]);
/**
 * Categories the original lacks, written as one it has with the same meaning for recovery (both pre-body): an
 * `in_doubt` refusal reads as `denied` (docs/design.md#the-in-doubt-guard); an attempt left waiting for an
 * operator's decision reads as an approval that could not be given (docs/design.md#durable-approvals).
 */
const MAPPED_CATEGORIES: ReadonlyMap<string, string> = new Map([
  ['in_doubt', 'denied'],
  ['approval_pending', 'approval_unavailable'],
]);
const originalCategory = (category: string): string => MAPPED_CATEGORIES.get(category) ?? category;
/** Only written once a body ran. */
const BODY_RAN: ReadonlySet<string> = new Set(['body_failure', 'body_panic', 'output_limit']);

/**
/** Drops the inbox's approval record from a result (docs/design.md#durable-approvals). */
function dropApprovalEvidence(wire: JsonObject): void {
  delete ((wire.kind as JsonObject).result as JsonObject).approval;
}

/**
 * Writes `events` as the original's records: no `tool_started` events, no `task_ledger` events (the store's own
 * record of a task's budget, docs/design.md#the-task-ledger-in-the-chain), no `tool_review` events (journaled reviews,
 * docs/design.md#reviews-are-journaled-evidence: the original cannot read them, and without them its recovery sees
 * the reviewed call as uncertain again, which is the safe reading), no `start_marker` flag, no `recorded_at`,
 * no approval records, `in_doubt` written as `denied` and `approval_pending` as `approval_unavailable`, `seq` renumbered
 * 0, 1, 2, ..., `provider_call_id: null` where an action has none. Refuses (ExportUnrepresentableError, nothing
 * written) a record the original would read differently in a way that loses safety: a flagged call whose result
 * says the body never started although its start marker is there, or says the body ran although there is no
 * marker; and any event kind or failure category the original does not know.
 */
export function exportRustJournal(events: readonly SessionEvent[]): string {
  const started = new Set<string>();
  const results = new Map<string, ToolResult>();
  for (const e of events) {
    if (e.kind.type === 'tool_started') started.add(e.kind.callId);
    else if (e.kind.type === 'tool_result') results.set(e.kind.result.callId, e.kind.result);
  }
  let out = '';
  let seq = 0;
  for (const e of events) {
    const kind = e.kind;
    if (kind.type === 'tool_started' || kind.type === 'tool_review' || kind.type === 'task_ledger') continue;
    const wireType = kind.type === 'opaque' ? kind.wireType : kind.type;
    if (!ORIGINAL_EVENT_KINDS.has(wireType)) throw new ExportUnrepresentableError(e.seq, `the original has no event kind ${JSON.stringify(wireType)}`);
    const wire = encodeEvent(e);
    wire.seq = seq++;
    // The original's envelope has no recorded time (docs/design.md#recorded-times).
    delete wire.recorded_at;
    if (kind.type === 'tool_result') dropApprovalEvidence(wire);
    if (kind.type === 'tool_result' && kind.result.outcome.status === 'failed') {
      (((wire.kind as JsonObject).result as JsonObject).outcome as JsonObject).category = originalCategory(kind.result.outcome.category);
    }
    if (kind.type === 'tool_result' && kind.result.outcome.status === 'failed' && !ORIGINAL_CATEGORIES.has(originalCategory(kind.result.outcome.category))) {
      throw new ExportUnrepresentableError(e.seq, `the original has no failure category ${JSON.stringify(kind.result.outcome.category)}`);
    }
    if (kind.type === 'tool_call') {
      const call = (wire.kind as JsonObject).call as JsonObject;
      const operation = call.operation as JsonObject | undefined;
      if (operation && operation.start_marker === true) {
        delete operation.start_marker;
        const outcome = results.get(kind.call.id)?.outcome;
        const marked = started.has(kind.call.id);
        if (outcome?.status === 'failed' && marked && ORIGINAL_PRE_BODY.has(originalCategory(outcome.category))) {
          throw new ExportUnrepresentableError(e.seq,
            `call ${kind.call.id} has a start marker but a ${outcome.category} result; without the marker the original would read it as not executed`);
        }
        if (outcome && !marked && (outcome.status === 'succeeded' || BODY_RAN.has(outcome.category))) {
          throw new ExportUnrepresentableError(e.seq,
            `call ${kind.call.id} has no start marker but a result from its body (${outcome.status === 'succeeded' ? 'succeeded' : outcome.category}); its evidence contradicts itself`);
        }
      }
      const action = call.action as JsonObject | undefined;
      if (action && !('provider_call_id' in action)) action.provider_call_id = null;
    }
    out += JSON.stringify(wire) + '\n';
  }
  return out;
}

/**
 * The original loader's line rules: a last line with no line feed is a torn write, and `seq` must be written as a
 * plain integer (`1`, never `1.0` or `1e0`). Throws JournalImportError naming the line.
 */
export function checkLoaderRules(lines: readonly string[], endsWithNewline: boolean): void {
  if (lines.length > 0 && !endsWithNewline) {
    throw new JournalImportError(lines.length, 'the last line has no line ending: a torn write, refused as the original loader refuses it');
  }
  lines.forEach((line, i) => {
    const literal = topLevelLiteral(line, 'seq');
    if (literal !== null && !/^(0|[1-9][0-9]*)$/.test(literal)) {
      throw new JournalImportError(i + 1, `seq is written as ${literal}, not as an integer literal`);
    }
  });
}

/** The raw text of a top-level member's scalar value in one JSON object line, or null (the caller parses the line anyway). */
function topLevelLiteral(line: string, name: string): string | null {
  let depth = 0;
  let i = 0;
  const n = line.length;
  while (i < n) {
    const c = line[i]!;
    if (c === '"') {
      let j = i + 1;
      while (j < n && line[j] !== '"') j += line[j] === '\\' ? 2 : 1;
      const key = line.slice(i + 1, j);
      i = j + 1;
      if (depth !== 1 || key !== name) continue;
      while (i < n && /\s/.test(line[i]!)) i++;
      if (line[i] !== ':') continue;
      i++;
      while (i < n && /\s/.test(line[i]!)) i++;
      let k = i;
      while (k < n && /[-+.0-9eE]/.test(line[k]!)) k++;
      return k > i ? line.slice(i, k) : null;
    }
    if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
    i++;
  }
  return null;
}
