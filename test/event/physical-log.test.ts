import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { PhysicalLogError, type PhysicalLogViolation } from '../../src/errors.js';
import { validatePhysicalLog, type SessionEvent } from '../../src/event/index.js';
import type { EventId, SessionId, TurnId } from '../../src/ids.js';
import { arbPhysicalLog } from '../support/arbitraries.js';

function ev(seq: number, eventId = `evt_${seq}`, sessionId = 'sess_1'): SessionEvent {
  return { eventId: eventId as EventId, sessionId: sessionId as SessionId, turnId: 'turn_1' as TurnId, seq, kind: { type: 'user_message', text: `m${seq}` } };
}

function violates(sessionId: string, events: SessionEvent[], violation: PhysicalLogViolation, index: number): void {
  assert.throws(
    () => validatePhysicalLog(sessionId, events),
    (e: unknown) => e instanceof PhysicalLogError && e.violation === violation && e.index === index && e.code === 'invalid_physical_log',
  );
}

describe('validatePhysicalLog', () => {
  it('accepts a contiguous log of one session, and an empty one', () => {
    validatePhysicalLog('sess_1', [ev(0), ev(1), ev(2)]);
    validatePhysicalLog('sess_1', []);
  });

  it('wrong_session', () => {
    violates('sess_1', [ev(0), ev(1, 'evt_1', 'sess_2')], 'wrong_session', 1);
    violates('sess_2', [ev(0)], 'wrong_session', 0);
  });

  it('wrong_sequence: gaps, repeats, a start other than 0, reordering', () => {
    violates('sess_1', [ev(0), ev(2)], 'wrong_sequence', 1);
    violates('sess_1', [ev(1)], 'wrong_sequence', 0);
    violates('sess_1', [ev(0), ev(0, 'evt_x')], 'wrong_sequence', 1);
    violates('sess_1', [ev(1), ev(0)], 'wrong_sequence', 0);
  });

  it('duplicate_event_id', () => {
    violates('sess_1', [ev(0, 'evt_a'), ev(1, 'evt_b'), ev(2, 'evt_a')], 'duplicate_event_id', 2);
  });

  it('checks each index in order: session, then seq, then id', () => {
    violates('sess_1', [ev(0), ev(5, 'evt_0', 'sess_2')], 'wrong_session', 1);
    violates('sess_1', [ev(0), ev(5, 'evt_0')], 'wrong_sequence', 1);
    violates('sess_1', [ev(0, 'evt_0'), ev(1, 'evt_0'), ev(1, 'evt_z', 'other')], 'duplicate_event_id', 1);
  });

  it('never reorders or changes its input', () => {
    const events = [ev(0), ev(1)];
    const copy = structuredClone(events);
    validatePhysicalLog('sess_1', events);
    assert.deepStrictEqual(events, copy);
  });

  it('property: generated physical logs pass; any swap of two positions fails', () => {
    fc.assert(
      fc.property(arbPhysicalLog({ minLength: 2 }), fc.nat(), fc.nat(), (events, a, b) => {
        validatePhysicalLog(events[0]!.sessionId, events);
        const i = a % events.length;
        const j = b % events.length;
        fc.pre(i !== j);
        const swapped = [...events];
        [swapped[i], swapped[j]] = [swapped[j]!, swapped[i]!];
        violates(events[0]!.sessionId, swapped, 'wrong_sequence', Math.min(i, j));
      }),
      { numRuns: 100 },
    );
  });
});
