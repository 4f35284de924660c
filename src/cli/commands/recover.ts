import { AnchorError, JournalCorruptError, ToolRetryError } from '../../errors.js';
import { checkAcquireAnchors } from '../../store/anchor-store.js';
import { ANCHORS_OPTION, anchorOptions, KEY_OPTION } from '../anchors.js';
import { RECOVERY_POLICIES, approvalRetryPlan, approvalsToUse, callsAwaitingApproval, decidedApprovals, openCalls, operationOf, safeRetryPlan, type RecoveryPolicy } from '../../tool/recover.js';
import { ToolRecoveryStatus } from '../../tool/retry-policy.js';
import { STORE_ARGUMENT, type Command } from '../command.js';
import { EXIT, UsageError } from '../exit.js';
import { plural, safe, safeId, shortId, table } from '../format.js';
import { withStore } from '../session.js';
import { pendingInboxReviews } from '../assessment.js';
import type { DecisionRow as InboxDecisionRow } from '../../store/inbox-rows.js';
import type { SessionEvent, ToolReviewOutcome } from '../../event/types.js';
import type { CallId, EventId } from '../../ids.js';

interface PlannedCall {
  readonly call_id: string;
  readonly tool: string;
  readonly effect: string | null;
  readonly status: string;
  /** Its outcome is uncertain: the host's reconciler, if its tool declares one, is asked first. */
  readonly reconciler_first: boolean;
  /** What the library's routine would do with this policy, unless a reconciler settles it first. */
  readonly would: 'retry' | 'leave' | 'settled';
  readonly reason: string;
  /** An operator's review decision of the call waiting in the inbox: the routine journals it first, and `would` is decided on it. */
  readonly inbox_review: { readonly id: string; readonly decision: string; readonly actor: string } | null;
  /** For a call waiting for an approval: the inbox's decided decision no attempt has used yet, which a retry uses; null when undecided. */
  readonly inbox_approval?: { readonly id: string; readonly decision: string; readonly actor: string } | null;
}

interface PlannedSession {
  readonly session_id: string;
  readonly owner: string | null;
  readonly epoch: number;
  readonly lease_expires_at: string | null;
  /**
   * Nobody holds it: under retry_safe the routine acquires it after the abandoned sessions, to retry a call waiting
   * for an approval a person decided after an earlier pass had left it.
   */
  readonly released: boolean;
  readonly calls: readonly PlannedCall[];
  readonly problem: { readonly code: string; readonly message: string } | null;
}

export const recoverCommand: Command = {
  name: 'recover',
  summary: 'dry run of the startup routine: the abandoned sessions, their open calls, and what recovery would do',
  arguments: [STORE_ARGUMENT],
  options: {
    policy: { type: 'string', value: 'policy', help: `the policy to plan with: ${RECOVERY_POLICIES.join(' or ')} (default suspend)` },
    json: { type: 'boolean', help: 'print one JSON document instead of text' },
    key: { ...KEY_OPTION, help: 'with --anchors: the public key of the hosts\' anchor, to show which sessions the routine given that anchor would refuse' },
    anchors: ANCHORS_OPTION,
  },
  description: `
A dry run: changes nothing and takes over nothing. Lists the sessions whose owner's lease ran out (the owner stopped
writing and heartbeating: it crashed or hangs), each one's open calls (in doubt, or interrupted before an answer),
and what the startup routine would do with each under the policy: with retry_safe, retry a call that needs no
review (read-only or idempotent, or provably never started); leave everything else in the queue for a person.
This command holds no tools, so it cannot ask reconcilers or run retries: calls marked "reconciler first" are
asked by the host's reconciler, when its tool declares one, before the policy applies, and may be settled by it.
An operator's review decision waiting in the decision inbox is journaled by the routine before it decides, so the
plan is made on it ("journal alice's not_executed review, then ..."): a not_executed one lets retry_safe retry the
call, a completed one settles it. A call waiting for an approval that a person has decided and no attempt has used
is retried under retry_safe ("use alice's approval: retry"), the decision answering for that attempt, and left under
suspend; one nobody has decided is left. With retry_safe it also lists the sessions nobody holds where a person
decided an approval after an earlier pass had left the call: the routine acquires them to use it. A call of an agent
run that finished is left for a person or a new run.
With --key and --anchors (the hosts' anchor file and the public key of its signing key), each session is also
checked as the routine given that anchor checks it before taking it over: a journal its signed checkpoints do not
vouch for (a backup put back, an edit) is shown as refused (anchor_mismatch), since the routine reports it failed
and takes nothing (docs/design.md#a-restored-journal-is-refused-at-acquire).
To recover for real, the host calls recoverAbandoned(store, { runtime, tools, caller }, policy) from
'jingwei/review' at startup: it takes each abandoned session over (never a live one), reconciles, applies the
policy and reports what it did (docs/operator-guide.md).`,
  exitCodes: 'This command exits 1 when abandoned sessions are found, or with retry_safe sessions nobody holds with approvals to use (a host should run the routine), 0 when there are none.',
  examples: ['jingwei recover journal.db', 'jingwei recover postgres://ops@db/agents --policy retry_safe --json', 'jingwei recover journal.db --key anchor.pub.pem --anchors anchors.jsonl'],
  async run({ out, err, args, options }) {
    const policy = options.policy ?? 'suspend';
    if (typeof policy !== 'string' || !(RECOVERY_POLICIES as readonly string[]).includes(policy)) {
      throw new UsageError(`jingwei recover: --policy ${JSON.stringify(policy)} is not one of ${RECOVERY_POLICIES.join(', ')}`);
    }
    const keys = anchorOptions('recover', options, true, err);
    return withStore(args.store!, async (store) => {
      /** Why the routine given the hosts' anchor would refuse the session, or null. */
      const refusal = async (sessionId: string): Promise<PlannedSession['problem']> => {
        if (keys === null) return null;
        try {
          await checkAcquireAnchors(store, sessionId, keys);
          return null;
        } catch (error) {
          if (!(error instanceof AnchorError)) throw error;
          return { code: error.code, message: `${error.message} The routine given this anchor reports the session failed and takes nothing over.` };
        }
      };
      const planned: PlannedSession[] = [];
      for (const summary of await store.listExpiredSessions()) {
        const base = {
          session_id: summary.sessionId,
          owner: summary.owner,
          epoch: summary.epoch,
          lease_expires_at: summary.leaseExpiresAt === null ? null : new Date(summary.leaseExpiresAt).toISOString(),
          released: false,
        };
        try {
          const refused = await refusal(summary.sessionId);
          if (refused !== null) {
            planned.push({ ...base, calls: [], problem: refused });
            continue;
          }
          const waiting = (await pendingInboxReviews(store, summary.sessionId)).get(summary.sessionId) ?? new Map<string, InboxDecisionRow>();
          const history = await store.loadHistory(summary.sessionId);
          const approvals = await decidedApprovals(store, summary.sessionId);
          planned.push({ ...base, calls: [...plan(history, policy as RecoveryPolicy, waiting), ...planApprovals(history, policy as RecoveryPolicy, approvals)], problem: null });
        } catch (error) {
          if (!(error instanceof JournalCorruptError) && !(error instanceof ToolRetryError)) throw error;
          planned.push({ ...base, calls: [], problem: { code: error.code, message: error.message } });
        }
      }
      const abandoned = planned.length;
      if (policy === 'retry_safe') {
        const listed = new Set(planned.map((p) => p.session_id));
        const nobodyHolds = new Map<string, { owner: string | null; epoch: number }>();
        for (const x of await store.listSessions()) if (!x.held) nobodyHolds.set(x.sessionId, x);
        for (const { sessionId, history, decided } of await approvalsToUse(store, (id) => listed.has(id) || !nobodyHolds.has(id))) {
          const summary = nobodyHolds.get(sessionId);
          const refused = await refusal(sessionId);
          planned.push({
            session_id: sessionId, owner: summary?.owner ?? null, epoch: summary?.epoch ?? 0, lease_expires_at: null, released: true,
            calls: refused === null ? planApprovals(history, 'retry_safe', decided) : [], problem: refused,
          });
        }
      }
      if (options.json === true) {
        out.line(JSON.stringify({ dry_run: true, policy, sessions: planned }, null, 2));
        return planned.length === 0 ? EXIT.ok : EXIT.findings;
      }
      const s = out.style;
      if (planned.length === 0) {
        // A session held before leases were recorded has none to run out: never listed as abandoned, never live either.
        const held = (await store.listSessions()).filter((x) => x.held);
        const unleased = held.filter((x) => x.leaseExpiresAt === null);
        if (unleased.length === 0) {
          out.line(s.green(held.length === 0 ? 'No abandoned sessions: no session is held.' : 'No abandoned sessions: every held session\'s lease is live.'));
          if (held.length === 0) out.line('The calls of released sessions are not the startup routine\'s: see `jingwei sessions` and `jingwei queue`.');
          return EXIT.ok;
        }
        const named = unleased.slice(0, 5).map((x) => safeId(x.sessionId)).join(', ') + (unleased.length > 5 ? ', ...' : '');
        out.line(`No abandoned sessions by lease, but ${plural(unleased.length, 'held session')} ${unleased.length === 1 ? 'has' : 'have'} no lease ` +
          `(held before leases were recorded), so ${unleased.length === 1 ? 'it' : 'they'} never expire${unleased.length === 1 ? 's' : ''} by ` +
          `${unleased.length === 1 ? 'itself' : 'themselves'}: ${named}.`);
        out.line('Once you know the owner is gone, a host takes such a session over with acquire(id, { owner, takeover: true }).');
        return EXIT.ok;
      }
      const released = planned.length - abandoned;
      out.line(`Dry run, policy ${policy}: ${plural(abandoned, 'abandoned session')}${released > 0 ? `, and ${plural(released, 'session')} nobody holds with approvals to use` : ''}. Nothing was changed.`);
      for (const session of planned) {
        out.line();
        out.line(s.bold(`Session ${safeId(session.session_id)}`) + (session.released
          ? `, nobody holds it (released by ${safe(session.owner ?? '-')}, epoch ${session.epoch}): the routine acquires it to use the decisions`
          : ` owner ${safe(session.owner ?? '-')}, epoch ${session.epoch}, lease expired ${session.lease_expires_at ?? '-'}`));
        if (session.problem !== null) {
          out.line(s.red(`  ${session.problem.code}: ${safe(session.problem.message)}`));
          continue;
        }
        if (session.calls.length === 0) {
          out.line('  No open calls: a takeover would only release it.');
          continue;
        }
        out.line(table(
          [{ header: 'CALL' }, { header: 'TOOL' }, { header: 'EFFECT' }, { header: 'STATUS' }, { header: 'WOULD' }, { header: 'WHY' }],
          session.calls.map((c) => [
            shortId(c.call_id), safe(c.tool), c.effect ?? '-', c.status,
            (c.inbox_review ? `journal ${c.inbox_review.actor}'s ${c.inbox_review.decision} review, then ` : '') +
              (c.inbox_approval ? `use ${c.inbox_approval.actor}'s ${c.inbox_approval.decision === 'approved' ? 'approval' : 'denial'}: ` : '') +
              (c.reconciler_first ? 'reconciler first, then ' : '') +
              (c.would === 'retry' ? s.green('retry') : c.would === 'settled' ? s.green('nothing: settled') : s.yellow('leave for a person')),
            safe(c.reason),
          ]),
          s,
          { indent: '  ', ...(out.width !== undefined ? { width: out.width } : {}) },
        ));
      }
      out.line();
      out.line(s.dim('This command holds no tools: the host recovers with recoverAbandoned from jingwei/review (docs/operator-guide.md).'));
      return EXIT.findings;
    });
  },
};

/**
 * What the routine would do with each open call. A call whose review decision waits in the inbox is decided as the
 * routine decides it, after journaling that review first: on the history with the review appended.
 */
function plan(history: readonly SessionEvent[], policy: RecoveryPolicy, waiting: ReadonlyMap<string, InboxDecisionRow>): PlannedCall[] {
  return openCalls(history).map((call) => {
    const row = waiting.get(call.callId);
    const decided = row === undefined ? history : withReview(history, call.callId, row);
    const after = row === undefined ? call : openCalls(decided).find((c) => c.callId === call.callId);
    const inbox = row === undefined ? null : { id: row.id, decision: row.decision ?? '', actor: row.actor ?? '' };
    const base = { call_id: call.callId, tool: call.name, effect: call.effect, status: call.status, reconciler_first: call.status === ToolRecoveryStatus.OutcomeUnknown, inbox_review: inbox };
    if (after === undefined) return { ...base, would: 'settled' as const, reason: `${inbox!.actor}'s ${inbox!.decision} review settles it` };
    const safeRetry = policy === 'retry_safe' ? safeRetryPlan(decided, after) : { reason: `policy suspend: ${after.reason}` };
    return { ...base, would: 'reason' in safeRetry ? 'leave' as const : 'retry' as const, reason: 'reason' in safeRetry ? safeRetry.reason : after.reason };
  });
}

/** What the routine would do with each call waiting for an approval, given the inbox's decided approvals by operation. */
function planApprovals(history: readonly SessionEvent[], policy: RecoveryPolicy, approvals: ReadonlyMap<string, InboxDecisionRow>): PlannedCall[] {
  return callsAwaitingApproval(history).map((call) => {
    const row = approvals.get(operationOf(call.taskId!, call.key!));
    const planned = approvalRetryPlan(history, call, row, policy);
    return {
      call_id: call.callId, tool: call.name, effect: call.effect, status: call.status, reconciler_first: false, inbox_review: null,
      inbox_approval: row === undefined ? null : { id: row.id, decision: row.decision ?? '', actor: row.actor ?? '' },
      would: 'reason' in planned ? 'leave' as const : 'retry' as const,
      reason: 'reason' in planned ? planned.reason : planned.unused,
    };
  });
}

/** `history` with the inbox's review decision `row` of `callId` journaled after it, as the routine journals it. */
function withReview(history: readonly SessionEvent[], callId: string, row: InboxDecisionRow): SessionEvent[] {
  const last = history[history.length - 1]!;
  const review = { callId: callId as CallId, actor: row.actor ?? '', outcome: row.decision as ToolReviewOutcome, evidence: row.reason ?? '', source: 'human' as const, decisionId: row.id };
  return [...history, { eventId: 'evt_dry_run' as EventId, sessionId: last.sessionId, turnId: last.turnId, seq: last.seq + 1, kind: { type: 'tool_review', review } }];
}
