/**
 * A call's control is checked again just before its work is called, not only when its timers run: a stalled event
 * loop (a synchronous body of another call, a paused process) wakes with the timers not run yet, and a body called then
 * may run beside another host's retry of it (the lease ran out meanwhile) or past its deadline.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { performance } from 'node:perf_hooks';
import { CallControl } from '../../src/tool/control.js';
import { LeaseWatch } from '../../src/store/lease-watch.js';

const never = () => () => undefined;

/** Blocks the event loop: no timer runs meanwhile. */
function stall(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end) { /* a stalled process */ }
}

it('a body whose session may have been lost by the time it is called is never called, and says so (no end to wait for)', async () => {
  let lost: string | null = null;
  const control = new CallControl(10_000, [], never, never, () => lost);
  control.bodyStarts();
  let called = false;
  const ran = control.race(async () => { called = true; return 'paid'; });
  // Between the race and the call of its work, another call's synchronous body stalled past the lease.
  lost = 'its lease of 1000 ms may have run out: last renewed 6000 ms ago';
  const outcome = await ran;
  assert.equal(called, false);
  assert.ok('interrupt' in outcome && outcome.ended === undefined, 'never called: no end');
  assert.equal(outcome.interrupt.code, 'tool_cancelled');
  assert.match(outcome.interrupt.message, /lost its hold on the session, or may have.*may have run out/);
  assert.equal(control.signal.aborted, true);
  control.dispose();
});

it('a body is not called once its deadline has passed, though its timer has not run yet', async () => {
  const control = new CallControl(30, [], never, never, () => null);
  stall(80);
  control.bodyStarts();
  let called = false;
  const outcome = await control.race(async () => { called = true; return 'paid'; });
  assert.equal(called, false);
  assert.ok('interrupt' in outcome && outcome.ended === undefined);
  assert.equal(outcome.interrupt.code, 'tool_timeout');
  control.dispose();
});

it('a body called while the session is held runs, and an interrupt after it started says when it ends', async () => {
  let lost: string | null = null;
  const control = new CallControl(10_000, [], never, (onLost) => {
    setTimeout(() => { lost = 'taken over'; onLost('taken over', false); }, 20);
    return () => undefined;
  }, () => lost);
  control.bodyStarts();
  let finish: () => void = () => undefined;
  const outcome = await control.race(() => new Promise<string>((resolve) => { finish = () => resolve('paid'); }));
  assert.ok('interrupt' in outcome && outcome.ended !== undefined, 'called, so its end is tracked');
  finish();
  assert.equal(await outcome.ended, 'returned');
  control.dispose();
});

it('a body written as a plain function (no async) settles the race with its value or its throw, as an async one does', async () => {
  const control = new CallControl(10_000, [], never, never, () => null);
  control.bodyStarts();
  const value = await control.race((() => 'paid') as unknown as () => Promise<string>);
  assert.deepEqual(value, { value: 'paid' });
  await assert.rejects(control.race((() => { throw new Error('the bank said no'); }) as unknown as () => Promise<string>), { message: 'the bank said no' });
  control.dispose();
});

it('a lease counts a suspend: the monotonic clock stands still through one, the wall clock does not', async () => {
  const watch = new LeaseWatch(100, LeaseWatch.now());
  assert.equal(watch.lapse(), null);
  const frozen = performance.now();
  const realNow = performance.now.bind(performance);
  performance.now = () => frozen; // a suspended machine: on Linux the monotonic clock does not count the suspend
  try {
    await new Promise((resolve) => setTimeout(resolve, 150));
    assert.match(watch.lapse() ?? '', /its lease of 100 ms may have run out/);
  } finally {
    performance.now = realNow;
  }
});

it("a call's deadline counts a suspend too", async () => {
  const frozen = performance.now();
  const realNow = performance.now.bind(performance);
  performance.now = () => frozen;
  try {
    const control = new CallControl(50, [], never, never, () => null);
    stall(80);
    control.bodyStarts();
    let called = false;
    const outcome = await control.race(async () => { called = true; return 'paid'; });
    assert.equal(called, false);
    assert.ok('interrupt' in outcome && outcome.interrupt.code === 'tool_timeout');
    control.dispose();
  } finally {
    performance.now = realNow;
  }
});
