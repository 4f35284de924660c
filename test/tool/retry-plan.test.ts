/**
 * ToolRetryPlan: retry test 4 of Jingwei for Rust, and properties of binding, single use and non-serializability.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ToolEffect, ToolReviewOutcome, type ToolEffectContract } from '../../src/event/types.js';
import type { JsonValue } from '../../src/json/types.js';
import { prepareToolRetry } from '../../src/tool/recovery.js';
import { ToolRetryError, ToolRetryPlanNotSerializableError } from '../../src/errors.js';
import { ToolRetryPlan, type ToolRetryBinding } from '../../src/tool/retry-plan.js';
import { FIXTURE, HistoryBuilder, expectRetryError, review } from '../support/history.js';

function planFor(effect: ToolEffect = ToolEffect.ReadOnly, args: JsonValue = FIXTURE.args): { plan: ToolRetryPlan; binding: ToolRetryBinding } {
  const h = new HistoryBuilder();
  h.call({ effect, arguments: args });
  const plan = prepareToolRetry(h.build(), FIXTURE.call, null);
  const binding: ToolRetryBinding = {
    sessionId: FIXTURE.session,
    taskId: FIXTURE.task,
    name: FIXTURE.tool,
    arguments: args,
    contract: { effect, revision: FIXTURE.revision },
  };
  return { plan, binding };
}

describe('retry test 4 of Jingwei for Rust', () => {
  it('plan_clones_share_one_use_and_bind_all_execution_inputs', () => {
    const { plan, binding } = planFor(ToolEffect.ReadOnly);
    const clone = plan.clone();
    const mismatches: ToolRetryBinding[] = [
      { ...binding, sessionId: 'sess_other' },
      { ...binding, taskId: 'task_other' },
      { ...binding, name: 'other' },
      { ...binding, arguments: { ok: false } },
      { ...binding, contract: { effect: ToolEffect.Idempotent, revision: FIXTURE.revision } },
    ];
    for (const mismatch of mismatches) expectRetryError(() => plan.takeOperation(mismatch), 'binding_changed');
    assert.equal(plan.consumed, false);
    const operation = plan.takeOperation(binding);
    assert.equal(operation.key, FIXTURE.key);
    assert.equal(operation.retry?.callId, FIXTURE.call);
    expectRetryError(() => clone.takeOperation(binding), 'consumed');
    assert.equal(clone.consumed, true);
  });
});

describe('ToolRetryPlan', () => {
  it('exposes its source and returns an operation auditing the source call event', () => {
    const h = new HistoryBuilder();
    const event = h.call({ effect: ToolEffect.NonIdempotent });
    const r = review(ToolReviewOutcome.NotExecuted);
    const plan = prepareToolRetry(h.build(), FIXTURE.call, r);
    assert.equal(plan.sourceCallId, FIXTURE.call);
    assert.equal(plan.sourceEventId, event.eventId);
    assert.equal(plan.sessionId, FIXTURE.session);
    assert.equal(plan.taskId, FIXTURE.task);
    assert.equal(plan.operationKey, FIXTURE.key);
    assert.equal(plan.toolName, FIXTURE.tool);
    assert.deepEqual(plan.arguments, FIXTURE.args);
    assert.deepEqual(plan.contract, { effect: ToolEffect.NonIdempotent, revision: FIXTURE.revision });
    assert.deepEqual(plan.review, r);
    const operation = plan.takeOperation({
      sessionId: FIXTURE.session,
      taskId: FIXTURE.task,
      name: FIXTURE.tool,
      arguments: { ok: true },
      contract: { effect: ToolEffect.NonIdempotent, revision: FIXTURE.revision },
    });
    assert.deepEqual(operation, {
      taskId: FIXTURE.task,
      key: FIXTURE.key,
      contract: { effect: ToolEffect.NonIdempotent, revision: FIXTURE.revision },
      retry: { callId: FIXTURE.call, eventId: event.eventId, review: r },
    });
  });

  it('binds a copy: mutating the history after preparation changes nothing', () => {
    const h = new HistoryBuilder();
    const args = { list: [1, 2] };
    h.call({ effect: ToolEffect.ReadOnly, arguments: args });
    const plan = prepareToolRetry(h.build(), FIXTURE.call);
    args.list.push(3);
    assert.deepEqual(plan.arguments, { list: [1, 2] });
    assert.ok(Object.isFrozen(plan.arguments));
  });

  it('equals is true exactly for clones sharing the latch', () => {
    const a = planFor().plan;
    const b = planFor().plan;
    assert.ok(a.equals(a.clone()));
    assert.ok(a.clone().equals(a.clone().clone()));
    assert.equal(a.equals(b), false);
    assert.equal(a.equals({}), false);
    assert.equal(a.equals(structuredClone(a)), false);
  });

  it('JSON.stringify throws a typed error, also when the plan is nested', () => {
    const { plan } = planFor();
    assert.throws(() => JSON.stringify(plan), ToolRetryPlanNotSerializableError);
    assert.throws(() => JSON.stringify({ options: { retry: plan } }), ToolRetryPlanNotSerializableError);
  });

  it('a structured clone or a spread is never usable, even with the prototype restored', () => {
    const { plan, binding } = planFor();
    for (const copy of [structuredClone(plan), { ...plan }, JSON.parse(JSON.stringify(Object.assign({}, plan))) as object]) {
      assert.equal('takeOperation' in copy, false);
      const forged = Object.setPrototypeOf(copy, ToolRetryPlan.prototype) as ToolRetryPlan;
      expectRetryError(() => forged.takeOperation(binding), 'invalid_evidence');
      expectRetryError(() => forged.clone(), 'invalid_evidence');
      expectRetryError(() => forged.sourceCallId, 'invalid_evidence');
    }
    const forged = Object.create(ToolRetryPlan.prototype) as ToolRetryPlan;
    expectRetryError(() => forged.takeOperation(binding), 'invalid_evidence');
    expectRetryError(() => ToolRetryPlan.prototype.takeOperation.call(undefined as never, binding), 'invalid_evidence');
    assert.equal(plan.consumed, false);
    assert.ok(plan.takeOperation(binding));
  });

  it('cannot be constructed from outside', () => {
    const Ctor = ToolRetryPlan as unknown as new (...args: unknown[]) => ToolRetryPlan;
    for (const token of [undefined, Symbol('ToolRetryPlan.mint'), {}]) {
      expectRetryError(() => new Ctor(token, { latch: { consumed: false } }), 'invalid_evidence');
    }
    expectRetryError(() => Reflect.construct(Ctor, [Symbol.for('ToolRetryPlan.mint'), {}]), 'invalid_evidence');
  });

  it('the plan and its returned operation are independent: editing the operation does not change the plan', () => {
    const { plan, binding } = planFor();
    const operation = plan.takeOperation(binding) as { contract: ToolEffectContract };
    (operation.contract as { revision: string }).revision = 'changed';
    assert.equal(plan.contract.revision, FIXTURE.revision);
  });
});

describe('ToolRetryPlan properties', () => {
  const mismatchArb = fc.record(
    {
      sessionId: fc.string({ minLength: 1 }),
      taskId: fc.string({ minLength: 1 }),
      name: fc.string({ minLength: 1 }),
      arguments: fc.jsonValue(),
      effect: fc.constantFrom(...Object.values(ToolEffect)),
      revision: fc.string({ minLength: 1 }),
    },
    { requiredKeys: [] },
  );

  it('any change of session, task, name, arguments or contract is binding_changed and consumes nothing', () => {
    fc.assert(
      fc.property(mismatchArb, (change) => {
        const { plan, binding } = planFor(ToolEffect.Idempotent);
        const changed: ToolRetryBinding = {
          sessionId: change.sessionId ?? binding.sessionId,
          taskId: change.taskId ?? binding.taskId,
          name: change.name ?? binding.name,
          arguments: change.arguments === undefined ? binding.arguments : (change.arguments as JsonValue),
          contract: { effect: change.effect ?? binding.contract.effect, revision: change.revision ?? binding.contract.revision },
        };
        const same =
          changed.sessionId === binding.sessionId &&
          changed.taskId === binding.taskId &&
          changed.name === binding.name &&
          JSON.stringify(changed.arguments) === JSON.stringify(binding.arguments) &&
          changed.contract.effect === binding.contract.effect &&
          changed.contract.revision === binding.contract.revision;
        fc.pre(!same);
        expectRetryError(() => plan.takeOperation(changed), 'binding_changed');
        assert.equal(plan.consumed, false);
        assert.equal(plan.takeOperation(binding).key, FIXTURE.key);
      }),
    );
  });

  it('the binding_changed message names what changed, its verb agreeing with it', () => {
    const { plan, binding } = planFor(ToolEffect.Idempotent);
    const cases: Array<[Partial<ToolRetryBinding>, string]> = [
      [{ sessionId: 'other' }, 'the session differs'],
      [{ taskId: 'other' }, 'the task differs'],
      [{ name: 'other' }, 'the tool name differs'],
      [{ arguments: { other: true } }, 'the arguments differ'],
      [{ contract: { effect: binding.contract.effect, revision: 'other' } }, "the tool's current contract differs"],
    ];
    for (const [change, clause] of cases) {
      assert.throws(() => plan.takeOperation({ ...binding, ...change }), { name: 'ToolRetryError', code: 'binding_changed', message: `binding_changed: ${clause} from the plan's source call; the plan was not consumed` });
    }
    assert.throws(() => plan.takeOperation(null as never), { code: 'binding_changed', message: /^binding_changed: the binding differs from/ });
    assert.equal(plan.consumed, false);
  });

  it('a plan and all its clones succeed exactly once in total', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 6 }), fc.array(fc.nat(), { minLength: 1, maxLength: 20 }), (clones, uses) => {
        const { plan, binding } = planFor();
        const handles = [plan];
        for (let i = 0; i < clones; i++) handles.push(handles[i % handles.length]!.clone());
        let successes = 0;
        for (const use of uses) {
          try {
            handles[use % handles.length]!.takeOperation(binding);
            successes += 1;
          } catch (error) {
            assert.ok(error instanceof ToolRetryError && error.code === 'consumed');
          }
        }
        assert.equal(successes, 1);
        assert.ok(handles.every((h) => h.consumed));
      }),
    );
  });

  it('arguments differing only in key order are accepted', () => {
    const shuffle = (value: JsonValue, seed: number): JsonValue => {
      if (Array.isArray(value)) return value.map((v, i) => shuffle(v, seed + i));
      if (typeof value !== 'object' || value === null) return value;
      const entries = Object.entries(value);
      const rotated = entries.length === 0 ? entries : [...entries.slice(seed % entries.length), ...entries.slice(0, seed % entries.length)];
      return Object.fromEntries(rotated.reverse().map(([k, v]) => [k, shuffle(v, seed + 1)]));
    };
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 })), fc.nat(), (args, seed) => {
        const { plan, binding } = planFor(ToolEffect.ReadOnly, args as JsonValue);
        assert.equal(plan.takeOperation({ ...binding, arguments: shuffle(args as JsonValue, seed) }).key, FIXTURE.key);
      }),
    );
  });

  it('JSON.stringify of any plan throws', () => {
    fc.assert(
      fc.property(fc.constantFrom(...Object.values(ToolEffect)), fc.boolean(), (effect, consumed) => {
        const h = new HistoryBuilder();
        h.call({ effect });
        const plan = prepareToolRetry(h.build(), FIXTURE.call, review(ToolReviewOutcome.NotExecuted));
        if (consumed) plan.takeOperation({ sessionId: FIXTURE.session, taskId: FIXTURE.task, name: FIXTURE.tool, arguments: FIXTURE.args, contract: { effect, revision: FIXTURE.revision } });
        assert.throws(() => JSON.stringify(plan), ToolRetryPlanNotSerializableError);
        assert.throws(() => JSON.stringify([plan.clone()]), ToolRetryPlanNotSerializableError);
        const copy = structuredClone(plan) as unknown as Record<string, unknown>;
        assert.equal(typeof copy.takeOperation, 'undefined');
      }),
    );
  });
});
