/**
 * The journaled review's wire form (docs/design.md#reviews-are-journaled-evidence): one codec, snake_case keys,
 * `decision_id` only when present, and strict decoding (unknown fields, unknown sources and outcomes, blank or
 * over-limit text are refused, naming the field).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeEvent, decodeToolReviewRecord, encodeEvent, encodeToolReviewRecord } from '../../src/event/codec.js';
import type { SessionEvent, ToolReviewRecord } from '../../src/event/types.js';
import type { CallId, EventId, SessionId, TurnId } from '../../src/ids.js';
import { LIMITS } from '../../src/limits.js';

const review: ToolReviewRecord = { callId: 'toolcall_1' as CallId, actor: 'ops:maria', outcome: 'completed', evidence: 'sent', source: 'human' };
const wire = { call_id: 'toolcall_1', actor: 'ops:maria', outcome: 'completed', evidence: 'sent', source: 'human' };

describe('tool_review on the wire', () => {
  it('encodes in snake_case, decision_id only when present, and decodes back', () => {
    assert.deepEqual(encodeToolReviewRecord(review), wire);
    assert.deepEqual(encodeToolReviewRecord({ ...review, decisionId: 'd-1' }), { ...wire, decision_id: 'd-1' });
    assert.deepEqual(decodeToolReviewRecord({ ...wire, decision_id: 'd-1' }), { ...review, decisionId: 'd-1' });
    const event: SessionEvent = {
      eventId: 'evt_1' as EventId, sessionId: 's' as SessionId, turnId: 't' as TurnId, seq: 0,
      kind: { type: 'tool_review', review: { ...review, source: 'reconciler', actor: 'reconciler:send_email@r3' } },
    };
    const encoded = encodeEvent(event);
    assert.deepEqual(encoded.kind, { type: 'tool_review', review: { ...wire, source: 'reconciler', actor: 'reconciler:send_email@r3' } });
    assert.deepEqual(decodeEvent(JSON.parse(JSON.stringify(encoded))), event);
  });

  it('refuses what recordToolReview could never write, naming the field', () => {
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ ...wire, time: 1 }, /^time: unknown field/],
      [{ ...wire, source: 'model' }, /^source: unknown value "model"/],
      [{ ...wire, outcome: 'maybe' }, /^outcome: unknown value/],
      [{ ...wire, actor: '   ' }, /^actor: must not be empty or blank/],
      [{ ...wire, evidence: 'x'.repeat(LIMITS.maxTextBytes + 1) }, /^evidence: is 1025 UTF-8 bytes/],
      [{ ...wire, decision_id: '' }, /^decision_id: must not be empty/],
      [{ actor: 'a', outcome: 'completed', evidence: 'e', source: 'human' }, /^call_id: missing field/],
    ];
    for (const [value, message] of bad) assert.throws(() => decodeToolReviewRecord(value), (e: Error & { code?: string }) => e.code === 'invalid_event' && message.test(e.message), JSON.stringify(value));
    assert.throws(() => decodeEvent({ event_id: 'e', session_id: 's', turn_id: 't', seq: 0, kind: { type: 'tool_review' } }), /kind\.review: missing field|kind: .*review/);
  });
});
