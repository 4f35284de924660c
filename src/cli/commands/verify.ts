import type { KeyObject } from 'node:crypto';
import { AnchorError, JournalCorruptError, ToolRetryError } from '../../errors.js';
import { checkAnchors, type Checkpoint } from '../../store/anchors.js';
import { verifySessionAnchors } from '../../store/anchor-store.js';
import { ANCHORS_OPTION, anchorOptions, KEY_OPTION } from '../anchors.js';
import type { TaskLedgerReport } from '../../store/task-ledger.js';
import type { LookupRowsReport } from '../../store/index-check.js';
import type { SessionStore } from '../../store/types.js';
import { assessSession } from '../../tool/assess.js';
import { STORE_ARGUMENT, type Command } from '../command.js';
import { EXIT, libraryMessage, UsageError } from '../exit.js';
import { clip, num, plural, safe, safeId } from '../format.js';
import type { Io } from '../io.js';
import { loadSession, withStore } from '../session.js';

interface Anchored {
  readonly checkpoints: number;
  readonly anchoredSeq: number;
  readonly unanchoredEvents: number;
}

type Verdict =
  | { readonly ok: true; readonly sessionId: string; readonly events: number; readonly epoch: number | null; readonly owner: string | null; readonly held: boolean; readonly calls: number; readonly anchors: Anchored | null; readonly tasks: TaskLedgerReport | null; readonly lookups: LookupRowsReport | null }
  | { readonly ok: false; readonly sessionId: string; readonly anchor: { readonly seq: number; readonly reason: string; readonly message: string } }
  | { readonly ok: false; readonly sessionId: string; readonly corruption: { readonly seq: number; readonly reason: string; readonly message: string } }
  | { readonly ok: false; readonly sessionId: string; readonly evidence: { readonly code: string; readonly message: string } };

type Keys = { readonly publicKey: KeyObject; readonly checkpoints: readonly Checkpoint[] } | null;

/**
 * A session with rows but no owner row (sessionsWithoutOwnerRow): checked against the anchors as a missing session is,
 * then verified; with neither an owner row nor events, its remaining rows (tasks, operations, attention) are reported.
 */
async function verifyOrphan(store: SessionStore, wanted: string, io: Io, keys: Keys): Promise<Verdict> {
  try {
    return await verifyOne(store, wanted, io, keys, false, true);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
  }
  const message = `rows of session ${wanted} remain (its tasks, operations or attention rows), but its owner row and its events are gone`;
  return { ok: false, sessionId: wanted, corruption: { seq: 0, reason: 'head_mismatch', message } };
}

/** `exact`: `wanted` is an id the store or the anchors listed, not one typed (which may be a printed form). */
async function verifyOne(store: SessionStore, wanted: string, io: Io, keys: Keys, known: boolean, exact: boolean): Promise<Verdict> {
  if (keys && !known) {
    // Anchored, but the store has no such session at all: every anchored event is missing.
    try {
      verifyAnchorsOf(wanted, keys);
    } catch (error) {
      if (error instanceof AnchorError) return { ok: false, sessionId: wanted, anchor: { seq: error.seq, reason: error.reason, message: error.message } };
      throw error;
    }
  }
  let loaded;
  try {
    loaded = await loadSession(store, wanted, io, exact);
  } catch (error) {
    if (error instanceof JournalCorruptError) {
      return { ok: false, sessionId: error.sessionId, corruption: { seq: error.seq, reason: error.reason, message: error.message } };
    }
    throw error;
  }
  const { history, sessionId, summary, progress } = loaded;
  let anchors: Anchored | null = null;
  if (keys) {
    try {
      anchors = await verifySessionAnchors(store, sessionId, keys);
    } catch (error) {
      progress.done();
      if (error instanceof AnchorError) return { ok: false, sessionId, anchor: { seq: error.seq, reason: error.reason, message: error.message } };
      if (error instanceof JournalCorruptError) return { ok: false, sessionId, corruption: { seq: error.seq, reason: error.reason, message: error.message } };
      throw error;
    }
  }
  let tasks: TaskLedgerReport | null = null;
  let lookups: LookupRowsReport | null = null;
  try {
    progress.update('checking the task ledger against the chain');
    tasks = (await store.checkTaskLedger?.(sessionId)) ?? null;
    progress.update('checking the attention index and the operation rows against the chain');
    lookups = (await store.checkLookupRows?.(sessionId)) ?? null;
  } catch (error) {
    progress.done();
    if (error instanceof JournalCorruptError) return { ok: false, sessionId, corruption: { seq: error.seq, reason: error.reason, message: error.message } };
    throw error;
  }
  try {
    progress.update(`checking the tool evidence of ${num(history.length)} events`);
    const calls = history.length === 0 ? 0 : assessSession(history).totals.calls;
    return { ok: true, sessionId, events: history.length, epoch: summary?.epoch ?? null, owner: summary?.owner ?? null, held: summary?.held ?? false, calls, anchors, tasks, lookups };
  } catch (error) {
    if (error instanceof ToolRetryError) return { ok: false, sessionId, evidence: { code: error.code, message: error.detail } };
    throw error;
  } finally {
    progress.done();
  }
}

function verifyAnchorsOf(sessionId: string, keys: NonNullable<Keys>): void {
  checkAnchors(sessionId, [], 0, keys.checkpoints, keys.publicKey);
}

function verdictJson(v: Verdict) {
  if (v.ok) {
    return {
      session_id: v.sessionId, ok: true, events: v.events, epoch: v.epoch, owner: v.owner, held: v.held, tool_calls: v.calls,
      checked: v.anchors ? 'integrity_and_anchors' : 'integrity_only',
      ...(v.anchors ? { anchors: { checkpoints: v.anchors.checkpoints, anchored_seq: v.anchors.anchoredSeq, unanchored_events: v.anchors.unanchoredEvents } } : {}),
      ...(v.tasks ? { task_ledger: { covered: v.tasks.covered, not_covered: v.tasks.notCovered } } : {}),
      ...(v.lookups ? { lookup_rows: { checked: v.lookups.checked, attention_rows: v.lookups.attentionRows, operation_rows: v.lookups.operationRows } } : {}),
    };
  }
  if ('anchor' in v) return { session_id: v.sessionId, ok: false, anchor: v.anchor };
  if ('corruption' in v) return { session_id: v.sessionId, ok: false, corruption: v.corruption };
  return { session_id: v.sessionId, ok: false, invalid_evidence: v.evidence };
}

export const verifyCommand: Command = {
  name: 'verify',
  summary: "check a session's journal: sequence, ids, hash chain, head, and the tool evidence",
  arguments: [STORE_ARGUMENT, { name: 'session', required: false, help: 'a session id, or a unique part of one (default: every session)' }],
  options: {
    json: { type: 'boolean', help: 'print one JSON document instead of text' },
    key: KEY_OPTION,
    anchors: ANCHORS_OPTION,
  },
  description: `
Verifies the stored journal the way every load does, and says exactly what is wrong if anything is: events
numbered 0, 1, 2, ... without gaps, well-formed wire JSON, one session, unique event ids, epochs never newer than
the owner's, the hash chain from the first event to the head recorded on the owner row. The first violation is
reported with its sequence number and reason (hash_mismatch, seq_gap, head_mismatch, order, duplicate_id,
malformed_event, epoch, wrong_session, too_large, storage); nothing is repaired, skipped or truncated. Then each
task's stored row (state, limits, charges, reservations) is recomputed from its journaled changes and its tool
evidence (reason task_ledger, naming the task, when they disagree; a task with no journaled change, as in an
imported session, is listed as not covered). Then the lookup rows beside the chain, which the queue, the in-doubt
guard and caller keys read, are recomputed from it and compared: each operation's attention row (reason
attention_index) and its operation row naming its latest attempt (reason operation_index). Then the tool evidence is checked as recovery checks it: every
result after its call, every retry pointing at the attempt before it, arguments and contract unchanged across
attempts.

Without --key this checks integrity only: a journal rewritten with its chain recomputed still passes. With
--key <public key> --anchors <file>, every session is also checked against the signed checkpoints of its chain
head (see fileAnchorSink): an event changed under an anchored head (rewritten, with the first bad seq), anchored
events missing (truncated, or a whole session gone), or an owner epoch lower than an anchored one (rolled_back) is
reported, and so is a checkpoint the key did not sign. A session the anchors file has no checkpoint of is reported
UNANCHORED (reason unanchored), naming the sessions the file has checkpoints of: nothing vouches for it (a copy
under a look-alike id passes integrity). Events after the newest checkpoint are reported as not anchored yet.
A torn last line of the anchors file (no newline, not JSON: a sink that died mid-append) is skipped with a
warning on stderr; any other bad line is refused.`,
  exitCodes: 'This command exits 1 when a journal is corrupt, its tool evidence is invalid, or (with --key) it disagrees with the anchors or has none.',
  examples: [
    'jingwei verify journal.db demo-1a2b3c4d',
    'jingwei verify journal.db            # every session',
    'jingwei verify journal.db --key anchor.pub.pem --anchors anchors.jsonl',
  ],
  async run({ io, out, err, args, options }) {
    const keys = anchorOptions('verify', options, true, err);
    return withStore(args.store!, async (store) => {
      const stored: string[] = (await store.listSessions()).map((s) => s.sessionId);
      // Rows of a session whose owner row is gone: listSessions cannot name it, and a store-wide verify must.
      const orphans = args.session !== undefined ? [] : (await store.sessionsWithoutOwnerRow?.()) ?? [];
      const wanted: string[] = args.session !== undefined ? [args.session] : [...stored, ...orphans];
      if (keys && args.session === undefined) {
        for (const c of keys.checkpoints) if (!wanted.includes(c.sessionId)) wanted.push(c.sessionId);
      }
      const verdicts: Verdict[] = [];
      for (const id of wanted) {
        const known = args.session !== undefined || stored.includes(id);
        // Every session by its own id: read as a typed one, `s\u00A0x` (ten characters) named its look-alike, which was
        // verified twice while it was never verified at all.
        verdicts.push(!known && orphans.includes(id) ? await verifyOrphan(store, id, io, keys) : await verifyOne(store, id, io, keys, known, args.session === undefined));
      }
      const failed = verdicts.filter((v) => !v.ok).length;
      const code = failed > 0 ? EXIT.findings : EXIT.ok;
      if (options.json === true) {
        out.line(JSON.stringify(args.session !== undefined ? verdictJson(verdicts[0]!) : { sessions: verdicts.map(verdictJson) }, null, 2));
        return code;
      }
      const s = out.style;
      if (verdicts.length === 0) out.line('No sessions in this store.');
      for (const v of verdicts) {
        const id = safeId(v.sessionId);
        if (v.ok) {
          out.line(`${s.green('ok')}       ${id}: journal intact`);
          out.line(`         ${plural(v.events, 'event')}${v.events > 0 ? ` (seq 0..${v.events - 1} contiguous, event ids unique)` : ''}; hash chain verified up to the head on the owner row`);
          if (v.epoch !== null) out.line(`         ownership epoch ${v.epoch}, ${v.held ? `held by ${safe(v.owner ?? '-')}` : `released (last owner ${safe(v.owner ?? '-')})`}`);
          out.line(`         tool evidence valid: ${plural(v.calls, 'tool call')}, results paired with their calls, retries chained to their previous attempts`);
          if (v.tasks && v.tasks.covered.length > 0) out.line(`         task ledger matches the chain: ${v.tasks.covered.map((t) => clip(t, 40)).join(', ')}`);
          if (v.tasks && v.tasks.notCovered.length > 0) {
            out.line(`         task ledger not covered (no row of it was stored, as in an imported session, or the journal holds none of its changes, as one written before tasks were journaled): ${v.tasks.notCovered.map((t) => clip(t, 40)).join(', ')}`);
          }
          if (v.lookups?.checked === true) {
            out.line(`         lookup rows match the chain: ${plural(v.lookups.attentionRows, 'attention row')}, ${plural(v.lookups.operationRows, 'operation row')}`);
          } else if (v.lookups) {
            out.line('         lookup rows not checked: the session kept changing while they were read (run verify again)');
          }
          if (v.anchors) {
            out.line(`         anchors verified: ${plural(v.anchors.checkpoints, 'signed checkpoint')}${v.anchors.anchoredSeq >= 0 ? `, anchored up to seq ${v.anchors.anchoredSeq}` : ''}` +
              `${v.anchors.unanchoredEvents > 0 ? `; ${plural(v.anchors.unanchoredEvents, 'later event')} not anchored yet` : ''}`);
          } else {
            out.line(`         integrity only: no --key given, so the journal was not checked against signed anchors (a rewrite with a recomputed chain would pass)`);
          }
        } else if ('anchor' in v && v.anchor.reason === 'unanchored') {
          out.line(`${s.red('UNANCHORED')} ${id}: reason unanchored`);
          out.line(`         ${libraryMessage(v.anchor.message)}`);
          out.line(`         No signed checkpoint vouches for this journal, so only its integrity could be checked (a rewrite with a recomputed chain, or a copy under another id, would pass).`);
        } else if ('anchor' in v) {
          out.line(`${s.red('TAMPERED')} ${id}: ${v.anchor.seq >= 0 ? `seq ${v.anchor.seq}, ` : ''}reason ${v.anchor.reason}`);
          out.line(`         ${libraryMessage(v.anchor.message)}`);
          out.line(`         The journal disagrees with a signed checkpoint of its head. Nothing was repaired.`);
        } else if ('corruption' in v) {
          out.line(`${s.red('CORRUPT')}  ${id}: seq ${v.corruption.seq}, reason ${v.corruption.reason}`);
          out.line(`         ${libraryMessage(v.corruption.message)}`);
          out.line(v.corruption.reason === 'attention_index' || v.corruption.reason === 'operation_index'
            ? '         The chain is intact, but a row the queue, the in-doubt guard and caller keys read (or an index over those rows) was changed outside the library or damaged, or written by a process of an older release still running after this release upgraded the store: they may miss a call in doubt and let its repeat run. Nothing was repaired. Stop the hosts of this store, keep the file for investigation, and work from `jingwei inspect`, which reads the chain.'
            : '         Nothing was repaired. Keep the file for investigation; restore the session from a verified export or backup\n' +
              '         (a backup lacks the calls made since it was taken: check it with --key and --anchors before a host runs on it).');
        } else {
          out.line(`${s.red('INVALID')}  ${id}: tool evidence ${v.evidence.code}`);
          out.line(`         ${libraryMessage(v.evidence.message)}`);
          out.line(`         The journal's chain is intact, but recovery refuses to plan from this history.`);
        }
      }
      if (verdicts.length > 1) out.line(`\n${plural(verdicts.length, 'session')} verified, ${failed === 0 ? s.green('all intact') : s.red(`${failed} with problems`)}.`);
      return code;
    });
  },
};
