/**
 * Helpers for the CLI tests: run the compiled program as a child process, and build real SQLite stores for it.
 * Importing this file does nothing by itself (node --test may run it as a file of no tests).
 */
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import type { SessionEvent } from '../../src/event/types.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { exportJournal } from '../../src/store/jsonl.js';
import type { SessionId } from '../../src/ids.js';
import { ToolEffect } from '../../src/event/types.js';
import { HistoryBuilder, failed, succeeded } from '../support/history.js';
import { commitAs } from '../../src/store/owner-commit.js';
import { ToolBodyError } from '../../src/errors.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { ToolGateway } from '../../src/tool/types.js';
import type { SessionOwner } from '../../src/store/types.js';

/** The compiled program, built from src/cli/main.ts by the same tsc run as these tests. */
export const MAIN = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

export interface Run {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The environment of a run: no colour-forcing leftovers from the test runner's own environment. */
function cleanEnv(extra: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.NO_COLOR;
  delete env.FORCE_COLOR;
  delete env.JINGWEI_DEBUG;
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

/** Runs `node <MAIN> ...args` to completion (stdin from `input`, if given). */
export function cli(args: readonly string[], options: { input?: string; env?: Record<string, string | undefined>; cwd?: string } = {}): Run {
  const result = spawnSync(process.execPath, [MAIN, ...args], {
    encoding: 'utf8',
    input: options.input ?? '',
    env: cleanEnv(options.env ?? {}),
    cwd: options.cwd,
    maxBuffer: 256 * 1024 * 1024,
    timeout: 120_000,
  });
  if (result.error) throw result.error;
  return { code: result.status, signal: result.signal, stdout: result.stdout, stderr: result.stderr };
}

/** Same, without blocking the test process (for long runs). */
export function cliAsync(args: readonly string[], options: { env?: Record<string, string | undefined> } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], { env: cleanEnv(options.env ?? {}), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** Can `script` (util-linux) run a command on a pseudo-terminal here? */
export function haveScript(): boolean {
  const probe = spawnSync('script', ['-qec', 'test -t 1 && test -t 2', '/dev/null'], { encoding: 'utf8', timeout: 10_000 });
  return probe.error === undefined && probe.status === 0;
}

/** Runs the program on a pseudo-terminal (stdout and stderr both the terminal), `columns` wide. */
export function cliOnTty(args: readonly string[], options: { env?: Record<string, string | undefined>; columns?: number } = {}): Run {
  const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const command = `stty cols ${options.columns ?? 100}; ${[process.execPath, MAIN, ...args].map(quote).join(' ')}`;
  const result = spawnSync('script', ['-qec', command, '/dev/null'], {
    encoding: 'utf8',
    env: cleanEnv({ TERM: 'xterm-256color', ...(options.env ?? {}) }),
    maxBuffer: 64 * 1024 * 1024,
    timeout: 120_000,
  });
  if (result.error) throw result.error;
  return { code: result.status, signal: result.signal, stdout: result.stdout, stderr: result.stderr };
}

/** SGR colour sequences (ESC [ ... m). */
export const COLOUR = /\u001b\[[0-9;]*m/;

/**
 * Writes sessions (id → events, kinds and ids kept; seq and session renumbered) to a SQLite file through the
 * verified import, the one public way tool evidence enters a store from outside the runtime. An empty session is
 * acquired (and released unless `release: false`); with `release: false` an imported session is acquired again
 * after the import (epoch 2) and left held.
 */
export async function writeStore(path: string, sessions: Record<string, readonly SessionEvent[]>, options: { release?: boolean } = {}): Promise<void> {
  const store = openSqliteStore(path);
  try {
    for (const [id, events] of Object.entries(sessions)) {
      if (events.length > 0) {
        const renumbered = events.map((e, seq) => ({ ...e, sessionId: id as SessionId, seq }));
        await store.importJsonl(exportJournal(renumbered), { owner: 'test-host' });
        if (options.release === false) await store.acquire(id, { owner: 'test-host' });
        continue;
      }
      const owner = await store.acquire(id, { owner: 'test-host' });
      if (options.release !== false) await owner.release();
    }
  } finally {
    await store.close();
  }
}

/**
 * Writes sessions whose tool evidence the verified import refuses (an orphan result, a forged marker), for the
 * views that must report such a journal: through `commit`, the runtime's own write primitive, standing in for a
 * writer with access to the database. Left released.
 */
export async function forgeStore(path: string, sessions: Record<string, readonly SessionEvent[]>): Promise<void> {
  const store = openSqliteStore(path);
  try {
    for (const [id, events] of Object.entries(sessions)) {
      const owner = await store.acquire(id, { owner: 'test-host' });
      await commitAs(owner, { events: events.map((e) => ({ eventId: e.eventId, turnId: e.turnId, kind: e.kind })) });
      await owner.release();
    }
  } finally {
    await store.close();
  }
}

/**
 * `alpha`: a message, then one call of each kind of outcome: a success (c-ok), an idempotent body failure
 * (c-idem, retry_allowed), a non_idempotent call whose body started with no result (c-pay, needs_review), and a
 * flagged non_idempotent call with no start marker (c-ship, not_executed, retry_allowed).
 */
export function alphaHistory(): SessionEvent[] {
  const h = new HistoryBuilder('alpha', 'turn-a');
  h.message('Place the order');
  h.call({ id: 'c-ok', name: 'check_stock', key: 'k-ok', effect: ToolEffect.ReadOnly, startMarker: true, arguments: { sku: 'x' } });
  h.started('c-ok');
  h.result('c-ok', succeeded('{"on_hand":3}'));
  h.call({ id: 'c-idem', name: 'create_order', key: 'k-idem', effect: ToolEffect.Idempotent, startMarker: true });
  h.started('c-idem');
  h.result('c-idem', failed('body_failure', true));
  h.call({ id: 'c-pay', name: 'charge_card', key: 'k-pay', effect: ToolEffect.NonIdempotent, startMarker: true });
  h.started('c-pay');
  h.call({ id: 'c-ship', name: 'ship_order', key: 'k-ship', effect: ToolEffect.NonIdempotent, startMarker: true });
  return h.build();
}

/** `quiet`: a message and one successful call. */
export function quietHistory(): SessionEvent[] {
  const h = new HistoryBuilder('quiet', 'turn-q');
  h.message('hello');
  h.call({ id: 'q-1', name: 'check_stock', key: 'k-q', effect: ToolEffect.ReadOnly, startMarker: true });
  h.started('q-1');
  h.result('q-1', succeeded());
  return h.build();
}

/** Tampers through a separate raw connection, after the store is closed (as test/store/sqlite-corruption.test.ts does). */
export function tamper(path: string, sql: string): void {
  const raw = new Database(path);
  try {
    raw.exec(sql);
  } finally {
    raw.close();
  }
}

/**
 * A session of exactly `count` small events in one verified import (one transaction): a tool call every 100 events, each
 * started, nine in ten with a result. Short ids keep the journal far under the 16 MiB limit.
 */
export async function writeBigSession(path: string, sessionId: string, count: number): Promise<{ calls: number; open: number }> {
  const list: SessionEvent[] = [];
  let calls = 0;
  let open = 0;
  const turnId = 't' as SessionEvent['turnId'];
  const push = (kind: SessionEvent['kind']) =>
    list.push({ eventId: `e${list.length}` as SessionEvent['eventId'], sessionId: sessionId as SessionId, turnId, seq: list.length, kind });
  while (list.length < count) {
    if (list.length % 100 === 0 && list.length + 3 <= count) {
      const id = `c${calls}`;
      push({
        type: 'tool_call',
        call: {
          id: id as never,
          name: 'probe',
          arguments: {},
          operation: { taskId: 'big-task' as never, key: `k${calls}` as never, contract: { effect: 'idempotent', revision: 'v1' }, retry: null, startMarker: true },
        },
      });
      push({ type: 'tool_started', callId: id as never });
      if (calls % 10 === 0) open += 1;
      else push({ type: 'tool_result', result: { callId: id as never, outcome: { status: 'succeeded', output: 'ok' } } });
      calls += 1;
    } else push({ type: 'user_message', text: 'x' });
  }
  const store = openSqliteStore(path);
  try {
    await store.importJsonl(exportJournal(list), { owner: 'builder' });
  } finally {
    await store.close();
  }
  return { calls, open };
}

/** The CLI's PostgreSQL target for `schema` on the server at `url` (its own ?schema= parameter). */
export function withSchema(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set('schema', schema);
  return u.toString();
}

/**
 * A fresh schema on the server at `url` holding session alpha (alphaHistory), imported through the CLI from a
 * SQLite export written under `dir`. Returns the CLI target, the SQLite original and the import's run.
 */
export async function alphaOnPostgres(url: string, schema: string, dir: string): Promise<{ target: string; source: string; imported: Run }> {
  const target = withSchema(url, schema);
  const source = join(dir, `source-${schema}.db`);
  await writeStore(source, { alpha: alphaHistory() });
  const file = join(dir, `alpha-${schema}.jsonl`);
  writeFileSync(file, cli(['export', source, 'alpha']).stdout);
  return { target, source, imported: await cliAsync(['import', target, file]) };
}

/** A gateway on `owner` for task `taskId` whose non-idempotent `pay` needs approval, and whose approver always answers pending. */
export function pendingPayGateway(owner: SessionOwner, taskId: string): ToolGateway {
  return createToolRuntime({
    tools: [{ name: 'pay', metadata: new ToolMetadata('pay', { type: 'object' }).withEffect('non_idempotent', 'v1').withApproval('ops'), execute: async () => 'paid' }],
    grants: { agent: '*' },
    approvers: { ops: async () => ({ decision: 'pending' as const }) },
  }).bind({ owner, taskId, caller: 'agent' });
}

/**
 * A journal at `path` whose session `s-1` asked for `pay` once per entry of `calls` (task `t`), each left pending by
 * its approver; the host released the session. Returns the approval requests' ids, in order.
 */
export async function pendingPayments(path: string, calls: readonly { readonly to: string }[], where: { readonly sessionId: string; readonly taskId: string } = { sessionId: 's-1', taskId: 't' }): Promise<string[]> {
  const store = openSqliteStore(path);
  try {
    const owner = await store.acquire(where.sessionId, { owner: 'host' });
    await owner.startTask(where.taskId);
    const gateway = pendingPayGateway(owner, where.taskId);
    const ids: string[] = [];
    for (const args of calls) ids.push((await gateway.call('pay', args)).result.approval!.requestId);
    await owner.release();
    return ids;
  } finally {
    await store.close();
  }
}

/**
 * Through `owner`, which holds its session, task `task-1` started and a call of a non-idempotent tool whose body failed
 * in a way that leaves its outcome unknown. Returns the call's id.
 */
export async function uncertainMailCall(owner: SessionOwner): Promise<string> {
  await owner.startTask('task-1');
  const mail = {
    name: 'send_mail',
    metadata: new ToolMetadata('sends a mail', { type: 'object' }).withEffect('non_idempotent', 'mail-v1'),
    execute: async () => { throw new ToolBodyError('connection_reset', 'the provider hung up'); },
  };
  const gateway = createToolRuntime({ tools: [mail], grants: { agent: '*' } }).bind({ owner, taskId: 'task-1', caller: 'agent' });
  return (await gateway.call('send_mail', { to: 'a@example.com' })).call.id;
}

/** uncertainMailCall's call in session `sessionId` of the journal at `path`, the session then released. */
export async function uncertainCall(path: string, sessionId: string): Promise<string> {
  const store = openSqliteStore(path);
  const owner = await store.acquire(sessionId, { owner: 'host-a' });
  const id = await uncertainMailCall(owner);
  await owner.release();
  await store.close();
  return id;
}
