/**
 * An error thrown by code a store runs inside its transaction without owning it (the pure decision, our own checks,
 * the write a tool hands an idempotency helper): the transaction rolls back, and the error is rethrown unchanged
 * instead of being mapped as the store's own failure.
 */
export class Passthrough {
  constructor(readonly error: unknown) {}
}
