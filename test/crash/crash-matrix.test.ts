/**
 * The cross-process crash matrix (reliability test plan §2, rows C0–C10): a child process runs one scripted call
 * through the canonical runtime against an on-disk store and is killed with SIGKILL at a named point; a fresh child
 * recovers (take over, load, assessSession, prepare with the host's review where the row calls for one, retry,
 * report); the parent then reads the journal, the external ledger and the budget itself and checks the invariants.
 * Then a negative control proves the checker sees a duplicate, and a seeded random-kill soak repeats the invariants
 * after every kill. Prints one summary line. See docs/crash-matrix.md.
 *
 * Environment: JINGWEI_PG_URL adds the PostgreSQL row set. JINGWEI_SOAK_KILLS (default 300) and JINGWEI_SOAK_KILLS_PG
 * (default 100) set the soak's kills on SQLite and on PostgreSQL; JINGWEI_SOAK_SEED replays a soak;
 * JINGWEI_CRASH_PARALLEL (default 3) bounds the cases run at once and JINGWEI_SOAK_WORKERS (default 3) the soak
 * chains per store; JINGWEI_CRASH_VERBOSE=1 adds a diagnostic line with the soak's kills per point.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addCounts, normalizeIds, normalizeTimes, ZERO_COUNTS, type InvariantCounts } from './invariants.js';
import {
  BROKEN_TOOL,
  EFFECTS,
  emptySoakTotals,
  expectationFor,
  MATRIX_POINTS,
  runCase,
  soakWorker,
  type CaseEnv,
  type CaseResult,
  type CaseSpec,
  type SoakTotals,
} from './harness.js';
import { TOOL_POINTS } from './killer.js';
import { enabledStoreKinds, openStore, type StoreKind, type StoreSpec } from './stores.js';
import { tempDir } from '../support/tmp.js';

const KINDS = enabledStoreKinds();
function envCount(name: string, fallback: number): number {
  const value = Number.parseInt(process.env[name] ?? String(fallback), 10);
  assert.ok(Number.isSafeInteger(value) && value >= 0, `${name} must be a non-negative integer`);
  return value;
}
/** Soak kills per store: 300 on SQLite; PostgreSQL, slower per kill, defaults to 100. */
const SOAK_KILLS: Record<StoreKind, number> = {
  sqlite: envCount('JINGWEI_SOAK_KILLS', 300),
  postgres: envCount('JINGWEI_SOAK_KILLS_PG', 100),
};
const SOAK_SEED = process.env.JINGWEI_SOAK_SEED ? Number.parseInt(process.env.JINGWEI_SOAK_SEED, 10) >>> 0 : randomBytes(4).readUInt32LE(0);
const PARALLEL = Math.max(1, envCount('JINGWEI_CRASH_PARALLEL', 3));
const SOAK_WORKERS = Math.max(1, envCount('JINGWEI_SOAK_WORKERS', 3));

const root = tempDir('jingwei-crash-');
const runId = `${process.pid}_${randomBytes(3).toString('hex')}`;
let caseCounter = 0;

/** PostgreSQL: one fresh schema for the whole run, dropped at the end; cases and workers use distinct sessions. */
const pgSchema = `jw_crash_${runId}`;
async function dropPgSchema(): Promise<void> {
  const url = process.env.JINGWEI_PG_URL;
  if (!url || !KINDS.includes('postgres')) return;
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${pgSchema}" CASCADE`);
  } finally {
    await client.end();
  }
}

function caseEnv(kind: StoreKind, label: string): CaseEnv {
  caseCounter += 1;
  const caseId = `${label.replace(/[^A-Za-z0-9_-]+/g, '_')}-${caseCounter}`;
  const dir = join(root, caseId);
  mkdirSync(dir);
  const store: StoreSpec = kind === 'sqlite'
    ? { kind, location: join(dir, 'journal.db') }
    : { kind, location: process.env.JINGWEI_PG_URL!, schema: pgSchema };
  return { dir, store, caseId };
}

const results: CaseResult[] = [];
const matrixCounts: InvariantCounts = { ...ZERO_COUNTS };
const negativeFlagged = new Set<StoreKind>();
const soak: Record<string, SoakTotals> = {};

before(async () => {
  // Create the PostgreSQL schema once, before children race to migrate it.
  if (KINDS.includes('postgres')) await (await openStore({ kind: 'postgres', location: process.env.JINGWEI_PG_URL!, schema: pgSchema })).close();
});
after(dropPgSchema);

function toolCallsOf(r: CaseResult) {
  return r.history.flatMap((e) => (e.kind.type === 'tool_call' ? [e.kind.call] : []));
}

/** Every assertion the row of the test plan makes, on one case. */
function checkCase(r: CaseResult): void {
  const { point, effect } = r.spec;
  const want = expectationFor(point, effect);
  const label = `${r.spec.kind} ${point.id} ${effect}`;
  assert.deepEqual(r.invariants.problems, [], `${label}: invariants`);
  assert.deepEqual(r.after.problems, [], `${label}: recovery consistency`);
  assert.ok(r.integrity.every((x) => x === 'ok'), `${label}: integrity_check ${r.integrity.join(', ')}`);

  const before = r.before;
  const scripted = Object.keys(before.probes);
  assert.equal(before.unknownCall, 'invalid_evidence', `${label}: an unknown call id is refused explicitly`);
  if (want.status === null) {
    assert.equal(scripted.length, 0, `${label}: no call in the journal`);
    assert.deepEqual(before.assessment?.calls ?? [], [], `${label}: nothing to recover`);
    assert.deepEqual(r.after.actions, [], `${label}: no action`);
  } else {
    assert.equal(scripted.length, 1, `${label}: exactly the scripted call`);
    const callId = scripted[0]!;
    const inspection = before.inspections[callId]!;
    assert.ok(!('error' in inspection), `${label}: inspection refused: ${JSON.stringify(inspection)}`);
    assert.equal(inspection.status, want.status, `${label}: inspected status`);
    assert.equal(inspection.startedEvent !== null, point.journaled !== 'call', `${label}: start marker`);
    const listed = before.assessment!.calls.find((c) => c.callId === callId);
    assert.equal(listed?.nextStep ?? null, want.nextStep, `${label}: assessSession next step`);
    if (want.status === 'completed') assert.equal(before.probes[callId], 'completed', `${label}: a completed call is never planned`);
    if (want.nextStep === 'needs_review') assert.equal(before.probes[callId], 'needs_review', `${label}: no plan without a review`);

    const actions = r.after.actions;
    if (want.nextStep === null) assert.deepEqual(actions, [], `${label}: no action`);
    else {
      assert.equal(actions.length, 1, `${label}: one action`);
      const action = actions[0]!;
      assert.equal(action.review, want.review, `${label}: host review`);
      assert.equal(action.prepared, want.retried ? 'plan' : 'completed', `${label}: prepareToolRetry`);
      if (want.retried) {
        assert.equal(action.retry?.outcome, 'succeeded', `${label}: the retry succeeded: ${JSON.stringify(action)}`);
        assert.equal(action.cloneRefused, 'consumed', `${label}: the plan's clone is refused once the plan is used`);
        assert.equal(action.retry!.approvalsAsked, point.approval ? 1 : 0, `${label}: approval asked afresh, never carried over`);
        if (effect === 'idempotent' && point.wrote) {
          assert.equal(action.retry!.output, JSON.stringify({ entry: r.ledger[0]!.id }), `${label}: the retry replays the stored result`);
        }
      }
    }
  }
  assert.equal(r.ledger.length, want.ledger, `${label}: business rows`);
  assert.equal(r.charged[r.taskId]?.toolCalls, want.charged, `${label}: tool calls charged`);
  assert.equal(r.charged[r.taskId]?.reservedOutputBytes, 0, `${label}: no reservation outlives its owner`);
  assert.equal(toolCallsOf(r).length, want.charged, `${label}: attempts journaled`);
  assert.deepEqual(r.after.remaining.filter((c) => c.nextStep === 'retry_allowed'), [], `${label}: nothing retryable left`);

  if (point.recoveryKill) {
    const killed = r.killedRecovery!;
    if (point.row === 'C8') {
      assert.ok(killed.before, `${label}: the killed recovery had inspected the journal`);
      assert.deepEqual(
        normalizeIds(r.before.inspections, { session: r.sessionId, task: r.taskId }),
        normalizeIds(killed.before!.inspections, { session: r.sessionId, task: r.taskId }),
        `${label}: a consumed plan whose retry was never written leaves no trace in the journal`,
      );
      assert.equal(r.before.epoch, killed.epoch! + 1, `${label}: epochs`);
    } else {
      assert.equal(killed.before, undefined, `${label}: killed before the load`);
      assert.equal(r.before.epoch, r.crashEpoch + 2, `${label}: the takeover that died still fenced: epoch n+2`);
    }
  }
}

for (const kind of KINDS) {
  describe(`crash matrix on ${kind}: ${MATRIX_POINTS.length} points × ${EFFECTS.length} effects`, { concurrency: PARALLEL }, () => {
    for (const point of MATRIX_POINTS) {
      for (const effect of EFFECTS) {
        it(`${point.row} ${point.id} (${point.description}) · ${effect}`, async () => {
          const spec: CaseSpec = { kind, point, effect };
          const result = await runCase(spec, caseEnv(kind, `${kind}-${point.id}-${effect}`));
          results.push(result);
          addCounts(matrixCounts, result.invariants);
          checkCase(result);
        });
      }
    }
  });

  describe(`crash matrix on ${kind}: the journal cannot tell the points between marker and result apart`, () => {
    for (const effect of EFFECTS) {
      it(`${effect}: identical inspection and assessment after normalizing ids and recorded times`, () => {
        const group = results.filter((r) => r.spec.kind === kind && r.spec.effect === effect && r.spec.point.betweenMarkerAndResult);
        assert.equal(group.length, MATRIX_POINTS.filter((p) => p.betweenMarkerAndResult).length, 'every point of the group ran');
        const views = group.map((r) => ({
          point: r.spec.point.id,
          view: normalizeTimes(normalizeIds({ inspections: r.before.inspections, assessment: r.before.assessment, probes: r.before.probes }, { session: r.sessionId, task: r.taskId })),
        }));
        for (const v of views.slice(1)) assert.deepEqual(v.view, views[0]!.view, `${v.point} differs from ${views[0]!.point}`);
      });
    }
  });

  describe(`negative control on ${kind}`, () => {
    it('a tool that commits its business row apart from its dedup record is caught duplicating', async () => {
      const point = {
        id: 'split-write', row: 'C3x', description: 'business row committed, dedup record not', approval: false,
        crash: { point: TOOL_POINTS.splitWrite, hit: 1 }, journaled: 'call+started', wrote: true,
      } as const;
      const r = await runCase({ kind, point, effect: 'idempotent', tool: BROKEN_TOOL }, caseEnv(kind, `${kind}-negative-control`));
      assert.equal(r.after.actions[0]?.retry?.outcome, 'succeeded', 'the declared-idempotent retry ran');
      assert.equal(r.ledger.length, 2, 'the broken tool wrote twice');
      assert.equal(r.invariants.duplicates, 1, `the checker flags the duplicate: ${JSON.stringify(r.invariants)}`);
      assert.match(r.invariants.problems.join('\n'), /has 2 business rows/);
      negativeFlagged.add(kind);
    });
  });

  describe(`random-kill soak on ${kind}`, () => {
    it(`${SOAK_KILLS[kind]} SIGKILLs at random points of mixed bursts (seed ${SOAK_SEED}; JINGWEI_SOAK_SEED=${SOAK_SEED} replays)`, async (t) => {
      const totals = emptySoakTotals();
      soak[kind] = totals;
      const budget = { remaining: SOAK_KILLS[kind] };
      await Promise.all(
        Array.from({ length: SOAK_WORKERS }, (_, worker) => {
          const env = caseEnv(kind, `${kind}-soak-${worker}`);
          return soakWorker({ store: env.store, dir: env.dir, sessionPrefix: `soak-${runId}-${worker}`, seed: SOAK_SEED, worker, budget }, totals);
        }),
      );
      if (process.env.JINGWEI_CRASH_VERBOSE) {
        t.diagnostic(`soak on ${kind}: ${totals.kills} kills in ${totals.runs} runs, ${totals.killsInRecovery} inside a recovery; by point ${JSON.stringify(totals.killedAt)}`);
      }
      assert.deepEqual(totals.failures, [], `soak (seed ${SOAK_SEED})`);
      assert.ok(totals.kills >= SOAK_KILLS[kind], `soak reached ${totals.kills} of ${SOAK_KILLS[kind]} kills`);
      assert.deepEqual(totals.counts, { duplicates: 0, unreviewedReexecutions: 0, retriedCompletions: 0, other: 0 });
    });
  });
}

describe('crash matrix summary', () => {
  it('prints one line and holds every count at zero', () => {
    const cases = results.length;
    const soakKills = KINDS.map((kind, i) => `${soak[kind]?.kills ?? 0}${i === 0 ? ' kills' : ''}${KINDS.length > 1 ? ` on ${kind}` : ''}`).join(' + ');
    const soakCounts = Object.values(soak).reduce(
      (acc, t) => ({
        duplicates: acc.duplicates + t.counts.duplicates,
        unreviewedReexecutions: acc.unreviewedReexecutions + t.counts.unreviewedReexecutions,
        retriedCompletions: acc.retriedCompletions + t.counts.retriedCompletions,
        failed: acc.failed + t.failures.length + t.counts.other,
      }),
      { duplicates: 0, unreviewedReexecutions: 0, retriedCompletions: 0, failed: 0 },
    );
    // Uncertain cases: the scripted call's outcome is unknown. A person is asked about those needing a review,
    // unless (with reconcilers) the tool's reconciler gave a definite answer first.
    const uncertain = results.flatMap((r) => (r.before.assessment?.calls ?? []).filter((c) => c.status === 'outcome_unknown').map((c) => ({ r, c })));
    const toPerson = uncertain.filter(({ c }) => c.nextStep === 'needs_review');
    const toPersonReconciled = toPerson.filter(({ r, c }) => ['none', 'unknown', undefined].includes(r.before.reconcilers?.[c.callId]));
    const duplicates = matrixCounts.duplicates + soakCounts.duplicates;
    const unreviewed = matrixCounts.unreviewedReexecutions + soakCounts.unreviewedReexecutions;
    const retried = matrixCounts.retriedCompletions + soakCounts.retriedCompletions;
    const soakOk = soakCounts.failed === 0 && KINDS.every((kind) => (soak[kind]?.kills ?? -1) >= SOAK_KILLS[kind]);
    const stores = KINDS.length === 1 ? '1 store' : `${KINDS.length} stores`;
    console.log(
      `crash matrix: ${MATRIX_POINTS.length} points × ${EFFECTS.length} effects × ${stores} (${KINDS.join(', ')}) = ${cases} cases; ` +
        `duplicates ${duplicates}, unreviewed re-executions ${unreviewed}, retried completions ${retried}; ` +
        `negative control ${negativeFlagged.size === KINDS.length ? 'flagged' : 'NOT flagged'}; ` +
        `uncertain cases ${uncertain.length}, reaching a person ${toPerson.length} without reconcilers and ${toPersonReconciled.length} with; ` +
        `soak ${soakKills} (seed ${SOAK_SEED}) ${soakOk ? 'ok' : 'FAILED'}`,
    );
    assert.equal(cases, MATRIX_POINTS.length * EFFECTS.length * KINDS.length, 'every case ran');
    assert.deepEqual(toPersonReconciled.map(({ r, c }) => r.before.reconcilers?.[c.callId]).filter((a) => a !== 'none'), [], 'a declared reconciler always answered');
    assert.equal(duplicates, 0);
    assert.equal(unreviewed, 0);
    assert.equal(retried, 0);
    assert.equal(negativeFlagged.size, KINDS.length, 'the negative control was flagged on every store');
    assert.ok(soakOk, 'soak');
  });
});
