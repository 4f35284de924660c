/**
 * The chained export: the journal's lines exactly as stored, then one trailer line carrying each event's epoch and
 * chain hash and the session's signed checkpoints (docs/design.md#anchored-signed-heads). Our import recognises
 * the trailer, recomputes the chain over the lines and refuses an edited file; with a public key it also checks
 * the checkpoints, so an edit whose hashes were recomputed is caught too.
 */
import type { KeyObject } from 'node:crypto';
import { AnchorError, JournalImportError } from '../errors.js';
import { parseJson } from '../json/parse.js';
import type { JsonObject, JsonValue } from '../json/types.js';
import { checkAnchors, decodeCheckpoint, encodeCheckpoint, noCheckpointOf, type AnchorReport, type ChainLink, type Checkpoint } from './anchors.js';
import { chainHash, GENESIS_HASH } from './chain.js';
import type { EventRow } from './rows.js';

const TRAILER_KEY = 'jingwei_chain';
const TRAILER_PREFIX = `{"${TRAILER_KEY}":`;

export interface ChainTrailer {
  /** The owner epoch of the session when it was exported. */
  readonly epoch: number;
  /** For seq i: the epoch that wrote it and its chain hash. */
  readonly links: readonly ChainLink[];
  readonly checkpoints: readonly Checkpoint[];
}

/** The stored lines of a session, then the trailer. `rows` must be the verified rows of one session. */
export function exportChainJournal(rows: readonly EventRow[], ownerEpoch: number, checkpoints: readonly Checkpoint[]): string {
  let out = '';
  for (const row of rows) out += row.body + '\n';
  const sessionId = rows[0]?.sessionId;
  const trailer: JsonObject = {
    version: 1,
    epoch: ownerEpoch,
    links: rows.map((r) => [r.epoch, r.hash]),
    checkpoints: checkpoints.filter((c) => c.sessionId === sessionId).map(encodeCheckpoint),
  };
  return out + JSON.stringify({ [TRAILER_KEY]: trailer }) + '\n';
}

/** Splits a JSONL journal into its event lines and, when its last line is a chain trailer, the trailer. */
export function splitChainTrailer(text: string): { journal: string; trailer: ChainTrailer | null } {
  const body = text.endsWith('\n') ? text.slice(0, -1) : text;
  const cut = body.lastIndexOf('\n');
  const last = body.slice(cut + 1);
  if (!last.startsWith(TRAILER_PREFIX)) return { journal: text, trailer: null };
  const line = body.slice(0, cut + 1).split('\n').length;
  return { journal: body.slice(0, cut + 1), trailer: decodeTrailer(last, cut < 0 ? 1 : line) };
}

function decodeTrailer(text: string, line: number): ChainTrailer {
  const bad = (detail: string): never => {
    throw new JournalImportError(line, `the chain trailer ${detail}`);
  };
  let value: JsonValue;
  try {
    value = parseJson(text);
  } catch (error) {
    throw new JournalImportError(line, `the chain trailer is not JSON: ${(error as Error).message}`, { cause: error });
  }
  const outer = value as JsonObject;
  const t = outer[TRAILER_KEY] as JsonObject | undefined;
  if (Object.keys(outer).length !== 1 || typeof t !== 'object' || t === null || Array.isArray(t)) return bad('must be one object');
  for (const key of Object.keys(t)) if (!['version', 'epoch', 'links', 'checkpoints'].includes(key)) bad(`has an unknown field ${JSON.stringify(key)}`);
  if (t.version !== 1) bad('has an unknown version');
  if (!Number.isSafeInteger(t.epoch) || (t.epoch as number) < 0) bad('needs an integer epoch');
  if (!Array.isArray(t.links) || !Array.isArray(t.checkpoints)) bad('needs links and checkpoints arrays');
  const links = (t.links as JsonValue[]).map((l, i): ChainLink => {
    if (!Array.isArray(l) || l.length !== 2 || !Number.isSafeInteger(l[0]) || typeof l[1] !== 'string') return bad(`has a malformed link at seq ${i}`);
    return { epoch: l[0] as number, hash: l[1] as string };
  });
  let checkpoints: Checkpoint[];
  try {
    checkpoints = (t.checkpoints as JsonValue[]).map((c, i) => decodeCheckpoint(c, `trailer checkpoint ${i}`));
  } catch (error) {
    throw new JournalImportError(line, (error as Error).message, { cause: error });
  }
  return { epoch: t.epoch as number, links, checkpoints };
}

/**
 * Recomputes the chain over the event lines and compares it with the trailer: a line edited after export fails
 * with JournalImportError naming it. Returns the links for an anchor check.
 */
export function checkChainTrailer(journal: string, trailer: ChainTrailer): readonly ChainLink[] {
  const lines = journal.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  if (lines.length !== trailer.links.length) {
    throw new JournalImportError(Math.min(lines.length, trailer.links.length) + 1,
      `the chain trailer records ${trailer.links.length} events, the file holds ${lines.length}`);
  }
  let previous = GENESIS_HASH;
  let previousEpoch = 1;
  lines.forEach((raw, i) => {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    const link = trailer.links[i]!;
    // The epochs a store accepts: from 1, never decreasing, none newer than the owner's (an import keeps them).
    if (link.epoch < previousEpoch || link.epoch > trailer.epoch) {
      throw new JournalImportError(i + 1, `the chain trailer gives seq ${i} epoch ${link.epoch}, after epoch ${previousEpoch} and with the owner at epoch ${trailer.epoch}; epochs start at 1, never decrease and never pass the owner's`);
    }
    previousEpoch = link.epoch;
    const hash = chainHash(previous, link.epoch, line);
    if (hash !== link.hash) throw new JournalImportError(i + 1, `seq ${i} does not match the chain hash recorded at export (the line was changed)`);
    previous = hash;
  });
  return trailer.links;
}

/**
 * Checks a chained export against signed checkpoints: `external` ones, kept outside the file (e.g. an anchor file),
 * and those the file carries. At least one external checkpoint must be of the file's session: the file's own
 * cannot vouch for it alone (whoever rewrites or cuts it drops those that no longer match), and a file renamed to
 * another session id, a look-alike of an anchored one, matches none. Fails with AnchorError: `unanchored` without a
 * trailer or without such a checkpoint (naming the sessions `external` is of), else as `checkAnchors` does. The
 * report's `unanchoredEvents` are the events after the newest checkpoint: nothing vouches for them.
 */
export function checkExportAnchors(
  sessionId: string,
  journal: string,
  trailer: ChainTrailer | null,
  publicKey: KeyObject | string,
  external: readonly Checkpoint[],
): AnchorReport {
  if (!trailer) {
    throw new AnchorError(sessionId, -1, 'unanchored', "the file carries no chain trailer, so it cannot be checked against a key; export it with 'jingwei export --format chain'");
  }
  const links = checkChainTrailer(journal, trailer);
  if (!external.some((c) => c.sessionId === sessionId)) {
    throw new AnchorError(sessionId, -1, 'unanchored', noCheckpointOf(sessionId, external, 'kept outside the file'));
  }
  // A checkpoint both carried and kept outside is one checkpoint.
  const all = new Map([...trailer.checkpoints, ...external].map((c) => [JSON.stringify(encodeCheckpoint(c)), c]));
  return checkAnchors(sessionId, links, trailer.epoch, [...all.values()], publicKey);
}
