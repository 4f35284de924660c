import { DriverMissingError } from '../errors.js';

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
