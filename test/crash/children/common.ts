/**
 * What every crash child shares: its script arrives as one JSON argument, it answers in JSON lines on stdout, and
 * an unexpected error is reported as a line and exit code 1 (a SIGKILL is the only other way out). Run without a
 * script (say, by a test runner that globbed it), a child does nothing and exits 0.
 */
import { openBusiness } from '../tools.js';
import { Killer, type KillSpec } from '../killer.js';
import { openStore, type StoreSpec } from '../stores.js';

export interface ChildBase {
  readonly store: StoreSpec;
  /** The external system's SQLite file. */
  readonly business: string;
  readonly sessionId: string;
  readonly kill: KillSpec | null;
}

export function emit(line: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(line) + '\n');
}

export async function childMain<S extends ChildBase>(body: (script: S) => Promise<void>): Promise<void> {
  const raw = process.argv[2];
  if (raw === undefined) return;
  try {
    await body(JSON.parse(raw) as S);
    process.exit(0);
  } catch (error) {
    emit({ phase: 'error', code: (error as { code?: unknown })?.code ?? null, error: error instanceof Error ? `${error.stack}` : String(error) });
    process.exit(1);
  }
}

/** The killer, the journal store and the external system, opened in that order. */
export async function openAll(script: ChildBase, options: { verifyOnOpen?: boolean } = {}) {
  const killer = new Killer(script.kill).install();
  const store = await openStore(script.store, { verifyOnOpen: options.verifyOnOpen === true });
  const business = openBusiness(script.business);
  return { killer, store, business };
}
