import { InvalidInputError } from '../../errors.js';
import { TOOL_EFFECTS, type ToolEffect } from '../../event/types.js';
import { ATTENTION_STATUSES, type AttentionStatus } from '../../store/rows.js';
import { integerOption, STORE_ARGUMENT, type Command } from '../command.js';
import { EXIT, UsageError } from '../exit.js';
import { durationText, parseAge, safe, safeId, shortId, storeWord, table, timeText } from '../format.js';
import { withStore } from '../session.js';
import { approvalRequests, attentionTimes, lateBodyEnds, type InboxListing, REVIEWED_NOT_EXECUTED_HINT, waitingReviewDecisions } from '../assessment.js';
import { QUEUE_ATTENTION_STATUSES } from '../../store/attention.js';
import { identicalApprovals, sameArguments, sameWrite } from '../../store/inbox.js';
import type { DecisionRow } from '../../store/inbox-rows.js';

function statusesOf(value: string | boolean | undefined): AttentionStatus[] | undefined {
  if (typeof value !== 'string') return undefined;
  const list = value.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  for (const s of list) {
    if (!(ATTENTION_STATUSES as readonly string[]).includes(s)) {
      throw new UsageError(`jingwei queue: --status ${JSON.stringify(s)} is not one of ${ATTENTION_STATUSES.join(', ')}`);
    }
  }
  return list as AttentionStatus[];
}

export const queueCommand: Command = {
  name: 'queue',
  summary: 'list the operations that need attention across sessions, from the store\'s index (no journal is loaded)',
  arguments: [STORE_ARGUMENT],
  options: {
    session: { type: 'string', value: 'id', help: 'only this session' },
    tool: { type: 'string', value: 'name', help: 'only calls of this tool' },
    effect: { type: 'string', value: 'effect', help: `only this effect (${TOOL_EFFECTS.join(', ')})` },
    status: { type: 'string', value: 'list', help: `comma-separated statuses (default ${QUEUE_ATTENTION_STATUSES.join(',')}; also ${ATTENTION_STATUSES.filter((s) => !QUEUE_ATTENTION_STATUSES.includes(s)).join(', ')})` },
    'older-than': { type: 'string', value: 'age', help: 'only operations last active (result, start marker, or call) at least this long ago: 90s, 30m, 4h, 2d' },
    limit: { type: 'string', value: 'n', help: 'at most n items (1..1000, default 100)' },
    cursor: { type: 'string', value: 'cursor', help: 'continue after the page that printed this cursor' },
    'approvals-after': { type: 'string', value: 'id', help: 'list the approval requests after this one (the next page of approvals)' },
    'decided-after': { type: 'string', value: 'id', help: 'list the decided requests after this one (the next page of those)' },
    'reviews-after': { type: 'string', value: 'id', help: 'list the waiting review decisions after this one (the next page of those)' },
    json: { type: 'boolean', help: 'print one JSON document instead of a table' },
  },
  description: `
Lists, across every session, the operations whose latest attempt needs attention, read from the index the store
keeps in each commit: no journal is loaded, so it stays fast on any number of sessions. By default that is every
operation without a result (running, waiting, or interrupted), every one whose outcome is unknown, and every one a
review says did not happen (reviewed_not_executed: its write is still to be made, and nothing makes it until a host
retries it, by resuming the session's run or, where no run will, with prepareToolRetry); a failure recorded before
the body and delivered to its caller is not listed. IN DOUBT marks an unknown or non-idempotent tool whose body
started or may have: a host must find out what happened (a review) before anything repeats it.
Times are when the store recorded the call; durations come from the recorded times (how long the body ran, or has
been without a result). Operations recorded before the store kept the index are not listed; 'jingwei inspect'
assesses a whole journal.

Below the operations, the open approval requests: attempts recorded approval_pending whose approver left the
decision to a person. Each shows its request id (for 'jingwei approve' or 'jingwei deny'), session, tool and since
when it waits; --session, --tool and --older-than filter them too, --limit pages them (--approvals-after continues),
and --status or --effect (which select operations) leave them out. A request for the same call (task, tool and
arguments) as another of its session, waiting or approved, is named under the table: a model told that its call
waits for a person may ask for it again, and approving both makes the write twice ('jingwei approve' refuses the
second approval unless --allow-identical).

Last, the approval requests a person decided whose decision no attempt has used yet: the session's host uses each on
its next attempt of the operation (a resumed run, or a retry), so one that stays here means that host has not come
back: resume the session's run on another host. The same filters apply; --decided-after continues them.

And the review decisions recorded ('jingwei review') that the session's host has not journaled yet: nothing acts on
one until then (a retry of its operation is refused meanwhile), so one that stays here means that host has not come
back: resume the session's run, or run the recovery routine, on another host (it journals them for a session
abandoned or released alike). --reviews-after continues them.`,
  exitCodes: 'This command exits 0 whether or not items are listed (use --json and count them in scripts).',
  examples: [
    'jingwei queue journal.db',
    'jingwei queue journal.db --status outcome_unknown --older-than 30m',
    'jingwei queue postgres://ops@db/agents --effect non_idempotent --json',
  ],
  async run({ out, args, options }) {
    const effect = options.effect;
    if (effect !== undefined && !(TOOL_EFFECTS as readonly unknown[]).includes(effect)) {
      throw new UsageError(`jingwei queue: --effect ${JSON.stringify(effect)} is not one of ${TOOL_EFFECTS.join(', ')}`);
    }
    const age = options['older-than'];
    const olderThanMs = typeof age === 'string' ? parseAge(age) : undefined;
    if (olderThanMs === null) throw new UsageError(`jingwei queue: --older-than ${JSON.stringify(age)} is not an age such as 90s, 30m, 4h or 2d`);
    const limit = integerOption('queue', 'limit', options.limit, 100, { min: 1, max: 1000 });
    const status = statusesOf(options.status);
    return withStore(args.store!, async (store) => {
      let page;
      try {
        page = await store.attention({
          ...(typeof options.session === 'string' ? { sessionId: options.session } : {}),
          ...(typeof options.tool === 'string' ? { tool: options.tool } : {}),
          ...(effect !== undefined ? { effect: effect as ToolEffect } : {}),
          ...(status ? { status } : {}),
          ...(olderThanMs !== undefined ? { olderThanMs } : {}),
          ...(typeof options.cursor === 'string' ? { cursor: options.cursor } : {}),
          limit,
        });
      } catch (error) {
        if (error instanceof InvalidInputError) throw new UsageError(`jingwei queue: ${error.message}`);
        throw error;
      }
      const none = { items: [], next: null };
      let approvals: Awaited<ReturnType<typeof approvalRequests>> = none;
      let decided: Awaited<ReturnType<typeof approvalRequests>> = none;
      let reviews: Awaited<ReturnType<typeof approvalRequests>> = none;
      if (status === undefined && effect === undefined) {
        const page = async (option: 'approvals-after' | 'decided-after' | 'reviews-after', list: (query: InboxListing) => ReturnType<typeof approvalRequests>) => {
          try {
            return await list({
              ...(typeof options.session === 'string' ? { sessionId: options.session } : {}),
              ...(typeof options.tool === 'string' ? { tool: options.tool } : {}),
              ...(olderThanMs !== undefined ? { createdAtMost: Date.now() - olderThanMs } : {}),
              ...(typeof options[option] === 'string' ? { after: options[option] } : {}),
              limit,
            });
          } catch (error) {
            if (error instanceof InvalidInputError && error.field === 'after') throw new UsageError(`jingwei queue: --${option} ${error.message.replace(/^after: /, '')}`);
            throw error;
          }
        };
        approvals = await page('approvals-after', (q) => approvalRequests(store, 'open', q));
        decided = await page('decided-after', (q) => approvalRequests(store, 'decided', q));
        reviews = await page('reviews-after', (q) => waitingReviewDecisions(store, q));
      }
      // Per open request, the other requests for the same tool and arguments, waiting or approved (used or not): of its
      // session and task, the same write; of another task of its session, or another session listed here, most likely
      // a host or a user that started it again.
      const identical = new Map<string, DecisionRow[]>();
      const alike = new Map<string, DecisionRow[]>();
      const listed = [...approvals.items, ...decided.items];
      const live = (t: DecisionRow) => t.state === 'open' || t.decision === 'approved';
      const ofSession = await identicalApprovals(store, approvals.items, ['open', 'decided', 'consumed']);
      for (const row of approvals.items) {
        const same = (ofSession.get(row.id) ?? []).filter(live);
        const twins = same.filter((t) => sameWrite(row, t));
        const others = [...same.filter((t) => !sameWrite(row, t)), ...listed.filter((t) => t.sessionId !== row.sessionId && live(t) && sameArguments(row, t))];
        if (twins.length > 0) identical.set(row.id, twins);
        if (others.length > 0) alike.set(row.id, others);
      }
      const bodyEnds = await lateBodyEnds(store, page.items);
      const now = new Date().toISOString();
      if (options.json === true) {
        out.line(JSON.stringify({
          items: page.items.map((i) => ({
            session_id: i.sessionId, task_id: i.taskId, key: i.key, call_id: i.callId, tool: i.tool, effect: i.effect,
            revision: i.revision, status: i.status, started: i.started, category: i.category, in_doubt: i.inDoubt,
            called_at: i.calledAt, started_at: i.startedAt, ended_at: i.endedAt, pending_since: i.pendingSince,
            body_ended: bodyEnds.get(i.callId) ?? null,
          })),
          next: page.next,
          approvals: approvals.items.map((r) => ({
            request_id: r.id, session_id: r.sessionId, call_id: r.callId, tool: r.tool, task_id: r.binding?.taskId ?? null,
            key: r.binding?.key ?? null, revision: r.binding?.revision ?? null, approver: r.binding?.approver ?? null, note: r.note, since: r.createdAt,
            identical_to: (identical.get(r.id) ?? []).map((t) => t.id),
            same_arguments_as: (alike.get(r.id) ?? []).map((t) => ({ request_id: t.id, session_id: t.sessionId, task_id: t.binding?.taskId ?? null, state: t.state })),
          })),
          approvals_next: approvals.next,
          decided: decided.items.map((r) => ({
            request_id: r.id, session_id: r.sessionId, call_id: r.callId, tool: r.tool, task_id: r.binding?.taskId ?? null,
            key: r.binding?.key ?? null, decision: r.decision, actor: r.actor, decided_at: r.decidedAt, since: r.createdAt,
          })),
          decided_next: decided.next,
          reviews: reviews.items.map((r) => ({
            decision_id: r.id, session_id: r.sessionId, call_id: r.callId, tool: r.tool, outcome: r.decision, actor: r.actor,
            evidence: r.reason, recorded_at: r.createdAt,
          })),
          reviews_next: reviews.next,
        }, null, 2));
        return EXIT.ok;
      }
      const s = out.style;
      if (page.items.length === 0 && approvals.items.length === 0 && decided.items.length === 0 && reviews.items.length === 0) {
        out.line(options.cursor || options['approvals-after'] || options['decided-after'] || options['reviews-after'] ? 'No more items.' : s.green('Nothing needs attention.'));
        return EXIT.ok;
      }
      if (page.items.length > 0) {
        const cells = page.items.map((i) => [
          timeText(i.calledAt),
          safeId(i.sessionId),
          shortId(i.callId),
          safe(i.tool),
          i.effect,
          i.inDoubt ? s.yellow(`${i.status} IN DOUBT`) : QUEUE_ATTENTION_STATUSES.includes(i.status) ? s.cyan(i.status) : s.dim(i.status),
          i.category ?? '-',
          attentionTimes(i, now, bodyEnds.get(i.callId)),
        ]);
        out.line(table(
          [{ header: 'CALLED AT' }, { header: 'SESSION' }, { header: 'CALL' }, { header: 'TOOL' }, { header: 'EFFECT' }, { header: 'STATUS' }, { header: 'RESULT' }, { header: 'TIMES' }],
          cells,
          s,
          out.width !== undefined ? { width: out.width } : {},
        ));
        out.line();
        out.line(`${page.items.length} item${page.items.length === 1 ? '' : 's'}` + (page.next ? `; more: --cursor ${page.next}` : '.'));
        if (page.items.some((i) => i.status === 'reviewed_not_executed')) out.line(s.dim(`${REVIEWED_NOT_EXECUTED_HINT}.`));
        out.line(s.dim(`One call in detail: jingwei inspect ${storeWord(args.store!)} <session> <call>`));
      }
      if (approvals.items.length > 0) {
        if (page.items.length > 0) out.line();
        out.line(s.bold(`Approval requests waiting for a person (${approvals.items.length}):`));
        out.line(table(
          [{ header: 'SINCE' }, { header: 'REQUEST' }, { header: 'SESSION' }, { header: 'CALL' }, { header: 'TOOL' }, { header: 'WAITING' }, { header: 'NOTE' }],
          approvals.items.map((r) => [
            timeText(r.createdAt), safeId(r.id), safeId(r.sessionId), shortId(r.callId), safe(r.tool ?? '-'), durationText(r.createdAt, now) ?? '-', safe(r.note ?? '-'),
          ]),
          s,
          out.width !== undefined ? { width: out.width } : {},
        ));
        out.line();
        const standing = (t: DecisionRow) => (t.state === 'open' ? 'waiting' : t.state === 'consumed' ? 'approved, used' : 'approved');
        for (const [id, twins] of identical) {
          const named = twins.map((t) => `${safeId(t.id)} (${standing(t)})`).join(', ');
          out.line(s.yellow(`${safeId(id)} asks for the same call (tool and arguments) as ${named}: approving both makes the write twice; deny the one that repeats the other.`));
        }
        for (const row of approvals.items) {
          const others = alike.get(row.id);
          if (others === undefined) continue;
          const named = others.map((t) => `${safeId(t.id)} (${t.sessionId === row.sessionId ? `task ${safeId(t.binding?.taskId ?? '-')}` : `session ${safeId(t.sessionId)}`}, ${standing(t)})`).join(', ');
          out.line(s.yellow(`${safeId(row.id)} asks for the same tool and arguments as ${named}: if it is the same request started again, approving both makes the write twice.`));
        }
        out.line(s.dim(`What one would do (the call and its arguments in full): jingwei inspect ${storeWord(args.store!)} <request>`));
        out.line(s.dim(`Decide one: jingwei approve ${storeWord(args.store!)} <request> --actor <name> (or jingwei deny)` + (approvals.next ? `; more: --approvals-after ${approvals.next}` : '')));
      }
      if (decided.items.length > 0) {
        if (page.items.length > 0 || approvals.items.length > 0) out.line();
        out.line(s.bold(`Decided, waiting for the session's host to use the decision (${decided.items.length}):`));
        out.line(table(
          [{ header: 'DECIDED AT' }, { header: 'REQUEST' }, { header: 'SESSION' }, { header: 'TOOL' }, { header: 'DECISION' }, { header: 'UNUSED FOR' }],
          decided.items.map((r) => [
            timeText(r.decidedAt ?? r.createdAt), safeId(r.id), safeId(r.sessionId), safe(r.tool ?? '-'),
            `${safe(r.decision ?? '-')} by ${safe(r.actor ?? '-')}`, durationText(r.decidedAt ?? r.createdAt, now) ?? '-',
          ]),
          s,
          out.width !== undefined ? { width: out.width } : {},
        ));
        out.line();
        out.line(s.dim('The session\'s host uses each on its next attempt of the operation; if that host is gone, the startup routine with retry_safe (recoverAbandoned) makes it, or resume the session\'s run on another'
          + (decided.next ? `; more: --decided-after ${decided.next}` : '.')));
      }
      if (reviews.items.length > 0) {
        if (page.items.length > 0 || approvals.items.length > 0 || decided.items.length > 0) out.line();
        out.line(s.bold(`Review decisions waiting for the session's host to journal them (${reviews.items.length}):`));
        out.line(table(
          [{ header: 'RECORDED AT' }, { header: 'DECISION' }, { header: 'SESSION' }, { header: 'CALL' }, { header: 'TOOL' }, { header: 'OUTCOME' }, { header: 'WAITING' }],
          reviews.items.map((r) => [
            timeText(r.createdAt), safeId(r.id), safeId(r.sessionId), shortId(r.callId), safe(r.tool ?? '-'),
            `${safe(r.decision ?? '-')} by ${safe(r.actor ?? '-')}`, durationText(r.createdAt, now) ?? '-',
          ]),
          s,
          out.width !== undefined ? { width: out.width } : {},
        ));
        out.line();
        out.line(s.dim('The session\'s host journals each when it next uses the inbox (a resumed run, its recovery routine); no retry of the operation is made meanwhile. If that host is gone, resume the session\'s run on another'
          + (reviews.next ? `; more: --reviews-after ${reviews.next}` : '.')));
      }
      return EXIT.ok;
    });
  },
};
