/**
 * `jingwei/anchors`: signed checkpoints of a session's chain head, kept outside the database, and the checks that
 * use them (docs/design.md#anchored-signed-heads). Pass `anchor: { privateKey, sink }` to `store.acquire` to sign
 * an owner's heads; check a store or an export against them with a public key. Ed25519 through node:crypto only.
 */
export {
  anchorPublicKey,
  checkAnchors,
  decodeCheckpoint,
  encodeCheckpoint,
  fileAnchorSink,
  parseCheckpoints,
  signCheckpoint,
  verifyCheckpoint,
  type AnchorOptions,
  type AnchorReport,
  type AnchorSink,
  type ChainLink,
  type Checkpoint,
} from './store/anchors.js';
export { exportChainedJsonl, verifySessionAnchors } from './store/anchor-store.js';
export { checkChainTrailer, checkExportAnchors, splitChainTrailer, type ChainTrailer } from './store/export-chain.js';
export { AnchorError, type AnchorFailureReason } from './errors.js';
