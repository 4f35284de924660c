/**
 * A store refuses to write what could not be read back (docs/design.md#what-a-store-refuses-to-write). The check
 * runs on the line just encoded; this compares what a commit refuses with the definition it replaces: encode, then
 * decode the text with the bounded parser, a failure named by the draft's own field.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { InvalidInputError, WireDecodeError } from '../../src/errors.js';
import { apiFieldPath } from '../../src/event/api-path.js';
import { decodeEventText, encodeEventText, recordedAtText } from '../../src/event/codec.js';
import type { EventDraft, SessionEvent } from '../../src/event/types.js';
import type { EventId, SessionId } from '../../src/ids.js';
import type { JsonValue } from '../../src/json/types.js';
import { createMemoryStore } from '../../src/store/memory.js';
import { commitAs } from '../../src/store/owner-commit.js';
import { openSqliteStore } from '../../src/store/sqlite/index.js';
import type { SessionStore } from '../../src/store/types.js';
import { arbHostileJson } from '../support/arbitraries.js';

const NOW = Date.parse('2026-12-01T10:00:00.000Z');

/** The refusal by the former definition, as chainEvents reported it; null when the event would be written. */
function formerRefusal(event: SessionEvent): { field: string; message: string } | null {
  try {
    decodeEventText(encodeEventText(event));
    return null;
  } catch (error) {
    if (error instanceof WireDecodeError) {
      const detail = error.message.startsWith(`${error.path}: `) ? error.message.slice(error.path.length + 2) : error.message;
      return { field: `events[0].${apiFieldPath(error.path)}`, message: `cannot be journaled: ${detail}` };
    }
    return { field: 'events[0]', message: `cannot be journaled: ${(error as Error).message}` };
  }
}

const hostileText = fc.string({ unit: fc.constantFrom('a', ' ', '\ud800', '\udc00', '\u0000', '\\', 'u', '😀'), maxLength: 6 });

/** A draft with hostile JSON or text where a host (or the runtime, for tool calls) puts its own values. */
const arbDraft: fc.Arbitrary<Omit<EventDraft, 'eventId'>> = fc.oneof(
  fc.tuple(arbHostileJson(), hostileText).map(([payload, kind]) => ({ turnId: 'turn', kind: { type: 'custom', plugin: 'p', kind: `k${kind}`, payload: payload as JsonValue } }) as EventDraft),
  fc.tuple(arbHostileJson(), hostileText).map(([args, name]) => ({ turnId: 'turn', kind: { type: 'tool_call', call: { id: 'call', name: `t${name}`, arguments: args as JsonValue } } }) as unknown as EventDraft),
  hostileText.map((text) => ({ turnId: `turn${text}`, kind: { type: 'user_message', text } }) as EventDraft),
  hostileText.map((text) => ({ turnId: 'turn', generationId: text, kind: { type: 'assistant_message', text: `a${text}` } }) as EventDraft),
);

async function checkStore(store: SessionStore, runs: number): Promise<void> {
  const sessionId = 'write-validation' as SessionId;
  const owner = await store.acquire(sessionId, { owner: 'test' });
  let seq = 0;
  let n = 0;
  try {
    await fc.assert(
      fc.asyncProperty(arbDraft, async (partial) => {
        const eventId = `evt-${n++}` as EventId;
        const draft = { ...partial, eventId } as EventDraft;
        const expected = formerRefusal({ ...draft, sessionId, seq, recordedAt: recordedAtText(NOW) } as SessionEvent);
        try {
          await commitAs(owner, { events: [draft] });
        } catch (error) {
          assert.ok(error instanceof InvalidInputError, `expected InvalidInputError, got ${String(error)}`);
          assert.deepStrictEqual({ field: error.field, message: error.message }, expected && { field: expected.field, message: `${expected.field}: ${expected.message}` });
          return;
        }
        assert.equal(expected, null, 'written, though the former definition refused it');
        seq += 1;
      }),
      { numRuns: runs },
    );
  } finally {
    await store.close();
  }
}

describe('a commit refuses exactly the drafts the encode-then-parse definition refused', () => {
  it('property: memory store, hostile drafts', async () => {
    await checkStore(createMemoryStore({ clock: () => NOW }), 1500);
  });

  it('property: SQLite store, hostile drafts', async () => {
    await checkStore(openSqliteStore(':memory:', { clock: () => NOW }), 500);
  });
});
