import { JournalCorruptError } from '../errors.js';
import type { Reservation } from './rows.js';

/** Reads a task's stored reservations; anything but the shape the store writes is damaged storage. */
export function parseReservations(text: string, sessionId: string): Reservation[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const ok = Array.isArray(value) && value.every((r: Partial<Reservation> | null) =>
    typeof r === 'object' && r !== null && typeof r.callId === 'string' && Number.isSafeInteger(r.bytes) &&
    typeof r.started === 'boolean' && Number.isSafeInteger(r.epoch));
  if (!ok) throw new JournalCorruptError(sessionId, -1, 'storage', 'a task holds malformed output reservations');
  return value as Reservation[];
}
