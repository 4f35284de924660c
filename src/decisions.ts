/**
 * `jingwei/decisions`: the decision inbox (docs/design.md#the-decision-inbox). Operators record approval and review
 * decisions in the store without owning the session; a host waits for one (`awaitDecision`) or comes back after a
 * restart, and the session's owner journals a decision when it uses it (docs/design.md#durable-approvals).
 */
export { awaitDecision, decisionInbox, DecisionInbox } from './store/inbox.js';
export type { ApprovalDecisionInput, AwaitDecisionOptions, DecisionListOptions, DecisionPage, ReviewDecisionInput } from './store/inbox.js';
export type { ApprovalBinding, DecisionKind, DecisionRow, DecisionState } from './store/inbox-rows.js';
export { watchQueue, type QueueChange } from './store/queue-watch.js';
export { DecisionError, type DecisionErrorCode } from './errors.js';
