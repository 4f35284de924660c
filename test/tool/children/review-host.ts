/**
 * Another host: takes a session over, journals a person's review of one call, lets the session go. Prints {reviewed}.
 * argv: <sqlite path | postgres:// URL> <postgres schema | -> <session> <call id> <outcome>
 */
import { recordToolReview } from '../../../src/tool/review.js';
import { openTarget } from '../../support/stores.js';

const [target, schema, sessionId, callId, outcome] = process.argv.slice(2) as [string, string, string, string, 'completed' | 'not_executed' | 'uncertain'];
const store = await openTarget(target, schema === '-' ? undefined : schema);
const owner = await store.acquire(sessionId, { owner: 'other-host', takeover: true });
const event = await recordToolReview(owner, await store.loadHistory(sessionId), callId, { actor: 'ops-2', outcome, evidence: 'the provider sent a receipt' });
await owner.release();
await store.close();
process.stdout.write(`${JSON.stringify({ reviewed: event.seq })}\n`);
