/**
 * A non-idempotent mail tool whose server hangs while `hang` is set: the body has started, the caller gives up on it
 * (`giveUp`, a test's abort, as a deadline would) and the mail never leaves. No timing is involved. `sent` holds the
 * arguments of every mail that left.
 */
import { ToolEffect } from '../../src/event/types.js';
import { ToolMetadata } from '../../src/tool/metadata.js';

export function mailer(mode: { hang: boolean; giveUp?: () => void }) {
  const sent: unknown[] = [];
  const tool = {
    name: 'send_mail',
    metadata: new ToolMetadata('Sends one e-mail', { type: 'object' }).withEffect(ToolEffect.NonIdempotent, 'mail-v1'),
    async execute(request: { arguments: unknown }, signal: AbortSignal) {
      if (mode.hang) {
        const stopped = new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
        mode.giveUp?.();
        await stopped;
      }
      sent.push(request.arguments);
      return 'sent';
    },
  };
  return { tool, sent };
}
