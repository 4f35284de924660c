/**
 * `jingwei/review`: reviews of uncertain calls as journaled evidence, and reconcilers that ask the outside system
 * before any person is asked (docs/design.md#reviews-are-journaled-evidence, docs/design.md#reconcilers), and the
 * startup routine that recovers abandoned sessions with them (docs/design.md#recovering-abandoned-sessions).
 * Recovery (inspectToolRecovery, prepareToolRetry, assessSession) reads the journaled reviews by itself.
 */
export { recordToolReview, type ToolReviewInput } from './tool/review.js';
export { reconcileUncertainCalls, reconcilerActor, type ReconcileReport, type ReconciledCall } from './tool/reconcile.js';
export { journalInboxReviews, type InboxReviewReport, type JournaledInboxReview, type StaleInboxReview } from './tool/inbox-review.js';
export type { ToolReconcileAnswer, ToolReconcileRequest } from './tool/types.js';
export type { ToolReviewRecord, ToolReviewSource } from './event/types.js';
export {
  RECOVERY_POLICIES,
  openCalls,
  recoverAbandoned,
  safeRetryPlan,
  type RecoverOptions,
  type RecoveryHost,
  type RecoveryLeftCall,
  type RecoveryPolicy,
  type RecoveryReport,
  type RecoveryRetry,
  type SessionRecovery,
} from './tool/recover.js';
export { operationOriginIn } from './tool/idempotency.js';
