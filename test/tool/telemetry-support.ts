/**
 * Helpers for the observability tests: an OpenTelemetry tracer over an in-memory span exporter, a meter over a
 * collecting reader, and readers of the collected points. Importing this file does nothing by itself.
 */
import { MeterProvider, MetricReader, type DataPoint, type Histogram } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { TelemetryMeter, TelemetryTracer, ToolRuntimeEvent } from '../../src/tool/telemetry-types.js';

export class CollectingReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

export interface Observed {
  exporter: InMemorySpanExporter;
  reader: CollectingReader;
  tracer: TelemetryTracer;
  meter: TelemetryMeter;
  events: ToolRuntimeEvent[];
}

export function observed(): Observed {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const reader = new CollectingReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  // Typed as Jingwei's structural shapes: this assignment is the compile-time proof that OpenTelemetry's fit.
  const tracer: TelemetryTracer = provider.getTracer('jingwei-test');
  const meter: TelemetryMeter = meterProvider.getMeter('jingwei-test');
  return { exporter, reader, tracer, meter, events: [] };
}

export type Points = Array<DataPoint<number | Histogram>>;

export async function collect(reader: CollectingReader): Promise<Map<string, Points>> {
  const { resourceMetrics } = await reader.collect();
  const out = new Map<string, Points>();
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) out.set(metric.descriptor.name, metric.dataPoints as Points);
  }
  return out;
}

/** The value of the one point whose attributes include `match`; 0 when none. */
export function counter(all: Map<string, Points>, name: string, match: Record<string, unknown> = {}): number {
  const points = (all.get(name) ?? []).filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v));
  return points.reduce((sum, p) => sum + (p.value as number), 0);
}

export function histogramCount(all: Map<string, Points>, name: string, match: Record<string, unknown> = {}): number {
  const points = (all.get(name) ?? []).filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v));
  return points.reduce((sum, p) => sum + (p.value as Histogram).count, 0);
}
