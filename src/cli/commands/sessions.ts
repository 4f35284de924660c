import { JournalCorruptError, ToolRetryError } from '../../errors.js';
import { assessSession } from '../../tool/assess.js';
import { awaitingApproval } from '../../tool/retry-safe.js';
import { attentionOf, attentionText, overtakenReviews, pendingInboxReviews, withInboxReviews, type Attention } from '../assessment.js';
import { STORE_ARGUMENT, type Command } from '../command.js';
import { EXIT } from '../exit.js';
import { num, plural, safe, safeId, table } from '../format.js';
import type { Style } from '../io.js';
import { Progress } from '../progress.js';
import { withStore } from '../session.js';

type Problem =
  | { readonly kind: 'journal_corrupt'; readonly seq: number; readonly reason: string; readonly message: string }
  | { readonly kind: 'invalid_evidence'; readonly code: string; readonly message: string };

interface Row {
  readonly sessionId: string;
  readonly events: number;
  readonly epoch: number;
  readonly owner: string | null;
  readonly held: boolean;
  readonly leaseExpiresAt: number | null;
  readonly leaseExpired: boolean;
  readonly attention: Attention | null;
  /** Review decisions recorded in the inbox about this session's calls that its host will journal. */
  readonly reviewsWaiting: number;
  /** Those the calls' own events overtook since they were made: its host marks them stale instead. */
  readonly reviewsOvertaken: number;
  /** Calls whose latest attempt waits for a decision on its approval request (a person's, or its use by a host). */
  readonly awaitingApproval: number;
  readonly problem: Problem | null;
}

export const sessionsCommand: Command = {
  name: 'sessions',
  summary: 'list the sessions of a store, with event counts and the calls needing attention',
  arguments: [STORE_ARGUMENT],
  options: {
    json: { type: 'boolean', help: 'print one JSON document instead of a table' },
  },
  description: `
Lists every session in the store: how many events its journal holds, its ownership epoch and current owner, and
whether its owner's lease ran out (held, lease expired: the owner stopped writing and heartbeating, so a recovering
host may take it over with takeover 'expired'), and how many tool calls need a host's attention: calls whose outcome
is in doubt (needs_review: a trusted review is required before any retry) or that were interrupted before anyone saw
an answer (retry_allowed: a host may prepare one retry). A failure recorded before the body and delivered to its
caller is not pending work, even when a retry would be allowed: the caller saw it and decided ('jingwei inspect'
shows such calls); nor is a call a completed review resolved, journaled or recorded with 'jingwei review' and
waiting in the decision inbox for the owner to journal it. Such decisions are counted apart (reviews waiting to be
journaled): until a host of the session journals them nothing acts on them, and a retry of their operation is
refused meanwhile ('jingwei queue' lists them). Calls waiting for approval (an approver left the request pending,
or a person decided it and no host has used the decision yet) are counted apart too. Every journal is loaded and verified on the way, so a damaged one
shows up here with the sequence number and reason of the damage.`,
  exitCodes: `This command exits 1 when a journal is corrupt or its tool evidence is invalid; calls needing
attention alone do not make it fail (use 'jingwei inspect' for that).`,
  examples: ['jingwei sessions journal.db', 'jingwei sessions journal.db --json | jq ".sessions[] | select(.needs_attention > 0)"'],
  async run({ io, out, args, options }) {
    return withStore(args.store!, async (store) => {
      const sessions = await store.listSessions();
      const inbox = await pendingInboxReviews(store);
      const total = sessions.reduce((sum, s) => sum + s.events, 0);
      const progress = Progress.for(io, total);
      const rows: Row[] = [];
      try {
        for (const [i, s] of sessions.entries()) {
          progress.update(`checking session ${i + 1} of ${sessions.length}: ${s.sessionId} (${num(s.events)} events)`);
          let attention: Attention | null = null;
          let problem: Problem | null = null;
          let overtaken = 0;
          let approvals = 0;
          try {
            const history = await store.loadHistory(s.sessionId);
            const assessment = history.length === 0 ? null : assessSession(history);
            attention = assessment === null ? { total: 0, needsReview: 0, retryAllowed: 0, handled: 0 } : attentionOf(withInboxReviews(assessment, inbox.get(s.sessionId), history));
            overtaken = overtakenReviews(inbox.get(s.sessionId), history);
            approvals = assessment === null ? 0 : awaitingApproval(assessment).length;
          } catch (error) {
            if (error instanceof JournalCorruptError) problem = { kind: 'journal_corrupt', seq: error.seq, reason: error.reason, message: error.message };
            else if (error instanceof ToolRetryError) problem = { kind: 'invalid_evidence', code: error.code, message: error.message };
            else throw error;
          }
          rows.push({
            sessionId: s.sessionId, events: s.events, epoch: s.epoch, owner: s.owner, held: s.held,
            leaseExpiresAt: s.leaseExpiresAt, leaseExpired: s.leaseExpired, attention, reviewsWaiting: (inbox.get(s.sessionId)?.size ?? 0) - overtaken, reviewsOvertaken: overtaken, awaitingApproval: approvals, problem,
          });
        }
      } finally {
        progress.done();
      }
      const damaged = rows.filter((r) => r.problem !== null).length;
      if (options.json === true) {
        out.line(JSON.stringify({
          sessions: rows.map((r) => ({
            session_id: r.sessionId,
            events: r.events,
            epoch: r.epoch,
            owner: r.owner,
            held: r.held,
            lease_expires_at: r.leaseExpiresAt === null ? null : new Date(r.leaseExpiresAt).toISOString(),
            lease_expired: r.leaseExpired,
            needs_attention: r.attention?.total ?? null,
            needs_review: r.attention?.needsReview ?? null,
            retry_allowed: r.attention?.retryAllowed ?? null,
            handled_failures: r.attention?.handled ?? null,
            reviews_waiting: r.reviewsWaiting,
            reviews_overtaken: r.reviewsOvertaken,
            awaiting_approval: r.awaitingApproval,
            problem: r.problem,
          })),
        }, null, 2));
        return damaged > 0 ? EXIT.findings : EXIT.ok;
      }
      const s = out.style;
      if (rows.length === 0) {
        out.line('No sessions in this store.');
        return EXIT.ok;
      }
      const cells = rows.map((r) => [
        safeId(r.sessionId),
        num(r.events),
        String(r.epoch),
        r.owner === null || r.owner === undefined ? '-' : safe(r.owner),
        r.leaseExpired ? s.yellow('held, lease expired') : r.held ? 'held' : 'released',
        r.problem?.kind === 'journal_corrupt'
          ? s.red(`CORRUPT at seq ${r.problem.seq} (${r.problem.reason})`)
          : r.problem
            ? s.red(`INVALID EVIDENCE (${r.problem.code})`)
            : attentionCell(r, s),
      ]);
      out.line(table(
        [{ header: 'SESSION' }, { header: 'EVENTS', align: 'right' }, { header: 'EPOCH', align: 'right' }, { header: 'OWNER' }, { header: 'STATE' }, { header: 'NEEDS ATTENTION' }],
        cells,
        s,
        out.width !== undefined ? { width: out.width } : {},
      ));
      const attention = rows.filter((r) => (r.attention?.total ?? 0) > 0).length;
      const waiting = rows.filter((r) => r.reviewsWaiting + r.reviewsOvertaken > 0).length;
      const approving = rows.filter((r) => r.awaitingApproval > 0).length;
      out.line();
      out.line(
        `${plural(rows.length, 'session')}, ${plural(total, 'event')}; ` +
          `${plural(attention, 'session')} with calls needing attention` +
          (approving > 0 ? `; ${plural(approving, 'session')} with calls waiting for approval ('jingwei queue' lists the requests)` : '') +
          (waiting > 0 ? `; ${plural(waiting, 'session')} with review decisions waiting for a host to journal them or mark them stale ('jingwei queue' lists them)` : '') +
          (damaged > 0 ? `; ${s.red(`${plural(damaged, 'damaged journal')}`)} (run 'jingwei verify' on it)` : ''),
      );
      return damaged > 0 ? EXIT.findings : EXIT.ok;
    });
  },
};

/** "2 (1 needs_review, 1 retry_allowed)", then the review decisions waiting to be journaled and those overtaken, if any. */
function attentionCell(r: Row, s: Style): string {
  const calls = r.attention!.total > 0 ? s.yellow(attentionText(r.attention!)) : s.dim('0');
  const waiting = r.reviewsWaiting > 0 ? `; ${s.yellow(`${plural(r.reviewsWaiting, 'review decision')} waiting to be journaled`)}` : '';
  const overtaken = r.reviewsOvertaken > 0
    ? `; ${s.yellow(`${plural(r.reviewsOvertaken, 'review decision')} overtaken by the call's own events (the host marks ${r.reviewsOvertaken === 1 ? 'it' : 'them'} stale: review again)`)}`
    : '';
  const approvals = r.awaitingApproval > 0 ? `; ${s.yellow(`${plural(r.awaitingApproval, 'call')} waiting for approval`)}` : '';
  return calls + approvals + waiting + overtaken;
}
