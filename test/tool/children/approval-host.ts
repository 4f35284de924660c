/**
 * A host in its own process whose mail tool needs approval; its approver always answers pending, so only an
 * operator's decision from the inbox can let a call run. The body appends the recipient to a mailbox file (the
 * outside effect). One JSON line out, then:
 *   ask <to>                  acquire (takeover), call send_mail, print the result, then wait to be killed
 *   resume <callId> <to>      acquire (takeover), retry callId through a plan with arguments {to}, print, exit
 * argv: <sqlite path | postgres:// URL> <schema or -> <session> <mailbox file> <mode> [args…]
 */
import { appendFileSync } from 'node:fs';
import { openTarget } from '../../support/stores.js';
import { ToolMetadata } from '../../../src/tool/metadata.js';
import { prepareToolRetry } from '../../../src/tool/recovery.js';
import { createToolRuntime } from '../../../src/tool/runtime.js';
import type { ToolExecution } from '../../../src/tool/types.js';

const [target, schema, sessionId, mailbox, mode, ...rest] = process.argv.slice(2) as [string, string, string, string, string, ...string[]];
const out = (v: unknown) => process.stdout.write(JSON.stringify(v) + '\n');
const store = await openTarget(target, schema === '-' ? undefined : schema);
const owner = await store.acquire(sessionId, { owner: `host-${process.pid}`, takeover: true });
await owner.startTask('t');
const mail = {
  name: 'send_mail',
  metadata: new ToolMetadata('send mail', { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] })
    .withEffect('non_idempotent', 'mail-v1').withApproval('ops'),
  async execute(request: { arguments: unknown }) {
    appendFileSync(mailbox, `${(request.arguments as { to: string }).to}\n`);
    return 'sent';
  },
};
const runtime = createToolRuntime({
  tools: [mail],
  grants: { agent: '*' },
  approvers: { ops: async () => ({ decision: 'pending', note: 'needs a person' }) },
});
const gateway = runtime.bind({ owner, taskId: 't', caller: 'agent' });

function report(e: ToolExecution) {
  const o = e.result.outcome;
  return {
    ok: true,
    callId: e.call.id,
    status: o.status,
    category: o.status === 'failed' ? o.category : null,
    code: o.status === 'failed' ? o.code : null,
    resultApproval: e.result.approval ?? null,
    startedApproval: e.startedEvent?.kind.type === 'tool_started' ? e.startedEvent.kind.approval ?? null : null,
  };
}

try {
  if (mode === 'ask') {
    out(report(await gateway.call('send_mail', { to: rest[0]! })));
    setInterval(() => undefined, 60_000);
  } else {
    const [callId, to] = rest as [string, string];
    const plan = prepareToolRetry(await store.loadHistory(sessionId), callId);
    out(report(await gateway.callWithOptions('send_mail', { to }, { retry: plan })));
    await store.close();
  }
} catch (error) {
  out({ ok: false, code: (error as { code?: string }).code ?? 'unknown', message: String(error) });
  await store.close();
}
