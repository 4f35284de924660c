import { JingweiError } from '../errors.js';

export type ToolRetryErrorCode =
  | 'invalid_evidence'
  | 'legacy_call'
  | 'completed'
  | 'needs_review'
  | 'not_latest_attempt'
  | 'binding_changed'
  | 'consumed';

/** Why a retry cannot be planned or used. `detail` says which evidence failed (docs/design.md#retry-errors). */
export class ToolRetryError extends JingweiError {
  declare readonly code: ToolRetryErrorCode;
  readonly detail: string;
  constructor(code: ToolRetryErrorCode, detail: string) {
    super(code, `${code}: ${detail}`);
    this.detail = detail;
  }
}
