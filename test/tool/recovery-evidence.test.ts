/**
 * Tampered and over-limit histories: each fails with the code Jingwei for Rust gives, the first violation in physical order
 * wins, and the exact limits pass (docs/design.md#evidence-validation, docs/design.md#limits).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeEvent } from '../../src/event/codec.js';
import { ToolEffect, ToolReviewOutcome, type SessionEvent } from '../../src/event/types.js';
import type { EventId, TurnId } from '../../src/ids.js';
import { LIMITS } from '../../src/limits.js';
import { inspectToolRecovery, prepareToolRetry } from '../../src/tool/recovery.js';
import {
  FIXTURE,
  HistoryBuilder,
  callOf,
  expectRetryError,
  failed,
  renumber,
  replaceCall,
  replaceEvent,
  review,
  succeeded,
} from '../support/history.js';

/** call attempt-1 (idempotent) failed, then attempt-2 retrying it. */
function twoAttempts(): { h: HistoryBuilder; first: SessionEvent; firstResult: SessionEvent; second: SessionEvent } {
  const h = new HistoryBuilder();
  const first = h.call({ effect: ToolEffect.Idempotent });
  const firstResult = h.result(FIXTURE.call, failed('body_failure'));
  const second = h.retry(first, { id: 'attempt-2' });
  return { h, first, firstResult, second };
}

const withRetry = (history: SessionEvent[], index: number, change: Record<string, unknown>): SessionEvent[] =>
  replaceCall(history, index, (call) => ({
    ...call,
    operation: { ...call.operation!, retry: { ...call.operation!.retry!, ...change } },
  }));

describe('tampered histories', () => {
  it('a retry audit pointing at the wrong call id or the wrong event id is invalid_evidence', () => {
    const { h, firstResult } = twoAttempts();
    const history = h.build();
    assert.equal(inspectToolRecovery(history, 'attempt-2').attempt, 2);
    expectRetryError(() => inspectToolRecovery(withRetry(history, 2, { callId: 'attempt-0' }), 'attempt-2'), 'invalid_evidence');
    // The audit must name the event holding the CALL, not its result.
    expectRetryError(
      () => inspectToolRecovery(withRetry(history, 2, { eventId: firstResult.eventId }), 'attempt-2'),
      'invalid_evidence',
    );
  });

  it('a retry audit with no previous attempt, and a reused key without an audit, are invalid_evidence', () => {
    const h = new HistoryBuilder();
    h.call({ effect: ToolEffect.Idempotent, retry: { callId: 'attempt-0' as never, eventId: 'evt-0' as EventId, review: null } });
    expectRetryError(() => inspectToolRecovery(h.build(), FIXTURE.call), 'invalid_evidence');

    const { h: h2 } = twoAttempts();
    const noAudit = replaceCall(h2.build(), 2, (call) => ({ ...call, operation: { ...call.operation!, retry: null } }));
    expectRetryError(() => inspectToolRecovery(noAudit, 'attempt-2'), 'invalid_evidence');
  });

  it('a later attempt that changes arguments, name, effect or revision is binding_changed', () => {
    const history = twoAttempts().h.build();
    const changes = [
      (c: ReturnType<typeof callOf>) => ({ ...c, arguments: { ok: false } }),
      (c: ReturnType<typeof callOf>) => ({ ...c, name: 'other' }),
      (c: ReturnType<typeof callOf>) => ({ ...c, operation: { ...c.operation!, contract: { effect: ToolEffect.ReadOnly, revision: 'v1' } } }),
      (c: ReturnType<typeof callOf>) => ({ ...c, operation: { ...c.operation!, contract: { effect: ToolEffect.Idempotent, revision: 'v2' } } }),
    ];
    for (const change of changes) {
      expectRetryError(() => inspectToolRecovery(replaceCall(history, 2, change), 'attempt-2'), 'binding_changed');
      // The corruption fails every request, even about another call.
      expectRetryError(() => inspectToolRecovery(replaceCall(history, 2, change), FIXTURE.call), 'binding_changed');
    }
    // Key order inside the arguments is not a change.
    const reordered = new HistoryBuilder();
    const first = reordered.call({ effect: ToolEffect.Idempotent, arguments: { a: 1, b: { c: [1, { d: 2, e: 3 }] } } });
    reordered.retry(first, { id: 'attempt-2', arguments: { b: { c: [1, { e: 3, d: 2 }] }, a: 1 } });
    assert.equal(inspectToolRecovery(reordered.build(), 'attempt-2').attempt, 2);
  });

  it('results out of place are invalid_evidence: before the call, in another turn, twice, for an unknown call', () => {
    const h = new HistoryBuilder();
    h.call();
    h.result(FIXTURE.call, failed('timeout'));
    const history = h.build();
    expectRetryError(() => inspectToolRecovery(renumber([history[1]!, history[0]!]), FIXTURE.call), 'invalid_evidence');
    expectRetryError(
      () => inspectToolRecovery(replaceEvent(history, 1, (e) => ({ ...e, turnId: 'new-turn' as TurnId })), FIXTURE.call),
      'invalid_evidence',
    );
    h.result(FIXTURE.call, succeeded());
    expectRetryError(() => inspectToolRecovery(h.build(), FIXTURE.call), 'invalid_evidence');
    const stray = new HistoryBuilder();
    stray.call();
    stray.result('attempt-9', succeeded());
    expectRetryError(() => inspectToolRecovery(stray.build(), FIXTURE.call), 'invalid_evidence');
  });

  it('a duplicate call id is invalid_evidence, even in another operation', () => {
    const h = new HistoryBuilder();
    h.call({ key: 'logical-1' });
    h.call({ key: 'logical-2' });
    expectRetryError(() => inspectToolRecovery(h.build(), FIXTURE.call), 'invalid_evidence');
  });

  it('tool_started without a flagged call, after the result, twice, or in another turn is invalid_evidence', () => {
    const cases: Array<[string, (h: HistoryBuilder) => void]> = [
      ['unflagged call', (h) => { h.call(); h.started(); }],
      ['legacy call', (h) => { h.call({ legacy: true }); h.started(); }],
      ['unknown call', (h) => { h.call({ startMarker: true }); h.started('attempt-9'); }],
      ['before its call', (h) => { h.started(); h.call({ startMarker: true }); }],
      ['after the result', (h) => { h.call({ startMarker: true }); h.result(FIXTURE.call, failed('body_failure')); h.started(); }],
      ['twice', (h) => { h.call({ startMarker: true }); h.started(); h.started(); }],
      ['another turn', (h) => { h.call({ startMarker: true }); h.started(FIXTURE.call, { turnId: 'new-turn' }); }],
    ];
    for (const [name, build] of cases) {
      const h = new HistoryBuilder();
      build(h);
      expectRetryError(() => inspectToolRecovery(h.build(), FIXTURE.call), 'invalid_evidence', name);
    }
    const ok = new HistoryBuilder();
    ok.call({ startMarker: true });
    ok.started();
    ok.result(FIXTURE.call, failed('body_failure'));
    assert.ok(inspectToolRecovery(ok.build(), FIXTURE.call).startedEvent);
  });

  it('the physical log must be one session, seq = index, unique event ids', () => {
    const h = new HistoryBuilder();
    h.call();
    h.message();
    const history = h.build();
    expectRetryError(() => inspectToolRecovery(replaceEvent(history, 1, (e) => ({ ...e, sessionId: 'other' as never })), FIXTURE.call), 'invalid_evidence');
    expectRetryError(() => inspectToolRecovery(replaceEvent(history, 1, (e) => ({ ...e, seq: 2 })), FIXTURE.call), 'invalid_evidence');
    expectRetryError(
      () => inspectToolRecovery(replaceEvent(history, 1, (e) => ({ ...e, eventId: history[0]!.eventId })), FIXTURE.call),
      'invalid_evidence',
    );
  });

  it('the first violation in physical order wins', () => {
    const { h } = twoAttempts();
    const bindingFirst = replaceCall(h.build(), 2, (c) => ({ ...c, name: 'other' }));
    const then = new HistoryBuilder();
    for (const e of bindingFirst) then.push(e.kind, { eventId: e.eventId });
    then.result('attempt-9', succeeded());
    expectRetryError(() => inspectToolRecovery(then.build(), FIXTURE.call), 'binding_changed');

    const invalidFirst = new HistoryBuilder();
    invalidFirst.result('attempt-9', succeeded());
    const first = invalidFirst.call({ effect: ToolEffect.Idempotent });
    invalidFirst.retry(first, { id: 'attempt-2', name: 'other' });
    expectRetryError(() => inspectToolRecovery(invalidFirst.build(), FIXTURE.call), 'invalid_evidence');
  });

  it('an unknown or blank call id, and an empty history, are invalid_evidence', () => {
    const h = new HistoryBuilder();
    h.call();
    expectRetryError(() => inspectToolRecovery(h.build(), 'attempt-9'), 'invalid_evidence');
    expectRetryError(() => inspectToolRecovery(h.build(), ' \u0085 '), 'invalid_evidence');
    expectRetryError(() => inspectToolRecovery([], FIXTURE.call), 'invalid_evidence');
  });
});

describe('limits', () => {
  const text = (bytes: number) => 'k'.repeat(bytes);

  it('texts of 1024 bytes pass and 1025 fail: call id, task id, key, revision, audit ids, review actor and evidence', () => {
    const specs = [
      (t: string) => ({ id: t }),
      (t: string) => ({ taskId: t }),
      (t: string) => ({ key: t }),
      (t: string) => ({ revision: t }),
    ];
    for (const spec of specs) {
      const ok = new HistoryBuilder();
      ok.call(spec(text(1024)));
      const okId = callOf(ok.events[0]!).id;
      assert.ok(inspectToolRecovery(ok.build(), okId));
      const bad = new HistoryBuilder();
      bad.call(spec(text(1025)));
      expectRetryError(() => inspectToolRecovery(bad.build(), callOf(bad.events[0]!).id), 'invalid_evidence');
    }
    for (const field of ['callId', 'eventId'] as const) {
      for (const [bytes, ok] of [[1024, true], [1025, false]] as const) {
        const h = new HistoryBuilder();
        // No earlier attempt, so even a valid audit fails; an over-long one must fail before that check, equally.
        h.call({ retry: { callId: 'a' as never, eventId: 'e' as EventId, review: null, [field]: text(bytes) } });
        expectRetryError(() => inspectToolRecovery(h.build(), FIXTURE.call), 'invalid_evidence', `${field} ${ok}`);
      }
    }
    const { h } = twoAttempts();
    const history = h.build();
    for (const field of ['actor', 'evidence'] as const) {
      const audited = (t: string) =>
        withRetry(history, 2, { review: { ...review(ToolReviewOutcome.NotExecuted), [field]: t } });
      assert.ok(inspectToolRecovery(audited(text(1024)), 'attempt-2'));
      expectRetryError(() => inspectToolRecovery(audited(text(1025)), 'attempt-2'), 'invalid_evidence');
      expectRetryError(() => inspectToolRecovery(audited(' '), 'attempt-2'), 'invalid_evidence');
      const single = new HistoryBuilder();
      single.call({ effect: ToolEffect.NonIdempotent });
      const r = (t: string) => ({ ...review(ToolReviewOutcome.NotExecuted), [field]: t });
      assert.ok(prepareToolRetry(single.build(), FIXTURE.call, r(text(1024))));
      expectRetryError(() => prepareToolRetry(single.build(), FIXTURE.call, r(text(1025))), 'invalid_evidence');
      expectRetryError(() => prepareToolRetry(single.build(), FIXTURE.call, r('\t\n')), 'invalid_evidence');
    }
  });

  it('a review is checked before the history is read, and its outcome must be one of the three', () => {
    const bad = { actor: ' ', evidence: 'x', outcome: ToolReviewOutcome.NotExecuted };
    expectRetryError(() => prepareToolRetry([], FIXTURE.call, bad), 'invalid_evidence');
    const h = new HistoryBuilder();
    h.call({ effect: ToolEffect.NonIdempotent });
    expectRetryError(
      () => prepareToolRetry(h.build(), FIXTURE.call, { ...review(ToolReviewOutcome.NotExecuted), outcome: 'done' as never }),
      'invalid_evidence',
    );
  });

  it('blank ids fail; Rust trim semantics: U+0085 is blank, U+FEFF is not', () => {
    for (const blank of ['', ' ', '\t', '\u0085', '\u3000 ']) {
      for (const spec of [{ id: blank }, { taskId: blank }, { key: blank }, { revision: blank }]) {
        const h = new HistoryBuilder();
        h.call(spec);
        expectRetryError(() => inspectToolRecovery(h.build(), FIXTURE.call), 'invalid_evidence', JSON.stringify(spec));
      }
    }
    for (const options of [{ eventId: ' ' }, { turnId: '\u2028' }, { sessionId: '' }]) {
      const h = new HistoryBuilder();
      h.call({}, options);
      expectRetryError(() => inspectToolRecovery(h.build(), FIXTURE.call), 'invalid_evidence', JSON.stringify(options));
    }
    const long = new HistoryBuilder('s'.repeat(1025));
    long.call();
    expectRetryError(() => inspectToolRecovery(long.build(), FIXTURE.call), 'invalid_evidence');
    const h = new HistoryBuilder();
    h.call({ key: '\ufeff' });
    assert.ok(inspectToolRecovery(h.build(), FIXTURE.call));
  });

  it('tool names: 256 bytes pass, 257 fail, empty fails; a blank name is not trimmed', () => {
    for (const [name, ok] of [
      ['n'.repeat(256), true],
      ['é'.repeat(128), true],
      [' ', true],
      ['n'.repeat(257), false],
      ['é'.repeat(128) + 'n', false],
      ['', false],
    ] as const) {
      const h = new HistoryBuilder();
      h.call({ name });
      if (ok) assert.ok(inspectToolRecovery(h.build(), FIXTURE.call), name);
      else expectRetryError(() => inspectToolRecovery(h.build(), FIXTURE.call), 'invalid_evidence', name);
    }
  });

  it('100,000 events pass and 100,001 fail', () => {
    const h = new HistoryBuilder();
    h.call({ effect: ToolEffect.ReadOnly });
    while (h.events.length < LIMITS.maxHistoryEvents) h.message('m');
    assert.equal(inspectToolRecovery(h.build(), FIXTURE.call).callEvent.seq, 0);
    h.message('m');
    expectRetryError(() => inspectToolRecovery(h.build(), FIXTURE.call), 'invalid_evidence');
  });

  it('exactly 16 MiB of wire JSON passes and one byte more fails', () => {
    const wireBytes = (history: readonly SessionEvent[]) => Buffer.byteLength(JSON.stringify(history.map(encodeEvent)));
    const build = (padding: number) => {
      const h = new HistoryBuilder();
      h.call({ effect: ToolEffect.ReadOnly, arguments: { text: 'ü'.repeat(100) } });
      h.message('x'.repeat(padding));
      return h.build();
    };
    const base = wireBytes(build(0));
    const exact = build(LIMITS.maxHistoryBytes - base);
    assert.equal(wireBytes(exact), LIMITS.maxHistoryBytes);
    assert.ok(inspectToolRecovery(exact, FIXTURE.call));
    const over = build(LIMITS.maxHistoryBytes - base + 1);
    assert.equal(wireBytes(over), LIMITS.maxHistoryBytes + 1);
    expectRetryError(() => inspectToolRecovery(over, FIXTURE.call), 'invalid_evidence');
  });
});
