/** Anchor checks and chained exports of a session held in a store (docs/design.md#anchored-signed-heads). */
import type { KeyObject } from 'node:crypto';
import { InvalidInputError } from '../errors.js';
import { checkJournalAgainstCheckpoints, journalIdOf } from './anchor-log.js';
import { checkAnchors, type AnchorReport, type Checkpoint } from './anchors.js';
import { exportChainJournal } from './export-chain.js';
import { JournalStore } from './journal-store.js';
import type { SessionStore } from './types.js';

function journalStore(store: SessionStore): JournalStore {
  if (!(store instanceof JournalStore)) throw new InvalidInputError('store', 'anchors need a store made by jingwei (openSqliteStore, openPostgresStore, createMemoryStore or createJournalStore)');
  return store;
}

/**
 * Verifies a stored session (as every load does) and then checks it against signed checkpoints; throws
 * JournalCorruptError or AnchorError on the first disagreement.
 */
export async function verifySessionAnchors(
  store: SessionStore,
  sessionId: string,
  options: { readonly publicKey: KeyObject | string; readonly checkpoints: readonly Checkpoint[] },
): Promise<AnchorReport> {
  const { epoch, rows } = await journalStore(store).readChain(sessionId);
  return checkAnchors(sessionId, rows.map((r) => ({ epoch: r.epoch, hash: r.hash })), epoch, options.checkpoints, options.publicKey);
}

/**
 * What an owner acquiring `sessionId` with an anchor of this key would find (checkJournalAgainstAnchor), on
 * checkpoints already read: throws AnchorError when the stored journal is not the one they vouch for.
 */
export async function checkAcquireAnchors(
  store: SessionStore,
  sessionId: string,
  options: { readonly publicKey: KeyObject; readonly checkpoints: readonly Checkpoint[] },
): Promise<void> {
  const journal = journalStore(store);
  await checkJournalAgainstCheckpoints(sessionId, options.checkpoints, options.publicKey, journalIdOf(journal.backend), () => journal.readChain(sessionId));
}

/** A session's verified journal with its chain trailer: each event's epoch and hash, and its `checkpoints`. */
export async function exportChainedJsonl(store: SessionStore, sessionId: string, checkpoints: readonly Checkpoint[] = []): Promise<string> {
  const { epoch, rows } = await journalStore(store).readChain(sessionId);
  return exportChainJournal(rows, epoch, checkpoints);
}
