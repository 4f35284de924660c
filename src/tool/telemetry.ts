/**
 * Spans, metrics and `onEvent` events of each attempt (docs/design.md#observability). The runtime builds an
 * Observability only when a tracer, a meter or a hook is configured; otherwise it holds null and every report site
 * is one null check. Nothing here imports OpenTelemetry: the tracer and meter are the host's own objects.
 */
import { ToolConfigError } from '../errors.js';
import { PRE_BODY_CATEGORIES, type ToolCall, type ToolFailureCategory, type ToolRecordedOutcome } from '../event/types.js';
import { evidenceRuleFor, type ToolRecoveryStatus } from './retry-policy.js';
import type { ToolRetryPlan } from './retry-plan.js';
import type {
  TelemetryAttributes,
  TelemetryCounter,
  TelemetryHistogram,
  TelemetryMeter,
  TelemetrySpan,
  TelemetryTracer,
  ToolRuntimeEvent,
  ToolRuntimeEventBase,
  ToolRuntimeEventHandler,
  ToolTelemetry,
  ToolUnrecordedStage,
} from './telemetry-types.js';

/** OpenTelemetry's numeric constants, written out so that nothing is imported. */
const SPAN_KIND_INTERNAL = 0;
const STATUS_ERROR = 2;

/**
 * The tool name spans and metrics give a call to a tool the caller cannot use (not registered, or not granted): a
 * model may send any name, and each would otherwise become a span name and a metric series of its own. Spans keep
 * the requested name in `jingwei.tool.requested_name`; the hook's events carry it as `tool`. OpenTelemetry's own
 * placeholder for a value outside the known set (as `http.request.method` does).
 */
export const UNAVAILABLE_TOOL_LABEL = '_OTHER';

/** Seconds, as the GenAI conventions advise for durations: 10 ms to about 80 s, doubling. */
const DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];

/** Every instrument the runtime records to; docs/api.md#observability says what each one measures. */
interface Instruments {
  readonly attempts: TelemetryCounter;
  readonly failures: TelemetryCounter;
  readonly inDoubt: TelemetryCounter;
  readonly inFlight: TelemetryCounter;
  readonly approvalsWaiting: TelemetryCounter;
  readonly duration: TelemetryHistogram;
  readonly bodyDuration: TelemetryHistogram;
  readonly approvalDuration: TelemetryHistogram;
}

function createInstruments(meter: TelemetryMeter): Instruments {
  const seconds = (description: string) => ({ description, unit: 's', advice: { explicitBucketBoundaries: DURATION_BUCKETS } });
  return {
    attempts: meter.createCounter('jingwei.tool.attempts', { description: 'Tool call attempts that ended, by outcome and failure category', unit: '{attempt}' }),
    failures: meter.createCounter('jingwei.tool.failures', { description: 'Tool call attempts recorded as failed, by category', unit: '{attempt}' }),
    inDoubt: meter.createCounter('jingwei.tool.in_doubt', { description: 'Attempts that ended with an unknown outcome (body started, no success recorded)', unit: '{attempt}' }),
    inFlight: meter.createUpDownCounter('jingwei.tool.in_flight', { description: 'Tool calls admitted and not yet ended', unit: '{call}' }),
    approvalsWaiting: meter.createUpDownCounter('jingwei.tool.approvals_waiting', { description: 'Attempts waiting for an approver to answer', unit: '{attempt}' }),
    duration: meter.createHistogram('gen_ai.execute_tool.duration', seconds('Tool call attempt duration, from admission to the recorded result')),
    bodyDuration: meter.createHistogram('jingwei.tool.body.duration', seconds('Tool body duration, from its start marker to its settling')),
    approvalDuration: meter.createHistogram('jingwei.tool.approval.duration', seconds('Time spent waiting for an approver')),
  };
}

function hasMethods(value: unknown, names: readonly string[]): boolean {
  return typeof value === 'object' && value !== null && names.every((n) => typeof (value as Record<string, unknown>)[n] === 'function');
}

/**
 * Any throw of a hook, a tracer or a meter stops here, and so does the rejection of a thenable one returns (not only
 * this realm's Promise: one from a vm context, a library's own): observing never changes a call, nor ends the host
 * with an unhandled rejection. Promise.resolve adopts the thenable and the catch handles its rejection.
 */
export function quietly(report: () => unknown): void {
  try {
    const returned = report();
    if (returned === undefined || returned === null || (typeof returned !== 'object' && typeof returned !== 'function')) return;
    if (typeof (returned as { then?: unknown }).then === 'function') void Promise.resolve(returned).catch(() => undefined);
  } catch {
    // Swallowed on purpose (docs/design.md#observability).
  }
}

const now = () => performance.now();
const seconds = (ms: number) => ms / 1000;

export class Observability {
  private constructor(
    readonly tracer: TelemetryTracer | null,
    readonly instruments: Instruments | null,
    readonly onEvent: ToolRuntimeEventHandler | null,
  ) {}

  /** Null when nothing is configured: the runtime then reports nothing and builds nothing per attempt. */
  static from(telemetry: ToolTelemetry | undefined, onEvent: ToolRuntimeEventHandler | undefined): Observability | null {
    if (telemetry === undefined && onEvent === undefined) return null;
    if (onEvent !== undefined && typeof onEvent !== 'function') throw new ToolConfigError('onEvent must be a function');
    if (telemetry !== undefined && (typeof telemetry !== 'object' || telemetry === null)) {
      throw new ToolConfigError('telemetry must be an object with a tracer, a meter or both');
    }
    const tracer = telemetry?.tracer;
    const meter = telemetry?.meter;
    if (tracer !== undefined && !hasMethods(tracer, ['startSpan'])) throw new ToolConfigError('telemetry.tracer must have startSpan (an OpenTelemetry Tracer)');
    if (meter !== undefined && !hasMethods(meter, ['createCounter', 'createUpDownCounter', 'createHistogram'])) {
      throw new ToolConfigError('telemetry.meter must have createCounter, createUpDownCounter and createHistogram (an OpenTelemetry Meter)');
    }
    if (tracer === undefined && meter === undefined && onEvent === undefined) return null;
    let instruments: Instruments | null = null;
    if (meter !== undefined) {
      try {
        instruments = createInstruments(meter);
      } catch (error) {
        throw new ToolConfigError(`telemetry.meter could not create the runtime's instruments: ${(error as Error)?.message ?? String(error)}`, { cause: error });
      }
    }
    return new Observability(tracer ?? null, instruments, onEvent ?? null);
  }

  /**
   * Reports an admitted attempt and returns what follows it to its end. `usable`: the tool is registered and granted
   * to the caller; otherwise spans and metrics name it UNAVAILABLE_TOOL_LABEL.
   */
  attempt(sessionId: string, call: ToolCall, plan: ToolRetryPlan | undefined, usable: boolean): AttemptObserver {
    return new AttemptObserver(this, sessionId, call, plan, usable);
  }
}

export class AttemptObserver {
  private readonly base: Omit<ToolRuntimeEventBase, 'time'>;
  private span: TelemetrySpan | null = null;
  /** Low-cardinality attributes for metrics; null until the span and metrics are opened. */
  private labels: TelemetryAttributes | null = null;
  private readonly started = now();
  private approvalStarted: number | null = null;
  private approvalMs: number | null = null;
  private approver = '';
  private bodyStartedAt: number | null = null;
  /** Whether the start marker is journaled: what recovery reads, whether or not the body was then called. */
  private marker = false;
  private bodyMs: number | null = null;
  private ended = false;

  constructor(
    private readonly o: Observability,
    private readonly sessionId: string,
    private readonly call: ToolCall,
    plan: ToolRetryPlan | undefined,
    private readonly usable: boolean,
  ) {
    const op = call.operation!;
    const attempt = plan === undefined ? 1 : plan.sourceAttempt + 1;
    this.base = { sessionId, taskId: op.taskId, callId: call.id, tool: call.name, operationKey: op.key, attempt, effect: op.contract.effect, revision: op.contract.revision };
    this.emit({ type: 'attempt_admitted' });
    if (op.retry !== null) this.emit({ type: 'retry_plan_used', sourceCallId: op.retry.callId, review: op.retry.review?.outcome ?? null });
    if (o.tracer !== null || o.instruments !== null) this.open();
  }

  /** Starts the span and counts the attempt in flight, once, named for the tool unless the caller cannot use it. */
  private open(): TelemetryAttributes {
    if (this.labels !== null) return this.labels;
    const call = this.call;
    const op = call.operation!;
    const unavailable = !this.usable;
    const name = unavailable ? UNAVAILABLE_TOOL_LABEL : call.name;
    this.labels = { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': name, 'jingwei.tool.effect': op.contract.effect };
    const tracer = this.o.tracer;
    if (tracer !== null) {
      quietly(() => {
        const attributes: Record<string, string | number | boolean> = {
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': name,
          'gen_ai.tool.call.id': call.id,
          'jingwei.session.id': this.sessionId,
          'jingwei.task.id': op.taskId,
          'jingwei.tool.effect': op.contract.effect,
          'jingwei.tool.revision': op.contract.revision,
          'jingwei.operation.key': op.key,
          'jingwei.attempt': this.base.attempt,
          'jingwei.retry': op.retry !== null,
        };
        if (unavailable) attributes['jingwei.tool.requested_name'] = call.name;
        if (op.retry !== null) attributes['jingwei.retry.source_call_id'] = op.retry.callId;
        this.span = tracer.startSpan(`execute_tool ${name}`, { kind: SPAN_KIND_INTERNAL, attributes });
      });
    }
    this.count('inFlight', 1, this.labels);
    if (op.retry !== null) {
      this.event('jingwei.retry.plan_used', { 'jingwei.retry.source_call_id': op.retry.callId, 'jingwei.retry.review': op.retry.review?.outcome ?? 'none' });
    }
    return this.labels;
  }

  /** The attempt was recorded without its body (told once journaled): a check refused it, or it was interrupted first. */
  refused(outcome: ToolRecordedOutcome): void {
    this.open();
    if (outcome.status !== 'failed') return;
    this.event('jingwei.attempt.refused', { 'jingwei.failure.category': outcome.category, 'jingwei.failure.code': outcome.code });
    this.emit({ type: 'attempt_refused', category: outcome.category, code: outcome.code });
  }

  approvalRequested(approver: string): void {
    const labels = this.open();
    this.approver = approver;
    this.approvalStarted = now();
    this.count('approvalsWaiting', 1, labels);
    this.event('jingwei.approval.requested', { 'jingwei.approval.approver': approver });
    this.emit({ type: 'approval_requested', approver });
  }

  /** `refusal` is null when approved. */
  approvalAnswered(refusal: ToolRecordedOutcome | null): void {
    const labels = this.open();
    const waited = now() - (this.approvalStarted ?? now());
    this.approvalMs = waited;
    const answer = refusal === null || refusal.status !== 'failed' ? 'approved' : refusal.category;
    this.count('approvalsWaiting', -1, labels);
    this.histogram('approvalDuration', seconds(waited), { ...labels, 'jingwei.approval.answer': answer });
    this.event('jingwei.approval.answered', { 'jingwei.approval.approver': this.approver, 'jingwei.approval.answer': answer });
    this.emit({ type: 'approval_answered', approver: this.approver, answer, waitMs: waited });
  }

  bodyStarted(): void {
    this.open();
    this.marker = true;
    this.bodyStartedAt = now();
    this.event('jingwei.body.started', {});
    this.emit({ type: 'body_started' });
  }

  /** An interrupt stopped the attempt after its marker, before the body was called: no body ran, none is timed. */
  bodyNotCalled(): void {
    this.bodyStartedAt = null;
  }

  bodySettled(outcome: ToolRecordedOutcome): void {
    if (this.bodyStartedAt === null) return;
    this.bodyMs = now() - this.bodyStartedAt;
    this.histogram('bodyDuration', seconds(this.bodyMs), { ...this.open(), ...outcomeLabels(outcome) });
  }

  /** The result is in the journal. */
  recorded(outcome: ToolRecordedOutcome): void {
    if (this.ended) return;
    this.ended = true;
    const opened = this.open();
    const bodyStarted = this.bodyStartedAt !== null;
    const rule = evidenceRuleFor({ flagged: true, marker: this.marker, result: outcome });
    // The runtime never writes a contradiction; were one there, recovery would refuse it: for observers, unknown.
    const recoveryStatus: ToolRecoveryStatus = rule.status === 'invalid' ? 'outcome_unknown' : rule.status;
    const durationMs = now() - this.started;
    const failed = outcome.status === 'failed' ? outcome : null;
    const labels = { ...opened, ...outcomeLabels(outcome) };
    this.count('attempts', 1, labels);
    if (failed !== null) this.count('failures', 1, { ...labels, 'jingwei.failure.pre_body': PRE_BODY_CATEGORIES.has(failed.category) });
    this.histogram('duration', seconds(durationMs), labels);
    const attributes: Record<string, string | number | boolean> = {
      'jingwei.outcome': outcome.status,
      'jingwei.body.started': bodyStarted,
      'jingwei.recovery.status': recoveryStatus,
      'jingwei.recovery.rule': rule.id,
    };
    if (failed !== null) {
      attributes['jingwei.failure.category'] = failed.category;
      attributes['jingwei.failure.code'] = failed.code;
      attributes['error.type'] = failed.category;
    }
    this.event('jingwei.result.recorded', attributes);
    this.finishSpan(attributes, failed === null ? null : `${failed.category}: ${failed.code}`);
    this.end(recoveryStatus);
    this.emit({
      type: 'result_recorded',
      outcome: outcome.status,
      category: failed?.category ?? null,
      code: failed?.code ?? null,
      bodyStarted,
      recoveryStatus,
      durationMs,
      bodyMs: this.bodyMs,
      approvalMs: this.approvalMs,
    });
  }

  /** The call threw instead of returning a recorded result. */
  unrecorded(error: unknown): void {
    if (this.ended) return;
    this.ended = true;
    const opened = this.open();
    const e = error as { code?: unknown; stage?: unknown; name?: unknown } | null;
    const code = typeof e?.code === 'string' ? e.code : typeof e?.name === 'string' ? e.name : 'unknown';
    // After admission only the writes throw: a ToolRecordingError names its stage; anything else is the store's
    // refusal of the call itself (budget, stopped task, superseded attempt, full journal), passed through untouched.
    const stage: ToolUnrecordedStage = e?.code === 'recording_failed' && (e.stage === 'started' || e.stage === 'result') ? e.stage : 'call';
    const callWritten = stage !== 'call';
    const bodyStarted = this.bodyStartedAt !== null;
    let recoveryStatus: ToolRecoveryStatus | null = null;
    if (callWritten) {
      const status = evidenceRuleFor({ flagged: true, marker: this.marker, result: null }).status;
      recoveryStatus = status === 'invalid' ? null : status;
    }
    const durationMs = now() - this.started;
    const labels = { ...opened, 'jingwei.outcome': 'unrecorded', 'error.type': code };
    this.count('attempts', 1, labels);
    this.histogram('duration', seconds(durationMs), labels);
    const attributes: Record<string, string | number | boolean> = {
      'jingwei.outcome': 'unrecorded',
      'jingwei.body.started': bodyStarted,
      'jingwei.unrecorded.stage': stage,
      'error.type': code,
    };
    if (recoveryStatus !== null) attributes['jingwei.recovery.status'] = recoveryStatus;
    this.event('jingwei.result.unrecorded', attributes);
    // `<category>: <code>` as for a recorded failure, with `unrecorded` where the category would be.
    this.finishSpan(attributes, `unrecorded: ${code}`);
    this.end(recoveryStatus);
    this.emit({ type: 'attempt_unrecorded', stage, error: code, bodyStarted, recoveryStatus, durationMs });
  }

  private end(recoveryStatus: ToolRecoveryStatus | null): void {
    const labels = this.open();
    if (this.approvalStarted !== null && this.approvalMs === null) this.count('approvalsWaiting', -1, labels);
    if (recoveryStatus === 'outcome_unknown') this.count('inDoubt', 1, labels);
    this.count('inFlight', -1, labels);
  }

  private finishSpan(attributes: TelemetryAttributes, error: string | null): void {
    const span = this.span;
    if (span === null) return;
    quietly(() => span.setAttributes(attributes));
    if (error !== null) quietly(() => span.setStatus({ code: STATUS_ERROR, message: error }));
    quietly(() => span.end());
  }

  private event(name: string, attributes: TelemetryAttributes): void {
    const span = this.span;
    if (span !== null) quietly(() => span.addEvent(name, attributes));
  }

  private count(name: 'attempts' | 'failures' | 'inDoubt' | 'inFlight' | 'approvalsWaiting', value: number, attributes: TelemetryAttributes): void {
    const instruments = this.o.instruments;
    if (instruments !== null) quietly(() => instruments[name].add(value, attributes));
  }

  private histogram(name: 'duration' | 'bodyDuration' | 'approvalDuration', value: number, attributes: TelemetryAttributes): void {
    const instruments = this.o.instruments;
    if (instruments !== null) quietly(() => instruments[name].record(value, attributes));
  }

  private emit(fields: DistributiveOmit<ToolRuntimeEvent, keyof ToolRuntimeEventBase>): void {
    const hook = this.o.onEvent;
    if (hook === null) return;
    quietly(() => hook({ ...this.base, time: Date.now(), ...fields } as ToolRuntimeEvent));
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

function outcomeLabels(outcome: ToolRecordedOutcome): Record<string, string> {
  if (outcome.status === 'succeeded') return { 'jingwei.outcome': 'succeeded' };
  const category: ToolFailureCategory = outcome.category;
  return { 'jingwei.outcome': 'failed', 'jingwei.failure.category': category, 'error.type': category };
}
