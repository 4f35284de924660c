export type { JsonObject, JsonPrimitive, JsonValue } from './types.js';
export { canonicalJson, compactJsonBytes, jsonDigest, jsonEquals } from './canonical.js';
export { parseJson, type ParseJsonOptions } from './parse.js';
