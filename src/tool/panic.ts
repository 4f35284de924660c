/**
 * What the journal keeps of an unexpected throw by a tool body, by default. The model never reads it (see
 * bridges/outcome.ts): only operators do, so it keeps the stack for diagnosis. Hosts redact with `describePanic`.
 */
import type { PanicDescriber } from './types.js';

export const defaultPanicDescription: PanicDescriber = (error) => {
  if (error instanceof Error) {
    const head = `${error.name}: ${error.message}`;
    return typeof error.stack === 'string' && error.stack.includes(error.message) ? error.stack : head;
  }
  try {
    return String(error);
  } catch {
    return typeof error;
  }
};
