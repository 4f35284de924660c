/**
 * Model-based test: random command sequences run against the memory store (the model) and a durable store (the
 * system under test); every observable result (values, or the error code) must be identical. Event and call ids
 * are fixed by each command, so even the hashes and exported JSONL are compared byte for byte.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { EventDraft } from '../../src/event/types.js';
import type { CallId, EventId, OperationKey, TaskId, TurnId } from '../../src/ids.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { createMemoryStore } from '../../src/store/memory.js';
import type { SessionOwner, SessionStore } from '../../src/store/types.js';
import { describePostgres, freshSchema, openPostgresStore } from '../support/postgres.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { commitAs } from '../../src/store/owner-commit.js';

interface Side {
  readonly store: SessionStore;
  readonly owners: Map<string, SessionOwner>;
  /** Calls admitted and not settled yet, per task. */
  readonly open: Map<string, CallId[]>;
}
interface Pair {
  readonly model: Side;
  readonly real: Side;
  ids: number;
}

const SESSIONS = ['s-1', 's-2'];
const HOSTS = ['host-a', 'host-b'];
const TASKS = ['t-1', 't-2'];
const turn = 'turn-1' as TurnId;

/** What a call observably did: its value, or the code of the error it failed with. */
async function outcome<T>(fn: () => Promise<T>): Promise<{ ok: T } | { error: string }> {
  try {
    return { ok: await fn() };
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (typeof code !== 'string') throw error;
    return { error: code };
  }
}

/** Runs `step` on both sides with the same ids and asserts the outcomes are equal. */
async function both<T>(pair: Pair, what: string, step: (side: Side, id: (prefix: string) => string) => Promise<T>): Promise<void> {
  const start = pair.ids;
  let used = 0;
  const ids = () => {
    let n = start;
    return (prefix: string) => {
      used = Math.max(used, ++n - start);
      return `${prefix}-${n}`;
    };
  };
  const expected = await outcome(() => step(pair.model, ids()));
  const actual = await outcome(() => step(pair.real, ids()));
  pair.ids = start + used;
  assert.deepEqual(actual, expected, `${what}: the durable store differs from the model`);
}

const ownerKey = (host: string, session: string) => `${host}\u0000${session}`;
function owner(side: Side, host: string, session: string): SessionOwner {
  const o = side.owners.get(ownerKey(host, session));
  if (!o) throw Object.assign(new Error('no owner yet'), { code: 'test_no_owner' });
  return o;
}

type Cmd = fc.AsyncCommand<object, Pair>;
const cmd = (label: string, run: (pair: Pair) => Promise<void>): Cmd => ({
  check: () => true,
  run: (_model, pair) => run(pair),
  toString: () => label,
});

const host = fc.constantFrom(...HOSTS);
const session = fc.constantFrom(...SESSIONS);
const task = fc.constantFrom(...TASKS);

const acquire = fc.tuple(host, session, fc.boolean()).map(([h, s, takeover]) => cmd(`acquire(${h}, ${s}, ${takeover})`, (pair) =>
    both(pair, 'acquire', async (side) => {
      const o = await side.store.acquire(s, { owner: h, takeover });
      side.owners.set(ownerKey(h, s), o);
      return { epoch: o.epoch, sessionId: o.sessionId, owner: o.owner };
    })));

const commands = [
  acquire,
  acquire, // twice as likely as the others: most commands need an owner
  fc.tuple(host, session, fc.array(fc.string({ maxLength: 12 }), { minLength: 1, maxLength: 3 })).map(([h, s, texts]) =>
    cmd(`append(${h}, ${s}, ${JSON.stringify(texts)})`, (pair) =>
      both(pair, 'append', (side, id) => owner(side, h, s).append(texts.map((text): EventDraft => ({
        eventId: id('ev') as EventId, turnId: turn, kind: { type: 'user_message', text },
      })))))),
  fc.tuple(host, session, task, fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 200 })).map(([h, s, t, calls, bytes]) =>
    cmd(`startTask(${h}, ${s}, ${t}, ${calls}, ${bytes})`, (pair) =>
      both(pair, 'startTask', (side) => owner(side, h, s).startTask(t, { limits: { toolCalls: calls, toolOutputBytes: bytes } })))),
  fc.tuple(host, session, task).map(([h, s, t]) => cmd(`stopTask(${h}, ${s}, ${t})`, (pair) =>
    both(pair, 'stopTask', (side) => owner(side, h, s).stopTask(t, 'operator')))),
  fc.tuple(host, session, task).map(([h, s, t]) => cmd(`completeTask(${h}, ${s}, ${t})`, (pair) =>
    both(pair, 'completeTask', (side) => owner(side, h, s).completeTask(t)))),
  fc.tuple(host, session, task).map(([h, s, t]) => cmd(`task(${h}, ${s}, ${t})`, (pair) =>
    both(pair, 'task', (side) => owner(side, h, s).task(t)))),
  fc.tuple(host, session, task, fc.integer({ min: 1, max: 120 })).map(([h, s, t, max]) => cmd(`admit(${h}, ${s}, ${t}, ${max})`, (pair) =>
    both(pair, 'commit(admit)', async (side, id) => {
      const callId = id('call') as CallId;
      const receipt = await commitAs(owner(side, h, s), {
        events: [{
          eventId: id('ev') as EventId, turnId: turn,
          kind: { type: 'tool_call', call: { id: callId, name: 'probe', arguments: {}, operation: {
            taskId: t as TaskId, key: id('key') as OperationKey, contract: { effect: 'idempotent', revision: 'v1' }, retry: null,
          } } },
        }],
        budget: { taskId: t as TaskId, admit: { maxOutputBytes: max } },
      });
      side.open.set(t, [...(side.open.get(t) ?? []), callId]);
      return receipt;
    }))),
  fc.tuple(host, session, task, fc.boolean(), fc.integer({ min: 0, max: 60 })).map(([h, s, t, start, charge]) =>
    cmd(`settle(${h}, ${s}, ${t}, started=${start}, ${charge})`, (pair) =>
      both(pair, 'commit(settle)', async (side, id) => {
        const callId = side.open.get(t)?.[0] ?? ('call-none' as CallId);
        const o = owner(side, h, s);
        if (start) await commitAs(o, { events: [{ eventId: id('ev') as EventId, turnId: turn, kind: { type: 'tool_started', callId } }], budget: { taskId: t as TaskId } });
        const receipt = await commitAs(o, {
          events: [{ eventId: id('ev') as EventId, turnId: turn, kind: { type: 'tool_result', result: { callId, outcome: { status: 'succeeded', output: 'ok' } } } }],
          budget: { taskId: t as TaskId, settle: { chargeOutputBytes: charge } },
        });
        side.open.set(t, (side.open.get(t) ?? []).slice(1));
        return receipt;
      }))),
  fc.tuple(host, session).map(([h, s]) => cmd(`release(${h}, ${s})`, (pair) =>
    both(pair, 'release', (side) => owner(side, h, s).release()))),
  fc.tuple(fc.option(session, { nil: undefined }), fc.integer({ min: 1, max: 3 })).map(([s, limit]) => cmd(`attention(${s}, ${limit})`, (pair) =>
    both(pair, 'attention', async (side) => {
      const pages = [];
      let cursor: string | null = null;
      do {
        const page = await side.store.attention({ ...(s ? { sessionId: s } : {}), status: ['no_result', 'outcome_unknown', 'not_executed', 'completed', 'resolved'], limit, cursor });
        pages.push(page.items);
        cursor = page.next;
      } while (cursor !== null);
      return pages;
    }))),
  session.map((s) => cmd(`loadHistory(${s})`, (pair) => both(pair, 'loadHistory', (side) => side.store.loadHistory(s)))),
  fc.constant(cmd('listSessions', (pair) =>
    both(pair, 'listSessions', async (side) => (await side.store.listSessions())
      .sort((a, b) => (a.sessionId < b.sessionId ? -1 : 1))
      // Two stores read their own clocks: compare whether a lease is recorded, not its instant.
      .map((s) => ({ ...s, leaseExpiresAt: s.leaseExpiresAt === null ? null : 'recorded' }))))),
  session.map((s) => cmd(`export+import(${s})`, (pair) =>
    both(pair, 'exportJsonl/importJsonl', async (side, id) => {
      const jsonl = await side.store.exportJsonl(s);
      const report = await side.store.importJsonl(jsonl, { owner: 'importer', sessionId: id(`${s}-copy`) });
      return { jsonl, report, copy: await side.store.loadHistory(report.sessionId) };
    }))),
];

/** The same clock on both sides, going back now and then: recorded times must still never decrease. */
function steppingClock(): () => number {
  const steps = [0, 7, 3, 3, 12, 1, 40];
  let i = 0;
  return () => 1_764_547_200_000 + steps[i++ % steps.length]! + 100 * Math.floor(i / steps.length);
}

function modelRun(open: (clock: () => number) => Promise<SessionStore>, numRuns: number) {
  return fc.assert(
    fc.asyncProperty(fc.commands(commands, { maxCommands: 25 }), async (cmds) => {
      const pair: Pair = {
        model: { store: createMemoryStore({ clock: steppingClock() }), owners: new Map(), open: new Map() },
        real: { store: await open(steppingClock()), owners: new Map(), open: new Map() },
        ids: 0,
      };
      try {
        await fc.asyncModelRun(() => ({ model: {}, real: pair }), cmds);
      } finally {
        await pair.model.store.close();
        await pair.real.store.close();
      }
    }),
    { numRuns },
  );
}

describe('model-based: SQLite against the memory model', () => {
  const dir = tempDir();
  it('every command sequence observes the same results', async () => {
    await modelRun(async (clock) => openSqliteStore(tempDbPath(dir), { clock }), 60);
  });
});

describePostgres('model-based: PostgreSQL against the memory model', (url) => {
  it('every command sequence observes the same results', async () => {
    await modelRun(async (clock) => openPostgresStore(url, { schema: freshSchema(), clock }), 25);
  });
});
