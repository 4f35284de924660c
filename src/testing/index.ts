/**
 * `jingwei/testing`: tools for testing code built on jingwei, and for proving a store. Loads `node:test`; import it
 * from tests only. Never loads a database driver.
 */
export { runStoreConformance, type StoreConformanceOptions } from './conformance.js';
export { FAULT_POINTS, setFaultHook, type FaultPoint } from '../fault.js';
export { setPostgresBeforeCommit, type PostgresBeforeCommit } from './postgres-hooks.js';
