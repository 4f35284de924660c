/** Reading `--key` and `--anchors` for the commands that check journals against signed checkpoints. */
import type { KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { anchorPublicKey, parseCheckpoints, type Checkpoint } from '../store/anchors.js';
import { StoreAccessError, UsageError } from './exit.js';
import type { Printer } from './io.js';

export const KEY_OPTION = { type: 'string', value: 'key', help: 'an Ed25519 public key: a PEM file, or the PEM text itself' } as const;
export const ANCHORS_OPTION = { type: 'string', value: 'file', help: 'a file of signed checkpoints (one JSON object a line, as fileAnchorSink writes them)' } as const;

function readText(what: string, file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new StoreAccessError(`cannot read the ${what} ${file}: ${(error as Error).message}`, { cause: error });
  }
}

/** The checkpoints in an anchor file; a torn last line is named on `err` as a warning. */
export function readCheckpointFile(file: string, err: Printer): Checkpoint[] {
  return parseCheckpoints(readText('anchor file', file), (_line, message) => err.line(`warning: anchor file ${file}: ${message}`));
}

/** The public key and checkpoints named by the options; null when --key is absent (then --anchors is refused). */
export function anchorOptions(command: string, options: Readonly<Record<string, string | boolean | undefined>>, needAnchors: boolean, err: Printer):
  { publicKey: KeyObject; checkpoints: Checkpoint[] } | null {
  const key = options.key;
  const anchors = options.anchors;
  if (key === undefined) {
    if (anchors !== undefined) throw new UsageError(`jingwei ${command}: --anchors needs --key (the public key that signed them)`);
    return null;
  }
  if (typeof key !== 'string' || key === '') throw new UsageError(`jingwei ${command}: --key needs a PEM file or PEM text`);
  if (needAnchors && (typeof anchors !== 'string' || anchors === '')) {
    throw new UsageError(`jingwei ${command}: --key needs --anchors <file>: the signed checkpoints live outside the store`);
  }
  const publicKey = anchorPublicKey(key.trimStart().startsWith('-----BEGIN') ? key : readText('key file', key));
  const checkpoints = typeof anchors === 'string' && anchors !== '' ? readCheckpointFile(anchors, err) : [];
  return { publicKey, checkpoints };
}
