/**
 * A run's call waiting for an operator's approval while a redeploy changes who approves its tool, under the same
 * contract revision (docs/design.md#durable-approvals): an approval given on the request of one approver never stands
 * in for another, and a tool that no longer asks for approval does not wait for a decision nothing needs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { resumeAgent, runAgent, scriptedModel, type ScriptedModel } from '../../src/agent.js';
import { decisionInbox } from '../../src/decisions.js';
import { openSqliteStore } from '../../src/sqlite.js';
import { createToolRuntime } from '../../src/tool/runtime.js';
import type { Tool, ToolApprover } from '../../src/tool/types.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { doneStep, emailStep, orderStep, outside } from './fixtures/shop-run.js';

const pending: ToolApprover = async () => ({ decision: 'pending', note: 'check the address' });
const cfoRefuses: ToolApprover = async () => ({ decision: 'denied', code: 'cfo_says_no', message: 'the CFO refuses' });

/** The e-mail tool asking `approver` (null: no approval), the same contract otherwise. */
function emailAsks(world: ReturnType<typeof outside>, approver: string | null): Tool[] {
  return world.tools.map((t) => {
    if (t.name !== 'send_email') return t;
    const plain = outside({}).tools[1]!.metadata;
    return { ...t, metadata: approver === null ? plain : plain.withApproval(approver) };
  });
}

/** One "process" whose runtime registers `approvers` by key. */
async function host(path: string, tools: Tool[], approvers: Record<string, ToolApprover>) {
  const store = openSqliteStore(path);
  const owner = await store.acquire('shop', { owner: `host-${Math.random()}`, takeover: true });
  await owner.startTask('task');
  const runtime = createToolRuntime({ tools, grants: { agent: '*' }, approvers });
  return { store, owner, gateway: runtime.bind({ owner, taskId: 'task', caller: 'agent' }) };
}

const toolMessages = (model: ScriptedModel) => model.requests[0]!.messages.filter((m) => m.role === 'tool').map((m) => m.content);

describe('a run whose call waits for approval while a redeploy changes its approver', () => {
  const dir = tempDir();

  async function waiting(runId: string) {
    const path = tempDbPath(dir);
    const world = outside({ emailApprover: true });
    const first = await host(path, emailAsks(world, 'operator'), { operator: pending });
    const stopped = await runAgent({ ...first, model: scriptedModel([orderStep, emailStep]), input: 'Buy tea.', maxSteps: 6, runId, store: first.store });
    assert.equal(stopped.stopReason, 'awaiting_approval');
    const [request] = (await decisionInbox(first.store).list({ sessionId: 'shop', kind: 'approval' })).items;
    assert.equal(request?.binding?.approver, 'operator', 'the request names the approver it was left for');
    return { path, world, first, request: request! };
  }

  it('approved on the old approver\'s request, the tool now asks a stricter one: that approver is asked, and its refusal stands', async () => {
    const { path, world, first, request } = await waiting('to-cfo-approved');
    await decisionInbox(first.store).approve(request.id, { actor: 'lead-bob' });
    await first.store.close();
    const second = await host(path, emailAsks(world, 'cfo'), { cfo: cfoRefuses });
    const model = scriptedModel([doneStep]);
    const resumed = await resumeAgent({ ...second, model, runId: 'to-cfo-approved', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order'], 'the e-mail was not sent on an approval the CFO never gave');
    assert.match(toolMessages(model)[1]!, /the CFO refuses/);
    const inbox = decisionInbox(second.store);
    assert.equal((await inbox.get(request.id))!.state, 'superseded', 'the old approval is not left for a later attempt to use');
    await second.store.close();
  });

  it('undecided, the tool now asks another approver: the resume asks it instead of waiting on a request it would not use', async () => {
    const { path, world, first, request } = await waiting('to-cfo-open');
    await first.store.close();
    const second = await host(path, emailAsks(world, 'cfo'), { cfo: pending });
    const resumed = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'to-cfo-open', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'awaiting_approval');
    const inbox = decisionInbox(second.store);
    assert.equal((await inbox.get(request.id))!.state, 'superseded');
    const open = (await inbox.list({ sessionId: 'shop', kind: 'approval' })).items;
    assert.deepEqual(open.map((r) => r.binding?.approver), ['cfo'], 'one request waits, for the approver the tool asks now');
    await inbox.approve(open[0]!.id, { actor: 'cfo-carol' });
    const done = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'to-cfo-open', store: second.store, maxSteps: 6 });
    assert.equal(done.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    await second.store.close();
  });

  it('undecided, the tool no longer asks for approval: the resume sends the e-mail once instead of waiting for a decision nothing needs', async () => {
    const { path, world, first, request } = await waiting('dropped-open');
    await first.store.close();
    const second = await host(path, emailAsks(world, null), {});
    const resumed = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'dropped-open', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    const inbox = decisionInbox(second.store);
    assert.equal((await inbox.get(request.id))!.state, 'superseded', 'the request leaves the queue: no one is asked to approve a sent e-mail');
    const again = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'dropped-open', store: second.store, maxSteps: 6 });
    assert.equal(again.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email'], 'a further resume sends nothing');
    await second.store.close();
  });

  it('denied by an operator, the tool no longer asks for approval: the denial of this very action stands', async () => {
    const { path, world, first, request } = await waiting('dropped-denied');
    await decisionInbox(first.store).deny(request.id, { actor: 'lead-bob', reason: 'wrong customer' });
    await first.store.close();
    const second = await host(path, emailAsks(world, null), {});
    const model = scriptedModel([doneStep]);
    const resumed = await resumeAgent({ ...second, model, runId: 'dropped-denied', store: second.store, maxSteps: 6 });
    assert.equal(resumed.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order']);
    assert.match(toolMessages(model)[1]!, /wrong customer/);
    await second.store.close();
  });

  it('resumed through a wrapper gateway, which cannot say which approver its tool asks: the run waits for the operator, and the approval is used (pass r52 #1)', async () => {
    const { path, world, first, request } = await waiting('wrapped');
    await first.store.close();
    const second = await host(path, emailAsks(world, 'operator'), { operator: pending });
    const g = second.gateway;
    const wrapper: typeof g = {
      sessionId: g.sessionId, taskId: g.taskId, turnId: g.turnId,
      schemas: () => g.schemas(),
      call: (name, args) => g.call(name, args),
      callWithOptions: (name, args, options) => g.callWithOptions(name, args, options),
    };
    const run = { ...second, gateway: wrapper, reconcilers: [], runId: 'wrapped', store: second.store, maxSteps: 6 };
    assert.equal((await resumeAgent({ ...run, model: scriptedModel([]) })).stopReason, 'awaiting_approval');
    assert.equal((await decisionInbox(second.store).get(request.id))!.state, 'open', 'the request the operator sees is still the one to decide');
    await decisionInbox(second.store).approve(request.id, { actor: 'lead-bob' });
    assert.equal((await resumeAgent({ ...run, model: scriptedModel([doneStep]) })).stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    await second.store.close();
  });

  it('a request left before requests recorded their approver is waited for, and its approval is used (pass r52 #2)', async () => {
    const { path, world, first, request } = await waiting('old-request');
    await first.store.close();
    const db = new Database(path);
    const row = db.prepare<[string], { detail: string }>('SELECT detail FROM jw_decisions WHERE id = ?').get(request.id)!;
    const detail = JSON.parse(row.detail) as { binding: Record<string, unknown> };
    delete detail.binding.approver;
    db.prepare('UPDATE jw_decisions SET detail = ? WHERE id = ?').run(JSON.stringify(detail), request.id);
    db.close();
    const second = await host(path, emailAsks(world, 'operator'), { operator: pending });
    assert.equal((await resumeAgent({ ...second, model: scriptedModel([]), runId: 'old-request', store: second.store, maxSteps: 6 })).stopReason, 'awaiting_approval');
    await decisionInbox(second.store).approve(request.id, { actor: 'lead-bob' });
    const done = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'old-request', store: second.store, maxSteps: 6 });
    assert.equal(done.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email'], 'sent on the approval, not asked again');
    assert.equal((await decisionInbox(second.store).get(request.id))!.state, 'consumed');
    await second.store.close();
  });

  it('the same approver after a redeploy: the run still waits for the operator, and the approval is used', async () => {
    const { path, world, first, request } = await waiting('same-approver');
    await first.store.close();
    const second = await host(path, emailAsks(world, 'operator'), { operator: pending });
    const waitingAgain = await resumeAgent({ ...second, model: scriptedModel([]), runId: 'same-approver', store: second.store, maxSteps: 6 });
    assert.equal(waitingAgain.stopReason, 'awaiting_approval');
    assert.equal((await decisionInbox(second.store).get(request.id))!.state, 'open', 'no new attempt superseded the request');
    await decisionInbox(second.store).approve(request.id, { actor: 'lead-bob' });
    const done = await resumeAgent({ ...second, model: scriptedModel([doneStep]), runId: 'same-approver', store: second.store, maxSteps: 6 });
    assert.equal(done.stopReason, 'completed');
    assert.deepEqual(world.bodies, ['place_order', 'send_email']);
    await second.store.close();
  });
});
