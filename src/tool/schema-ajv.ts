/**
 * The one JSON Schema validator setup for tool input schemas (the runtime and the MCP bridge): draft 2020-12, not
 * strict about unknown keywords, and with the standard `format`s checked (email, uri, date-time, uuid, …), so a
 * schema's `format` is enforced rather than ignored.
 */
import { createRequire } from 'node:module';
import type { ValidateFunction } from 'ajv';
import type { Ajv2020 } from 'ajv/dist/2020.js';

type FormatsPlugin = (ajv: Ajv2020) => Ajv2020;

/**
 * ajv and ajv-formats are CommonJS and take about 90 ms and 90 files to load: they are required the first time a
 * validator is made, so a process that only reads journals (the CLI's reading commands, a host's recovery) never
 * loads them.
 */
let loaded: { Ajv: typeof Ajv2020; addFormats: FormatsPlugin } | null = null;

function load(): { Ajv: typeof Ajv2020; addFormats: FormatsPlugin } {
  if (loaded === null) {
    const require = createRequire(import.meta.url);
    const { Ajv2020: Ajv } = require('ajv/dist/2020.js') as { Ajv2020: typeof Ajv2020 };
    // ajv-formats' `module.exports` is the plugin, with the plugin again as its `default`.
    const formats = require('ajv-formats') as FormatsPlugin & { default?: FormatsPlugin };
    loaded = { Ajv, addFormats: formats.default ?? formats };
  }
  return loaded;
}

/**
 * ajv, not strict, only warns of a `format` it does not know and then lets any value through it: the schema is
 * refused instead (a ToolConfigError for the runtime, a skipped tool for an MCP import), and nothing is printed.
 */
function refuseUnknownFormat(...parts: unknown[]): void {
  const text = parts.map(String).join(' ');
  if (text.startsWith('unknown format')) {
    throw new Error(`${text.replace(' ignored', '')}: the validator checks the standard formats only, and would let any value through this one`);
  }
}

export function createSchemaAjv(): Ajv2020 {
  const { Ajv, addFormats } = load();
  // ownProperties: a property is present only as the arguments' own (`required: ['constructor']` is not met by
  // Object.prototype's constructor), as the arguments are parsed JSON with no inherited members of their own.
  const ajv = new Ajv({ strict: false, allErrors: false, ownProperties: true, logger: { log: () => undefined, warn: refuseUnknownFormat, error: () => undefined } });
  addFormats(ajv);
  return ajv;
}

/**
 * Compiles a tool's input schema into the validator every attempt runs. Throws what ajv throws for a schema that
 * does not compile, and refuses an `$async` schema: its validator answers with a promise, which a synchronous check
 * would read as "valid" (every argument passing) and whose rejection nothing would handle.
 */
export function compileInputSchema(ajv: Ajv2020, schema: object | boolean): ValidateFunction {
  const proto = protoProperty(schema, 0);
  if (proto !== null) {
    throw new Error(`it has an entry named __proto__ (at ${proto}), which the validator cannot check; name it otherwise`);
  }
  const validate = ajv.compile(schema);
  if ((validate as { $async?: unknown }).$async === true) {
    throw new Error('it is an $async schema, whose validator answers later; tool arguments are checked synchronously, before the call is journaled');
  }
  return validate;
}

/** The keywords whose value maps names (or patterns) to schemas or lists: ajv drops a `__proto__` key from some. */
const SCHEMA_MAPS: ReadonlySet<string> = new Set(['properties', 'patternProperties', 'dependentSchemas', 'dependentRequired', 'dependencies', '$defs', 'definitions']);

/**
 * Where `schema` has an entry named `__proto__` in one of SCHEMA_MAPS, or null: ajv leaves such an entry of
 * `properties` or `patternProperties` out of the validator it builds, so that part would pass unchecked (the others
 * are refused alike, as no schema needs the name). Walked to the depth ajv itself would compile.
 */
function protoProperty(schema: unknown, depth: number, path = '#'): string | null {
  if (typeof schema !== 'object' || schema === null || depth > 256) return null;
  if (Array.isArray(schema)) {
    for (const [i, item] of schema.entries()) {
      const found = protoProperty(item, depth + 1, `${path}/${i}`);
      if (found !== null) return found;
    }
    return null;
  }
  for (const [key, value] of Object.entries(schema)) {
    if (SCHEMA_MAPS.has(key) && typeof value === 'object' && value !== null && Object.hasOwn(value, '__proto__')) return `${path}/${key}`;
    const found = protoProperty(value, depth + 1, `${path}/${key}`);
    if (found !== null) return found;
  }
  return null;
}
