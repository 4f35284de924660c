import { existsSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { LIMITS } from '../../limits.js';
import { exportJournal, journalSession, parseJournalFile, type ImportedChain } from '../../store/jsonl.js';
import { exportChainedJsonl } from '../../store/anchor-store.js';
import type { AnchorReport } from '../../store/anchors.js';
import { checkExportAnchors, splitChainTrailer } from '../../store/export-chain.js';
import { exportRustJournal } from '../../store/rust-format.js';
import { ANCHORS_OPTION, anchorOptions, KEY_OPTION, readCheckpointFile } from '../anchors.js';
import { assessSession } from '../../tool/assess.js';
import { JournalImportError, ToolRetryError } from '../../errors.js';
import { attentionOf, attentionText } from '../assessment.js';
import { STORE_ARGUMENT, type Command } from '../command.js';
import { EXIT, StoreAccessError, UsageError } from '../exit.js';
import { num, plural, safe, safeId, shellWord, storeWord } from '../format.js';
import type { Printer } from '../io.js';
import { loadSession, withStore } from '../session.js';
import { isPostgresTarget } from '../target.js';

/** Writes next to the destination and renames, so a failure never leaves half a journal under the real name. */
function writeAtomically(path: string, text: string): void {
  const partial = `${path}.partial-${process.pid}`;
  try {
    writeFileSync(partial, text, { flag: 'wx' });
    renameSync(partial, path);
  } catch (error) {
    rmSync(partial, { force: true });
    throw new StoreAccessError(`cannot write ${path}: ${(error as Error).message}`, { cause: error });
  }
}

/** Whether `a` and `b` name one file: the same device and inode when both exist (links included), else the same path. */
function sameFile(a: string, b: string): boolean {
  try {
    const x = statSync(a);
    const y = statSync(b);
    return x.dev === y.dev && x.ino === y.ino;
  } catch {
    return resolve(a) === resolve(b);
  }
}

/**
 * An --out that is a file this command reads (the store, a SQLite store's companion files, the anchors file): even
 * with --force, writing it would replace the journal being exported, and every other session in it, with one
 * session's JSONL.
 */
function refuseReadFile(target: string, store: string, anchors: string | undefined): void {
  const read = isPostgresTarget(store) ? [] : ['', '-wal', '-shm', '-journal'].map((suffix) => `${store}${suffix}`);
  if (anchors !== undefined) read.push(anchors);
  const hit = read.find((file) => sameFile(target, file));
  if (hit !== undefined) throw new UsageError(`jingwei export: --out ${target} is ${hit === anchors ? 'the anchors file' : 'the store'} this command reads (${hit}); write to another file`);
}

export const exportCommand: Command = {
  name: 'export',
  summary: "write a session's verified journal as JSONL (stdout, or a file)",
  arguments: [STORE_ARGUMENT, { name: 'session', required: true, help: 'a session id, or a unique part of one' }],
  options: {
    out: { type: 'string', short: 'o', value: 'file', help: 'write to this file instead of standard output' },
    force: { type: 'boolean', help: 'overwrite the --out file if it exists (never the store or anchors file being read)' },
    format: { type: 'string', value: 'jsonl|chain|rust', help: 'jsonl (default), chain (with hashes and checkpoints), or rust' },
    anchors: { ...ANCHORS_OPTION, help: 'with --format chain: carry this file\'s signed checkpoints of the session' },
  },
  description: `
Writes the session's journal as JSONL: one wire event per line, in physical order. The journal is verified first;
a damaged one is never exported. With --out the file appears complete or not at all.

--format jsonl (the default) writes our records as stored; they carry the start-marker flag and the tool_started
events, which Jingwei for Rust does not read. Nothing in such a file proves it unedited: an import stores whatever
it holds with a fresh hash chain. --format chain adds one trailer line with each event's epoch and
chain hash and the session's signed checkpoints (from --anchors), so 'jingwei import --key' can prove the file was
not edited. --format rust writes exactly the records Jingwei for Rust reads: no start-marker flag, no tool_started
events, seq renumbered 0, 1, 2, ..., provider_call_id written as null when absent; a call whose start marker and
result contradict each other (dropping the marker would change what recovery concludes) is refused, as is any event
kind or failure category the original does not know.`,
  exitCodes: 'This command exits 1 when the journal is corrupt or cannot be written in the chosen format.',
  examples: [
    'jingwei export journal.db demo-1a2b3c4d > demo.jsonl',
    'jingwei export journal.db demo-1a2b3c4d --out demo.jsonl',
    'jingwei export journal.db demo-1a2b3c4d --format rust --out demo.rust.jsonl',
    'jingwei export journal.db demo-1a2b3c4d --format chain --anchors anchors.jsonl --out demo.chain.jsonl',
  ],
  async run({ io, out, err, args, options }) {
    const target = typeof options.out === 'string' ? options.out : undefined;
    if (target !== undefined) {
      if (target === '') throw new UsageError('jingwei export: --out needs a file name');
      refuseReadFile(target, args.store!, typeof options.anchors === 'string' ? options.anchors : undefined);
      if (existsSync(target) && options.force !== true) throw new UsageError(`jingwei export: ${target} exists; add --force to overwrite it`);
    }
    const format = options.format ?? 'jsonl';
    if (format !== 'jsonl' && format !== 'chain' && format !== 'rust') throw new UsageError(`jingwei export: --format must be jsonl, chain or rust, not ${JSON.stringify(format)}`);
    if (options.anchors !== undefined && format !== 'chain') throw new UsageError('jingwei export: --anchors goes with --format chain');
    const checkpoints = typeof options.anchors === 'string' ? readCheckpointFile(options.anchors, err) : [];
    return withStore(args.store!, async (store) => {
      const { history, sessionId, progress } = await loadSession(store, args.session!, io);
      progress.done();
      const text = format === 'rust' ? exportRustJournal(history) : format === 'chain' ? await exportChainedJsonl(store, sessionId, checkpoints) : exportJournal(history);
      if (target === undefined) {
        io.stdout.write(text);
        return EXIT.ok;
      }
      writeAtomically(target, text);
      out.line(`Exported ${plural(history.length, 'event')} of session ${safeId(sessionId)} to ${safe(target)} (${num(Buffer.byteLength(text))} bytes).`);
      return EXIT.ok;
    });
  },
};

function readJournalFile(file: string): string {
  let bytes: Buffer;
  try {
    if (file !== '-') {
      const size = statSync(file).size;
      // A journal holds at most 16 MiB of compact JSON; a line ending (\r\n at worst) per event on top of that.
      const ceiling = LIMITS.maxHistoryBytes + 2 * LIMITS.maxHistoryEvents;
      if (size > ceiling) throw new JournalImportError(1, `the file is ${num(size)} bytes; a journal holds at most ${num(LIMITS.maxHistoryBytes)} bytes of events`);
    }
    bytes = readFileSync(file === '-' ? 0 : file);
  } catch (error) {
    if (error instanceof JournalImportError) throw error;
    throw new StoreAccessError(`cannot read ${file === '-' ? 'standard input' : file}: ${(error as Error).message}`, { cause: error });
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new JournalImportError(1, 'the file is not valid UTF-8');
  }
}

/**
 * What the anchors vouched for. Events after the newest checkpoint are imported, as verify reports them (not
 * anchored yet: an owner anchors after its commit, so a crash or `every` > 1 leaves a legitimate tail), but nothing
 * vouches for them, so they are named on stderr too.
 */
function reportAnchors(report: AnchorReport, store: string, id: string, out: Printer, err: Printer): void {
  const upTo = report.anchoredSeq >= 0 ? `, anchored up to seq ${report.anchoredSeq}` : '';
  if (report.unanchoredEvents === 0) {
    out.line(`Anchors verified: ${plural(report.checkpoints, 'signed checkpoint')}${upTo}; every event is anchored.`);
    return;
  }
  const first = report.anchoredSeq + 1;
  const last = report.anchoredSeq + report.unanchoredEvents;
  const range = first === last ? `seq ${first}` : `seq ${first}..${last}`;
  out.line(`Anchors verified: ${plural(report.checkpoints, 'signed checkpoint')}${upTo}; ${plural(report.unanchoredEvents, 'later event')} (${range}) not anchored.`);
  err.line(`warning: ${plural(report.unanchoredEvents, 'event')} (${range}) ${report.unanchoredEvents === 1 ? 'comes' : 'come'} after the newest signed checkpoint: no checkpoint vouches for them, ` +
    `and they were imported as the file has them. Check them before relying on them: jingwei events ${storeWord(store)} ${shellWord(id)} --from ${first}`);
}

/** How the import stored the chain: the file's (a chained export), or a fresh one. */
function chainStored(chain: ImportedChain | null): string {
  if (chain === null) return 'with a fresh hash chain';
  return chain.differsAt === null ? "with the file's hash chain and epochs" : "with the file's epochs and a hash chain of its own from seq " + chain.differsAt;
}

export const importCommand: Command = {
  name: 'import',
  summary: "import a JSONL journal (ours, or one from Jingwei for Rust) into a store, verified",
  arguments: [STORE_ARGUMENT, { name: 'file', required: true, help: "a JSONL journal, or - for standard input" }],
  options: {
    session: { type: 'string', value: 'id', help: 'refuse the file unless it belongs to this session' },
    owner: { type: 'string', value: 'name', help: 'the owner name recorded for the import (default jingwei-cli)' },
    key: { ...KEY_OPTION, help: 'refuse the file unless it matches the checkpoints in --anchors, signed by this Ed25519 public key (PEM file or text)' },
    anchors: { ...ANCHORS_OPTION, help: 'with --key (required with it): the signed checkpoints kept outside the file' },
  },
  description: `
Reads a JSONL journal (one wire event per line, as 'jingwei export' or the JSONL store of Jingwei for Rust writes it),
verifies all of it (every record well-formed, one session, seq 0, 1, 2, ... in order, unique event ids, recorded
times never going back, the tool evidence as recovery checks it, within 100,000 events and 16 MiB), and stores it as
a new session, left released so a host can acquire it. A file 'jingwei export --format chain' wrote keeps its
chain: every event's epoch and hash, and the owner's epoch, so the checkpoints signed over it still verify the
imported session; any other file is stored with a fresh hash chain. All of the file is checked before the store is
opened: a rejected file (import_rejected, naming its first bad line) leaves the store untouched, and a missing
SQLite file is not even created. A session that already has events is never overwritten.

A file written by 'jingwei export --format chain' ends with a trailer of chain hashes: a line changed after export
is refused by seq. With --key and --anchors, the file must also agree with every signed checkpoint of its session
(those in the anchors file and those it carries), so an edit whose hashes were recomputed, a truncated file and a
rolled-back epoch are refused too. The anchors file must hold a checkpoint of the file's session: a file under a
session id it has none of (a copy renamed to a look-alike id, with its checkpoints dropped) is refused as
unanchored, naming the sessions it does have. Events after the newest checkpoint are imported as the file has
them and reported as not anchored, on stdout and as a warning on stderr: nothing vouches for them (an owner signs
after its commit, so a crash or 'every' > 1 leaves such a tail in a genuine journal). --key needs --anchors: the
checkpoints a file carries cannot vouch for it alone, since whoever rewrites or cuts the file can drop those that
no longer match.`,
  exitCodes: 'This command exits 1 when the file is rejected (the first bad line is named), disagrees with the anchors or has none, or the session already has events.',
  examples: ['jingwei import journal.db demo.jsonl', 'jingwei export old.db s1 | jingwei import new.db -'],
  async run({ out, err, args, options }) {
    const owner = typeof options.owner === 'string' ? options.owner : 'jingwei-cli';
    // The file's own checkpoints cannot vouch for it: whoever edits or cuts the file can drop those that no longer
    // match. Only checkpoints kept outside it (--anchors) catch a rewritten or truncated tail, as for verify.
    const keys = anchorOptions('import', options, true, err);
    const text = readJournalFile(args.file!);
    // Every check of the file's content runs here: a rejected file never creates or touches the store.
    const { events, chain } = parseJournalFile(text);
    const expected = typeof options.session === 'string' ? options.session : undefined;
    const sessionId = journalSession(events, expected);
    let anchored: AnchorReport | null = null;
    if (keys) {
      const { journal, trailer } = splitChainTrailer(text);
      anchored = checkExportAnchors(sessionId, journal, trailer, keys.publicKey, keys.checkpoints);
    }
    return withStore(args.store!, async (store) => {
      const report = await store.importJsonl(text, { owner, ...(expected !== undefined ? { sessionId: expected } : {}) });
      const id = safeId(report.sessionId);
      out.line(`Imported ${plural(report.events, 'event')} into session ${id}: verified, stored ${chainStored(chain)}, and left released.`);
      if (chain?.differsAt != null) {
        err.line(`warning: seq ${chain.differsAt} and later are stored in the form this version writes, not as the file has them (an earlier version wrote them), so their chain hashes differ from the file's${anchored ? ' and the checkpoints signed over those will not match the store' : ''}`);
      }
      if (anchored) reportAnchors(anchored, args.store!, id, out, err);
      try {
        const attention = attentionOf(assessSession(await store.loadHistory(report.sessionId)));
        out.line(attention.total > 0
          ? `Calls needing attention: ${attentionText(attention)}. Run: jingwei inspect ${storeWord(args.store!)} ${shellWord(id)}`
          : 'No calls need attention.');
      } catch (error) {
        if (!(error instanceof ToolRetryError)) throw error;
        err.line(`warning: recovery will refuse to plan from this journal: ${safe(error.message)}`);
      }
      return EXIT.ok;
    }, { create: true });
  },
};
