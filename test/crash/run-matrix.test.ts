/**
 * The run-level crash matrix (docs/crash-matrix.md#the-run-level-matrix): an agent run (runAgent with a run id, the
 * scripted model from jingwei/agent, a durable store) places an order and then sends its confirmation e-mail, and
 * is killed with SIGKILL at every named point of both calls and at the model steps around them, once per effect of
 * the two tools. Each time a fresh process does what a host does at startup (recoverAbandoned once the crashed
 * owner's lease ran out, then runAgent with the same run id and policy retry_safe; reconcilers answer from the
 * outside system; where none can, the operator reviews through the decision inbox and the run is resumed again).
 * Then the parent checks the outside system and the journal, and runs the agent again with the same run id: it
 * must run nothing. Prints one summary line.
 *
 * Environment: JINGWEI_PG_URL adds PostgreSQL (one schema per case, on the same cluster); JINGWEI_CRASH_PARALLEL
 * (default 3) bounds the cases run at once.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { CaseEnv } from './harness.js';
import { checkRun, RUN_POINTS, runRunCase, type RunCaseResult, type RunCaseSpec } from './run-harness.js';
import { enabledStoreKinds, type StoreKind, type StoreSpec } from './stores.js';
import { EFFECTS } from './tools.js';
import { journalSketch } from './invariants.js';
import { tempDir } from '../support/tmp.js';

const KINDS = enabledStoreKinds();
const PARALLEL = Math.max(1, Number.parseInt(process.env.JINGWEI_CRASH_PARALLEL ?? '3', 10) || 3);
const root = tempDir('jingwei-run-crash-');
const tag = `${process.pid}_${randomBytes(3).toString('hex')}`;
const pgSchemas: string[] = [];
let counter = 0;

/** A case's journal: its own SQLite file, or its own schema on the run's PostgreSQL (recoverAbandoned takes every expired session of a store). */
function caseEnv(kind: StoreKind, label: string): CaseEnv {
  counter += 1;
  const caseId = `${label.replace(/[^A-Za-z0-9_-]+/g, '_')}-${counter}`;
  const dir = join(root, caseId);
  mkdirSync(dir);
  let store: StoreSpec;
  if (kind === 'sqlite') store = { kind, location: join(dir, 'journal.db') };
  else {
    const schema = `jw_run_${tag}_${counter}`;
    pgSchemas.push(schema);
    store = { kind, location: process.env.JINGWEI_PG_URL!, schema };
  }
  return { dir, store, caseId };
}

after(async () => {
  const url = process.env.JINGWEI_PG_URL;
  if (!url || pgSchemas.length === 0) return;
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const schema of pgSchemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
});

const results: RunCaseResult[] = [];
const negativeFlagged = new Set<StoreKind>();

for (const [kindIndex, kind] of KINDS.entries()) {
  describe(`run crash matrix on ${kind}: ${RUN_POINTS.length} points × ${EFFECTS.length} effects`, { concurrency: PARALLEL }, () => {
    for (const [pointIndex, point] of RUN_POINTS.entries()) {
      // Both shapes of a host's startup, alternating over points and stores: the routine retries (retry_safe) and
      // the run replays, or the routine only takes over and reconciles (suspend) and the resumed run retries.
      const startupPolicy = (pointIndex + kindIndex) % 2 === 0 ? 'retry_safe' : 'suspend';
      for (const effect of EFFECTS) {
        it(`${point.id} (${point.description}) · ${effect} · startup ${startupPolicy}`, async () => {
          const spec: RunCaseSpec = { kind, point, effect, startupPolicy };
          const r = await runRunCase(spec, caseEnv(kind, `${kind}-${point.id}-${effect}`));
          results.push(r);
          const label = `${kind} ${point.id} ${effect}`;
          assert.deepEqual(r.check.problems, [], `${label}: ${JSON.stringify(r.resumes)}\n${journalSketch(r.history)}`);
          assert.equal(r.resumes.at(-1)!.stopReason, 'completed', `${label}: the run finished`);
          // A person is asked exactly where nothing else can know: an unknown effect whose outcome is in doubt.
          const person = effect === 'unknown' && point.uncertain;
          assert.equal(r.operatorReviews.length, person ? 1 : 0, `${label}: operator reviews ${JSON.stringify(r.operatorReviews)}`);
          assert.equal(r.again.stopReason, 'completed', `${label}: running it again returns the finished run`);
          const rows = effect === 'read_only' ? 0 : 1;
          for (const tool of ['place_order', 'send_email']) {
            assert.equal(r.world.ledger.filter((row) => row.tool === tool).length, rows, `${label}: ${tool} records`);
          }
        });
      }
    }
  });

  describe(`run crash matrix negative control on ${kind}`, () => {
    it('a host that runs the agent again as a new run (no run id) after the order completed is caught placing a second order', async () => {
      const point = RUN_POINTS.find((p) => p.id === 'order/result:after')!;
      const r = await runRunCase({ kind, point, effect: 'non_idempotent', startupPolicy: 'retry_safe', naive: true }, caseEnv(kind, `${kind}-negative`));
      assert.equal(r.resumes[0]!.stopReason, 'completed', 'the naive host finished its new run');
      assert.notEqual(r.resumes[0]!.runId, r.runId);
      assert.equal(r.world.ledger.filter((row) => row.tool === 'place_order').length, 2, 'two orders');
      assert.equal(r.check.duplicates, 1, `the checker flags the duplicate: ${JSON.stringify(r.check)}`);
      assert.equal(r.check.unfinished, 1, 'and the original run never finished');
      negativeFlagged.add(kind);
    });

    it('the checker also counts a completed call run again and a journaled step asked again (fed what they would leave)', () => {
      const r = results.find((x) => x.spec.kind === kind && x.spec.effect === 'non_idempotent' && x.spec.point.id === 'email/result:after')!;
      assert.ok(r, 'the case ran');
      const clean = { effect: r.spec.effect, runId: r.runId, history: r.history, world: r.world, final: r.resumes.at(-1)!, again: r.again, invariants: r.invariants };
      assert.deepEqual([checkRun(clean).duplicates, checkRun(clean).unfinished, checkRun(clean).completedReruns, checkRun(clean).reasked], [0, 0, 0, 0]);
      // A second attempt of the completed order, journaled after its result, whose body ran.
      const call = r.history.find((e) => e.kind.type === 'tool_call' && e.kind.call.name === 'place_order')!;
      const kind2 = call.kind as Extract<typeof call.kind, { type: 'tool_call' }>;
      const again = { ...call, seq: r.history.length, eventId: `${call.eventId}x`, kind: { ...kind2, call: { ...kind2.call, id: `${kind2.call.id}x` } } } as typeof call;
      const body = { id: 1_000, tool: 'place_order', key: kind2.call.operation!.key, callId: `${kind2.call.id}x` };
      assert.equal(checkRun({ ...clean, history: [...r.history, again], world: { ...r.world, bodies: [...r.world.bodies, body] } }).completedReruns, 1);
      // A body run by the "run it again", and a step asked by a later process than the one that journaled it.
      assert.equal(checkRun({ ...clean, again: { ...r.again, bodies: 1 } }).completedReruns, 1);
      const late = { step: 1, epoch: 99, turn: 'turn-late' };
      assert.equal(checkRun({ ...clean, world: { ...r.world, asks: [...r.world.asks, late] } }).reasked, 1);
    });
  });
}

describe('run crash matrix summary', () => {
  it('prints one line and holds every count at zero', () => {
    const sum = (f: (r: RunCaseResult) => number) => results.reduce((n, r) => n + f(r), 0);
    const duplicates = sum((r) => r.check.duplicates);
    const unfinished = sum((r) => r.check.unfinished);
    const reruns = sum((r) => r.check.completedReruns);
    const reasked = sum((r) => r.check.reasked);
    const persons = sum((r) => r.operatorReviews.length);
    const stores = KINDS.length === 1 ? '1 store' : `${KINDS.length} stores`;
    console.log(
      `run crash matrix: ${RUN_POINTS.length} points × ${EFFECTS.length} effects × ${stores} (${KINDS.join(', ')}) = ${results.length} cases; ` +
        `duplicates ${duplicates}, unfinished runs ${unfinished}, completed calls re-run ${reruns}; ` +
        `journaled model steps asked again ${reasked}; negative control ${negativeFlagged.size === KINDS.length ? 'flagged' : 'NOT flagged'}; ` +
        `operator reviews ${persons} (unknown effect in doubt only)`,
    );
    assert.equal(results.length, RUN_POINTS.length * EFFECTS.length * KINDS.length, 'every case ran');
    assert.equal(duplicates, 0);
    assert.equal(unfinished, 0);
    assert.equal(reruns, 0);
    assert.equal(reasked, 0);
    assert.equal(negativeFlagged.size, KINDS.length, 'the negative control was flagged on every store');
  });
});
