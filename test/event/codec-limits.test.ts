import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WireDecodeError } from '../../src/errors.js';
import { decodeEvent, decodeEventText } from '../../src/event/index.js';
import { utf8Length } from '../../src/text.js';

/** Every text field the decoder holds to the journal's text rule, with a record that carries it. */
const TEXT_FIELDS: [string, (v: string) => Record<string, unknown>][] = [
  ['event_id', (v) => event(v, 's', 't', { type: 'user_message', text: '' })],
  ['session_id', (v) => event('e', v, 't', { type: 'user_message', text: '' })],
  ['turn_id', (v) => event('e', 's', v, { type: 'user_message', text: '' })],
  ['kind.call.id', (v) => event('e', 's', 't', { type: 'tool_call', call: call({ id: v }) })],
  ['kind.result.call_id', (v) => event('e', 's', 't', { type: 'tool_result', result: { call_id: v, outcome: { status: 'succeeded', output: '' } } })],
  ['kind.call_id', (v) => event('e', 's', 't', { type: 'tool_started', call_id: v })],
  ['kind.call.operation.task_id', (v) => event('e', 's', 't', { type: 'tool_call', call: call({}, { task_id: v }) })],
  ['kind.call.operation.key', (v) => event('e', 's', 't', { type: 'tool_call', call: call({}, { key: v }) })],
  ['kind.call.operation.contract.revision', (v) => event('e', 's', 't', { type: 'tool_call', call: call({}, { contract: { effect: 'unknown', revision: v } }) })],
  ['kind.call.operation.retry.call_id', (v) => event('e', 's', 't', { type: 'tool_call', call: call({}, { retry: audit({ call_id: v }) }) })],
  ['kind.call.operation.retry.event_id', (v) => event('e', 's', 't', { type: 'tool_call', call: call({}, { retry: audit({ event_id: v }) }) })],
  ['kind.call.operation.retry.review.actor', (v) => event('e', 's', 't', { type: 'tool_call', call: call({}, { retry: audit({}, { actor: v }) }) })],
  ['kind.call.operation.retry.review.evidence', (v) => event('e', 's', 't', { type: 'tool_call', call: call({}, { retry: audit({}, { evidence: v }) }) })],
];

function event(eventId: string, sessionId: string, turnId: string, kind: Record<string, unknown>): Record<string, unknown> {
  return { event_id: eventId, session_id: sessionId, turn_id: turnId, seq: 0, kind };
}
function call(fields: Record<string, unknown>, operation: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    operation: { task_id: 'task', key: 'key', contract: { effect: 'read_only', revision: 'r1' }, retry: null, ...operation },
    id: 'call',
    name: 'tool',
    arguments: {},
    ...fields,
  };
}
function audit(fields: Record<string, unknown>, review: Record<string, unknown> = {}): Record<string, unknown> {
  return { call_id: 'prev', event_id: 'evt_prev', review: { actor: 'ops', evidence: 'receipt', outcome: 'not_executed', ...review }, ...fields };
}

const ACCEPTED: [string, string][] = [
  ['256 × 😀 = 1024 bytes', '😀'.repeat(256)],
  ['1024 × a', 'a'.repeat(1024)],
  ['341 × € + a = 1024 bytes', '€'.repeat(341) + 'a'],
  ['padded text', '  x  '],
  ['a lone U+FEFF (Rust trim keeps it)', '\ufeff'],
];
const REJECTED: [string, string][] = [
  ['342 × € = 1026 bytes', '€'.repeat(342)],
  ['1025 × a', 'a'.repeat(1025)],
  ['341 × € + ab = 1025 bytes', '€'.repeat(341) + 'ab'],
  ['256 × 😀 + a = 1025 bytes', '😀'.repeat(256) + 'a'],
  ['empty', ''],
  ['blank', ' \t\n'],
  ['Unicode blanks', '\u3000\u0085\u00a0\u2028'],
];

describe('codec: text limits in UTF-8 bytes, exactly at the boundary', () => {
  it('the boundary strings have the sizes they claim', () => {
    assert.equal(utf8Length('😀'.repeat(256)), 1024);
    assert.equal(utf8Length('€'.repeat(342)), 1026);
    assert.equal('€'.repeat(342).length, 342);
    assert.equal(utf8Length('€'.repeat(341) + 'ab'), 1025);
  });
  for (const [field, build] of TEXT_FIELDS) {
    it(field, () => {
      for (const [name, value] of ACCEPTED) {
        assert.doesNotThrow(() => decodeEvent(build(value)), name);
        assert.doesNotThrow(() => decodeEventText(JSON.stringify(build(value))), name);
      }
      for (const [name, value] of REJECTED) {
        for (const decode of [() => decodeEvent(build(value)), () => decodeEventText(JSON.stringify(build(value)))]) {
          assert.throws(decode, (e: unknown) => e instanceof WireDecodeError && e.path === field, `${field}: ${name}`);
        }
      }
      assert.throws(() => decodeEvent(build('ok\ud800')), (e: unknown) => e instanceof WireDecodeError && e.path === field);
    });
  }

  it('tool names: non-empty (not trimmed), at most 256 bytes', () => {
    const named = (name: string) => event('e', 's', 't', { type: 'tool_call', call: call({ name }) });
    for (const name of ['x', ' ', 'a'.repeat(256), '😀'.repeat(64), '€'.repeat(85) + 'a']) {
      assert.doesNotThrow(() => decodeEventText(JSON.stringify(named(name))), JSON.stringify(name));
    }
    for (const name of ['', 'a'.repeat(257), '😀'.repeat(64) + 'a', '€'.repeat(86)]) {
      assert.throws(() => decodeEventText(JSON.stringify(named(name))), (e: unknown) => e instanceof WireDecodeError && e.path === 'kind.call.name');
    }
  });

  it('legacy calls are held to the same id rule', () => {
    const legacy = event('e', 's', 't', { type: 'tool_call', call: { id: '€'.repeat(342), name: 'n', arguments: null } });
    assert.throws(() => decodeEvent(legacy), (e: unknown) => e instanceof WireDecodeError && e.path === 'kind.call.id');
  });
});
