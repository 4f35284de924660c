/**
 * B6: resuming a run of 500 completed calls, replay only. A run (runAgent with a scripted model) makes 50 model
 * steps of 10 no-op calls each, then stops where the model would be asked for its last answer (the model throws:
 * nothing more is journaled). Each operation resumes it with resumeAgent: the journal is read back, the 50 journaled
 * responses are not asked again, the 500 completed calls are replayed and never run, and the model is asked once
 * (a model that only throws, so its cost is not in the figure). Against the B3 floor for the same events: the store's SELECT of the session's rows on a raw
 * connection plus JSON.parse of every body.
 */
import { resumeAgent, runAgent, scriptedModel } from '../../dist/agent.js';
import { createToolRuntime, ToolMetadata } from '../../dist/index.js';
import { openSqliteStore } from '../../dist/sqlite.js';
import { floorRead, openFloor, scratchDir } from '../lib/env.mjs';
import { compare, timeSerial } from '../lib/stats.mjs';

const SESSION = 'bench-b6';
const RUN = 'bench-b6-run';
const STOP = 'stopped before the last answer';

/**
 * The B6 session: a run of `steps` model steps of `perStep` no-op calls, stopped before its last answer. `resume()`
 * resumes it once (replay only) and checks that no call ran again.
 */
export async function openB6Rig(path, { steps, perStep }) {
  const store = openSqliteStore(path);
  let executed = 0;
  try {
    const metadata = new ToolMetadata('does nothing', { type: 'object' }).withEffect('read_only', 'bench-1');
    const runtime = createToolRuntime({ tools: [{ name: 'noop', metadata, execute: async () => { executed++; return 'ok'; } }], grants: { agent: '*' } });
    const owner = await store.acquire(SESSION, { owner: 'bench' });
    await owner.startTask('task', { limits: { toolCalls: 1_000_000 } });
    const gateway = runtime.bind({ owner, taskId: 'task', caller: 'agent' });
    let host = { owner, gateway, store };
    let restarted = null;
    const turns = Array.from({ length: steps }, (_, s) => ({
      text: null,
      toolCalls: Array.from({ length: perStep }, (_, c) => ({ id: `m-${s}-${c}`, name: 'noop', arguments: '{}' })),
    }));
    const stop = () => { throw new Error(STOP); };
    // The resume's model only throws: scriptedModel keeps a deep copy of every request it gets, which for this run's
    // conversation of 1,000 messages is the model's cost, not the resume's.
    const stopModel = { complete: async () => stop() };
    const options = { input: 'Call the tool 500 times.', runId: RUN, maxSteps: steps + 1 };
    const stopped = (error) => {
      if (!(error instanceof Error) || error.message !== STOP) throw error;
    };
    await runAgent({ ...options, ...host, model: scriptedModel([...turns, stop]) }).then(() => { throw new Error('B6: the run was expected to stop'); }, stopped);
    const calls = executed;
    if (calls !== steps * perStep) throw new Error(`B6: ${calls} calls ran, expected ${steps * perStep}`);
    const events = (await store.loadHistory(SESSION)).length;
    return {
      calls,
      events,
      resume: async () => {
        await resumeAgent({ ...options, ...host, model: stopModel }).then(() => { throw new Error('B6: the resume was expected to stop'); }, stopped);
        if (executed !== calls) throw new Error('B6: a replayed call ran again');
      },
      /**
       * A host just started: a store opened on the file and the session taken over by a new owner, whose first read
       * of the journal is the resume's (an owner checks a later read against its last one, so resume() after the
       * first reads again cheaply). The store of the restart before is closed.
       */
      restart: async () => {
        const opened = openSqliteStore(path);
        const next = await opened.acquire(SESSION, { owner: 'bench-restarted', takeover: true });
        await restarted?.close();
        restarted = opened;
        host = { owner: next, gateway: runtime.bind({ owner: next, taskId: 'task', caller: 'agent' }), store: opened };
      },
      close: async () => {
        await restarted?.close();
        await store.close();
      },
    };
  } catch (error) {
    await store.close();
    throw error;
  }
}

export async function runB6({ runs, n, warmup, steps = 50, perStep = 10, log }) {
  const scratch = scratchDir('b6');
  const path = scratch.path('b6.db');
  let rig;
  let floor;
  try {
    rig = await openB6Rig(path, { steps, perStep });
    const { calls, events } = rig;
    log(`  B6 run: ${steps} steps, ${calls} completed calls, ${events} events`);
    floor = openFloor(path);
    const read = floorRead(floor.db);
    const result = await compare({
      runs,
      log,
      variants: [
        {
          name: 'b6-jingwei-resume',
          label: `\`resumeAgent\`: replay ${calls} completed calls`,
          against: 'b6-floor',
          prepare: async () => ({ measure: () => timeSerial(rig.resume, { n, warmup }) }),
        },
        {
          name: 'b6-jingwei-restarted',
          label: `\`resumeAgent\` in a host just started (a new owner each resume): replay ${calls} completed calls`,
          against: 'b6-floor',
          prepare: async () => ({
            measure: async () => {
              const samples = new Float64Array(n);
              for (let i = -warmup; i < n; i++) {
                await rig.restart();
                const t = process.hrtime.bigint();
                await rig.resume();
                if (i >= 0) samples[i] = Number(process.hrtime.bigint() - t) / 1e6;
              }
              return { samples, wallMs: samples.reduce((a, x) => a + x, 0) };
            },
          }),
        },
        {
          name: 'b6-floor',
          label: 'floor: raw SELECT + JSON.parse of the same events',
          prepare: async () => ({
            measure: () => timeSerial(() => {
              if (read(SESSION).length !== events) throw new Error('B6 floor: unexpected row count');
            }, { n, warmup }),
          }),
        },
      ],
    });
    return { id: 'B6', title: `Resuming a run of ${calls} completed calls (${events} events), replay only`, calls, events, ...result };
  } finally {
    floor?.db.close();
    await rig?.close();
    scratch.remove();
  }
}
