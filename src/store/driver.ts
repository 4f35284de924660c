import { DriverMissingError, StoreUnavailableError } from '../errors.js';

/**
 * Loads an optional driver package. Only a missing `packageName` itself becomes DriverMissingError; a broken
 * install (a missing dependency of the driver, a failed native build) keeps its own error.
 */
export async function loadDriver<T>(packageName: string, entry: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    const message = error instanceof Error ? error.message : '';
    if (code === 'ERR_MODULE_NOT_FOUND' && message.includes(`'${packageName}'`)) throw new DriverMissingError(packageName, entry, { cause: error });
    throw error;
  }
}

/** A journal whose schema version is newer than this code's (`understood`): a later release has opened it. */
export function schemaTooNew(journal: string, version: number, understood: number): StoreUnavailableError {
  return new StoreUnavailableError(
    'schema_too_new',
    `${journal} is at schema version ${version}; this code understands up to ${understood}: a newer release of jingwei has opened it, and this one would misread what that release writes; open it with that release or a later one`,
  );
}
