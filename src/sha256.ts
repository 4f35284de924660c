import * as crypto from 'node:crypto';

/** Node's one-shot digest (20.12+): no Hash object per digest. Older Node 20 releases fall back to createHash. */
const oneShot = (crypto as { hash?: (algorithm: string, data: string | Uint8Array, encoding: 'hex') => string }).hash;

/** SHA-256 of `data` (a string is hashed as its UTF-8, lone surrogates as U+FFFD), as lowercase hex. */
export function sha256Hex(data: string | Uint8Array): string {
  return oneShot ? oneShot('sha256', data, 'hex') : crypto.createHash('sha256').update(data).digest('hex');
}
