/**
 * Module resolution hook for no-otel-child: any import of an `@opentelemetry` module fails, loudly. Registered with
 * `module.register` before the runtime is loaded, it sees every ESM import the child makes.
 */
interface ResolveContext { readonly parentURL?: string }
type NextResolve = (specifier: string, context: ResolveContext) => Promise<{ url: string }>;

export async function resolve(specifier: string, context: ResolveContext, next: NextResolve): Promise<{ url: string }> {
  const resolved = await next(specifier, context);
  if (specifier.includes('@opentelemetry') || resolved.url.includes('/@opentelemetry/')) {
    throw new Error(`blocked OpenTelemetry import: ${specifier} from ${context.parentURL ?? 'the entry'}`);
  }
  return resolved;
}
