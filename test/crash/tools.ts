/**
 * The crash matrix's tools and its "external system". The external system is a separate SQLite database (the
 * `orders` table from test/support/orders.ts) whose rows are the ledger of side effects: one row per external
 * write, tagged with the operation key and the call that wrote it. The idempotent tool writes through the
 * idempotency helper (business row and dedup record in one transaction); the non-idempotent and unknown tools
 * always insert; the read-only tool only reads. Every body passes the harness's own kill points around its write.
 */
import Database from 'better-sqlite3';
import { createToolRuntime, RUNTIME_DEFAULTS, ToolBodyError, ToolMetadata } from '../../src/index.js';
import type { ToolEffect } from '../../src/event/types.js';
import type { SqliteIdempotencyStore } from '../../src/store/sqlite/idempotency.js';
import type { SqliteDatabase } from '../../src/sqlite.js';
import type { Tool, ToolApprover, ToolBodyRequest, ToolReconcileAnswer, ToolReconcileRequest, ToolRuntime } from '../../src/tool/types.js';
import { openBusiness } from '../support/orders.js';
import { TOOL_POINTS } from './killer.js';

export const EFFECTS = ['read_only', 'idempotent', 'non_idempotent', 'unknown'] as const satisfies readonly ToolEffect[];
export type Effect = (typeof EFFECTS)[number];

/** What one admission reserves: the runtime's default output limit (no tool here sets a lower ceiling). */
export const RESERVATION: number = RUNTIME_DEFAULTS.maxOutputBytes;

/** The approver key of the `*_approved` tools. */
export const APPROVAL_KEY = 'operator';
/** The caller every gateway binds. */
export const CALLER = 'agent';
/** Negative control: declared idempotent, but commits its business row apart from the dedup record. */
export const BROKEN_TOOL = 'broken_idempotent';

export const toolName = (effect: Effect, approval: boolean): string => (approval ? `${effect}_approved` : effect);

/**
 * Scripted arguments. `fail` makes the first attempt of an operation (no retry audit) throw a ToolBodyError before
 * or after its write; `deny` makes the approver deny the first attempt. Retries always go through.
 */
export interface CrashArgs {
  /** Required by the tools' schema; the soak sometimes leaves it out to journal an invalid_arguments rejection. */
  readonly item?: string;
  readonly fail?: 'before_write' | 'after_write';
  readonly deny?: boolean;
}

/** One ledger row: one external write. */
export interface LedgerRow {
  readonly id: number;
  readonly taskId: string;
  readonly key: string;
  readonly callId: string;
  readonly tool: string;
}

export { openBusiness };

function insertRow(db: SqliteDatabase, request: ToolBodyRequest, tool: string): number {
  const item = JSON.stringify({ callId: request.callId, tool });
  const info = db.prepare('INSERT INTO orders (task_id, key, item) VALUES (?, ?, ?)').run(request.operation.taskId, request.operation.key, item);
  return Number(info.lastInsertRowid);
}

/** One schema object for every tool: Ajv caches a compiled schema by identity, so a child compiles it once. */
const ARGS_SCHEMA = { type: 'object', required: ['item'] };

/**
 * The reconcilers the crash tools declare: the idempotent tool asks its idempotency helper (the dedup record), the
 * non-idempotent tool looks its operation up in the external ledger by key (as an API with idempotency-key lookups
 * answers); the unknown-effect and read-only tools declare none, so their uncertain calls always reach a person.
 */
function reconcilerFor(business: SqliteIdempotencyStore, effect: Effect): ((request: ToolReconcileRequest) => ToolReconcileAnswer) | null {
  if (effect === 'idempotent') return (request) => business.reconcile(request);
  if (effect !== 'non_idempotent') return null;
  return (request) => {
    const { taskId, key } = request.operation;
    const rows = (business.db.prepare('SELECT count(*) AS n FROM orders WHERE task_id = ? AND key = ?').get(taskId, key) as { n: number }).n;
    return rows > 0
      ? { outcome: 'completed', evidence: `the ledger holds ${rows} row(s) for key ${key}` }
      : { outcome: 'not_executed', evidence: `the ledger holds no row for key ${key}` };
  };
}

function effectTool(business: SqliteIdempotencyStore, at: (point: string) => void, effect: Effect, approval: boolean): Tool {
  const name = toolName(effect, approval);
  let metadata = new ToolMetadata(`${effect} crash-matrix tool`, ARGS_SCHEMA).withEffect(effect, 'crash-v1');
  if (approval) metadata = metadata.withApproval(APPROVAL_KEY);
  const reconcile = reconcilerFor(business, effect);
  return {
    name,
    metadata,
    ...(reconcile === null ? {} : { reconcile }),
    async execute(request) {
      const args = request.arguments as unknown as CrashArgs;
      const first = request.operation.retry === null;
      at(TOOL_POINTS.beforeWrite);
      if (first && args.fail === 'before_write') throw new ToolBodyError('flaky_before_write', 'failed before writing', { retryable: true });
      let output: { entry: number } | { rows: number };
      if (effect === 'read_only') {
        output = { rows: (business.db.prepare('SELECT count(*) AS n FROM orders').get() as { n: number }).n };
      } else if (effect === 'idempotent') {
        output = business.run(request, (db) => ({ entry: insertRow(db, request, name) })).result;
      } else {
        output = { entry: insertRow(business.db, request, name) };
      }
      at(TOOL_POINTS.afterWrite);
      if (first && args.fail === 'after_write') throw new ToolBodyError('flaky_after_write', 'wrote, then lost the receipt', { retryable: true });
      return output;
    },
  };
}

/**
 * The negative control's tool: it claims to be idempotent but commits the business row in its own transaction and
 * the dedup record in a second one. A crash between the two leaves a row the dedup table does not know, so an
 * honest retry writes a second row. The checker must flag it.
 */
function brokenTool(business: SqliteIdempotencyStore, at: (point: string) => void): Tool {
  return {
    name: BROKEN_TOOL,
    metadata: new ToolMetadata('idempotent in name only', ARGS_SCHEMA).withEffect('idempotent', 'crash-v1'),
    async execute(request) {
      at(TOOL_POINTS.beforeWrite);
      const entry = insertRow(business.db, request, BROKEN_TOOL);
      at(TOOL_POINTS.splitWrite);
      const { result } = business.run(request, () => ({ entry }));
      at(TOOL_POINTS.afterWrite);
      return result;
    },
  };
}

export function crashTools(business: SqliteIdempotencyStore, at: (point: string) => void): Tool[] {
  const tools: Tool[] = [];
  for (const effect of EFFECTS) for (const approval of [false, true]) tools.push(effectTool(business, at, effect, approval));
  tools.push(brokenTool(business, at));
  return tools;
}

/** Approves every attempt, except the first attempt of a call whose arguments say `deny`. Counts what it is asked. */
export function crashApprover(counter: { count: number }): ToolApprover {
  return async ({ call }) => {
    counter.count += 1;
    const args = call.arguments as unknown as CrashArgs;
    if (args.deny === true && call.operation?.retry === null) {
      return { decision: 'denied', code: 'operator_denied', message: 'not this time', retryable: true };
    }
    return { decision: 'approved' };
  };
}

/** The canonical runtime over the crash tools, one approver, every tool granted to CALLER. */
export function crashRuntime(business: SqliteIdempotencyStore, at: (point: string) => void, approvals: { count: number }): ToolRuntime {
  return createToolRuntime({
    tools: crashTools(business, at),
    grants: { [CALLER]: '*' },
    approvers: { [APPROVAL_KEY]: crashApprover(approvals) },
  });
}

/** The whole ledger, in insertion order. Opens its own read-only connection. */
export function readLedger(path: string): LedgerRow[] {
  const db = new Database(path, { readonly: true, timeout: 5000 });
  try {
    return ledgerRows(db);
  } finally {
    db.close();
  }
}

export function ledgerRows(db: SqliteDatabase): LedgerRow[] {
  const rows = db.prepare('SELECT id, task_id, key, item FROM orders ORDER BY id').all() as Array<{ id: number; task_id: string; key: string; item: string }>;
  return rows.map((r) => {
    const item = JSON.parse(r.item) as { callId: string; tool: string };
    return { id: r.id, taskId: r.task_id, key: r.key, callId: item.callId, tool: item.tool };
  });
}
