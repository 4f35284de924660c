/**
 * The live queue's stream to a client that stops reading: every update replaces the last whole, so the console holds
 * the newest one, not every one sent meanwhile, and sends it once the client has read the rest.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { it } from 'node:test';
import { LatestUpdate } from '../../src/cli/console/live-stream.js';

/** A socket whose client has stopped reading: nothing written completes until `read()` is called. */
function stalledClient() {
  const received: string[] = [];
  let done: (() => void) | null = null;
  const out = new Writable({
    highWaterMark: 64,
    write(chunk: Buffer, _encoding, callback) {
      received.push(chunk.toString());
      done = () => callback();
    },
  });
  return { out, received, read: () => { const d = done; done = null; d?.(); } };
}

it('a client that stops reading holds the console to one pending update, and gets the newest when it reads again', async () => {
  const client = stalledClient();
  const live = new LatestUpdate(client.out);
  live.send(`event: queue\ndata: ${'first '.repeat(20)}\n\n`);
  for (let i = 1; i <= 5000; i++) live.send(`event: queue\ndata: update ${i} ${'x'.repeat(100)}\n\n`);
  assert.ok(client.out.writableLength < 1024, `the console kept ${client.out.writableLength} bytes for a client that reads nothing`);
  assert.equal(client.received.length, 1, 'only what was sent before the client stopped reading reached its socket');
  client.read();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(client.received.length, 2);
  assert.match(client.received[1]!, /^event: queue\ndata: update 5000 /, 'the newest update, not the oldest held');
  client.read();
  live.send('event: queue\ndata: later\n\n');
  assert.equal(client.received.at(-1), 'event: queue\ndata: later\n\n', 'a client reading again gets updates at once');
});

it('nothing is written to a stream already ended', () => {
  const client = stalledClient();
  const live = new LatestUpdate(client.out);
  client.out.end();
  live.send('event: queue\ndata: late\n\n');
  assert.deepEqual(client.received, []);
});
