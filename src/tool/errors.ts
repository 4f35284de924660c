import { JingweiError } from '../errors.js';
import type { ToolCall, ToolResult } from '../event/types.js';

/** The runtime's configuration is inconsistent; raised by createToolRuntime, never at call time. */
export class ToolConfigError extends JingweiError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('tool_config_invalid', message, options);
  }
}

export type ToolPreflightCode =
  | 'empty_name'
  | 'name_too_long'
  /** The name is not well-formed text (a lone surrogate, a control or format character). */
  | 'malformed_name'
  | 'arguments_too_large'
  | 'arguments_not_serializable'
  /** An integer beyond ±(2^53 − 1) in the arguments: it cannot be journaled exactly; send it as a string. */
  | 'unsafe_integer'
  /** A tool this caller cannot use (not registered or not granted), with arguments too large to journal for it. */
  | 'unavailable_tool'
  | 'invalid_options';
/** A call rejected before anything was reserved or recorded. */
export class ToolPreflightError extends JingweiError {
  declare readonly code: ToolPreflightCode;
  constructor(code: ToolPreflightCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/** More calls are in flight than `maxInFlight` allows. Nothing was recorded or charged. */
export class ToolOverloadedError extends JingweiError {
  constructor(limit: number) {
    super('overloaded', `${limit} tool calls are already in flight`);
  }
}

/** The gateway's binding signal fired; it admits nothing more. */
export class ToolTurnClosedError extends JingweiError {
  constructor() {
    super('turn_closed', 'the gateway was cancelled and admits no more calls');
  }
}

/**
 * Evidence could not be written (the owner was fenced, or storage failed). `stage` says which write; at stage
 * `call` nothing ran; at `started` the body never ran; at `result` the body ran and its outcome is in `result`.
 */
export class ToolRecordingError extends JingweiError {
  readonly stage: 'call' | 'started' | 'result';
  readonly call: ToolCall;
  readonly result: ToolResult | null;
  constructor(stage: 'call' | 'started' | 'result', call: ToolCall, result: ToolResult | null, cause: unknown) {
    super('recording_failed', `could not record the ${stage} of ${call.name} (${call.id}): ${String((cause as Error)?.message ?? cause)}`, { cause });
    this.stage = stage;
    this.call = call;
    this.result = result;
  }
}

/** Throw this from a tool body to report a failure; anything else thrown is recorded as a panic. */
export class ToolBodyError extends JingweiError {
  readonly retryable: boolean;
  constructor(code: string, message: string, options?: { retryable?: boolean; cause?: unknown }) {
    super(code, message, options);
    this.retryable = options?.retryable ?? false;
  }
}
