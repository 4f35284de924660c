/**
 * `jingwei/wire`: the journal's wire format, for tools that read, write or check journals outside a store: the
 * event codec, the physical-log check, JSONL journals, and the canonical JSON and bounded parser the format is
 * defined with (an operation's arguments digest is `jsonDigest` of its arguments; a retry binds arguments that are
 * `jsonEquals` to the recorded ones; every journal line is read with `parseJson`'s bounds).
 */
export * from './event/index.js';
export { PRE_BODY_CATEGORIES, TOOL_EFFECTS, TOOL_FAILURE_CATEGORIES, TOOL_REVIEW_OUTCOMES } from './event/types.js';
export { exportJournal, parseJournal } from './store/jsonl.js';
export { exportRustJournal, ORIGINAL_EVENT_KINDS } from './store/rust-format.js';
export { canonicalJson, compactJsonBytes, jsonDigest, jsonEquals } from './json/canonical.js';
export { validateToolContract } from './tool/evidence.js';
export { parseJson, type ParseJsonOptions } from './json/parse.js';
export { CanonicalJsonError, ExportUnrepresentableError, JournalImportError, JsonParseError, PhysicalLogError, WireDecodeError } from './errors.js';
