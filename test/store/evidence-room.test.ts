/**
 * A result always has room (docs/design.md#a-result-always-has-room): an admitted call keeps journal room for its
 * output reservation and its evidence (marker, result, one review) until its result is recorded. The room kept for
 * the evidence holds the largest marker, result and review there can be; near a full journal a call whose evidence
 * would not fit is refused before anything is written, so no body runs whose result could not be recorded.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { encodeEventText } from '../../src/event/codec.js';
import { ToolEffect, type SessionEvent } from '../../src/event/types.js';
import { newEventId, type CallId, type EventId, type SessionId, type TurnId } from '../../src/ids.js';
import { LIMITS } from '../../src/limits.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { recordToolReview } from '../../src/tool/review.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { forEachStore } from '../support/stores.js';
import { fillUntil, used } from '../support/journal-fill.js';
import { untilBodyEnded } from '../support/body-ended.js';

it('the room kept for a call\'s evidence holds its largest marker, result and review', () => {
  // Every id and text at its limit, of a character JSON escapes to six (U+0001 is one UTF-8 byte, `\u0001` in JSON).
  const text = '\u0001'.repeat(LIMITS.maxTextBytes);
  const diagnostic = '\u0001'.repeat(LIMITS.maxDiagnosticBytes);
  const envelope = { eventId: newEventId() as EventId, sessionId: text as SessionId, turnId: text as TurnId, seq: LIMITS.maxHistoryEvents - 1, recordedAt: '2026-12-03T04:35:00.000Z' };
  const callId = text as CallId;
  const approval = { requestId: text, decision: 'denied', actor: text, reason: text } as const;
  const marker: SessionEvent = { ...envelope, kind: { type: 'tool_started', callId, approval } };
  const result: SessionEvent = {
    ...envelope,
    kind: { type: 'tool_result', result: { callId, outcome: { status: 'failed', category: 'approval_denied', code: diagnostic, message: diagnostic, retryable: false }, approval } },
  };
  const review: SessionEvent = { ...envelope, kind: { type: 'tool_review', review: { callId, actor: text, outcome: 'not_executed', evidence: text, source: 'reconciler', decisionId: text } } };
  // Each event also takes one separator in the history's compact JSON.
  const largest = [marker, result, review].reduce((sum, e) => sum + Buffer.byteLength(encodeEventText(e)) + 1, 0);
  assert.ok(largest <= LIMITS.evidenceRoomBytes, `the largest evidence of a call takes ${largest} bytes, more than the ${LIMITS.evidenceRoomBytes} kept`);
  const reviewBytes = Buffer.byteLength(encodeEventText(review)) + 1;
  assert.ok(reviewBytes <= LIMITS.reviewRoomBytes, `the largest review takes ${reviewBytes} bytes, more than the ${LIMITS.reviewRoomBytes} kept`);
});

const OUTPUT_LIMIT = 200 * 1024;

/** A mail tool whose body reports each run, returning `outputBytes` of text (of `char`, one UTF-8 byte). */
function mailer(outputBytes: number, char = 'x') {
  const runs: string[] = [];
  const tool = {
    name: 'send_mail',
    metadata: new ToolMetadata('Sends one e-mail', { type: 'object' }).withEffect(ToolEffect.NonIdempotent, 'mail-v1').withOutputCeiling(OUTPUT_LIMIT),
    async execute(request: { callId: string }) {
      runs.push(request.callId);
      return char.repeat(outputBytes);
    },
  };
  return { runtime: createToolRuntime({ tools: [tool], grants: { agent: '*' }, maxOutputBytes: OUTPUT_LIMIT }), runs };
}

forEachStore('a result always has room', (target) => {
  async function session(free: number) {
    const store = await target.fresh().open();
    const owner = await store.acquire('s-full', { owner: 'host' });
    await owner.startTask('t', { limits: { toolOutputBytes: 64 * 1024 * 1024, journalBytes: 64 * 1024 * 1024 } });
    await fillUntil(store, owner, free);
    return { store, owner };
  }

  it('refuses, before anything is written, a call whose result and review could not be recorded: the body never runs', async () => {
    // Before the room was kept, this call ran, and its 150 KiB result did not fit in what was left: in doubt.
    const { store, owner } = await session(LIMITS.evidenceRoomBytes);
    const before = await used(store, 's-full');
    const { runtime, runs } = mailer(150 * 1024);
    const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent' });
    await assert.rejects(gateway.call('send_mail', { to: 'ana@example.com' }), { code: 'journal_full' });
    assert.deepEqual(runs, [], 'the body never ran');
    assert.equal(await used(store, 's-full'), before, 'nothing was written');
    await store.close();
  });

  it('an admitted call near the end of the journal gets its result recorded, and an uncertain one its review', async () => {
    // Room for the first call's whole output limit; after its 150 KiB, room for the second's evidence and less
    // than its 150 KiB output.
    const { store, owner } = await session(LIMITS.evidenceRoomBytes + OUTPUT_LIMIT + 90 * 1024);
    const { runtime, runs } = mailer(150 * 1024);
    const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent' });
    const sent = await gateway.call('send_mail', { to: 'ana@example.com' });
    assert.equal(sent.result.outcome.status, 'succeeded');
    assert.equal(runs.length, 1);
    // The output reservation shrinks to the room left: an output over it is refused, recorded, and reviewable.
    const next = await gateway.call('send_mail', { to: 'bob@example.com' });
    const outcome = next.result.outcome;
    assert.equal(outcome.status === 'failed' ? outcome.category : outcome.status, 'output_limit');
    assert.equal(runs.length, 2, 'its body ran, and its result is in the journal');
    const review = await recordToolReview(owner, await store.loadHistory('s-full'), next.call.id, {
      turnId: 'turn-review', actor: 'alice', outcome: 'completed', evidence: 'the mail is in the outbox',
    });
    assert.equal(review.kind.type, 'tool_review');
    assert.ok((await used(store, 's-full')) <= LIMITS.maxHistoryBytes);
    await store.close();
  });

  // u138 #1: events the host appended while a call ran used the room its result was admitted with; the body made its
  // write, its result could not be recorded (journal_full), and neither could a review: the call stayed in doubt.
  it('events appended while a call runs leave the room of its result: the append is refused, the result recorded', async () => {
    const { store, owner } = await session(LIMITS.evidenceRoomBytes + OUTPUT_LIMIT + 90 * 1024);
    let release!: () => void;
    let running!: () => void;
    const started = new Promise<void>((resolve) => (running = resolve));
    const tool = {
      name: 'send_mail',
      metadata: new ToolMetadata('Sends one e-mail', { type: 'object' }).withEffect(ToolEffect.NonIdempotent, 'mail-v1').withOutputCeiling(OUTPUT_LIMIT),
      async execute() {
        running();
        await new Promise<void>((resolve) => (release = resolve));
        return 'x'.repeat(150 * 1024);
      },
    };
    const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' }, maxOutputBytes: OUTPUT_LIMIT }).bind({ owner, taskId: 't', caller: 'agent' });
    const call = gateway.call('send_mail', { to: 'ana@example.com' });
    await started;
    const before = await used(store, 's-full');
    await assert.rejects(owner.append([{ turnId: 'turn-chat' as TurnId, kind: { type: 'user_message', text: 'm'.repeat(200 * 1024) } }]),
      { code: 'journal_full', message: /the results and reviews of 1 call still running need \d+ bytes and \d+ events of the rest; nothing was written/ });
    assert.equal(await used(store, 's-full'), before, 'nothing was written');
    await owner.append([{ turnId: 'turn-chat' as TurnId, kind: { type: 'user_message', text: 'a short one fits' } }]);
    release();
    const sent = await call;
    assert.equal(sent.result.outcome.status, 'succeeded', 'its result was recorded');
    await owner.append([{ turnId: 'turn-chat' as TurnId, kind: { type: 'user_message', text: 'm'.repeat(200 * 1024) } }]);
    assert.ok((await used(store, 's-full')) <= LIMITS.maxHistoryBytes, 'once recorded, the room is the host\'s again');
    await store.close();
  });

  // u140 #1: the room kept for a call's review went with its result: a result in doubt (the body threw after its
  // start), then the host's appends filled the journal, and the review that would settle the write was refused.
  it('a call whose write is in doubt keeps room for its review: appends are refused before they take it', async () => {
    const { store, owner } = await session(LIMITS.evidenceRoomBytes + OUTPUT_LIMIT + 90 * 1024);
    const tool = {
      name: 'send_mail',
      metadata: new ToolMetadata('Sends one e-mail', { type: 'object' }).withEffect(ToolEffect.NonIdempotent, 'mail-v1').withOutputCeiling(OUTPUT_LIMIT),
      async execute(): Promise<string> {
        throw new Error('connection reset after the request was sent');
      },
    };
    const gateway = createToolRuntime({ tools: [tool], grants: { agent: '*' }, maxOutputBytes: OUTPUT_LIMIT }).bind({ owner, taskId: 't', caller: 'agent' });
    const failed = await gateway.call('send_mail', { to: 'ana@example.com' });
    assert.equal(failed.result.outcome.status, 'failed');
    await assert.rejects(fillUntil(store, owner, 0), { code: 'journal_full', message: /a review of each of 1 call whose outcome is open or whose write is due need \d+ bytes and \d+ events of the rest/ });
    assert.ok(LIMITS.maxHistoryBytes - (await used(store, 's-full')) >= LIMITS.reviewRoomBytes - 1024, 'the review room is left');
    const review = await recordToolReview(owner, await store.loadHistory('s-full'), failed.call.id, {
      turnId: 'turn-review', actor: 'alice', outcome: 'completed', evidence: 'the mail is in the outbox',
    });
    assert.equal(review.kind.type, 'tool_review');
    await owner.append([{ turnId: 'turn-chat' as TurnId, kind: { type: 'user_message', text: 'm'.repeat(20 * 1024) } }]);
    await store.close();
  });

  // u140 #3: a new owner kept no room for the old owner's call still running; it filled the journal, and that call's
  // review could not be journaled.
  it('a new owner keeps room for a review of the calls the old owner left open', async () => {
    const location = target.fresh();
    const store = await location.open();
    const old = await store.acquire('s-full', { owner: 'host-a' });
    await old.startTask('t', { limits: { toolOutputBytes: 64 * 1024 * 1024, journalBytes: 64 * 1024 * 1024 } });
    await fillUntil(store, old, LIMITS.evidenceRoomBytes + OUTPUT_LIMIT + 90 * 1024);
    let running!: () => void;
    const started = new Promise<void>((resolve) => (running = resolve));
    let release!: (text: string) => void;
    const tool = {
      name: 'send_mail',
      metadata: new ToolMetadata('Sends one e-mail', { type: 'object' }).withEffect(ToolEffect.NonIdempotent, 'mail-v1').withOutputCeiling(OUTPUT_LIMIT),
      async execute(): Promise<string> {
        running();
        return await new Promise<string>((resolve) => (release = resolve));
      },
    };
    const call = createToolRuntime({ tools: [tool], grants: { agent: '*' }, maxOutputBytes: OUTPUT_LIMIT }).bind({ owner: old, taskId: 't', caller: 'agent' }).call('send_mail', {});
    call.catch(() => undefined);
    await started;
    const other = await location.open();
    const successor = await other.acquire('s-full', { owner: 'host-b', takeover: true });
    await assert.rejects(fillUntil(other, successor, 0), { code: 'journal_full', message: /a review of each of 1 call whose outcome is open or whose write is due/ });
    release('sent');
    await call.catch(() => undefined);
    const called = (await other.loadHistory('s-full')).find((e) => e.kind.type === 'tool_call')?.kind;
    assert.ok(called?.type === 'tool_call');
    // The old body's end reaches the journal through the new owner (one process, one database): reviewed after it.
    await untilBodyEnded(other, 's-full', called.call.id);
    const history = await other.loadHistory('s-full');
    const review = await recordToolReview(successor, history, called.call.id, { turnId: 'turn-review', actor: 'alice', outcome: 'completed', evidence: 'the mail is in the outbox' });
    assert.equal(review.kind.type, 'tool_review');
    await successor.release();
    await other.close();
    await store.close();
  });

  it('an output that grows when JSON-escaped is counted as the journal stores it: its result is recorded', async () => {
    // 200 KiB of U+0001 is 200 KiB of UTF-8, within the limit by that count, and 1.2 MiB in the journal (`\u0001`):
    // its result did not fit in the room kept for it, and the sent mail was left in doubt.
    const { store, owner } = await session(LIMITS.evidenceRoomBytes + OUTPUT_LIMIT + 90 * 1024);
    const { runtime, runs } = mailer(OUTPUT_LIMIT, '\u0001');
    const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent' });
    const sent = await gateway.call('send_mail', { to: 'ana@example.com' });
    const outcome = sent.result.outcome;
    assert.equal(outcome.status === 'failed' ? outcome.category : outcome.status, 'output_limit');
    assert.match(outcome.status === 'failed' ? outcome.message : '', new RegExp(`the output is ${OUTPUT_LIMIT} bytes, ${6 * OUTPUT_LIMIT} as the journal stores it \\(JSON-escaped\\)`));
    assert.equal(runs.length, 1);
    assert.equal((await owner.task('t')).charged.toolOutputBytes, OUTPUT_LIMIT, 'charged its reservation, no more');
    assert.ok((await used(store, 's-full')) <= LIMITS.maxHistoryBytes);
    await store.close();
  });
});
