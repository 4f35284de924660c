import { PhysicalLogError } from '../errors.js';
import { knownDistinctIds } from './decoded-history.js';
import type { SessionEvent } from './types.js';

/**
 * The physical-log rule (docs/design.md#evidence-validation): for each index i, in order, the event belongs to
 * `sessionId` (else `wrong_session`), its `seq` is i (else `wrong_sequence`), and its event id has not appeared
 * before (else `duplicate_event_id`). The first violation throws PhysicalLogError; nothing is reordered or repaired.
 */
export function validatePhysicalLog(sessionId: string, events: readonly SessionEvent[]): void {
  // A history a store verified holds distinct ids; with every id still as verified, no duplicate can be found.
  const seen = knownDistinctIds(events) ? null : new Set<string>();
  for (let i = 0; i < events.length; i++) {
    const event = events[i]!;
    if (event.sessionId !== sessionId) {
      throw new PhysicalLogError(
        'wrong_session',
        i,
        `event ${i} belongs to session ${JSON.stringify(event.sessionId)}, not ${JSON.stringify(sessionId)}`,
      );
    }
    if (event.seq !== i) {
      throw new PhysicalLogError('wrong_sequence', i, `event ${i} has seq ${event.seq}, expected ${i}`);
    }
    if (seen === null) continue;
    if (seen.has(event.eventId)) {
      throw new PhysicalLogError('duplicate_event_id', i, `event ${i} repeats event id ${JSON.stringify(event.eventId)}`);
    }
    seen.add(event.eventId);
  }
}
