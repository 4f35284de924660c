/**
 * What the PostgreSQL store decides after a write transaction lost its connection, on the owner row it finds under
 * its lock: the lost commit's writes all landed, none did, or it cannot tell. Only the second runs the decision again;
 * the third reports the loss, the outcome unknown.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StoreBusyError, StoreUnavailableError } from '../../src/errors.js';
import type { SessionId } from '../../src/ids.js';
import type { SessionRow, TxState, TxWrites } from '../../src/store/rows.js';
import { afterLostWrites, headProbe, isConnectionLost, Landed, LostConnectionRetry } from '../../src/store/postgres/lost-connection.js';

const before: SessionRow = {
  sessionId: 's' as SessionId, owner: 'host', held: true, epoch: 2, lastSeq: 4, headHash: 'a'.repeat(64), bodyBytes: 100, recordedAt: null, leaseExpiresAt: 1_000,
};
const after: SessionRow = { ...before, lastSeq: 6, headHash: 'b'.repeat(64), bodyBytes: 180, leaseExpiresAt: 2_000 };
const appending: TxWrites<string> = {
  session: { row: after, expect: { epoch: 2, lastSeq: 4 } },
  events: [],
  result: 'the lost attempt\'s result',
};
const lost = new StoreUnavailableError('store_failure', 'session s: PostgreSQL failed: Connection terminated unexpectedly', { cause: new Error('Connection terminated unexpectedly') });
const state = (session: SessionRow | undefined): TxState => ({ session, task: undefined, operation: undefined, existingEventIds: [], attention: [], now: 1_500 });
const decidedAgain: TxWrites<string> = { result: 'decided again' };

/** The decision after `writes` were lost, their head's event row read as `probeHash` (undefined: not read). */
function outcome(writes: TxWrites<string>, stored: SessionRow | undefined, probeHash?: string | null): string {
  try {
    const probe = headProbe(writes);
    if (probe !== undefined) probe.hash = probeHash;
    return afterLostWrites('session s', [{ writes, probe }], lost, () => decidedAgain)(state(stored)).result;
  } catch (error) {
    if (error instanceof Landed) return `landed: ${error.result as string}`;
    if (error instanceof StoreUnavailableError && error.cause === lost && /^session s: the connection to PostgreSQL was lost after this transaction's writes were sent \(Connection terminated unexpectedly\), and .*: whether they were stored is unknown/.test(error.message)) return 'unknown';
    throw error;
  }
}

describe('after a write lost its connection', () => {
  it('its result stands when the head is the one it wrote, and it is decided again when the head is the one it was decided on', () => {
    assert.equal(outcome(appending, after), 'landed: the lost attempt\'s result');
    assert.equal(outcome(appending, { ...before, leaseExpiresAt: 1_200 }), 'decided again');
  });

  it('the loss is reported, the outcome unknown, when the owner row shows neither', () => {
    assert.equal(outcome(appending, { ...after, headHash: 'c'.repeat(64) }), 'unknown', 'the same length, another chain');
    assert.equal(outcome(appending, { ...after, epoch: 3 }), 'unknown', 'taken over since');
    assert.equal(outcome(appending, { ...before, epoch: 3 }), 'unknown', 'taken over, the head unmoved');
    assert.equal(outcome(appending, { ...before, lastSeq: 5 }), 'unknown', 'another write since');
    assert.equal(outcome(appending, undefined), 'unknown', 'no owner row');
  });

  it('a write of the owner row alone is made again; other writes the owner row cannot show are not', () => {
    const lease: TxWrites<string> = { session: { row: { ...before, leaseExpiresAt: 2_000 }, expect: { epoch: 2, lastSeq: 4 } }, result: 'renewed' };
    assert.equal(outcome(lease, before), 'decided again');
    assert.equal(outcome(lease, { ...before, epoch: 3 }), 'unknown');
    const decisions = { ...lease, decisions: [{}] } as unknown as TxWrites<string>;
    assert.equal(outcome(decisions, before), 'unknown', 'an inbox row');
    assert.equal(outcome({ result: 'no owner row' }, before), 'unknown');
    assert.equal(outcome({ session: { row: after, expect: null }, result: 'created' }, undefined), 'unknown', 'a session created');
  });

  it('with the event row at the head it would have ended at: its own there is landed, another or none is decided again', () => {
    const landed = 'landed: the lost attempt\'s result';
    const movedOn = { ...after, lastSeq: 9, headHash: 'd'.repeat(64) };
    assert.equal(outcome(appending, movedOn, 'b'.repeat(64)), landed, 'its event at seq 6, other writes after it');
    assert.equal(outcome(appending, movedOn, 'c'.repeat(64)), 'decided again', 'another event at seq 6: a parallel write took that seq');
    assert.equal(outcome(appending, { ...before, lastSeq: 5, headHash: 'e'.repeat(64) }, null), 'decided again', 'no event at seq 6 yet');
    assert.equal(outcome(appending, { ...movedOn, epoch: 3 }, 'c'.repeat(64)), 'decided again', 'taken over: the decision then says so');
    assert.equal(outcome(appending, { ...movedOn, epoch: 3 }, 'b'.repeat(64)), landed, 'landed before a takeover');
  });

  // u135 #1: a commit on known rows, still on its way, landed after a second attempt was lost in turn; the third,
  // looking only at the second's head, found another event there and wrote the result a second time.
  it('every lost attempt is looked for: an earlier one that landed after a later one was lost is the one that landed', () => {
    const first: TxWrites<string> = { session: { row: after, expect: { epoch: 2, lastSeq: 4 } }, events: [], result: 'the first attempt' };
    const second: TxWrites<string> = { session: { row: { ...after, headHash: 'f'.repeat(64) }, expect: { epoch: 2, lastSeq: 4 } }, events: [], result: 'the second attempt' };
    const probes = [headProbe(first)!, headProbe(second)!];
    const decision = (hash: string | null) => {
      for (const p of probes) p.hash = hash;
      try {
        return afterLostWrites('session s', [{ writes: first, probe: probes[0] }, { writes: second, probe: probes[1] }], lost, () => decidedAgain)(state({ ...after, headHash: hash ?? 'x' })).result;
      } catch (error) {
        if (error instanceof Landed) return `landed: ${error.result as string}`;
        throw error;
      }
    };
    assert.equal(decision('b'.repeat(64)), 'landed: the first attempt');
    assert.equal(decision('f'.repeat(64)), 'landed: the second attempt');
    assert.equal(decision(null), 'decided again', 'neither there: both fenced by the commit this attempt makes');
  });

  it('says why it cannot tell', () => {
    assert.throws(() => afterLostWrites('session s', [{ writes: appending, probe: undefined }], lost, () => decidedAgain)(state({ ...after, epoch: 3 })),
      /the owner row has moved on since \(epoch 3, head at seq 6; the writes were decided at epoch 2, seq 4\)/);
  });

  it('once writes were sent on a lost connection, no later failure says nothing was written; before, failures are reported as they are', async () => {
    const busy = new StoreBusyError('session s: another writer holds the lock (lock_timeout)');
    const fresh = new LostConnectionRetry(3);
    assert.equal(fresh.report('session s', busy), busy, 'nothing was sent: the failure as it is');
    assert.equal(await fresh.again(lost, { connected: true }), true, 'lost before its writes: run again');
    assert.equal(fresh.report('session s', busy), busy);
    assert.equal(await fresh.again(lost, { connected: true, writes: appending }), true);
    const reported = fresh.report('session s', busy) as StoreUnavailableError;
    assert.equal(reported.code, 'store_failure');
    assert.equal(reported.cause, lost);
    assert.match(reported.message, /trying again failed \(session s: another writer holds the lock \(lock_timeout\)\): whether they were stored is unknown/);
    assert.equal(await fresh.again(busy, { connected: true }), false, 'a lock timeout is not run again');
  });

  it('runs again at most as often as it is allowed, and waits for a restarting server for a while', async () => {
    const refused = new StoreUnavailableError('store_failure', 'session s: PostgreSQL is unreachable (ECONNREFUSED)', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) });
    const unresolved = new StoreUnavailableError('store_failure', 'session s: PostgreSQL is unreachable (ENOTFOUND)', { cause: Object.assign(new Error('getaddrinfo ENOTFOUND db'), { code: 'ENOTFOUND' }) });
    assert.equal(await new LostConnectionRetry(3).again(unresolved, { connected: false }), false, 'a host that cannot be found is reported at once');
    const waiting = new LostConnectionRetry(3);
    let waits = 0;
    while (await waiting.again(refused, { connected: false })) waits += 1;
    assert.ok(waits >= 5 && waits <= 10, `a refusing server is waited for, with a growing wait, then reported (${waits} waits)`);
    const retry = new LostConnectionRetry(2);
    assert.equal(await retry.again(lost, { connected: true }), true);
    assert.equal(await retry.again(refused, { connected: false }), true, 'refused after a loss: the server may be restarting');
    assert.equal(await retry.again(lost, { connected: true }), true);
    assert.equal(await retry.again(lost, { connected: true }), false, 'the third loss is one too many');
    const starting = new StoreUnavailableError('store_failure', 'session s: PostgreSQL failed: the database system is starting up (57P03)', { cause: Object.assign(new Error('the database system is starting up'), { code: '57P03' }) });
    assert.equal(await new LostConnectionRetry(3).again(starting, { connected: false }), true, 'a server starting up is waited for');
  });

  it('knows a lost connection from other failures', () => {
    const coded = (code: string) => Object.assign(new Error('x'), { code });
    for (const error of [coded('57P01'), coded('57P02'), coded('57P03'), coded('57P05'), coded('08006'), coded('ECONNRESET'), coded('EPIPE'),
      new Error('Connection terminated unexpectedly'), new Error('Client has encountered a connection error and is not queryable'),
      new StoreUnavailableError('store_failure', 'wrapped', { cause: coded('57P01') })]) {
      assert.equal(isConnectionLost(error), true, String((error as { code?: string }).code ?? error.message));
    }
    for (const error of [coded('55P03'), coded('57014'), coded('23505'), coded('ECONNREFUSED'), new Error('Query read timeout'), new Error('Connection terminated by the user'), 'Connection terminated', null,
      new StoreUnavailableError('store_failure', 'no cause')]) {
      assert.equal(isConnectionLost(error), false, String(error));
    }
  });
});
