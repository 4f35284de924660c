/** Freezes a JSON-shaped value and everything in it, so a reader holding it cannot change it for anyone else. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) freezeTree(value);
  return value;
}

/**
 * Without an array of values per object (Object.values): a verified read freezes every event it keeps, and a host
 * just started pays that on its first read of the whole journal.
 */
function freezeTree(value: object): void {
  Object.freeze(value);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const child: unknown = value[i];
      if (typeof child === 'object' && child !== null && !Object.isFrozen(child)) freezeTree(child);
    }
    return;
  }
  for (const key in value) {
    const child: unknown = (value as Record<string, unknown>)[key];
    if (typeof child === 'object' && child !== null && !Object.isFrozen(child)) freezeTree(child);
  }
}
