/**
 * The run-level crash matrix's agent: a scripted model that places an order (`place_order`, with an operator's
 * approval) and then sends its confirmation (`send_email`), and the two tools, both declared with the case's
 * effect. The outside system is the crash matrix's business database (the `orders` table: one row per external
 * write, tagged with its tool and writing call). Two more tables there are the harness's own instruments, not side
 * effects: `bodies` (one row per body execution, so a completed call run again shows) and `model_asks` (one row
 * per model request, with the epoch of the process that asked).
 */
import Database from 'better-sqlite3';
import { scriptedModel, type ChatRequest, type ChatResponse, type ScriptedModel } from '../../src/agent.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { SqliteIdempotencyStore } from '../../src/store/sqlite/idempotency.js';
import type { Tool, ToolBodyRequest, ToolReconcileAnswer, ToolReconcileRequest, ToolRuntime } from '../../src/tool/types.js';
import { TOOL_POINTS } from './killer.js';
import { APPROVAL_KEY, CALLER, crashApprover, ledgerRows, openBusiness, type Effect, type LedgerRow } from './tools.js';

export const ORDER_TOOL = 'place_order';
export const EMAIL_TOOL = 'send_email';
/** The user's message of every run. */
export const RUN_INPUT = 'Buy one tea and confirm it by e-mail.';
export const FINAL_TEXT = 'Ordered and confirmed.';
/** Model steps of a finished run: the order, the e-mail, the final answer. */
export const RUN_STEPS = 3;
/** Each step's call runs in the phase named here (the harness's kill points are `<phase>/<point>`). */
export const CALL_PHASE: Readonly<Record<number, string>> = { 1: 'order', 2: 'email' };

const ARGS_SCHEMA = { type: 'object', required: ['item'] };

const STEP_ANSWERS: Readonly<Record<number, ChatResponse>> = {
  1: { text: 'Placing the order.', toolCalls: [{ id: 'call-order', name: ORDER_TOOL, arguments: '{"item":"one tea"}' }] },
  2: { text: null, toolCalls: [{ id: 'call-email', name: EMAIL_TOOL, arguments: '{"item":"confirmation of one tea"}' }] },
  3: { text: FINAL_TEXT, toolCalls: [] },
};

/** The step a request is for: one more than the assistant messages the model has already written. */
export function stepOf(request: ChatRequest): number {
  return request.messages.filter((m) => m.role === 'assistant').length + 1;
}

/** The business database with the harness's two instrument tables. */
export function openRunBusiness(path: string): SqliteIdempotencyStore {
  const business = openBusiness(path);
  business.db.exec(`
    CREATE TABLE IF NOT EXISTS bodies (id INTEGER PRIMARY KEY, tool TEXT NOT NULL, key TEXT NOT NULL, call_id TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS model_asks (id INTEGER PRIMARY KEY, step INTEGER NOT NULL, epoch INTEGER NOT NULL, turn TEXT NOT NULL);
  `);
  return business;
}

/**
 * The scripted model (from jingwei/agent): each answer is chosen by the step the request is for, so a resumed run
 * (which rebuilds the conversation from the journal) gets the same answers. `onAsk` runs first (the child moves
 * its kill phase there); every request is logged with the asking process's epoch.
 */
export function shopModel(business: SqliteIdempotencyStore, asker: { epoch: number; turnId: string }, onAsk: (step: number) => void = () => {}): ScriptedModel {
  const log = business.db.prepare('INSERT INTO model_asks (step, epoch, turn) VALUES (?, ?, ?)');
  const answer = (request: ChatRequest): ChatResponse => {
    const step = stepOf(request);
    log.run(step, asker.epoch, asker.turnId);
    onAsk(step);
    const reply = STEP_ANSWERS[step];
    if (reply === undefined) throw new Error(`the shop model has no answer for step ${step}`);
    return reply;
  };
  return scriptedModel(Array.from({ length: RUN_STEPS }, () => answer));
}

function insertRow(db: SqliteIdempotencyStore['db'], request: ToolBodyRequest, tool: string): number {
  const item = JSON.stringify({ callId: request.callId, tool });
  return Number(db.prepare('INSERT INTO orders (task_id, key, item) VALUES (?, ?, ?)').run(request.operation.taskId, request.operation.key, item).lastInsertRowid);
}

/**
 * The reconcilers: the idempotent tools ask their idempotency helper; the non-idempotent ones look their key up
 * in the outside system (as an API with idempotency-key lookups answers); read-only and unknown-effect tools
 * declare none (a read is retried; an unknown effect reaches a person).
 */
function reconcilerFor(business: SqliteIdempotencyStore, effect: Effect, tool: string): ((request: ToolReconcileRequest) => ToolReconcileAnswer) | null {
  if (effect === 'idempotent') return (request) => business.reconcile(request);
  if (effect !== 'non_idempotent') return null;
  return (request) => {
    const { taskId, key } = request.operation;
    const rows = (business.db.prepare("SELECT count(*) AS n FROM orders WHERE task_id = ? AND key = ? AND json_extract(item, '$.tool') = ?").get(taskId, key, tool) as { n: number }).n;
    return rows > 0
      ? { outcome: 'completed', evidence: `${tool}: the outside system holds ${rows} record(s) for key ${key}` }
      : { outcome: 'not_executed', evidence: `${tool}: the outside system holds no record for key ${key}` };
  };
}

function runTool(business: SqliteIdempotencyStore, at: (point: string) => void, effect: Effect, name: string, approval: boolean): Tool {
  let metadata = new ToolMetadata(`${name} (${effect})`, ARGS_SCHEMA).withEffect(effect, 'run-v1');
  if (approval) metadata = metadata.withApproval(APPROVAL_KEY);
  const reconcile = reconcilerFor(business, effect, name);
  const logBody = business.db.prepare('INSERT INTO bodies (tool, key, call_id) VALUES (?, ?, ?)');
  return {
    name,
    metadata,
    ...(reconcile === null ? {} : { reconcile }),
    async execute(request) {
      logBody.run(name, request.operation.key, request.callId);
      at(TOOL_POINTS.beforeWrite);
      let output: { entry: number } | { rows: number };
      if (effect === 'read_only') {
        output = { rows: (business.db.prepare('SELECT count(*) AS n FROM orders').get() as { n: number }).n };
      } else if (effect === 'idempotent') {
        output = business.run(request, (db) => ({ entry: insertRow(db, request, name) })).result;
      } else {
        output = { entry: insertRow(business.db, request, name) };
      }
      at(TOOL_POINTS.afterWrite);
      return output;
    },
  };
}

/** The run's two tools with the case's effect: the order needs an operator's approval, the e-mail does not. */
export function runTools(business: SqliteIdempotencyStore, at: (point: string) => void, effect: Effect): Tool[] {
  return [runTool(business, at, effect, ORDER_TOOL, true), runTool(business, at, effect, EMAIL_TOOL, false)];
}

/** The canonical runtime over the run's tools; the approver approves every attempt and counts them. */
export function runRuntime(tools: Tool[], approvals: { count: number }): ToolRuntime {
  return createToolRuntime({ tools, grants: { [CALLER]: '*' }, approvers: { [APPROVAL_KEY]: crashApprover(approvals) } });
}

export interface BodyRow {
  readonly id: number;
  readonly tool: string;
  readonly key: string;
  readonly callId: string;
}

/** What the outside system and the instruments hold, read through a connection of its own. */
export interface RunWorld {
  readonly ledger: LedgerRow[];
  readonly bodies: BodyRow[];
  readonly asks: Array<{ readonly step: number; readonly epoch: number; readonly turn: string }>;
}

export function readRunWorld(path: string): RunWorld {
  const db = new Database(path, { readonly: true, timeout: 5000 });
  try {
    const bodies = (db.prepare('SELECT id, tool, key, call_id FROM bodies ORDER BY id').all() as Array<{ id: number; tool: string; key: string; call_id: string }>)
      .map((r) => ({ id: r.id, tool: r.tool, key: r.key, callId: r.call_id }));
    const asks = db.prepare('SELECT step, epoch, turn FROM model_asks ORDER BY id').all() as RunWorld['asks'];
    return { ledger: ledgerRows(db), bodies, asks };
  } finally {
    db.close();
  }
}
