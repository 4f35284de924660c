/**
 * `approve`, `deny` and `review`: an operator's decisions, written to the store's decision inbox without taking the
 * session over (docs/design.md#the-decision-inbox). The session's owner journals a decision when it uses it.
 */
import { TOOL_REVIEW_OUTCOMES, type ToolReviewOutcome } from '../../event/types.js';
import type { DecisionRow } from '../../store/inbox-rows.js';
import { decisionInbox } from '../../store/inbox.js';
import { APPROVER_FIRST } from '../assessment.js';
import { STORE_ARGUMENT, type Command, type CommandContext } from '../command.js';
import { escapeOutput } from '../escape.js';
import { EXIT, UsageError, type ExitCode } from '../exit.js';
import { safe, safeId } from '../format.js';
import { withStore } from '../session.js';

const DECISION_EXIT_CODES = `This command exits 1 when the request was already decided, used, or superseded by a newer attempt (nothing
is written), and 2 when there is no such request or call.`;

const APPROVE_EXIT_CODES = `This command exits 1 when the request was already decided, used, or superseded by a newer attempt, or when an
identical call was already approved in its session and --allow-identical is not given (nothing is written), and 2
when there is no such request.`;

function requiredText(command: string, name: string, value: string | boolean | undefined): string {
  if (typeof value !== 'string' || value.trim() === '') throw new UsageError(`jingwei ${command}: --${name} is required`, `Run 'jingwei ${command} --help' for usage.`);
  return value;
}

function optionalText(value: string | boolean | undefined): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** The decision row with the CLI's snake_case keys, as every command's JSON has them. */
function decisionJson(row: DecisionRow) {
  const b = row.binding;
  return {
    id: row.id, kind: row.kind, session_id: row.sessionId, call_id: row.callId, state: row.state,
    binding: b === null ? null : { task_id: b.taskId, key: b.key, tool: b.tool, revision: b.revision, arguments_digest: b.argumentsDigest, approver: b.approver ?? null },
    tool: row.tool, note: row.note, decision: row.decision, actor: row.actor, reason: row.reason,
    created_at: row.createdAt, decided_at: row.decidedAt, consumed_at: row.consumedAt, consumed_by: row.consumedBy,
  };
}

/** The decision as JSON (one line, journal text escaped) or a short readable report. */
function report(ctx: CommandContext, row: DecisionRow, what: string): ExitCode {
  if (ctx.options.json === true) {
    ctx.io.stdout.write(escapeOutput(JSON.stringify(decisionJson(row))) + '\n');
    return EXIT.ok;
  }
  ctx.out.line(`${what} ${safeId(row.id)} (session ${safeId(row.sessionId)}, call ${safeId(row.callId)}${row.tool !== null ? `, tool ${safe(row.tool)}` : ''})`);
  ctx.out.line(`  by ${safe(row.actor ?? '')}${row.reason !== null ? `: ${safe(row.reason)}` : ''}`);
  ctx.out.line(row.kind === 'approval'
    ? `  The session's host uses it on the next attempt of this operation (same tool, contract revision and arguments)${row.decision === 'approved' ? APPROVER_FIRST : ''}.`
    : '  The session\'s host journals it as the review of this call.');
  return EXIT.ok;
}

const DECIDE_OPTIONS = {
  actor: { type: 'string', value: 'name', help: 'who decides (required; recorded in the journal when the decision is used)' },
  reason: { type: 'string', value: 'text', help: 'why (recorded with the decision)' },
  json: { type: 'boolean', help: 'print the recorded decision as one JSON line' },
} as const;

const APPROVE_OPTIONS = {
  ...DECIDE_OPTIONS,
  'allow-identical': { type: 'boolean', help: 'approve although an identical call (same task, tool and arguments) was already approved in the session: a second identical write is meant' },
} as const;

function approvalCommand(name: 'approve' | 'deny'): Command {
  const verb = name === 'approve' ? 'approves' : 'denies';
  return {
    name,
    summary: `${name} an approval request left by a call whose approver answered pending`,
    arguments: [STORE_ARGUMENT, { name: 'request', required: true, help: 'the approval request id (approval_…)' }],
    options: name === 'approve' ? APPROVE_OPTIONS : DECIDE_OPTIONS,
    description: `
${name === 'approve' ? 'Approves' : 'Denies'} an open approval request in the store's decision inbox, without taking the session over.
A request takes one decision: one already decided, used, or superseded by a newer attempt is refused and nothing
is written. The session's host uses the decision once, on the next attempt of the same operation with the same
tool, contract revision and arguments, and journals it with the actor; ${name === 'approve' ? 'the call then runs' : 'the call is then recorded as approval_denied'}.
This command ${verb} the request only; it never runs a tool.${name === 'approve' ? `

A model told that its call waits for a person may ask for the same call again, leaving a second request for the
same write under another operation. Once an operator approved one of them, approving the other is refused (nothing
is written), naming the approved one: deny it, or give --allow-identical when a second identical write is meant.` : ''}`,
    exitCodes: name === 'approve' ? APPROVE_EXIT_CODES : DECISION_EXIT_CODES,
    examples: [`jingwei ${name} journal.db approval_0190… --actor alice --reason "${name === 'approve' ? 'checked the recipient' : 'wrong recipient'}"`],
    async run(ctx) {
      const actor = requiredText(name, 'actor', ctx.options.actor);
      const reason = optionalText(ctx.options.reason);
      return withStore(ctx.args.store!, async (store) => {
        const inbox = decisionInbox(store);
        const input = { actor, ...(reason !== undefined ? { reason } : {}), ...(ctx.options['allow-identical'] === true ? { allowIdentical: true } : {}) };
        const row = name === 'approve' ? await inbox.approve(ctx.args.request!, input) : await inbox.deny(ctx.args.request!, input);
        return report(ctx, row, name === 'approve' ? 'Approved' : 'Denied');
      });
    },
  };
}

export const approveCommand = approvalCommand('approve');
export const denyCommand = approvalCommand('deny');

export const reviewCommand: Command = {
  name: 'review',
  summary: "record an operator's review of a call, for the session's host to journal",
  arguments: [STORE_ARGUMENT, { name: 'call', required: true, help: 'the call id (toolcall_…)' }],
  options: {
    session: { type: 'string', value: 'id', help: 'the session of the call (required)' },
    outcome: { type: 'string', value: TOOL_REVIEW_OUTCOMES.join('|'), help: 'what the outside system shows happened (required)' },
    evidence: { type: 'string', value: 'text', help: 'what the outcome rests on (required)' },
    actor: DECIDE_OPTIONS.actor,
    replaces: { type: 'string', value: 'id', help: 'the review of this call still waiting to be journaled that this one replaces (review_…)' },
    'despite-late-return': { type: 'boolean', help: 'record not_executed although the journal records that the body returned after its result' },
    json: DECIDE_OPTIONS.json,
  },
  description: `
Records a review decision in the store's decision inbox, without taking the session over: the call's outcome as
the outside system shows it (completed, not_executed or uncertain), the evidence and who gave it. The session's
host journals it as the call's review when it next uses the inbox. The call must be in the session's journal. A
call that may still be running (its host holds the session with a live lease, and no result is journaled, or its
result was recorded while its body went on and the body's end is not) cannot be reviewed yet: review it once its
body has ended, the host's lease has run out, or the session was taken over. A
takeover fences the old host's writes, not its body: before not_executed, make sure the process that ran the call
has stopped (a rolling deploy can leave it running), or its body may still make the write. A retry
whose body has not started (its approver is asked) can be reviewed completed: its body is then never started, and
the review settles its operation; one that starts while the review is recorded is refused (call_in_flight).

A call takes one review waiting to be journaled: while one waits, another is refused (decision_stale, naming it),
so two operators answering at the same moment never both read "Recorded". To replace the waiting review (a mistake,
or new evidence), name it with --replaces; it is then marked superseded and never journaled.

not_executed is refused, and nothing recorded, for a call whose journal records that its body went on after its
result (a timeout, a cancel) and returned: it most likely made its write ('jingwei inspect' shows the call). If the
outside system shows the write was not made all the same, say so with --despite-late-return.`,
  exitCodes:
    'This command exits 2 when the session has no such call, 1 when the call may still be running (call_in_flight), another review of it ' +
    'waits to be journaled and --replaces does not name it, or not_executed meets a body that returned after its result (decision_stale).',
  examples: ['jingwei review journal.db toolcall_0190… --session s-1 --outcome not_executed --evidence "no message in the outbox" --actor alice'],
  async run(ctx) {
    const sessionId = requiredText('review', 'session', ctx.options.session);
    const outcome = requiredText('review', 'outcome', ctx.options.outcome);
    if (!(TOOL_REVIEW_OUTCOMES as readonly string[]).includes(outcome)) {
      throw new UsageError(`jingwei review: --outcome must be one of ${TOOL_REVIEW_OUTCOMES.join(', ')}, got ${JSON.stringify(outcome)}`);
    }
    const evidence = requiredText('review', 'evidence', ctx.options.evidence);
    const actor = requiredText('review', 'actor', ctx.options.actor);
    return withStore(ctx.args.store!, async (store) => {
      const replaces = optionalText(ctx.options.replaces);
      const row = await decisionInbox(store).recordReview({
        sessionId, callId: ctx.args.call!, outcome: outcome as ToolReviewOutcome, evidence, actor, ...(replaces !== undefined ? { replaces } : {}),
        ...(ctx.options['despite-late-return'] === true ? { despiteLateReturn: true } : {}),
      });
      return report(ctx, row, 'Recorded review');
    });
  },
};
