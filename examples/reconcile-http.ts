/**
 * A reconciler for an HTTP API that deduplicates on an idempotency key and lets you look a key up (as mail, payment
 * and messaging providers do). The tool sends `externalIdempotencyKey(request)` as the key (`jw-` and a digest of the
 * session, task and operation key: the same on every attempt of one operation); after a crash, its reconciler asks
 * the provider what became of that key, so no person has to (docs/design.md#reconcilers).
 *
 * The provider in this example: `POST /emails` with an `Idempotency-Key` header sends a mail once per key, and
 * `GET /emails/by-key/<key>` answers 200 with the mail it sent for that key, or 404 when it has accepted none.
 * test/tool/reconcile-http.test.ts runs it against such a provider on node:http.
 */
import { externalIdempotencyKey, ToolBodyError, ToolMetadata, type JsonValue, type Tool } from 'jingwei';
import type { ToolReconcileAnswer, ToolReconcileRequest } from 'jingwei/review';

export const MAIL_REVISION = 'mail-api-r3';

export function createMailTool(baseUrl: string): Tool {
  return {
    name: 'send_email',
    // Non-idempotent from the model's point of view: a second operation sends a second mail.
    metadata: new ToolMetadata('Sends one e-mail', {
      type: 'object',
      properties: { to: { type: 'string' }, subject: { type: 'string' } },
      required: ['to', 'subject'],
    }).withEffect('non_idempotent', MAIL_REVISION),

    async execute(request, signal) {
      const response = await fetch(`${baseUrl}/emails`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': externalIdempotencyKey(request) },
        body: JSON.stringify(request.arguments),
        signal,
      });
      if (!response.ok) throw new ToolBodyError(`http_${response.status}`, `the mail API answered ${response.status}`);
      return (await response.json()) as JsonValue;
    },

    // Asked only about calls whose outcome the journal leaves in doubt. A 404 is an exact `not_executed` here
    // because the provider deduplicates on the key: a retry with the same key can never send a second mail.
    async reconcile(request: ToolReconcileRequest, signal: AbortSignal): Promise<ToolReconcileAnswer> {
      const key = externalIdempotencyKey(request);
      const response = await fetch(`${baseUrl}/emails/by-key/${encodeURIComponent(key)}`, { signal });
      if (response.status === 200) {
        const mail = (await response.json()) as JsonValue;
        return { outcome: 'completed', evidence: `GET /emails/by-key: the provider sent mail for key ${key}`, output: mail };
      }
      if (response.status === 404) return { outcome: 'not_executed', evidence: `GET /emails/by-key: the provider accepted no mail for key ${key}` };
      return { outcome: 'unknown', evidence: `GET /emails/by-key answered ${response.status}` };
    },
  };
}
