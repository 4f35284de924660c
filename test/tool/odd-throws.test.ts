/**
 * What a body, a guard or an approver throws or answers is read once, defensively, and always recorded. Before, an
 * Error with a string code and a non-string message (or a code getter that throws, or a thrown revoked Proxy) came
 * out of the call as a raw TypeError after the start marker: the result was never journaled and a call whose body
 * had finished was left in doubt. And guards were handed the live call: a guard could rewrite the arguments that
 * were then journaled (past JSON Schema), or the operation key, making the session unassessable.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { assessSession } from '../../src/tool/assess.js';
import { ToolMetadata } from '../../src/tool/metadata.js';
import type { ToolHookContext } from '../../src/tool/types.js';
import { rig, tool } from '../support/runtime.js';
import { forEachStore } from '../support/stores.js';

const write = new ToolMetadata('writes', { type: 'object' }).withEffect('non_idempotent', 'v1');
const oddMessage = () => Object.assign(new Error('x'), { code: 'E_FOO', message: { not: 'text' } });
const throwingCode = () => {
  const error = new Error('boom');
  Object.defineProperty(error, 'code', { get() { throw new Error('no code for you'); } });
  return error;
};
const revokedProxy = () => {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
};

forEachStore('odd throws and answers are recorded', (target) => {
  it('a body throwing an error with a non-text message, a throwing code getter or a revoked Proxy: body_panic, journaled', async () => {
    const r = await rig(target, {
      tools: [
        tool('odd_message', async () => { throw oddMessage(); }, write),
        tool('throwing_code', async () => { throw throwingCode(); }, write),
        tool('revoked', async () => { throw revokedProxy(); }, write),
      ],
    });
    for (const name of ['odd_message', 'throwing_code', 'revoked']) {
      const execution = await r.gateway.call(name, {});
      assert.equal(execution.result.outcome.status === 'failed' && execution.result.outcome.category, 'body_panic', name);
      assert.ok(execution.startedEvent, `${name}: the body started`);
    }
    const history = await r.store.loadHistory(r.sessionId);
    assert.equal(history.filter((e) => e.kind.type === 'tool_result').length, 3, 'every result journaled');
    await r.store.close();
  });

  it('guards and approvers that throw such values, or answer with a Proxy that throws: recorded before the body', async () => {
    let ran = 0;
    const body = async () => { ran += 1; return 'ran'; };
    const throwing = new Proxy({}, { get() { throw new Error('trap'); } });
    const cases: Array<[string, (ctx: ToolHookContext) => unknown, string]> = [
      ['guard_odd', () => { throw oddMessage(); }, 'guard_fault'],
      ['guard_revoked', () => { throw revokedProxy(); }, 'guard_fault'],
      ['guard_proxy', () => throwing, 'guard_fault'],
    ];
    const r = await rig(target, {
      tools: [
        ...cases.map(([name]) => tool(name, body, write)),
        tool('approval_odd', body, new ToolMetadata('a', { type: 'object' }).withApproval('odd')),
        tool('approval_proxy', body, new ToolMetadata('a', { type: 'object' }).withApproval('proxy')),
      ],
      guards: [(ctx) => (cases.find(([name]) => name === ctx.call.name)?.[1](ctx) as null) ?? null],
      approvers: { odd: async () => { throw throwingCode(); }, proxy: async () => throwing as never },
    });
    for (const [name, , category] of cases) {
      const execution = await r.gateway.call(name, {});
      assert.equal(execution.result.outcome.status === 'failed' && execution.result.outcome.category, category, name);
    }
    for (const name of ['approval_odd', 'approval_proxy']) {
      const execution = await r.gateway.call(name, {});
      assert.equal(execution.result.outcome.status === 'failed' && execution.result.outcome.category, 'approval_fault', name);
      assert.equal(execution.startedEvent, null);
    }
    assert.equal(ran, 0);
    const assessment = assessSession(await r.store.loadHistory(r.sessionId));
    assert.ok(assessment.calls.every((c) => c.status === 'not_executed'), 'each is provably unrun');
    await r.store.close();
  });

  it('a guard cannot change the call: arguments, operation and what is journaled stay as validated', async () => {
    const seen: unknown[] = [];
    const pay = tool('pay', async (request) => { seen.push(request.arguments); return 'paid'; },
      new ToolMetadata('pays', { type: 'object', properties: { amount: { type: 'number', maximum: 100 } }, additionalProperties: false }).withEffect('non_idempotent', 'v1'));
    const attempts: string[] = [];
    const r = await rig(target, {
      tools: [pay],
      guards: [(ctx) => {
        const call = ctx.call as unknown as { arguments: Record<string, unknown>; operation: { key: string } };
        for (const change of [() => { call.arguments.amount = 999_999; }, () => { call.arguments.extra = 'injected'; }, () => { call.operation.key = 'other'; }]) {
          try {
            change();
            attempts.push('changed');
          } catch (error) {
            attempts.push((error as Error).name);
          }
        }
        return null;
      }],
    });
    const execution = await r.gateway.call('pay', { amount: 5 });
    assert.equal(execution.result.outcome.status, 'succeeded');
    assert.deepEqual(attempts, ['TypeError', 'TypeError', 'TypeError'], 'the hook view is frozen');
    assert.deepEqual(seen, [{ amount: 5 }]);
    assert.deepEqual(execution.call.arguments, { amount: 5 });
    const journaled = (await r.store.loadHistory(r.sessionId)).find((e) => e.kind.type === 'tool_call');
    assert.deepEqual(journaled?.kind.type === 'tool_call' && journaled.kind.call.arguments, { amount: 5 });
    assert.equal(assessSession(await r.store.loadHistory(r.sessionId)).calls.length, 0);
    await r.store.close();
  });
});
