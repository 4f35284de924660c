/**
 * Budgets shared by calls running at once in one task (docs/design.md#budgets-are-exact): a call is admitted with
 * its whole output limit or refused before anything is written, never with a limit its running siblings shrank (its
 * body could do its write and then have its answer refused as output_limit, leaving a completed write in doubt);
 * and the task's journal-bytes limit counts the outputs its open calls may still record, so the calls running at
 * once cannot each take the task past it.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { ToolMetadata } from '../../src/tool/metadata.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import { assessSession } from '../../src/tool/assess.js';
import type { Tool } from '../../src/tool/types.js';
import { sleep, tool } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';

const MAIL = new ToolMetadata('sends a mail', { type: 'object' }).withEffect('non_idempotent', 'v1');

/** A mail tool whose provider answers after `ms` with a 5,000-byte receipt; counts the mails it sent. */
function mailer(ms: number) {
  const sent: string[] = [];
  const send = tool('send_mail', async (request) => {
    await sleep(ms);
    sent.push(request.callId);
    return 'r'.repeat(5000);
  }, MAIL);
  return { send, sent };
}

type Settled = { status: 'succeeded' | 'failed'; category?: string } | { thrown: string; resource?: string; message: string };

async function settle(pending: Promise<{ result: { outcome: { status: string; category?: string } } }>): Promise<Settled> {
  try {
    const o = (await pending).result.outcome;
    return o.status === 'succeeded' ? { status: 'succeeded' } : { status: 'failed', category: o.category ?? '' };
  } catch (error) {
    const e = error as { code?: string; resource?: string; message: string };
    return { thrown: e.code ?? 'unknown', ...(e.resource ? { resource: e.resource } : {}), message: e.message };
  }
}

forEachStore('calls running at once share their task\'s budget', (target) => {
  /**
   * A task with a 68,000-byte output budget and one mail running in it (holding 65,536 of them), the gateway having
   * `tools` beside the mail tool.
   */
  async function oneMailRunning(sessionId: string, tools: Tool[] = []) {
    const store = await target.fresh().open();
    const owner = await store.acquire(sessionId, { owner: 'host' });
    await owner.startTask('t', { limits: { toolOutputBytes: 68000 } });
    const world = mailer(100);
    const gateway = createToolRuntime({ tools: [world.send, ...tools], grants: { agent: '*' } }).bind({ owner, taskId: 't', caller: 'agent' });
    const first = gateway.call('send_mail', { to: 'a' });
    await sleep(30);
    return { store, owner, world, gateway, first };
  }

  it('a call its siblings leave too little output budget is refused with nothing written; no completed write is recorded as output_limit', async () => {
    const { store, owner, world, gateway, first } = await oneMailRunning('s-share');
    const others = await Promise.all([settle(gateway.call('send_mail', { to: 'b' })), settle(gateway.call('send_mail', { to: 'c' }))]);
    assert.deepEqual(await settle(first), { status: 'succeeded' });
    for (const refused of others) {
      assert.ok('thrown' in refused && refused.thrown === 'budget_exhausted' && refused.resource === 'tool_output_bytes', JSON.stringify(refused));
      assert.match(refused.message, /0 of 68000 used and 65536 reserved by 1 call still open; this call needs 65536: call it again once they have finished/);
    }
    assert.equal(world.sent.length, 1, 'no refused body ran');
    const history = await store.loadHistory('s-share');
    assert.equal(history.filter((e) => e.kind.type === 'tool_call').length, 1, 'a refused call writes nothing');
    assert.deepEqual(assessSession(history).calls.filter((c) => c.attention !== 'none'), [], 'nothing is left in doubt');
    // Once the first has finished, the same call is admitted with what the task has not used and succeeds.
    assert.deepEqual(await settle(gateway.call('send_mail', { to: 'b' })), { status: 'succeeded' });
    const task = await owner.task('t');
    assert.deepEqual([task.charged.toolCalls, task.charged.toolOutputBytes, task.reservedOutputBytes], [2, 10000, 0]);
    await store.close();
  });

  it('a call refused before its body, beside a running call holding the whole output budget, is recorded as refused, not thrown', async () => {
    const strict = tool('send_strict', async () => 'sent', new ToolMetadata('sends a mail', { type: 'object', required: ['to'] }).withEffect('non_idempotent', 'v1'));
    const { store, owner, gateway, first } = await oneMailRunning('s-refused', [strict]);
    // The running call holds 65,536 of the 68,000 bytes; a call refused by its schema needs none of them.
    assert.deepEqual(await settle(gateway.call('send_strict', {})), { status: 'failed', category: 'invalid_arguments' });
    assert.deepEqual(await settle(gateway.call('send_nothing', {})), { status: 'failed', category: 'unavailable' });
    assert.deepEqual(await settle(first), { status: 'succeeded' });
    const task = await owner.task('t');
    assert.deepEqual([task.charged.toolCalls, task.charged.toolOutputBytes, task.reservedOutputBytes], [3, 5000, 0]);
    await store.close();
  });

  it('calls running at once take the task past its journal-bytes limit by one result at most', async () => {
    const store = await target.fresh().open();
    const owner = await store.acquire('s-journal', { owner: 'host' });
    await owner.startTask('t', { limits: { journalBytes: 20000 } });
    const world = mailer(50);
    const gateway = createToolRuntime({ tools: [world.send], grants: { agent: '*' }, maxOutputBytes: 6000 }).bind({ owner, taskId: 't', caller: 'agent' });
    const outcomes = await Promise.all(Array.from({ length: 10 }, (_, i) => settle(gateway.call('send_mail', { to: `p${i}` }))));
    const succeeded = outcomes.filter((o) => 'status' in o && o.status === 'succeeded').length;
    const refused = outcomes.filter((o) => 'thrown' in o && o.thrown === 'budget_exhausted' && o.resource === 'journal_bytes');
    assert.equal(succeeded + refused.length, 10, JSON.stringify(outcomes));
    assert.ok(succeeded >= 1);
    assert.equal(world.sent.length, succeeded);
    const history = await store.loadHistory('s-journal');
    const results = history.filter((e) => e.kind.type === 'tool_result');
    const largest = Math.max(...results.map((e) => Buffer.byteLength(JSON.stringify(e))));
    const task = await owner.task('t');
    assert.ok(task.charged.journalBytes <= 20000 + largest,
      `charged ${task.charged.journalBytes} journal bytes against a limit of 20000: more than one result (${largest} bytes) over it`);
    await store.close();
  });

  it('an output that grows when JSON-escaped takes the task past its journal-bytes limit by its reservation at most', async () => {
    // 6,000 ESC characters (terminal colours) are 6,000 UTF-8 bytes and 36,000 in the journal (`\u001b`): one such
    // result took a task five times its reservation past its limit (docs/design.md#output-is-counted-as-it-is-journaled).
    const store = await target.fresh().open();
    const owner = await store.acquire('s-escaped', { owner: 'host' });
    await owner.startTask('t', { limits: { journalBytes: 10000 } });
    const shell = tool('shell', async () => '\u001b'.repeat(6000));
    const gateway = createToolRuntime({ tools: [shell], grants: { agent: '*' }, maxOutputBytes: 6000 }).bind({ owner, taskId: 't', caller: 'agent' });
    const outcome = (await gateway.call('shell', {})).result.outcome;
    assert.equal(outcome.status === 'failed' ? outcome.category : outcome.status, 'output_limit');
    const task = await owner.task('t');
    assert.ok(task.charged.journalBytes <= 10000 + 6000, `charged ${task.charged.journalBytes} journal bytes against a limit of 10000 and a 6,000-byte reservation`);
    await store.close();
  });
});
