/**
 * What an agent run journals about itself (docs/design.md#resumable-runs): host `custom` events of plugin
 * `jingwei.run`, readable by every reader of the journal (the wire codec, the Rust-format export) as ordinary
 * custom events. `run_started` names the run's task and input; `model_response` holds one model answer with the
 * tool calls it asked for; `run_finished` records how a finished run ended. Each requested call's operation key
 * derives from (run id, step, index), so a resumed run finds the operation its step already journaled.
 */
import { InvalidInputError } from '../errors.js';
import type { EventDraft, SessionEvent } from '../event/types.js';
import type { JsonValue } from '../json/types.js';
import { hasLoneSurrogate } from '../ids.js';
import { LIMITS, OPERATION_KEY_LIMITS, RUN_LIMITS } from '../limits.js';
import { describeSetting, toWellFormed, truncateUtf8, utf8Length } from '../text.js';
import type { ChatResponse, ChatToolCall } from './model.js';

export const RUN_PLUGIN = 'jingwei.run';

/** How a finished run ended (journaled); a stopped run that waits on a person is not finished. */
export type FinishedStopReason = 'completed' | 'max_steps' | 'uncertain_outcome';

export interface JournaledRun {
  readonly runId: string;
  readonly taskId: string;
  readonly input: string;
  /** Journaled model responses, by step (1-based, contiguous). */
  readonly responses: ChatResponse[];
  /** `<step>/<index>` of calls journaled elided (see modelResponseEvent). */
  readonly omitted: ReadonlySet<string>;
  /** `<step>/<index>` of calls refused before anything was recorded, with the refusal the model read. */
  readonly refusals: ReadonlyMap<string, { readonly code: string; readonly message: string }>;
  /**
   * Steps a framework's loop journaled (through a bridge): a call of one with no attempt was never handed to the
   * bridge's tool, and is never made by any loop that continues the run (NOT_RUN_BY_FRAMEWORK).
   */
  readonly frameworkSteps: ReadonlySet<number>;
  readonly finished: { readonly stopReason: FinishedStopReason; readonly steps: number; readonly text: string | null } | null;
}

/**
 * The refusal the call at (step, index) met when its step ran, or undefined: a journaled preflight refusal, or a call
 * that could not be journaled as the model wrote it. A resumed run gives the model the same refusal again.
 */
export function journaledRefusal(run: JournaledRun | null, step: number, index: number): { readonly code: string; readonly message: string } | undefined {
  if (run === null) return undefined;
  const at = `${step}/${index}`;
  return run.refusals.get(at) ?? (run.omitted.has(at) ? NOT_JOURNALED : undefined);
}

/** A run id: OPERATION_KEY_LIMITS's characters without `/`, at most RUN_LIMITS.maxRunIdBytes. */
export function checkRunId(runId: unknown): string {
  if (typeof runId !== 'string') throw new InvalidInputError('runId', `must be a string, got ${typeof runId}`);
  if (runId.length === 0 || runId.length > RUN_LIMITS.maxRunIdBytes) {
    throw new InvalidInputError('runId', `must be 1 to ${RUN_LIMITS.maxRunIdBytes} characters, got ${runId.length}`);
  }
  if (!RUN_LIMITS.pattern.test(runId)) {
    throw new InvalidInputError('runId', 'may hold letters, digits and ._:@- only, starting with a letter or digit');
  }
  return runId;
}

/** The operation key of the `index`-th call (0-based) the model asked for at `step` (1-based) of run `runId`. */
export function runOperationKey(runId: string, step: number, index: number): string {
  checkRunId(runId);
  if (!Number.isSafeInteger(step) || step < 1) throw new InvalidInputError('step', `must be an integer of at least 1 (steps count from 1), got ${describeSetting(step)}`);
  if (!Number.isSafeInteger(index) || index < 0) throw new InvalidInputError('index', `must be an integer of at least 0 (calls count from 0), got ${describeSetting(index)}`);
  const key = `${runId}/${step}/${index}`;
  // A run id within its limit and safe-integer step and index always fit; checked so a change of limits cannot
  // silently produce keys the runtime refuses.
  if (key.length > OPERATION_KEY_LIMITS.maxBytes || !OPERATION_KEY_LIMITS.pattern.test(key)) {
    throw new InvalidInputError('runId', `gives operation key ${key}, outside the operation key rules`);
  }
  return key;
}

const custom = (turnId: string, kind: string, payload: JsonValue): EventDraft =>
  ({ turnId, kind: { type: 'custom', plugin: RUN_PLUGIN, kind, payload } }) as EventDraft;

export function runStartedEvent(turnId: string, runId: string, taskId: string, input: string): EventDraft {
  return custom(turnId, 'run_started', { runId, taskId, input });
}

/**
 * A call the journal cannot or must not hold as the model wrote it (text that is not well-formed, a name over the
 * name limit, arguments the gateway would refuse to record for their size) is journaled elided: empty name and
 * arguments and `omitted: true`, so a model cannot fill the journal through the run's own events. The gateway
 * refuses such a call before recording it; its refusal is journaled as `call_refused`.
 */
function journaledCall(c: ChatToolCall, available: ReadonlySet<string>): JsonValue {
  if (journalsAsWritten(c, available)) return { id: c.id, name: c.name, arguments: c.arguments };
  // What fits is kept, so the refusal read back names the tool and answers the model's own call id.
  return { id: idFits(c.id) ? c.id : '', name: nameFits(c.name) ? c.name : '', arguments: '', omitted: true };
}

/**
 * Whether the journal can hold a provider call id. The gateway refuses the name and arguments the journal cannot
 * hold, but drops such an id and would run the call: a call whose id does not fit is refused by the run itself,
 * when its step runs as when it is read back, so the journal never shows a call elided that ran.
 */
export const idFits = (id: string) => !hasLoneSurrogate(id) && utf8Length(id) <= LIMITS.maxTextBytes;
const nameFits = (name: string) => !hasLoneSurrogate(name) && utf8Length(name) <= LIMITS.maxToolNameBytes;

/** Whether the journal holds `c` as the model wrote it (see journaledCall). */
function journalsAsWritten(c: ChatToolCall, available: ReadonlySet<string>): boolean {
  const argBytes = utf8Length(c.arguments);
  return idFits(c.id) && nameFits(c.name) && !hasLoneSurrogate(c.arguments) && argBytes <= LIMITS.maxArgumentsBytes
    && (available.has(c.name) || argBytes <= LIMITS.maxUnavailableArgumentsBytes);
}

/** The refusal of a call the journal could not hold as the model wrote it (journalsAsWritten). */
export const NOT_JOURNALED = Object.freeze({ code: 'not_journaled', message: 'the call could not be journaled as the model wrote it' });

/** The refusal of a call to a tool the run did not offer the model (its `tools` option): journaled with its step. */
export function notOffered(name: string): { readonly code: 'unavailable_tool'; readonly message: string } {
  return { code: 'unavailable_tool', message: `tool ${JSON.stringify(name)} was not offered to the model in this run` };
}

/**
 * What the model reads about a journaled call with no attempt in a step a framework's loop journaled: the framework
 * never handed it to its tool (docs/design.md#bridges-resume-from-the-journal). It refused it (a tool not available at
 * that step, arguments it could not read, a response it rejected), or the process stopped first; either way it did
 * not run, and no loop continuing the run makes it.
 */
export const NOT_RUN_BY_FRAMEWORK = Object.freeze({
  code: 'not_run_by_framework',
  message: 'the framework did not run this call (it refused it, or the process stopped before it ran); ask for it again if it is still needed',
});

/** A model step; `framework`: journaled by a bridge for a framework's loop, which may refuse its calls without a word. */
export function modelResponseEvent(turnId: string, runId: string, step: number, response: ChatResponse, available: ReadonlySet<string>, framework = false): EventDraft {
  const toolCalls = response.toolCalls.map((c) => journaledCall(c, available));
  const text = response.text === null || !hasLoneSurrogate(response.text) ? response.text : toWellFormed(response.text);
  return custom(turnId, 'model_response', { runId, step, text, toolCalls, ...(framework ? { loop: 'framework' } : {}) });
}

/** A requested call refused before anything was recorded (a preflight refusal): what the model read. */
export function callRefusedEvent(turnId: string, runId: string, step: number, index: number, code: string, message: string): EventDraft {
  return custom(turnId, 'call_refused', { runId, step, index, code, message: truncateUtf8(toWellFormed(message), LIMITS.maxDiagnosticBytes) });
}

export function runFinishedEvent(turnId: string, runId: string, stopReason: FinishedStopReason, steps: number, text: string | null): EventDraft {
  return custom(turnId, 'run_finished', { runId, stopReason, steps, text });
}

type Obj = { readonly [key: string]: JsonValue };
const isObj = (v: JsonValue | undefined): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function bad(runId: string, seq: number, what: string): never {
  throw new InvalidInputError('runId', `the journal of run ${runId} is not readable at event ${seq}: ${what}`);
}

function toolCallsOf(runId: string, seq: number, value: JsonValue | undefined): ChatToolCall[] {
  if (!Array.isArray(value)) bad(runId, seq, 'toolCalls is not a list');
  return value.map((c) => {
    if (!isObj(c) || typeof c.id !== 'string' || typeof c.name !== 'string' || typeof c.arguments !== 'string') bad(runId, seq, 'a tool call is malformed');
    return { id: c.id, name: c.name, arguments: c.arguments };
  });
}

/** The run's journaled state, or null when the session holds no run with this id. Malformed run events throw. */
export function readRun(history: readonly SessionEvent[], runId: string): JournaledRun | null {
  let started: { taskId: string; input: string } | null = null;
  const responses: ChatResponse[] = [];
  const omitted = new Set<string>();
  const refusals = new Map<string, { code: string; message: string }>();
  const frameworkSteps = new Set<number>();
  let finished: JournaledRun['finished'] = null;
  for (const event of history) {
    const kind = event.kind;
    if (kind.type !== 'custom' || kind.plugin !== RUN_PLUGIN || !isObj(kind.payload) || kind.payload.runId !== runId) continue;
    const p = kind.payload;
    if (kind.kind === 'run_started') {
      if (started !== null) bad(runId, event.seq, 'the run is started twice');
      if (typeof p.taskId !== 'string' || typeof p.input !== 'string') bad(runId, event.seq, 'run_started is malformed');
      started = { taskId: p.taskId, input: p.input };
    } else if (kind.kind === 'model_response') {
      if (started === null) bad(runId, event.seq, 'a model response before the run started');
      if (p.step !== responses.length + 1) bad(runId, event.seq, `step ${String(p.step)} out of order`);
      if (p.text !== null && typeof p.text !== 'string') bad(runId, event.seq, 'text is malformed');
      responses.push({ text: p.text, toolCalls: toolCallsOf(runId, event.seq, p.toolCalls) });
      if (p.loop === 'framework') frameworkSteps.add(responses.length);
      if (Array.isArray(p.toolCalls)) p.toolCalls.forEach((c, i) => { if (isObj(c) && c.omitted === true) omitted.add(`${responses.length}/${i}`); });
    } else if (kind.kind === 'call_refused') {
      if (typeof p.step !== 'number' || typeof p.index !== 'number' || typeof p.code !== 'string' || typeof p.message !== 'string') bad(runId, event.seq, 'call_refused is malformed');
      refusals.set(`${p.step}/${p.index}`, { code: p.code, message: p.message });
    } else if (kind.kind === 'run_finished') {
      const reason = p.stopReason;
      if (reason !== 'completed' && reason !== 'max_steps' && reason !== 'uncertain_outcome') bad(runId, event.seq, 'run_finished is malformed');
      if (typeof p.steps !== 'number' || (p.text !== null && typeof p.text !== 'string')) bad(runId, event.seq, 'run_finished is malformed');
      finished = { stopReason: reason, steps: p.steps, text: p.text };
    }
  }
  return started === null ? null : { runId, ...started, responses, omitted, refusals, frameworkSteps, finished };
}

/**
 * The id of the finished run whose call operation (`taskId`, `key`) is, or null: a key `runId/step/index` of a run
 * started for that task whose `run_finished` is journaled. Such a call's result, a failure in doubt included, was read
 * by the run's model, which then gave its answer: the run is over.
 */
export function finishedRunOf(history: readonly SessionEvent[], taskId: string, key: string): string | null {
  const match = /^([^/]+)\/[1-9][0-9]*\/(?:0|[1-9][0-9]*)$/.exec(key);
  if (match === null) return null;
  const runId = match[1]!;
  let startedForTask = false;
  for (const event of history) {
    const kind = event.kind;
    if (kind.type !== 'custom' || kind.plugin !== RUN_PLUGIN || !isObj(kind.payload) || kind.payload.runId !== runId) continue;
    if (kind.kind === 'run_started') startedForTask = kind.payload.taskId === taskId;
    else if (kind.kind === 'run_finished' && startedForTask) return runId;
  }
  return null;
}

/**
 * How many events of `history` are run `runId`'s: its own events, and the attempts, markers, results and reviews of
 * calls under its keys (`runId/step/index`). What an entry journaled for the run changes it; another run's writes in
 * the same session do not.
 */
export function runFootprint(history: readonly SessionEvent[], runId: string): number {
  const prefix = `${runId}/`;
  const calls = new Set<string>();
  let count = 0;
  for (const { kind } of history) {
    if (kind.type === 'custom') {
      if (kind.plugin === RUN_PLUGIN && isObj(kind.payload) && kind.payload.runId === runId) count += 1;
    } else if (kind.type === 'tool_call') {
      if (kind.call.operation?.key.startsWith(prefix) === true) {
        calls.add(kind.call.id);
        count += 1;
      }
    } else if (kind.type === 'tool_started') {
      if (calls.has(kind.callId)) count += 1;
    } else if (kind.type === 'tool_result') {
      if (calls.has(kind.result.callId)) count += 1;
    } else if (kind.type === 'tool_review') {
      if (calls.has(kind.review.callId)) count += 1;
    }
  }
  return count;
}
